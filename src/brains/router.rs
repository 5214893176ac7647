//! The complexity router: picks the local model or a cloud tier, rule-based,
//! decided in nanoseconds, and always able to say why. Pure: no I/O, no clock.

/// Where the user would rather have answers come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Preference {
    #[default]
    Local,
    Cloud,
}

impl Preference {
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "local" => Some(Preference::Local),
            "cloud" => Some(Preference::Cloud),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Preference::Local => "local",
            Preference::Cloud => "cloud",
        }
    }
}

/// Who answers: the local model, or cloud tier `n` (0 = the first, cheapest, in settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Local,
    Cloud(usize),
}

/// What the router looks at.
#[derive(Clone, Copy, Debug)]
pub struct RouteInput {
    pub preference: Preference,
    /// Estimated tokens of the whole prompt (question, history, context).
    pub prompt_tokens: usize,
    pub attachments: usize,
    pub tools_needed: usize,
    /// "Try harder": the target of the answer being retried.
    pub try_harder_from: Option<Target>,
    /// The most prompt the local model takes (its context minus room for the answer).
    pub local_limit_tokens: usize,
    pub local_available: bool,
    /// How many cloud tiers are configured (and allowed: not offline).
    pub cloud_tiers: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub target: Target,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("no smarter model to try: the last configured tier already answered")]
    NoHigherTier,
    #[error("no model can answer: the local model is unavailable and no cloud provider is configured{0}")]
    Nothing(&'static str),
}

pub fn route(input: &RouteInput) -> Result<Route, RouteError> {
    let cloud = |tier: usize, reason: String| Ok(Route { target: Target::Cloud(tier), reason });
    let local = |reason: String| Ok(Route { target: Target::Local, reason });
    if let Some(from) = input.try_harder_from {
        let next = match from {
            Target::Local => 0,
            Target::Cloud(tier) => tier + 1,
        };
        return if next < input.cloud_tiers {
            cloud(next, format!("try harder: tier {} of {}", next + 1, input.cloud_tiers))
        } else {
            Err(RouteError::NoHigherTier)
        };
    }
    let why_cloud = if input.preference == Preference::Cloud {
        Some("you prefer cloud models".to_owned())
    } else if !input.local_available {
        Some("the local model is unavailable".to_owned())
    } else if input.prompt_tokens > input.local_limit_tokens {
        Some(format!(
            "too long for the local model ({} tokens, it takes {})",
            input.prompt_tokens, input.local_limit_tokens
        ))
    } else if input.attachments > 0 {
        Some("it has attachments the local model cannot read".to_owned())
    } else if input.tools_needed > 1 {
        Some(format!("it needs {} tools", input.tools_needed))
    } else {
        None
    };
    match (why_cloud, input.cloud_tiers > 0, input.local_available) {
        (None, _, _) => local("a simple request, and you prefer local".into()),
        (Some(reason), true, _) => cloud(0, reason),
        (Some(reason), false, true) => local(format!("{reason}, but no cloud provider is configured or allowed")),
        (Some(_), false, false) => Err(RouteError::Nothing(" (or offline mode is on)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> RouteInput {
        RouteInput {
            preference: Preference::Local,
            prompt_tokens: 200,
            attachments: 0,
            tools_needed: 0,
            try_harder_from: None,
            local_limit_tokens: 1500,
            local_available: true,
            cloud_tiers: 2,
        }
    }

    #[test]
    fn each_rule_routes_and_says_why() {
        assert_eq!(route(&input()).unwrap().target, Target::Local);
        let long = route(&RouteInput { prompt_tokens: 4000, ..input() }).unwrap();
        assert_eq!(long.target, Target::Cloud(0));
        assert!(long.reason.contains("too long") && long.reason.contains("4000"), "{}", long.reason);
        assert!(route(&RouteInput { attachments: 1, ..input() }).unwrap().reason.contains("attachments"));
        assert_eq!(route(&RouteInput { tools_needed: 1, ..input() }).unwrap().target, Target::Local);
        assert_eq!(route(&RouteInput { tools_needed: 3, ..input() }).unwrap().target, Target::Cloud(0));
        assert_eq!(route(&RouteInput { preference: Preference::Cloud, ..input() }).unwrap().target, Target::Cloud(0));
        // Try harder climbs one tier at a time, and says when there is none left.
        assert_eq!(route(&RouteInput { try_harder_from: Some(Target::Local), ..input() }).unwrap().target, Target::Cloud(0));
        assert_eq!(route(&RouteInput { try_harder_from: Some(Target::Cloud(0)), ..input() }).unwrap().target, Target::Cloud(1));
        assert_eq!(route(&RouteInput { try_harder_from: Some(Target::Cloud(1)), ..input() }), Err(RouteError::NoHigherTier));
        // No cloud (none configured, or offline): a long request stays local and says so.
        let stuck = route(&RouteInput { prompt_tokens: 4000, cloud_tiers: 0, ..input() }).unwrap();
        assert_eq!(stuck.target, Target::Local);
        assert!(stuck.reason.contains("no cloud provider"));
        assert!(route(&RouteInput { local_available: false, cloud_tiers: 0, ..input() }).is_err());
        assert_eq!(route(&RouteInput { local_available: false, ..input() }).unwrap().target, Target::Cloud(0));
    }
}
