//! MCP prompts in the chat input: `/name` (or `/server:name` when two servers
//! share a name) followed by its arguments, `key=value`, `key="two words"` or
//! in the order the server declares them. Pure: the chat view asks it what a
//! draft means, and the app sends `McpCommand::GetPrompt`.

use std::collections::BTreeMap;

use crate::mcp::events::McpPrompt;

/// A prompt to fill in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Use {
    pub server: String,
    pub name: String,
    pub arguments: BTreeMap<String, String>,
}

/// Splits on spaces, keeping "quoted words" together.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// The prompts of `servers` whose `/name` starts with what follows the slash
/// (for the suggestions under the input).
pub fn matching<'a>(draft: &str, servers: &[(&'a str, &'a [McpPrompt])]) -> Vec<(&'a str, &'a McpPrompt)> {
    let Some(typed) = draft.strip_prefix('/').filter(|t| !t.contains(char::is_whitespace)) else { return Vec::new() };
    let (server_part, name_part) = typed.split_once(':').map_or((None, typed), |(s, n)| (Some(s), n));
    servers
        .iter()
        .filter(|(server, _)| server_part.is_none_or(|s| s == *server))
        .flat_map(|&(server, prompts)| prompts.iter().map(move |p| (server, p)))
        .filter(|(_, p)| p.name.starts_with(name_part))
        .collect()
}

/// What a draft that starts with `/` asks for: None when it names no prompt
/// (it is sent as a message), else the prompt with its arguments or what is
/// missing.
pub fn parse(draft: &str, servers: &[(&str, &[McpPrompt])]) -> Option<Result<Use, String>> {
    let rest = draft.trim().strip_prefix('/')?;
    let (head, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let (server_part, name) = head.split_once(':').map_or((None, head), |(s, n)| (Some(s), n));
    let (server, prompt) = servers
        .iter()
        .filter(|(server, _)| server_part.is_none_or(|s| s == *server))
        .find_map(|&(server, prompts)| prompts.iter().find(|p| p.name == name).map(|p| (server, p)))?;
    let mut arguments = BTreeMap::new();
    let mut positional = Vec::new();
    for word in words(tail) {
        match word.split_once('=') {
            Some((key, value)) if prompt.arguments.iter().any(|(a, _)| a == key) => {
                arguments.insert(key.to_owned(), value.to_owned());
            }
            _ => positional.push(word),
        }
    }
    let mut free = prompt.arguments.iter().filter(|(a, _)| !arguments.contains_key(a)).map(|(a, _)| a.clone()).collect::<Vec<_>>().into_iter();
    for word in positional {
        match free.next() {
            Some(argument) => {
                arguments.insert(argument, word);
            }
            None => return Some(Err(format!("/{name} takes {} argument(s); \"{word}\" is one too many", prompt.arguments.len()))),
        }
    }
    let missing: Vec<&str> = prompt.arguments.iter().filter(|(a, required)| *required && !arguments.contains_key(a)).map(|(a, _)| a.as_str()).collect();
    if !missing.is_empty() {
        return Some(Err(format!("/{name} needs {}", missing.join(", "))));
    }
    Some(Ok(Use { server: server.to_owned(), name: name.to_owned(), arguments }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(name: &str, arguments: &[(&str, bool)]) -> McpPrompt {
        McpPrompt { name: name.into(), description: String::new(), arguments: arguments.iter().map(|(a, r)| ((*a).into(), *r)).collect() }
    }

    fn lists() -> (Vec<McpPrompt>, Vec<McpPrompt>) {
        (vec![prompt("simple-prompt", &[]), prompt("args-prompt", &[("city", true), ("state", false)])], vec![prompt("simple-prompt", &[])])
    }

    #[test]
    fn a_slash_names_a_prompt_with_its_arguments_by_name_or_in_order() {
        let (everything, notes) = lists();
        let servers = [("everything", everything.as_slice()), ("notes", notes.as_slice())];
        let used = |draft: &str| parse(draft, &servers).unwrap().unwrap();
        assert_eq!(used("/simple-prompt"), Use { server: "everything".into(), name: "simple-prompt".into(), arguments: BTreeMap::new() });
        assert_eq!(used("/notes:simple-prompt").server, "notes");
        let args = used(r#"/args-prompt "New York" state=NY"#).arguments;
        assert_eq!((args["city"].as_str(), args["state"].as_str()), ("New York", "NY"));
        let args = used("/args-prompt state=CA Fresno").arguments;
        assert_eq!((args["city"].as_str(), args["state"].as_str()), ("Fresno", "CA"));
    }

    #[test]
    fn a_missing_argument_is_named_and_other_slashes_are_messages() {
        let (everything, notes) = lists();
        let servers = [("everything", everything.as_slice()), ("notes", notes.as_slice())];
        assert_eq!(parse("/args-prompt state=NY", &servers), Some(Err("/args-prompt needs city".into())));
        assert!(parse("/args-prompt a b c", &servers).unwrap().unwrap_err().contains("one too many"));
        assert_eq!(parse("/usr/bin is where it lives", &servers), None);
        assert_eq!(parse("what is /simple-prompt", &servers), None);
        let names: Vec<(&str, &str)> = matching("/simp", &servers).into_iter().map(|(s, p)| (s, p.name.as_str())).collect();
        assert_eq!(names, [("everything", "simple-prompt"), ("notes", "simple-prompt")]);
        assert!(matching("/args-prompt x", &servers).is_empty());
    }
}
