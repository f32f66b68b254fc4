//! Throughput of transcript extraction + chunking over a realistic
//! workstream (target: ≥ 200 MB/s of input content on one core).
//!
//! The workstream is generated deterministically (xorshift64) so runs are
//! comparable: user turns of 50–3,000 chars, assistant answers (some long)
//! with reasoning, tool calls to allow-listed and other tools with JSON
//! inputs, tool results from 100 B to 200 KB, and some multi-byte text.
//!
//! Besides the real setting (default allow-list and budgets), the same 50 MB
//! is run with every tool allowed, and with every tool allowed and no budget:
//! with the defaults most bytes (reasoning, other tools' output) are skipped
//! unread, so those variants show the cost per byte actually processed.
//!
//! Run with `cargo bench -p compactor-shared --bench transcript`.

use std::hint::black_box;
use std::time::Duration;

use compactor_shared::chunk::{chunk, DEFAULT_CHUNK_MAX_CHARS};
use compactor_shared::message::{Message, Part, Role};
use compactor_shared::tokens::CharEstimator;
use compactor_shared::transcript::{extract, TranscriptBudgets, TranscriptConfig};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// xorshift64: tiny, deterministic, good enough for shaping test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        let span = (hi - lo + 1) as u64;
        lo + (self.next() % span) as usize
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// Log-uniform in `lo..=hi`: many small values, a few huge ones, as tool
    /// output sizes are.
    fn log_range(&mut self, lo: usize, hi: usize) -> usize {
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        let t = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((l + t * (h - l)).exp() as usize).clamp(lo, hi)
    }
}

const WORDS: &[&str] = &[
    "the",
    "deploy",
    "service",
    "config",
    "database",
    "migration",
    "error",
    "retry",
    "user",
    "customer",
    "invoice",
    "request",
    "latency",
    "timeout",
    "cache",
    "queue",
    "worker",
    "ticket",
    "branch",
    "release",
    "we",
    "should",
    "check",
    "why",
    "failed",
    "after",
    "update",
    "because",
    "value",
    "schema",
    "index",
    "field",
    "returns",
    "null",
    "instead",
    "of",
    "expected",
    "result",
];

const MULTIBYTE: &[&str] = &[
    "café",
    "naïve",
    "Grüße",
    "東京",
    "데이터",
    "😀",
    "→",
    "€200",
];

/// About `len` bytes of prose, with line breaks, occasional multi-byte words
/// and, rarely, a line that looks like a transcript header.
fn prose(rng: &mut Rng, len: usize, multibyte: bool) -> String {
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        let word = if multibyte && rng.chance(8) {
            MULTIBYTE[rng.range(0, MULTIBYTE.len() - 1)]
        } else {
            WORDS[rng.range(0, WORDS.len() - 1)]
        };
        s.push_str(word);
        match rng.next() % 100 {
            0..=3 => s.push('\n'),
            4 if rng.chance(5) => s.push_str("\n[#12 USER]\n"),
            5 => s.push_str(". "),
            _ => s.push(' '),
        }
    }
    s
}

/// Log-like tool output: many short lines.
fn tool_output(rng: &mut Rng, len: usize) -> String {
    let mut s = String::with_capacity(len + 96);
    let mut line = 0u64;
    while s.len() < len {
        line += 1;
        s.push_str("2026-04-14T10:00:");
        s.push_str(&format!("{:02}", line % 60));
        s.push_str(" INFO ");
        let words = rng.range(4, 14);
        for _ in 0..words {
            s.push_str(WORDS[rng.range(0, WORDS.len() - 1)]);
            s.push(' ');
        }
        s.push('\n');
    }
    s
}

const ALLOWED: &[&str] = &[
    "userQuestions",
    "proceedInOnboarding",
    "linearCreateIssue",
    "linearSearch",
];
const OTHER: &[&str] = &["bash", "read_file", "grep", "web_fetch", "edit_file"];

fn tool_input(rng: &mut Rng) -> serde_json::Value {
    let len = rng.range(20, 2_000);
    serde_json::json!({
        "query": prose(rng, len, true),
        "limit": rng.range(1, 100),
        "flags": ["a", "b"],
    })
}

/// The next message id.
fn next_id(id: &mut i64) -> i64 {
    *id += 1;
    *id
}

/// A workstream whose content adds up to at least `target` bytes.
fn workstream(target: usize) -> (Vec<Message>, u64) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut messages = Vec::new();
    let mut bytes = 0usize;
    let mut id = 0i64;
    while bytes < target {
        // A user turn.
        let len = rng.range(50, 3_000);
        let text = prose(&mut rng, len, true);
        bytes += text.len();
        messages.push(Message::text(next_id(&mut id), Role::User, text));

        // The assistant works with tools for a few rounds.
        for _ in 0..rng.range(1, 4) {
            let mut parts = Vec::new();
            let len = rng.range(200, 4_000);
            let reasoning = prose(&mut rng, len, false);
            bytes += reasoning.len();
            parts.push(Part::Reasoning { text: reasoning });
            let mut calls = Vec::new();
            for c in 0..rng.range(0, 3) {
                let tool = if rng.chance(30) {
                    ALLOWED[rng.range(0, ALLOWED.len() - 1)]
                } else {
                    OTHER[rng.range(0, OTHER.len() - 1)]
                };
                let input = tool_input(&mut rng);
                bytes += input.to_string().len();
                let call_id = format!("call_{}_{c}", id + 1);
                parts.push(Part::ToolCall {
                    call_id: call_id.clone(),
                    tool_name: tool.into(),
                    input,
                });
                calls.push((call_id, tool));
            }
            messages.push(Message::new(next_id(&mut id), Role::Assistant, parts));
            let results: Vec<Part> = calls
                .into_iter()
                .map(|(call_id, tool)| {
                    let len = rng.log_range(100, 200_000);
                    let output = tool_output(&mut rng, len);
                    bytes += output.len();
                    Part::ToolResult {
                        call_id,
                        tool_name: tool.into(),
                        output,
                        is_error: rng.chance(5),
                        pruned: false,
                    }
                })
                .collect();
            if !results.is_empty() {
                messages.push(Message::new(next_id(&mut id), Role::Tool, results));
            }
        }

        // The answer: usually short, sometimes a long write-up.
        let len = if rng.chance(10) {
            rng.range(5_000, 20_000)
        } else {
            rng.range(100, 1_500)
        };
        let text = prose(&mut rng, len, true);
        bytes += text.len();
        messages.push(Message::text(next_id(&mut id), Role::Assistant, text));
    }
    (messages, bytes as u64)
}

/// Benchmarks extract + chunk of `messages` (`bytes` of content) as `name`.
fn bench_one(
    c: &mut Criterion,
    name: &str,
    messages: &[Message],
    bytes: u64,
    config: &TranscriptConfig,
) {
    let transcript = extract(messages, config);
    let chunks = chunk(&transcript, DEFAULT_CHUNK_MAX_CHARS, CharEstimator::DEFAULT).len();
    eprintln!(
        "{name}: {} messages, {bytes} content bytes -> transcript {} bytes, {} blocks, {chunks} chunks",
        messages.len(),
        transcript.text.len(),
        transcript.blocks.len(),
    );
    let mut group = c.benchmark_group("transcript");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function(name, |b| {
        b.iter(|| {
            let transcript = extract(black_box(messages), config);
            let chunks = chunk(&transcript, DEFAULT_CHUNK_MAX_CHARS, CharEstimator::DEFAULT);
            black_box(chunks.len())
        })
    });
    group.finish();
}

/// Every tool allowed (the empty prefix matches all names), so every tool
/// output is read, counted and cut.
fn all_tools() -> TranscriptConfig {
    let mut config = TranscriptConfig::default();
    config.tools.prefixes.push(String::new());
    config
}

/// Every tool allowed and nothing cut: every content byte but reasoning is
/// copied, escaped and chunked (the worst case, not a real setting).
fn all_tools_uncut() -> TranscriptConfig {
    let mut config = all_tools();
    config.budgets = TranscriptBudgets {
        user: usize::MAX,
        assistant: usize::MAX,
        tool_result: usize::MAX,
        tool_input: usize::MAX,
    };
    config
}

fn extract_and_chunk(c: &mut Criterion) {
    let (messages, bytes) = workstream(50_000_000);
    let default = TranscriptConfig::default();
    bench_one(c, "extract_chunk_50MB", &messages, bytes, &default);
    bench_one(
        c,
        "extract_chunk_50MB_all_tools",
        &messages,
        bytes,
        &all_tools(),
    );
    bench_one(
        c,
        "extract_chunk_50MB_all_tools_uncut",
        &messages,
        bytes,
        &all_tools_uncut(),
    );
    drop(messages);
    let (messages, bytes) = workstream(5_000_000);
    bench_one(c, "extract_chunk_5MB", &messages, bytes, &default);
}

criterion_group!(benches, extract_and_chunk);
criterion_main!(benches);
