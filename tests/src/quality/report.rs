//! The benchmark's output: a human table per session and summarizer (every
//! round, then the last round per kind and the facts it lost),
//! `BENCH_RESULT` lines for `bench/report.py`-style tooling, and the same
//! tables in Markdown for BENCHMARKS.md.

use std::fmt::Write as _;

use super::drive::SessionRun;
use super::score::{Score, Tally};
use super::sessions::{Kind, Session};
use crate::bench::result;

/// The targets after the last compaction.
pub const VALUES_TARGET_PCT: f64 = 95.0;

/// Whether the last round meets every target: ≥ 95 % of exact values (and
/// of tool-only ones), every current decision and constraint, nothing
/// superseded shown as current, the context under the trigger, every round
/// committed.
pub fn meets_targets(run: &SessionRun) -> bool {
    let Some(last) = run.last() else { return false };
    let s = &last.score;
    s.values.pct() >= VALUES_TARGET_PCT
        && s.tool_only.pct() >= VALUES_TARGET_PCT
        && s.statements.kept == s.statements.total
        && s.superseded_shown == 0
        && s.context_tokens < run.trigger_tokens
        && run.rounds.iter().all(|r| r.committed)
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The model's window and the trigger of `run`, in tokens with thousands
/// separated: every table of a run names them.
fn window_and_trigger(run: &SessionRun) -> (String, String) {
    (thousands(run.context_window), thousands(run.trigger_tokens))
}

fn run_label(r: &super::drive::Round) -> String {
    let mut label = if r.committed {
        r.outcome.clone().unwrap_or_else(|| "?".into())
    } else {
        "NOT COMMITTED".into()
    };
    if r.degraded {
        label.push_str(", degraded");
    }
    label
}

/// The human report of one session in one mode.
pub fn human(session: &Session, run: &SessionRun) -> String {
    let mut out = String::new();
    let (window, trigger) = window_and_trigger(run);
    let _ = writeln!(
        out,
        "\n-- {} | {} | window {window} tokens, trigger {trigger} tokens | {:.1} s{}",
        session.spec.shape.title(),
        run.mode.title(),
        run.seconds,
        run.llm.map_or(String::new(), |l| format!(
            " | LLM calls {} ({} compaction, {} answered malformed)",
            l.calls, l.compaction_calls, l.malformed_answers
        ))
    );
    let _ = writeln!(
        out,
        "{:>5} {:>8} {:>14} {:>14} {:>14} {:>10} {:>19}  run",
        "round", "messages", "values", "tool-only", "decisions", "stale", "context / trigger"
    );
    for r in &run.rounds {
        let s = &r.score;
        let stale = format!("{}/{}", s.superseded_shown, s.superseded);
        let context = format!("{} / {trigger}", thousands(s.context_tokens));
        let _ = writeln!(
            out,
            "{:>5} {:>8} {:>14} {:>14} {:>14} {stale:>10} {context:>19}  {}",
            r.round,
            s.appended,
            s.values.to_string(),
            s.tool_only.to_string(),
            s.statements.to_string(),
            run_label(r)
        );
    }
    let Some(last) = run.last() else { return out };
    let _ = writeln!(out, "last round, per kind of exact value:");
    for (kind, t) in &last.score.by_kind {
        let _ = writeln!(out, "  {:<12} {t}", kind.name());
    }
    let _ = writeln!(out, "last round, per source of exact value:");
    for (source, t) in &last.score.by_source {
        let _ = writeln!(out, "  {:<17} {t}", source.name());
    }
    out.push_str(&lost_listing(session, &last.score, false));
    out.push_str(if meets_targets(run) {
        "targets: met\n"
    } else {
        "targets: not met\n"
    });
    out
}

/// The facts the context lacks, and the superseded ones it shows as
/// current (value | kind | class | source | first message).
pub fn lost_listing(session: &Session, s: &Score, markdown: bool) -> String {
    let mut out = String::new();
    let rows = |out: &mut String, title: &str, indices: &[usize]| {
        if indices.is_empty() {
            return;
        }
        if markdown {
            let _ = writeln!(
                out,
                "\n{title}:\n\n| value | kind | class | source | message |\n|---|---|---|---|---|"
            );
        } else {
            let _ = writeln!(out, "{title}:");
        }
        for &i in indices {
            let f = &session.facts[i];
            if markdown {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | #{} |",
                    f.value.replace('|', "\\|"),
                    f.kind.name(),
                    f.class.name(),
                    f.source.name(),
                    f.message
                );
            } else {
                let _ = writeln!(
                    out,
                    "  {:<48} {:<12} {:<10} {:<17} #{}",
                    f.value,
                    f.kind.name(),
                    f.class.name(),
                    f.source.name(),
                    f.message
                );
            }
        }
    };
    rows(&mut out, "lost", &s.lost);
    rows(&mut out, "superseded, shown as current", &s.stale);
    out
}

/// `BENCH_RESULT` lines: every round's figures, and the last round's per
/// kind. Metric names are `<shape>/<mode>/…`.
pub fn bench_lines(session: &Session, run: &SessionRun) {
    let prefix = format!("{}/{}", session.spec.shape.name(), run.mode.name());
    let emit = |metric: String, value: f64, unit: &str| result("quality", &metric, value, unit);
    for r in &run.rounds {
        let p = format!("{prefix}/round{:02}", r.round);
        score_lines(&emit, &p, &r.score, false);
    }
    if let Some(last) = run.last() {
        let s = &last.score;
        score_lines(&emit, &prefix, s, true);
        emit(
            format!("{prefix}/trigger_tokens"),
            run.trigger_tokens as f64,
            "tokens",
        );
        emit(
            format!("{prefix}/targets_met"),
            f64::from(u8::from(meets_targets(run))),
            "bool",
        );
        for (kind, t) in &s.by_kind {
            emit(format!("{prefix}/kind/{}_pct", kind.name()), t.pct(), "%");
        }
    }
}

/// The figures of `s` that every round and the last round both report,
/// under `p`: with `counts` (the last round), the values kept and total
/// too.
fn score_lines(emit: &dyn Fn(String, f64, &str), p: &str, s: &Score, counts: bool) {
    emit(format!("{p}/values_pct"), s.values.pct(), "%");
    if counts {
        emit(format!("{p}/values_kept"), s.values.kept as f64, "facts");
        emit(format!("{p}/values_total"), s.values.total as f64, "facts");
    }
    emit(format!("{p}/tool_only_pct"), s.tool_only.pct(), "%");
    emit(format!("{p}/decisions_pct"), s.statements.pct(), "%");
    emit(
        format!("{p}/superseded_shown"),
        s.superseded_shown as f64,
        "items",
    );
    emit(
        format!("{p}/context_tokens"),
        s.context_tokens as f64,
        "tokens",
    );
}

fn cell(t: &Tally) -> String {
    format!("{}/{} ({:.0} %)", t.kept, t.total, t.pct())
}

/// The columns of `s` both Markdown tables have, in their order: values,
/// tool-only, decisions & constraints, superseded shown / superseded.
fn score_cells(s: &Score) -> String {
    format!(
        "{} | {} | {} | {} / {}",
        cell(&s.values),
        cell(&s.tool_only),
        cell(&s.statements),
        s.superseded_shown,
        s.superseded
    )
}

/// Everything in Markdown: the summary over sessions and modes, then per
/// session the rounds, the kinds and the lost facts of each mode.
pub fn markdown(results: &[(Session, Vec<SessionRun>)]) -> String {
    let mut out = String::new();
    out.push_str(
        "| session | summarizer | exact values kept | of which only in tool output | current decisions & constraints | superseded shown as current | context / trigger | targets |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for (session, runs) in results {
        for run in runs {
            let Some(last) = run.last() else { continue };
            let s = &last.score;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} / {} | {} |",
                session.spec.shape.title(),
                run.mode.title(),
                score_cells(s),
                thousands(s.context_tokens),
                thousands(run.trigger_tokens),
                if meets_targets(run) {
                    "met"
                } else {
                    "**not met**"
                }
            );
        }
    }
    for (session, runs) in results {
        let _ = writeln!(
            out,
            "\n### {}\n\n{}.\n",
            session.spec.shape.title(),
            session.describe()
        );
        for run in runs {
            let (window, trigger) = window_and_trigger(run);
            let _ = writeln!(
                out,
                "\n#### {}: {} (window {window} tokens, trigger {trigger})\n\n| round | messages | values | tool-only | decisions & constraints | superseded shown | context tokens | run |\n|---|---|---|---|---|---|---|---|",
                session.spec.shape.title(),
                run.mode.title(),
            );
            for r in &run.rounds {
                let s = &r.score;
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    r.round,
                    s.appended,
                    score_cells(s),
                    thousands(s.context_tokens),
                    run_label(r)
                );
            }
        }
        // The last round per kind, modes side by side.
        let _ = write!(
            out,
            "\n#### {}: last round per kind\n\n| kind |",
            session.spec.shape.title()
        );
        for run in runs {
            let _ = write!(out, " {} |", run.mode.title());
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(runs.len()));
        out.push('\n');
        let row = |out: &mut String, label: &str, get: &dyn Fn(&Score) -> Option<Tally>| {
            let tallies: Vec<Option<Tally>> = runs
                .iter()
                .map(|r| r.last().and_then(|l| get(&l.score)))
                .collect();
            if tallies.iter().all(Option::is_none) {
                return;
            }
            let _ = write!(out, "| {label} |");
            for t in tallies {
                let _ = write!(out, " {} |", t.map_or("–".into(), |t| cell(&t)));
            }
            out.push('\n');
        };
        for kind in Kind::ALL {
            row(&mut out, kind.name(), &|s: &Score| {
                s.by_kind.get(&kind).copied()
            });
        }
        row(&mut out, "decisions & constraints", &|s: &Score| {
            Some(s.statements)
        });
        for run in runs {
            let Some(last) = run.last() else { continue };
            let listing = lost_listing(session, &last.score, true);
            if !listing.is_empty() {
                let _ = writeln!(
                    out,
                    "\n#### {}: {}, what the last context lacks\n{listing}",
                    session.spec.shape.title(),
                    run.mode.title()
                );
            }
        }
    }
    out
}
