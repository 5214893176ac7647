//! Skills (agent-coworker's format): a folder with a `SKILL.md` whose front
//! matter has `name` and `description`. They are found in `skills/` under
//! cowork's data directory and bundled from `assets/skills/`. The model sees
//! each name and description; the `skill` tool loads a body when a task
//! needs it, so bodies cost prompt only when used.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::ToolOutput;

pub const NAME: &str = "skill";

/// Skills built into cowork.
const BUNDLED: [&str; 1] = [include_str!("../../assets/skills/daily-review/SKILL.md")];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub body: String,
    /// Where it was read from (None: bundled).
    pub path: Option<PathBuf>,
}

pub fn schema() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}, "required": ["name"], "additionalProperties": false})
}

/// Reads `SKILL.md` text: front matter between `---` lines, then the body.
pub fn parse(text: &str, path: Option<PathBuf>) -> Result<Skill, String> {
    let text = text.trim_start_matches('\u{feff}');
    let rest = text.strip_prefix("---").ok_or("SKILL.md must start with front matter between --- lines")?;
    let end = rest.find("\n---").ok_or("the front matter has no closing ---")?;
    let (front, body) = (&rest[..end], &rest[end + 4..]);
    let field = |key: &str| {
        front.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').trim_matches('\'').to_owned())
        })
    };
    let name = field("name").filter(|n| !n.is_empty()).ok_or("the front matter has no name")?;
    let description = field("description").filter(|d| !d.is_empty()).ok_or("the front matter has no description")?;
    Ok(Skill { name, description, body: body.trim().to_owned(), path })
}

/// The user's skills (data directory) then the bundled ones; a user skill
/// with a bundled skill's name replaces it. Unreadable skills are named in
/// the second list.
pub fn discover(data_dir: &Path) -> (Vec<Skill>, Vec<String>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut problems = Vec::new();
    if let Ok(entries) = std::fs::read_dir(data_dir.join("skills")) {
        let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
        dirs.sort();
        for dir in dirs {
            let file = dir.join("SKILL.md");
            match std::fs::read_to_string(&file) {
                Ok(text) => match parse(&text, Some(file.clone())) {
                    Ok(skill) if !skills.iter().any(|s| s.name == skill.name) => skills.push(skill),
                    Ok(_) => problems.push(format!("{}: another skill has the same name", file.display())),
                    Err(err) => problems.push(format!("{}: {err}", file.display())),
                },
                Err(err) => problems.push(format!("{}: {err}", file.display())),
            }
        }
    }
    for text in BUNDLED {
        let skill = parse(text, None).expect("bundled skills parse");
        if !skills.iter().any(|s| s.name == skill.name) {
            skills.push(skill);
        }
    }
    (skills, problems)
}

/// One line per skill for the system prompt.
pub fn catalogue(skills: &[Skill]) -> String {
    skills.iter().map(|s| format!("- {}: {}", s.name, s.description)).collect::<Vec<_>>().join("\n")
}

pub fn run(args: &Value, skills: &[Skill]) -> ToolOutput {
    let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
    match skills.iter().find(|s| s.name == name) {
        Some(skill) => ToolOutput::ok(skill.body.clone()),
        None => {
            let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            ToolOutput::error(format!("there is no skill {name:?}; the skills are: {}", names.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_skills_are_found_override_bundled_ones_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let skills_dir = dir.path().join("skills");
        std::fs::create_dir_all(skills_dir.join("standup")).unwrap();
        std::fs::write(skills_dir.join("standup/SKILL.md"), "---\nname: standup\ndescription: \"Write a standup note\"\n---\nList yesterday, today, blockers.").unwrap();
        std::fs::create_dir_all(skills_dir.join("broken")).unwrap();
        std::fs::write(skills_dir.join("broken/SKILL.md"), "no front matter").unwrap();
        let (skills, problems) = discover(dir.path());
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["standup", "daily-review"]);
        assert_eq!(skills[0].description, "Write a standup note");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(catalogue(&skills).contains("- standup: Write a standup note"));
        assert_eq!(run(&json!({"name": "standup"}), &skills).content, "List yesterday, today, blockers.");
        let missing = run(&json!({"name": "nope"}), &skills);
        assert!(missing.is_error && missing.content.contains("standup, daily-review"));
    }
}
