//! Budgets, checked before a request is sent: caps per interaction, day, week
//! and month for paid use, and a monthly token quota for free cloud use.
//! What was spent lives in the `usage` table, so a restart resets nothing.
//!
//! An estimate takes the user's prices, else the shipped table's (`prices`);
//! cached input is priced at its own rate, and the `usage` rows keep cached
//! and cache-written tokens (migration 0018). A reasoning model whose room to
//! think would break a cap thinks less instead (`fit`).

use rusqlite::{Connection, params};

use crate::brains::provider::ProviderConfig;

/// Caps in US dollars (0 = no cap) and the free monthly token quota (0 = none).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Budget {
    pub per_interaction_usd: f64,
    pub daily_usd: f64,
    pub weekly_usd: f64,
    pub monthly_usd: f64,
    pub monthly_free_tokens: u64,
}

/// Spending so far in each window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spent {
    pub day_usd: f64,
    pub week_usd: f64,
    pub month_usd: f64,
    pub month_free_tokens: u64,
}

/// What one request is expected to cost at most (all of `max_tokens` used).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub usd: f64,
}

/// The most a request can cost: every input token at the full price (a cache
/// may make it cheaper, never dearer than this but for Anthropic's cache
/// writes, counted too) and all of `max_output_tokens` used. Prices are the
/// user's for the provider, else the shipped table's (`ProviderConfig::prices`).
pub fn estimate(provider: &ProviderConfig, input_tokens: u64, max_output_tokens: u64) -> Estimate {
    let prices = provider.prices(&provider.model);
    let input_price = prices.input.max(if provider.prompt_caching { prices.cache_write } else { 0.0 });
    // A reasoning model may think up to its allowance before it answers.
    let max_output_tokens = provider.output_allowance(&provider.model, max_output_tokens.min(u32::MAX as u64) as u32) as u64;
    let usd = (input_tokens as f64 * input_price + max_output_tokens as f64 * prices.output) / 1e6;
    Estimate { input_tokens, output_tokens: max_output_tokens, usd }
}

/// The actual cost of a finished request: uncached input at the input price,
/// cached input at the cache-read price, cache writes at theirs, output at the output price.
pub fn cost(provider: &ProviderConfig, model: &str, usage: &crate::brains::Usage) -> f64 {
    let prices = provider.prices(model);
    let cached = usage.cached_input_tokens.min(usage.input_tokens);
    let written = usage.cache_write_tokens.min(usage.input_tokens - cached);
    let plain = usage.input_tokens - cached - written;
    (plain as f64 * prices.input + cached as f64 * prices.cache_read + written as f64 * prices.cache_write + usage.output_tokens as f64 * prices.output) / 1e6
}

/// What the same tokens would have cost without the cache (for the saving shown).
pub fn cost_uncached(provider: &ProviderConfig, model: &str, usage: &crate::brains::Usage) -> f64 {
    cost(provider, model, &crate::brains::Usage { cached_input_tokens: 0, cache_write_tokens: 0, ..*usage })
}

/// Whether a provider counts against the free quota: no price, not on this machine.
pub fn is_free_cloud(provider: &ProviderConfig) -> bool {
    provider.prices(&provider.model).is_free()
        && !crate::net::host_of_url(&provider.base_url).is_some_and(|h| crate::net::is_loopback(&h))
}

/// The usage row of one finished request to `provider`.
pub fn usage_row(provider: &ProviderConfig, model: &str, tokens: &crate::brains::Usage, ask_id: i64) -> Usage {
    Usage {
        usage_id: crate::ids::next_id(),
        at_millis: crate::ids::now_millis(),
        provider: provider.name.clone(),
        model: model.to_owned(),
        input_tokens: tokens.input_tokens,
        output_tokens: tokens.output_tokens,
        cached_input_tokens: tokens.cached_input_tokens,
        cache_write_tokens: tokens.cache_write_tokens,
        cost_usd: cost(provider, model, tokens),
        free_cloud: is_free_cloud(provider),
        ask_id,
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum OverBudget {
    #[error("this answer could cost up to ${estimate:.4}, over your ${cap:.4} limit per interaction")]
    Interaction { estimate: f64, cap: f64 },
    #[error("over your {period} budget: ${spent:.4} spent of ${cap:.4}, and this answer could cost up to ${estimate:.4}")]
    Period { period: &'static str, spent: f64, cap: f64, estimate: f64 },
    #[error("over your free monthly quota: {used} of {quota} tokens used, this answer could take {estimate}")]
    Quota { used: u64, quota: u64, estimate: u64 },
}

/// Checks one request against the caps. Nothing is sent when this fails.
pub fn check(budget: &Budget, spent: &Spent, estimate: &Estimate, free_cloud: bool) -> Result<(), OverBudget> {
    if free_cloud {
        let tokens = estimate.input_tokens + estimate.output_tokens;
        if budget.monthly_free_tokens > 0 && spent.month_free_tokens + tokens > budget.monthly_free_tokens {
            return Err(OverBudget::Quota { used: spent.month_free_tokens, quota: budget.monthly_free_tokens, estimate: tokens });
        }
        return Ok(());
    }
    if estimate.usd == 0.0 {
        return Ok(());
    }
    if budget.per_interaction_usd > 0.0 && estimate.usd > budget.per_interaction_usd {
        return Err(OverBudget::Interaction { estimate: estimate.usd, cap: budget.per_interaction_usd });
    }
    for (period, spent, cap) in
        [("daily", spent.day_usd, budget.daily_usd), ("weekly", spent.week_usd, budget.weekly_usd), ("monthly", spent.month_usd, budget.monthly_usd)]
    {
        if cap > 0.0 && spent + estimate.usd > cap {
            return Err(OverBudget::Period { period, spent, cap, estimate: estimate.usd });
        }
    }
    Ok(())
}

/// Checks one request against the caps; a reasoning model whose room to think
/// would break a cap thinks less instead (at least 1,024 tokens), so the most
/// it can cost stays within every cap. `provider.thinking_tokens` is set then.
pub fn fit(provider: &mut ProviderConfig, budget: &Budget, spent: &Spent, input_tokens: u64, max_answer_tokens: u64) -> Result<Estimate, OverBudget> {
    let estimate = estimate(provider, input_tokens, max_answer_tokens);
    let free = is_free_cloud(provider);
    let refused = match check(budget, spent, &estimate, free) {
        Ok(()) => return Ok(estimate),
        Err(refused) => refused,
    };
    let allowance = provider.output_allowance(&provider.model, max_answer_tokens.min(u32::MAX as u64) as u32) as u64;
    let prices = provider.prices(&provider.model);
    if free || allowance <= max_answer_tokens || prices.output <= 0.0 {
        return Err(refused);
    }
    // What is left under the tightest cap, less the input, buys this many output tokens.
    let left = [
        budget.per_interaction_usd,
        budget.daily_usd - spent.day_usd,
        budget.weekly_usd - spent.week_usd,
        budget.monthly_usd - spent.month_usd,
    ]
    .into_iter()
    .zip([budget.per_interaction_usd, budget.daily_usd, budget.weekly_usd, budget.monthly_usd])
    .filter(|(_, cap)| *cap > 0.0)
    .map(|(left, _)| left)
    .fold(f64::INFINITY, f64::min);
    let input_usd = estimate.usd - allowance as f64 * prices.output / 1e6;
    let affordable = ((left - input_usd) * 1e6 / prices.output).floor();
    let thinking = affordable - max_answer_tokens as f64;
    if thinking < 1024.0 {
        return Err(refused);
    }
    provider.thinking_tokens = Some(thinking.min((allowance - max_answer_tokens) as f64) as u32);
    let estimate = self::estimate(provider, input_tokens, max_answer_tokens);
    check(budget, spent, &estimate, free).map(|()| estimate)
}

/// One finished cloud request, for the `usage` table.
#[derive(Clone, Debug, PartialEq)]
pub struct Usage {
    pub usage_id: i64,
    pub at_millis: i64,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `input_tokens`, read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    /// Of `input_tokens`, written to the cache.
    pub cache_write_tokens: u64,
    pub cost_usd: f64,
    pub free_cloud: bool,
    pub ask_id: i64,
}

pub fn insert_usage(conn: &Connection, usage: &Usage) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO usage (usage_id, at_ms, provider, model, input_tokens, output_tokens, cost_usd, free_cloud, ask_id,
                                       cached_input_tokens, cache_write_tokens)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
        usage.usage_id,
        usage.at_millis,
        usage.provider,
        usage.model,
        usage.input_tokens as i64,
        usage.output_tokens as i64,
        usage.cost_usd,
        usage.free_cloud,
        usage.ask_id,
        usage.cached_input_tokens as i64,
        usage.cache_write_tokens as i64,
    ])?;
    Ok(())
}

/// What was spent since each window's start (local day, the last 7 days, the calendar month).
pub fn spent(conn: &Connection, now_millis: i64) -> rusqlite::Result<Spent> {
    let day = crate::ids::local_day_start_millis(now_millis);
    let week = day - 6 * 86_400_000;
    let month = month_start_millis(now_millis);
    let sum = |since: i64| -> rusqlite::Result<f64> {
        conn.query_row("SELECT coalesce(sum(cost_usd), 0) FROM usage WHERE at_ms >= ?1", params![since], |r| r.get(0))
    };
    let tokens: i64 = conn.query_row(
        "SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM usage WHERE free_cloud = 1 AND at_ms >= ?1",
        params![month],
        |r| r.get(0),
    )?;
    Ok(Spent { day_usd: sum(day)?, week_usd: sum(week)?, month_usd: sum(month)?, month_free_tokens: tokens as u64 })
}

/// Cost of every answer to one question (an ask and its retries).
pub fn ask_cost(conn: &Connection, ask_id: i64) -> rusqlite::Result<f64> {
    conn.query_row("SELECT coalesce(sum(cost_usd), 0) FROM usage WHERE ask_id = ?1", params![ask_id], |r| r.get(0))
}

/// Midnight (local time) on the first of the month containing `now_millis`.
fn month_start_millis(now_millis: i64) -> i64 {
    let mut day = crate::ids::local_day_start_millis(now_millis);
    // Walk back a day at a time to the 1st (at most 30 steps; DST-safe via local_day_start).
    for _ in 0..31 {
        let secs = (day / 1000) as libc::time_t;
        // SAFETY: localtime_r writes only into `tm`.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        unsafe { libc::localtime_r(&secs, &mut tm) };
        if tm.tm_mday == 1 {
            return day;
        }
        day = crate::ids::local_day_start_millis(day - 3_600_000);
    }
    day
}

/// A finished cloud request, for budgets, in the next batch.
pub fn usage_write(usage: Usage) -> crate::store::StoreCommand {
    crate::store::StoreCommand::write("usage", move |tx| insert_usage(tx, &usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brains::provider::ProviderKind;

    fn paid() -> ProviderConfig {
        ProviderConfig {
            name: "openai".into(),
            kind: ProviderKind::Openai,
            base_url: "https://api.openai.com/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key_env: None,
            price_in_per_mtok: 0.15,
            price_out_per_mtok: 0.60,
            reasoning_effort: None,
            prompt_caching: false,
            thinking_tokens: None,
            vision: None,
        }
    }

    #[test]
    fn a_reasoning_model_thinks_less_rather_than_break_a_cap() {
        let mut gpt5 = ProviderConfig::new("openai", ProviderKind::Openai, "https://api.openai.com/v1", "gpt-5");
        let budget = Budget { per_interaction_usd: 0.05, ..Budget::default() };
        // Its full room to think could cost more than $0.05: it gets the thinking the cap pays for.
        assert!(estimate(&gpt5, 3000, 1024).usd > 0.05);
        let fitted = fit(&mut gpt5, &budget, &Spent::default(), 3000, 1024).unwrap();
        assert!(fitted.usd <= 0.05 && fitted.usd > 0.04, "{fitted:?}");
        let thinking = gpt5.thinking_tokens.unwrap();
        assert!((1024..8192).contains(&thinking), "{thinking}");
        // A cap that leaves no room to think at all still refuses, and says why.
        let mut gpt5 = ProviderConfig::new("openai", ProviderKind::Openai, "https://api.openai.com/v1", "gpt-5");
        let tight = Budget { per_interaction_usd: 0.015, ..Budget::default() };
        assert!(matches!(fit(&mut gpt5, &tight, &Spent::default(), 3000, 1024), Err(OverBudget::Interaction { .. })));
        assert_eq!(gpt5.thinking_tokens, None);
    }

    #[test]
    fn cached_tokens_cost_their_price_and_writes_theirs() {
        let provider = ProviderConfig::new("anthropic", ProviderKind::Anthropic, "https://api.anthropic.com", "claude-sonnet-4-5");
        let prices = provider.prices("claude-sonnet-4-5");
        let tokens = crate::brains::Usage { input_tokens: 10_000, output_tokens: 100, cached_input_tokens: 8_000, cache_write_tokens: 1_000, reasoning_tokens: 0 };
        let expected = (1_000.0 * prices.input + 8_000.0 * prices.cache_read + 1_000.0 * prices.cache_write + 100.0 * prices.output) / 1e6;
        assert!((cost(&provider, "claude-sonnet-4-5", &tokens) - expected).abs() < 1e-12);
        assert!(cost(&provider, "claude-sonnet-4-5", &tokens) < cost_uncached(&provider, "claude-sonnet-4-5", &tokens));
        // Counts a provider reports inconsistently never make a negative cost.
        let odd = crate::brains::Usage { input_tokens: 10, output_tokens: 0, cached_input_tokens: 50, cache_write_tokens: 50, reasoning_tokens: 0 };
        assert!(cost(&provider, "claude-sonnet-4-5", &odd) >= 0.0);
        // The table's prices count in the budget: the default OpenAI model is not "free cloud".
        assert!(!is_free_cloud(&ProviderConfig::new("openai", ProviderKind::Openai, "https://api.openai.com/v1", "gpt-5")));
        assert!(estimate(&ProviderConfig::new("openai", ProviderKind::Openai, "https://api.openai.com/v1", "gpt-5"), 1000, 1000).usd > 0.0);
    }

    #[test]
    fn caps_refuse_before_sending_and_name_the_limit() {
        let e = estimate(&paid(), 10_000, 1_000);
        assert!((e.usd - 0.0021).abs() < 1e-9, "{e:?}");
        let budget = Budget { per_interaction_usd: 0.01, daily_usd: 0.05, weekly_usd: 0.2, monthly_usd: 1.0, monthly_free_tokens: 1000 };
        assert!(check(&budget, &Spent::default(), &e, false).is_ok());
        let big = estimate(&paid(), 100_000, 4_000);
        assert!(matches!(check(&budget, &Spent::default(), &big, false), Err(OverBudget::Interaction { .. })));
        let day = Spent { day_usd: 0.049, week_usd: 0.049, month_usd: 0.049, month_free_tokens: 0 };
        let err = check(&budget, &day, &e, false).unwrap_err();
        assert!(err.to_string().starts_with("over your daily budget"), "{err}");
        let month = Spent { day_usd: 0.0, week_usd: 0.0, month_usd: 0.999, month_free_tokens: 0 };
        assert!(matches!(check(&budget, &month, &e, false), Err(OverBudget::Period { period: "monthly", .. })));
        let quota = Spent { month_free_tokens: 900, ..Spent::default() };
        let free = Estimate { input_tokens: 50, output_tokens: 100, usd: 0.0 };
        assert!(matches!(check(&budget, &quota, &free, true), Err(OverBudget::Quota { .. })));
        assert!(check(&Budget::default(), &Spent { day_usd: 100.0, ..Spent::default() }, &e, false).is_ok(), "no caps, no refusal");
    }

    #[test]
    fn spending_survives_in_sqlite_and_sums_per_window_and_per_ask() {
        let conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&conn).unwrap();
        let now = crate::ids::now_millis();
        let usage = |id, at, cost, ask| Usage {
            usage_id: id,
            at_millis: at,
            provider: "openai".into(),
            model: "m".into(),
            input_tokens: 100,
            output_tokens: 50,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
            cost_usd: cost,
            free_cloud: false,
            ask_id: ask,
        };
        insert_usage(&conn, &usage(1, now, 0.01, 7)).unwrap();
        insert_usage(&conn, &usage(2, now - 1000, 0.02, 7)).unwrap();
        insert_usage(&conn, &usage(3, now - 40 * 86_400_000, 5.0, 8)).unwrap();
        let s = spent(&conn, now).unwrap();
        assert!((s.day_usd - 0.03).abs() < 1e-9 && (s.month_usd - 0.03).abs() < 1e-9, "{s:?}");
        assert!((ask_cost(&conn, 7).unwrap() - 0.03).abs() < 1e-9);
        let first = month_start_millis(now);
        assert!(first <= now && now - first < 32 * 86_400_000);
    }
}
