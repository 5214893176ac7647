//! Provider streaming: first token from a loopback server (request sent →
//! first text delta), and our per-token cost (SSE framing + JSON decode +
//! assembly) against only splitting the raw stream into lines.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use cowork::brains::client::read_stream;
use cowork::brains::{Delta, ProviderConfig, ProviderKind, Role, Turn, stream_chat};
use cowork::net::OutboundGate;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn provider(base_url: String) -> ProviderConfig {
    ProviderConfig::new("bench", ProviderKind::Openai, base_url, "m")
}

/// A server that answers every request at once with one token, then `[DONE]`.
fn instant_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::Builder::new().name("bench-server".into()).spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                  data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
            );
        }
    }).unwrap();
    port
}

fn first_token(c: &mut Criterion) {
    let port = instant_server();
    let gate = OutboundGate::new(false);
    let provider = provider(format!("http://127.0.0.1:{port}/v1"));
    let turns = [Turn::new(Role::User, "hello")];
    let mut samples = Vec::new();
    c.bench_function("first_token_from_loopback", |b| {
        b.iter_custom(|n| {
            let mut total = Duration::ZERO;
            for _ in 0..n {
                let started = Instant::now();
                let mut first = None;
                stream_chat(&gate, &provider, None, None, &turns, 16, &|| false, &mut |delta| {
                    if first.is_none() && matches!(delta, Delta::Text(_)) {
                        first = Some(started.elapsed());
                    }
                })
                .unwrap();
                let first = first.unwrap();
                samples.push(first);
                total += first;
            }
            total
        })
    });
    samples.sort();
    if !samples.is_empty() {
        let pick = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
        println!("first token from loopback: p50 {:?}, p95 {:?} ({} samples)", pick(0.5), pick(0.95), samples.len());
    }
}

fn per_token(c: &mut Criterion) {
    const TOKENS: usize = 10_000;
    let mut body = String::new();
    for i in 0..TOKENS {
        body.push_str(&format!("data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    let provider = provider("http://127.0.0.1:1/v1".into());
    let mut group = c.benchmark_group("stream");
    group.throughput(Throughput::Elements(TOKENS as u64));
    group.bench_function("cowork_sse_decode_assemble_10k_tokens", |b| {
        b.iter(|| {
            let mut n = 0usize;
            read_stream(&provider, body.as_bytes(), Instant::now(), &|| false, &mut |_| n += 1).unwrap();
            n
        })
    });
    group.bench_function("raw_line_split_10k_tokens", |b| {
        b.iter(|| {
            let mut lines = 0usize;
            let mut reader = body.as_bytes();
            let mut buffer = [0u8; 8192];
            loop {
                let read = reader.read(&mut buffer).unwrap();
                if read == 0 {
                    break;
                }
                lines += buffer[..read].iter().filter(|b| **b == b'\n').count();
            }
            lines
        })
    });
    group.finish();
}

fn router(c: &mut Criterion) {
    use cowork::brains::router::{Preference, RouteInput, Target, route};
    use cowork::memory::tokens::estimate_tokens;
    let question = "Summarise what I worked on this morning and draft a status update for the team channel.";
    c.bench_function("router_decision", |b| {
        b.iter(|| {
            let input = RouteInput {
                preference: Preference::Local,
                prompt_tokens: estimate_tokens(std::hint::black_box(question)) + 400,
                attachments: 0,
                tools_needed: 2,
                try_harder_from: std::hint::black_box(Some(Target::Local)).filter(|_| false),
                local_limit_tokens: 1_500,
                local_available: true,
                cloud_tiers: 2,
            };
            route(&input).unwrap()
        })
    });
}

/// What the price table costs per request (the budget check and the usage row
/// each look a model up) and what a reasoning stream costs to decode.
fn prices_and_reasoning(c: &mut Criterion) {
    use cowork::brains::ProviderKind;
    let openai = ProviderConfig::new("openai", ProviderKind::Openai, "https://api.openai.com/v1", "gpt-5-2025-08-07");
    // The first lookup parses the shipped table (once per process).
    let _ = openai.prices("gpt-5");
    c.bench_function("price_lookup_dated_snapshot", |b| b.iter(|| std::hint::black_box(&openai).prices(std::hint::black_box("gpt-5-2025-08-07"))));
    c.bench_function("is_reasoning_unknown_model", |b| b.iter(|| std::hint::black_box(&openai).is_reasoning(std::hint::black_box("o9-preview-2099"))));
    const TOKENS: usize = 10_000;
    let mut body = String::new();
    for i in 0..TOKENS {
        let field = if i < TOKENS / 2 { "reasoning_content" } else { "content" };
        body.push_str(&format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"{field}\":\"tok{i} \"}}}}]}}\n\n"));
    }
    body.push_str("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":10000,\"prompt_cache_hit_tokens\":768}}\n\ndata: [DONE]\n\n");
    let deepseek = provider("http://127.0.0.1:1/v1".into());
    let mut group = c.benchmark_group("stream");
    group.throughput(Throughput::Elements(TOKENS as u64));
    group.bench_function("reasoning_then_answer_10k_tokens", |b| {
        b.iter(|| read_stream(&deepseek, body.as_bytes(), Instant::now(), &|| false, &mut |_| {}).unwrap().answer.cached_input_tokens)
    });
    group.finish();
}

criterion_group!(benches, first_token, per_token, router, prices_and_reasoning);
criterion_main!(benches);
