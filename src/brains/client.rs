//! Streams one answer from a provider over ureq, through the outbound gate:
//! clear errors (bad key, rate limit with retry-after, server errors with
//! bounded retries and backoff, timeouts, malformed streams), deltas as they
//! arrive, and cancel between any two reads.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::brains::message::{Assembled, Delta, Turn};
use crate::brains::provider::{Decoded, ProviderConfig, decode};
use crate::brains::stream::{NdjsonParser, SseParser};
use crate::net::{GateError, OutboundGate};

/// Attempts for one request when the server is busy or failing (before any delta arrived).
const MAX_ATTEMPTS: u32 = 3;
/// The longest `retry-after` honoured; longer ones become the error.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Until the response head arrives (a cold local model may take a while).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProviderError {
    #[error("{provider} refused the API key (HTTP {status}): {message}")]
    BadKey { provider: String, status: u16, message: String },
    #[error("{provider} is rate limiting (HTTP 429){}: {message}", retry_after.map(|d| format!(", retry after {} s", d.as_secs())).unwrap_or_default())]
    RateLimited { provider: String, retry_after: Option<Duration>, message: String },
    #[error("{provider} failed (HTTP {status}) after {attempts} attempts: {message}")]
    Server { provider: String, status: u16, attempts: u32, message: String },
    #[error("{provider} rejected the request (HTTP {status}): {message}")]
    Rejected { provider: String, status: u16, message: String },
    #[error("{provider} did not answer in time: {0}", .detail)]
    Timeout { provider: String, detail: String },
    #[error("cannot reach {provider}: {detail}")]
    Network { provider: String, detail: String },
    #[error("{provider} sent a malformed stream: {detail}")]
    Malformed { provider: String, detail: String },
    #[error("{provider} reported an error mid-stream: {message}")]
    InStream { provider: String, message: String },
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error("cancelled")]
    Cancelled,
}

/// A finished answer and what it took.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub answer: Assembled,
    pub attempts: u32,
    /// From sending the request to the first text delta.
    pub first_token: Option<Duration>,
    pub bytes_in: u64,
}

/// Sends `turns` to `provider` and streams the answer into `on_delta`.
/// `cancelled` is asked between reads and while waiting to retry.
#[allow(clippy::too_many_arguments)]
pub fn stream_chat(
    gate: &OutboundGate,
    provider: &ProviderConfig,
    model: Option<&str>,
    key: Option<&str>,
    turns: &[Turn],
    max_tokens: u32,
    cancelled: &dyn Fn() -> bool,
    on_delta: &mut dyn FnMut(&Delta),
) -> Result<Completion, ProviderError> {
    stream_chat_with_tools(gate, provider, model, key, turns, &[], max_tokens, cancelled, on_delta)
}

/// `stream_chat` offering `tools`: the calls come back as `Delta::ToolCall`s.
#[allow(clippy::too_many_arguments)]
pub fn stream_chat_with_tools(
    gate: &OutboundGate,
    provider: &ProviderConfig,
    model: Option<&str>,
    key: Option<&str>,
    turns: &[Turn],
    tools: &[crate::brains::ToolDef],
    max_tokens: u32,
    cancelled: &dyn Fn() -> bool,
    on_delta: &mut dyn FnMut(&Delta),
) -> Result<Completion, ProviderError> {
    let model = model.unwrap_or(&provider.model);
    let mut request = provider.request(model, turns, tools, max_tokens, key);
    // What this provider taught about this model before (a parameter it does not take),
    // held to what this request's format may lose (`rules::Format`).
    let format = crate::brains::rules::Format::of(provider.kind, request.responses);
    crate::brains::rules::adaptation(&provider.name, model).apply(format, &mut request.body);
    let mut body = request.body.to_string();
    let mut adapted = false;
    let name = provider.name.clone();
    let mut attempt = 0;
    loop {
        attempt += 1;
        if cancelled() {
            return Err(ProviderError::Cancelled);
        }
        let admission = gate.admit(&request.url, &format!("chat with {name}"))?;
        let agent = admission.agent(|config| config.timeout_connect(Some(CONNECT_TIMEOUT)).timeout_recv_response(Some(RESPONSE_TIMEOUT)).http_status_as_error(false));
        let mut call = agent.post(&request.url);
        for (header, value) in &request.headers {
            call = call.header(*header, value);
        }
        let started = Instant::now();
        let response = match call.send(body.as_str()) {
            Ok(response) => response,
            Err(err) => {
                gate.finish(admission, body.len() as u64, 0);
                let error = transport_error(&name, err);
                if attempt < MAX_ATTEMPTS && matches!(error, ProviderError::Network { .. }) {
                    wait(backoff(attempt), cancelled)?;
                    continue;
                }
                return Err(error);
            }
        };
        let status = response.status().as_u16();
        if status != 200 {
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let mut text = String::new();
            let _ = response.into_body().as_reader().take(8192).read_to_string(&mut text);
            gate.finish(admission, body.len() as u64, text.len() as u64);
            let message = crate::brains::rules::error_message(&text);
            // A parameter the model does not take: once more without it, and remembered.
            if matches!(status, 400 | 422)
                && !adapted
                && let Some(adaptation) = crate::brains::rules::unsupported(&text, format, &request.body)
            {
                adapted = true;
                adaptation.apply(format, &mut request.body);
                body = request.body.to_string();
                crate::brains::rules::learn(&provider.name, model, &adaptation);
                attempt -= 1;
                continue;
            }
            match status {
                401 | 403 => return Err(ProviderError::BadKey { provider: name, status, message }),
                429 => {
                    let pause = retry_after.unwrap_or_else(|| backoff(attempt));
                    if attempt < MAX_ATTEMPTS && pause <= MAX_RETRY_AFTER {
                        wait(pause, cancelled)?;
                        continue;
                    }
                    return Err(ProviderError::RateLimited { provider: name, retry_after, message });
                }
                500..=599 => {
                    if attempt < MAX_ATTEMPTS {
                        wait(retry_after.filter(|d| *d <= MAX_RETRY_AFTER).unwrap_or_else(|| backoff(attempt)), cancelled)?;
                        continue;
                    }
                    return Err(ProviderError::Server { provider: name, status, attempts: attempt, message });
                }
                _ => return Err(ProviderError::Rejected { provider: name, status, message }),
            }
        }
        let result = read_stream_of(provider, request.responses, response.into_body().into_reader(), started, cancelled, on_delta);
        let bytes_in = result.as_ref().map(|c| c.bytes_in).unwrap_or(0);
        gate.finish(admission, body.len() as u64, bytes_in);
        return result.map(|mut completion| {
            estimate_usage(&mut completion.answer, body.len());
            Completion { attempts: attempt, ..completion }
        });
    }
}

/// An answer that came without a usage report (a server that does not send
/// one, or one that refused `stream_options`) is counted by its bytes: about
/// four to a token, the request's for the input and the answer's (text,
/// calls, thinking) for the output, so the budget still sees what it cost.
pub fn estimate_usage(answer: &mut crate::brains::message::Assembled, request_bytes: usize) {
    if answer.input_tokens > 0 || answer.output_tokens > 0 {
        return;
    }
    let answered = answer.text.len() + answer.reasoning.len() + answer.tool_calls.iter().map(|c| c.name.len() + c.arguments.len()).sum::<usize>();
    answer.input_tokens = request_bytes.div_ceil(4) as u64;
    answer.output_tokens = answered.div_ceil(4) as u64;
}

/// Reads a streamed body to its end marker (public for benches and fuzzing).
pub fn read_stream(
    provider: &ProviderConfig,
    body: impl Read,
    started: Instant,
    cancelled: &dyn Fn() -> bool,
    on_delta: &mut dyn FnMut(&Delta),
) -> Result<Completion, ProviderError> {
    read_stream_of(provider, false, body, started, cancelled, on_delta)
}

/// `read_stream` for a chat-completions stream, or OpenAI's Responses API's when `responses`.
pub fn read_stream_of(
    provider: &ProviderConfig,
    responses: bool,
    mut body: impl Read,
    started: Instant,
    cancelled: &dyn Fn() -> bool,
    on_delta: &mut dyn FnMut(&Delta),
) -> Result<Completion, ProviderError> {
    let name = provider.name.clone();
    let malformed = |detail: String| ProviderError::Malformed { provider: name.clone(), detail };
    let mut sse = SseParser::default();
    let mut ndjson = NdjsonParser::default();
    let mut answer = Assembled::default();
    let mut first_token = None;
    let mut bytes_in = 0u64;
    let mut ended = false;
    let mut buffer = [0u8; 8192];
    let mut handle = |event: Option<&str>, data: &str, answer: &mut Assembled, first_token: &mut Option<Duration>| -> Result<bool, ProviderError> {
        let decoded = if responses { crate::brains::provider::decode_responses(event, data) } else { decode(provider.kind, event, data) }.map_err(&malformed)?;
        let (deltas, end) = match decoded {
            Decoded::Deltas(deltas) => (deltas, false),
            Decoded::End(deltas) => (deltas, true),
            Decoded::Error(message) => return Err(ProviderError::InStream { provider: name.clone(), message }),
        };
        for delta in &deltas {
            if first_token.is_none() && (matches!(delta, Delta::Text(_)) || delta.reasoning_text().is_some()) {
                *first_token = Some(started.elapsed());
            }
            answer.apply(delta);
            on_delta(delta);
        }
        Ok(end)
    };
    loop {
        if cancelled() {
            return Err(ProviderError::Cancelled);
        }
        let read = match body.read(&mut buffer) {
            Ok(read) => read,
            Err(err) if err.kind() == std::io::ErrorKind::TimedOut => {
                return Err(ProviderError::Timeout { provider: name.clone(), detail: format!("the stream stalled: {err}") });
            }
            Err(err) => return Err(malformed(format!("the stream broke: {err}"))),
        };
        let finishing = read == 0;
        bytes_in += read as u64;
        if provider.ndjson() {
            let lines = if finishing { ndjson.finish() } else { ndjson.feed(&buffer[..read]) }.map_err(|e| malformed(e.to_string()))?;
            for line in lines {
                ended |= handle(None, &line, &mut answer, &mut first_token)?;
            }
        } else {
            let events = if finishing { sse.finish() } else { sse.feed(&buffer[..read]) }.map_err(|e| malformed(e.to_string()))?;
            for event in events {
                ended |= handle(event.event.as_deref(), &event.data, &mut answer, &mut first_token)?;
            }
        }
        // Gemini has no end marker: a finish reason and the end of the body are the end.
        if finishing {
            let gemini_done = provider.kind == crate::brains::ProviderKind::Gemini && answer.finish.is_some();
            if !(ended || gemini_done) {
                return Err(malformed("the stream ended before the answer did (truncated)".into()));
            }
            // Calls are placed by the provider's own index (an output index, a part number): close the gaps.
            answer.tool_calls.retain(|call| !call.name.is_empty() || !call.arguments.is_empty());
            return Ok(Completion { answer, attempts: 1, first_token, bytes_in });
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500 * (1 << (attempt - 1).min(5)))
}

/// Sleeps in small steps so cancel is honoured while waiting to retry.
fn wait(duration: Duration, cancelled: &dyn Fn() -> bool) -> Result<(), ProviderError> {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        if cancelled() {
            return Err(ProviderError::Cancelled);
        }
        std::thread::sleep(Duration::from_millis(20).min(until.saturating_duration_since(Instant::now())));
    }
    Ok(())
}

fn transport_error(provider: &str, err: ureq::Error) -> ProviderError {
    match err {
        ureq::Error::Timeout(what) => ProviderError::Timeout { provider: provider.to_owned(), detail: format!("{what:?}") },
        other => ProviderError::Network { provider: provider.to_owned(), detail: other.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brains::ProviderKind;

    fn provider(kind: ProviderKind) -> ProviderConfig {
        ProviderConfig::new("fuzz", kind, "http://127.0.0.1:1", "m")
    }

    use crate::test_rng::Rng;

    /// Reads `bytes` in random-sized pieces.
    struct Pieces<'a> {
        bytes: &'a [u8],
        rng: Rng,
    }

    impl Read for Pieces<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = (1 + self.rng.below(64)).min(self.bytes.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    const VALID: &[(ProviderKind, &str)] = &[
        (ProviderKind::Openai, "data: {\"choices\":[{\"delta\":{\"content\":\"Hé\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"),
        (ProviderKind::Anthropic, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
        (ProviderKind::Gemini, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ja\"}]},\"finishReason\":\"STOP\"}]}\n\n"),
        (ProviderKind::Ollama, "{\"message\":{\"content\":\"x\"},\"done\":false}\n{\"message\":{\"content\":\"\"},\"done\":true}\n"),
    ];

    #[test]
    fn an_answer_without_a_usage_report_is_counted_by_its_size_and_a_reported_one_is_kept() {
        let mut answer = Assembled { text: "x".repeat(400), ..Assembled::default() };
        estimate_usage(&mut answer, 4_000);
        assert_eq!((answer.input_tokens, answer.output_tokens), (1_000, 100));
        let mut reported = Assembled { text: "x".repeat(400), input_tokens: 7, output_tokens: 3, ..Assembled::default() };
        estimate_usage(&mut reported, 4_000);
        assert_eq!((reported.input_tokens, reported.output_tokens), (7, 3));
    }

    #[test]
    fn a_responses_stream_gives_the_summary_apart_the_call_in_place_and_the_usage() {
        let stream = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{}}\n\n",
            "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"reasoning\"}}\n\n",
            "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"output_index\":0,\"delta\":\"Looking it up.\"}\n\n",
            "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"type\":\"function_call\",\"call_id\":\"call_9\",\"name\":\"current_window\",\"arguments\":\"\"}}\n\n",
            "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":1,\"delta\":\"{}\"}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"function_call\"}],\"usage\":{\"input_tokens\":2000,\"input_tokens_details\":{\"cached_tokens\":1792},\"output_tokens\":90,\"output_tokens_details\":{\"reasoning_tokens\":70}}}}\n\n",
        );
        let never = || false;
        let done = read_stream_of(&provider(ProviderKind::Openai), true, stream.as_bytes(), Instant::now(), &never, &mut |_| {}).unwrap().answer;
        assert_eq!((done.text.as_str(), done.reasoning.as_str()), ("", "Looking it up."));
        assert_eq!(done.tool_calls, vec![crate::brains::ToolCall { id: "call_9".into(), name: "current_window".into(), arguments: "{}".into(), signature: None }]);
        assert_eq!((done.input_tokens, done.cached_input_tokens, done.reasoning_tokens, done.finish.as_deref()), (2000, 1792, 70, Some("tool_calls")));
        // Cut before response.completed: truncated, said so.
        let cut = &stream[..stream.find("event: response.completed").unwrap()];
        assert!(matches!(read_stream_of(&provider(ProviderKind::Openai), true, cut.as_bytes(), Instant::now(), &never, &mut |_| {}), Err(ProviderError::Malformed { .. })));
    }

    #[test]
    fn random_truncated_and_mutated_streams_never_panic_and_fail_clearly() {
        let never = || false;
        for seed in 1..=400u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for (kind, valid) in VALID {
                // The whole stream, in random pieces: the same answer every time.
                let mut deltas = 0;
                let whole = read_stream(&provider(*kind), Pieces { bytes: valid.as_bytes(), rng: Rng(seed) }, Instant::now(), &never, &mut |_| deltas += 1);
                assert!(whole.is_ok(), "{kind:?} seed {seed}: {whole:?}");
                // Truncated anywhere before its end: an error that says so, or (Gemini, no end marker) a shorter answer.
                let cut = rng.below(valid.len());
                let truncated = read_stream(&provider(*kind), Pieces { bytes: &valid.as_bytes()[..cut], rng: Rng(seed) }, Instant::now(), &never, &mut |_| {});
                if let Err(err) = &truncated {
                    assert!(matches!(err, ProviderError::Malformed { .. }), "{kind:?} cut {cut}: {err:?}");
                }
                // Random bytes spliced in, or pure noise: no panic, and any error is Malformed or InStream.
                let mut mutated = valid.as_bytes().to_vec();
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(mutated.len());
                    mutated.insert(at, rng.next() as u8);
                }
                let noise: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
                for bytes in [mutated, noise] {
                    match read_stream(&provider(*kind), Pieces { bytes: &bytes, rng: Rng(seed) }, Instant::now(), &never, &mut |_| {}) {
                        Ok(_) | Err(ProviderError::Malformed { .. } | ProviderError::InStream { .. }) => {}
                        Err(other) => panic!("{kind:?} seed {seed}: unexpected {other:?}"),
                    }
                }
            }
        }
    }
}
