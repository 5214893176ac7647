//! Cutting text into pieces the embedder reads whole (MiniLM keeps 256 word
//! pieces, about 1,000 characters of English). Long texts become overlapping
//! windows cut at whitespace, each carrying the same short prefix that says
//! where the text came from, so every piece stands on its own.

/// Characters of body text per piece.
pub const PIECE_CHARS: usize = 800;
/// Characters repeated from the end of one piece at the start of the next.
pub const OVERLAP_CHARS: usize = 120;
/// Pieces kept per source text (a 64 KiB clipboard is ~80); the rest stays keyword-searchable.
pub const MAX_PIECES: usize = 64;

/// `prefix` + each window of `body`. An empty body gives no pieces.
pub fn pieces(prefix: &str, body: &str) -> Vec<String> {
    let body = body.trim();
    if body.is_empty() {
        return Vec::new();
    }
    let chars: Vec<(usize, char)> = body.char_indices().collect();
    let mut out = Vec::new();
    let mut start = 0; // index into chars
    while start < chars.len() && out.len() < MAX_PIECES {
        let mut end = (start + PIECE_CHARS).min(chars.len());
        if end < chars.len() {
            // Back up to whitespace so no word is cut, unless there is none in the second half.
            if let Some(space) = (start + PIECE_CHARS / 2..end).rev().find(|&i| chars[i].1.is_whitespace()) {
                end = space;
            }
        }
        let from = chars[start].0;
        let to = chars.get(end).map_or(body.len(), |c| c.0);
        out.push(format!("{prefix}{}", body[from..to].trim()));
        if end >= chars.len() {
            break;
        }
        let mut next = end.saturating_sub(OVERLAP_CHARS).max(start + 1);
        // Start the overlap at a word boundary too.
        while next < end && !chars[next - 1].1.is_whitespace() {
            next += 1;
        }
        start = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_piece_and_long_text_overlapping_windows_cut_at_words() {
        assert_eq!(pieces("Typed in code: ", "  fn main() {}  "), vec!["Typed in code: fn main() {}"]);
        assert!(pieces("x", "   ").is_empty());
        let words: Vec<String> = (0..600).map(|i| format!("word{i}")).collect();
        let body = words.join(" ");
        let out = pieces("P: ", &body);
        assert!(out.len() > 3 && out.len() < 10, "{}", out.len());
        for piece in &out {
            assert!(piece.starts_with("P: word"), "cut inside a word: {}", &piece[..20]);
            assert!(piece.chars().count() <= PIECE_CHARS + 3);
            let last = piece.split(' ').next_back().unwrap();
            assert!(words.iter().any(|w| w == last), "cut inside a word: {last}");
        }
        // Every word is in some piece, and neighbours share words.
        assert!(words.iter().all(|w| out.iter().any(|p| p.split(' ').any(|x| x == w))));
        let tail: Vec<&str> = out[0].split(' ').rev().take(3).collect();
        assert!(tail.iter().all(|w| out[1].contains(w)), "pieces overlap");
        // Multi-byte text never splits a character; a huge text is capped.
        let long = "é ".repeat(100_000);
        let capped = pieces("", &long);
        assert_eq!(capped.len(), MAX_PIECES);
    }
}
