//! Citations in a model's text, pure: `[n]`, `[n, m]` and `[n][m]` read out
//! of a line, and the line without them (other brackets, like a ticket's
//! `[ATL-212]`, stay). The recap and meeting notes both read their model's
//! lines this way.

/// The `[n]`, `[n, m]` and `[n][m]` citations in `text`, in order.
pub fn cites(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('[') {
        let after = &rest[start + 1..];
        let Some(end) = after.find(']') else { break };
        let inside = &after[..end];
        if inside.split([',', ' ', ';']).filter(|p| !p.is_empty()).all(|p| p.parse::<usize>().is_ok()) {
            out.extend(inside.split([',', ' ', ';']).filter_map(|p| p.parse::<usize>().ok()));
        }
        rest = &after[end + 1..];
    }
    out
}

/// `text` without its citations (other brackets stay), spaces tidied.
pub fn without_cites(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('[') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find(']') {
            Some(end) if after[..end].chars().all(|c| c.is_ascii_digit() || matches!(c, ',' | ' ' | ';')) => rest = &after[end + 1..],
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let text = out.split_whitespace().collect::<Vec<_>>().join(" ").replace(" .", ".").replace(" ,", ",");
    text.trim_end_matches([' ', ',', ';']).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_are_read_in_every_form_and_other_brackets_stay() {
        assert_eq!(cites("did it [1][2], then [3, 4] and [x] [5 ; 6]"), [1, 2, 3, 4, 5, 6]);
        assert_eq!(without_cites("fixed [ATL-212] export [1][2]."), "fixed [ATL-212] export.");
    }
}
