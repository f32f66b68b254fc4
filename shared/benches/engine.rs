//! CPU per MB of a compaction's pass 2 (issue 17), in memory: the passes a
//! worker runs on each page of the compacted span, over the e2e coding
//! conversation the `rss` benchmark compacts (`compactor_e2e::conversation`,
//! rebuilt here: this crate cannot depend on the e2e one).
//!
//! - `stated`: `stated::extract` of each page of 1,000 messages;
//! - `evidence`: `evidence::read` of each page (candidate lines by form);
//! - `transcript`: transcript extraction and chunking of the whole span;
//! - `summarize`: the extractive summarizer folding every chunk in turn,
//!   with the state merged after each, as the pipeline does;
//! - `compact`: the whole `pipeline::compact` (both passes) with the
//!   in-memory page source and the extractive summarizer.
//!
//! Each reports MB/s of message content (the `rss` benchmark's measure).
//! Run with `cargo bench -p compactor-shared --bench engine` (add a name to
//! run one). For instruction counts on a noisy machine, set
//! `ENGINE_BENCH_ONCE=<pass>` (or `none`, the set-up alone): the pass runs
//! once, without criterion, under `perf stat -e instructions`.
//! `ENGINE_BENCH_ONCE=digest` prints a digest of the whole compaction's
//! result (summary, state, watermark, report): a change meant to make the
//! engine faster without changing what it writes must leave it as it was.

use std::hint::black_box;
use std::time::Duration;

use compactor_shared::chunk::chunk;
use compactor_shared::config::EngineConfig;
use compactor_shared::extractive;
use compactor_shared::message::{Message, Part, Role};
use compactor_shared::pipeline::{self, Extractive, InMemory, Request, Workstream};
use compactor_shared::prompt::CompactionInput;
use compactor_shared::summary::Summary;
use compactor_shared::{
    evidence, stated, transcript, CharEstimator, TokenEstimator, WorkstreamState,
};
use criterion::{criterion_group, Criterion, Throughput};

/// Turns of the conversation (four messages each).
const TURNS: usize = 2_500;
/// Messages per page, as the worker reads them.
const PAGE: usize = 1_000;

/// The e2e coding conversation: per turn a user request, the assistant's
/// answer, a `bash` call and its failed test output.
fn conversation(turns: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(turns * 4);
    let mut id = 0i64;
    let mut next = || {
        id += 1;
        id
    };
    for t in 0..turns {
        out.push(Message::text(
            next(),
            Role::User,
            format!(
                "Turn {t}: please look at src/module_{t}.rs and explain why the test \
                 `test_case_{t}` fails with error E{:04}; we need it fixed before the release.",
                t % 10_000
            ),
        ));
        out.push(Message::text(
            next(),
            Role::Assistant,
            format!(
                "Looking at src/module_{t}.rs: the failure comes from an off-by-one in the \
                 loop bound; I will run the test to confirm before changing anything (turn {t})."
            ),
        ));
        let call_id = format!("call-{t}");
        out.push(Message::new(
            next(),
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: call_id.clone(),
                tool_name: "bash".into(),
                input: serde_json::json!({"cmd": format!("cargo test test_case_{t}")}),
            }],
        ));
        out.push(Message::new(
            next(),
            Role::Tool,
            vec![Part::ToolResult {
                call_id,
                tool_name: "bash".into(),
                output: format!(
                    "running 1 test\ntest test_case_{t} ... FAILED\nassertion failed: left == right (turn {t})"
                ),
                is_error: false,
                pruned: false,
            }],
        ));
    }
    out
}

/// Content bytes, counted as the `rss` benchmark counts them.
fn content_bytes(messages: &[Message]) -> u64 {
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(Part::content_len)
        .sum::<usize>() as u64
}

/// The chunks the summarizer folds.
fn chunks(messages: &[Message], engine: &EngineConfig) -> Vec<String> {
    let t = transcript::extract(messages, &engine.transcript);
    chunk(
        &t,
        engine.chunk.max_chars,
        CharEstimator::new(engine.chars_per_token),
    )
    .iter()
    .map(|c| c.text.to_owned())
    .collect()
}

fn stated_pass(messages: &[Message]) -> usize {
    messages
        .chunks(PAGE)
        .map(|page| stated::extract(page).len())
        .sum()
}

fn evidence_pass(messages: &[Message], engine: &EngineConfig) -> usize {
    messages
        .chunks(PAGE)
        .map(|page| evidence::read(page, engine.evidence.max_line_chars).len())
        .sum()
}

fn transcript_pass(messages: &[Message], engine: &EngineConfig) -> usize {
    chunks(messages, engine).len()
}

/// Folds `chunks` as `pipeline::compact` does with the extractive
/// summarizer.
fn summarize_pass(chunks: &[String], engine: &EngineConfig, e: &dyn TokenEstimator) -> Summary {
    let mut summary: Option<Summary> = None;
    let mut state = WorkstreamState::default();
    let mut judgements = extractive::Judgements::default();
    for text in chunks {
        let input = CompactionInput {
            previous_summary: summary.as_ref(),
            state: &state,
            new_messages: text,
            instructions: None,
            split_turn: false,
            format: engine.summary.format,
        };
        let out = extractive::summarize_with(
            &input,
            &engine.extractive_config(),
            engine.summary_budget(),
            e,
            &mut judgements,
        );
        summary = Some(out.summary);
        state.merge(&out.delta, &engine.state_caps);
    }
    summary.unwrap_or_default()
}

fn compact_pass(messages: &[Message], engine: &EngineConfig, e: &dyn TokenEstimator) -> bool {
    compaction(messages, engine, e).is_some()
}

/// The whole compaction of `messages` (`None`: it did not compact).
fn compaction(
    messages: &[Message],
    engine: &EngineConfig,
    e: &dyn TokenEstimator,
) -> Option<pipeline::Compacted> {
    let ws = Workstream {
        uncompacted_tokens: messages.iter().map(|m| e.message_tokens(m)).sum(),
        ..Workstream::default()
    };
    let mut pages = InMemory::new(messages, PAGE);
    let mut summarizer = Extractive::new(engine, e);
    let outcome = pipeline::now_or_never(pipeline::compact(
        &ws,
        &Request::default(),
        engine,
        e,
        1_000,
        &mut pages,
        &mut summarizer,
    ));
    match outcome {
        Some(Ok(pipeline::Outcome::Compacted(done))) => Some(*done),
        _ => None,
    }
}

/// A digest of what a compaction of `messages` writes.
fn digest(messages: &[Message], engine: &EngineConfig, e: &dyn TokenEstimator) -> String {
    use std::hash::{Hash, Hasher};
    let Some(done) = compaction(messages, engine, e) else {
        return "did not compact".into();
    };
    let written = format!(
        "{}\n{}\n{:?} {:?} {} {} {:?} {:?}",
        serde_json::to_string(&done.summary).unwrap_or_default(),
        serde_json::to_string(&done.state).unwrap_or_default(),
        done.watermark,
        done.keep,
        done.compacted_tokens,
        done.summary_tokens,
        done.report,
        done.pruned,
    );
    let mut h = std::hash::DefaultHasher::new();
    written.hash(&mut h);
    format!("{} bytes, {:016x}", written.len(), h.finish())
}

/// Runs `pass` once (for `perf stat`), or returns `false` if `pass` is not
/// one.
fn once(pass: &str) -> bool {
    let engine = EngineConfig::default();
    let e = CharEstimator::new(engine.chars_per_token);
    let messages = conversation(TURNS);
    let n = match pass {
        "none" => messages.len(),
        "stated" => stated_pass(&messages),
        "evidence" => evidence_pass(&messages, &engine),
        "transcript" => transcript_pass(&messages, &engine),
        "summarize" => {
            let c = chunks(&messages, &engine);
            summarize_pass(&c, &engine, &e).key_facts.len()
        }
        "chunks" => chunks(&messages, &engine).len(),
        "compact" => usize::from(compact_pass(&messages, &engine, &e)),
        "digest" => {
            eprintln!("digest: {}", digest(&messages, &engine, &e));
            return true;
        }
        _ => return false,
    };
    eprintln!("{pass}: {n}");
    true
}

fn passes(c: &mut Criterion) {
    let engine = EngineConfig::default();
    let e = CharEstimator::new(engine.chars_per_token);
    let messages = conversation(TURNS);
    let bytes = content_bytes(&messages);
    let chunked = chunks(&messages, &engine);
    eprintln!(
        "{} messages, {bytes} content bytes, {} chunks",
        messages.len(),
        chunked.len()
    );
    let mut group = c.benchmark_group("pass2");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("stated", |b| {
        b.iter(|| black_box(stated_pass(black_box(&messages))))
    });
    group.bench_function("evidence", |b| {
        b.iter(|| black_box(evidence_pass(black_box(&messages), &engine)))
    });
    group.bench_function("transcript", |b| {
        b.iter(|| black_box(transcript_pass(black_box(&messages), &engine)))
    });
    group.bench_function("summarize", |b| {
        b.iter(|| black_box(summarize_pass(black_box(&chunked), &engine, &e)))
    });
    group.bench_function("compact", |b| {
        b.iter(|| black_box(compact_pass(black_box(&messages), &engine, &e)))
    });
    group.finish();
}

criterion_group!(benches, passes);

fn main() {
    if let Ok(pass) = std::env::var("ENGINE_BENCH_ONCE") {
        assert!(once(&pass), "unknown pass {pass}");
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
