//! The quality benchmark: generated sessions of two shapes (a coding agent
//! with tools, a support / assistant chat), each appended in 10 slices to
//! one workstream with a compaction after each, run by a worker in this
//! process (the real job, the fenced commit), with three summarizers
//! (extractive, a fake LLM that writes value-free summaries, a fake LLM
//! that answers malformed every third call). After every compaction the
//! built context is scored against the planted facts.
//!
//! Also third-party data, each with a part to tune on and a held-out part:
//! Schema-Guided Dialogue task dialogues (`sgd-train`, `sgd-test`), CrossWOZ
//! Chinese task dialogues (`crosswoz-tune`, `crosswoz-held-out`) and two
//! real Claude Code sessions (`claude-code-tune`, `claude-code-held-out`),
//! from `tests/data/`. Every row also scores two baselines on the same
//! messages: the sliding window of the same tokens and the full history.
//!
//! Run: `bench/quality`, or `cargo bench -p compactor-e2e --bench quality`.
//! Knobs: `QUALITY_SHAPES` (coding,support,sgd-train,sgd-test,
//! crosswoz-tune,crosswoz-held-out,claude-code-tune,claude-code-held-out), `QUALITY_MODES`
//! (extractive,value_free_llm,malformed_llm), `QUALITY_SEED` (1),
//! `QUALITY_MESSAGES` (per shape's default: 1,600 coding, 1,200 support,
//! all of a data shape's fixture; a data shape is cut at whole dialogues or
//! turns),
//! `QUALITY_ROUNDS` (10), `QUALITY_CONTEXT_WINDOW` (derived: one slice is
//! about the trigger), `QUALITY_DB` (sqlite | postgres),
//! `QUALITY_MARKDOWN` (a file to write the Markdown tables to),
//! `QUALITY_JSON` (a file to write every round's scores to), `QUALITY_DUMP`
//! (a directory to write every round's context to, as scored),
//! `QUALITY_SESSIONS` (a directory to write each session to, as JSON).
//! Prints a human table per session and summarizer and `BENCH_RESULT`
//! lines (suite `quality`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::Duration;

use compactor_e2e::bench::env_or;
use compactor_e2e::db::Backend;
use compactor_e2e::quality::{drive, report, Mode, RunSpec, Session, SessionSpec, Shape};

fn list<T>(name: &str, all: &[T], parse: impl Fn(&str) -> Option<T>) -> Vec<T>
where
    T: Copy,
{
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .split(',')
            .map(|s| parse(s.trim()).unwrap_or_else(|| panic!("{name}: unknown {s:?}")))
            .collect(),
        _ => all.to_vec(),
    }
}

fn main() {
    let shapes = list("QUALITY_SHAPES", &Shape::EVERY, Shape::parse);
    let modes = list("QUALITY_MODES", &Mode::ALL, Mode::parse);
    let seed = env_or("QUALITY_SEED", 1u64);
    let messages: Option<usize> = std::env::var("QUALITY_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok());
    let spec = RunSpec {
        rounds: env_or("QUALITY_ROUNDS", 10usize),
        backend: match std::env::var("QUALITY_DB").as_deref() {
            Ok("postgres") => Backend::Postgres,
            _ => Backend::Sqlite,
        },
        context_window: std::env::var("QUALITY_CONTEXT_WINDOW")
            .ok()
            .and_then(|v| v.parse().ok()),
        round_timeout: Duration::from_secs(env_or("QUALITY_ROUND_TIMEOUT_SECS", 120u64)),
        dump: std::env::var_os("QUALITY_DUMP").map(std::path::PathBuf::from),
    };
    if let Some(dir) = &spec.dump {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    }
    let rt = compactor_e2e::bench::runtime();
    let mut results = Vec::new();
    rt.block_on(async {
        for shape in shapes {
            let mut session_spec = SessionSpec::new(shape, seed);
            if let Some(n) = messages {
                session_spec.messages = n;
            }
            let session = Session::generate(session_spec);
            println!("\n== {}", session.describe());
            if let Some(dir) = std::env::var_os("QUALITY_SESSIONS") {
                export(&session, &spec, std::path::Path::new(&dir));
            }
            let mut runs = Vec::new();
            for &mode in &modes {
                let run = drive::run(&session, mode, &spec).await;
                print!("{}", report::human(&session, &run));
                report::bench_lines(&session, &run);
                runs.push(run);
            }
            results.push((session, runs));
        }
    });
    let md = report::markdown(&results);
    println!("\n{md}");
    if let Ok(path) = std::env::var("QUALITY_MARKDOWN") {
        std::fs::write(&path, &md).unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
    if let Ok(path) = std::env::var("QUALITY_JSON") {
        let json: Vec<serde_json::Value> = results
            .iter()
            .map(|(s, runs)| {
                serde_json::json!({
                    "shape": s.spec.shape,
                    "seed": s.spec.seed,
                    "messages": s.messages.len(),
                    "facts": s.facts,
                    "runs": runs,
                })
            })
            .collect();
        std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap())
            .unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
}

/// Writes `session` as JSON (`<shape>.json`: its messages, facts, slices and
/// window) for offline analysis of what the engine keeps.
fn export(session: &Session, spec: &RunSpec, dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let window = spec
        .context_window
        .unwrap_or_else(|| drive::derived_window(session, spec.rounds));
    let slices: Vec<usize> = session.slices(spec.rounds).iter().map(|r| r.end).collect();
    let json = serde_json::json!({
        "shape": session.spec.shape.name(),
        "window": window,
        "slices": slices,
        "messages": session.messages,
        "facts": session.facts,
    });
    let path = dir.join(format!("{}.json", session.spec.shape.name()));
    std::fs::write(&path, json.to_string())
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}
