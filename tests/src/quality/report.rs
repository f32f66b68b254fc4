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
/// Where the sliding window of the same tokens keeps under this share of
/// the values, ours must keep at least [`WINDOW_MULTIPLE`] times its share.
pub const WINDOW_WEAK_PCT: f64 = 30.0;
pub const WINDOW_MULTIPLE: f64 = 3.0;

/// Each target of the last round: (what, met). ≥ 95 % of exact values (and
/// of tool-only ones, where there are any), every current decision and
/// constraint (where there are any), ≥ 3× the
/// sliding window's share where it keeps under 30 %, nothing superseded
/// shown as current, the context under the trigger, no near-duplicate line
/// pairs in the preamble, every round committed.
pub fn targets(run: &SessionRun) -> Vec<(String, bool)> {
    let Some(last) = run.last() else {
        return vec![("a round ran".into(), false)];
    };
    let s = &last.score;
    let mut out = vec![(
        format!("values {:.0} % ≥ {VALUES_TARGET_PCT:.0} %", s.values.pct()),
        s.values.pct() >= VALUES_TARGET_PCT,
    )];
    if s.tool_only.total > 0 {
        out.push((
            format!(
                "tool-only {:.0} % ≥ {VALUES_TARGET_PCT:.0} %",
                s.tool_only.pct()
            ),
            s.tool_only.pct() >= VALUES_TARGET_PCT,
        ));
    }
    if s.statements.total > 0 {
        out.push((
            format!(
                "decisions & constraints {}/{}",
                s.statements.kept, s.statements.total
            ),
            s.statements.kept == s.statements.total,
        ));
    }
    if let Some(b) = &run.baselines {
        let w = b.window.values.pct();
        if w < WINDOW_WEAK_PCT {
            let need = (WINDOW_MULTIPLE * w).min(100.0);
            out.push((
                format!("≥ {WINDOW_MULTIPLE:.0}× the sliding window ({w:.0} % → ≥ {need:.0} %)"),
                s.values.pct() >= need,
            ));
        } else {
            out.push((
                format!(
                    "≥ {WINDOW_MULTIPLE:.0}× the sliding window: n/a (it keeps {w:.0} % ≥ {WINDOW_WEAK_PCT:.0} %)"
                ),
                true,
            ));
        }
    }
    out.extend([
        (
            format!("superseded shown as current {} = 0", s.superseded_shown),
            s.superseded_shown == 0,
        ),
        (
            format!(
                "context {} < trigger {}",
                thousands(s.context_tokens),
                thousands(run.trigger_tokens)
            ),
            s.context_tokens < run.trigger_tokens,
        ),
        (
            format!("near-duplicate line pairs {} = 0", s.near_duplicate_pairs),
            s.near_duplicate_pairs == 0,
        ),
        (
            "every round committed".into(),
            run.rounds.iter().all(|r| r.committed),
        ),
    ]);
    out
}

/// Whether the last round meets every one of [`targets`].
pub fn meets_targets(run: &SessionRun) -> bool {
    targets(run).iter().all(|(_, met)| *met)
}

/// The targets as one line: each with ✓ or ✗.
pub fn targets_line(run: &SessionRun) -> String {
    targets(run)
        .iter()
        .map(|(what, met)| format!("{} {what}", if *met { "✓" } else { "✗" }))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The baselines' values cells: the sliding window, the full history (and
/// its tokens).
fn baseline_cells(run: &SessionRun) -> (String, String) {
    match &run.baselines {
        Some(b) => (
            cell(&b.window.values),
            format!(
                "{} at {} tokens",
                cell(&b.full.values),
                thousands(b.full.context_tokens)
            ),
        ),
        None => ("–".into(), "–".into()),
    }
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
    if let Some(b) = &run.baselines {
        let _ = writeln!(
            out,
            "baselines on the same {} messages: sliding window of {} tokens keeps {}; full history ({} tokens) keeps {}",
            last.score.appended,
            thousands(b.window.context_tokens),
            b.window.values,
            thousands(b.full.context_tokens),
            b.full.values
        );
    }
    let _ = writeln!(
        out,
        "near-duplicate line pairs in the preamble: {}",
        last.score.near_duplicate_pairs
    );
    out.push_str(&lost_listing(session, &last.score, false));
    let _ = writeln!(out, "targets: {}", targets_line(run));
    out.push_str(if meets_targets(run) {
        "targets: met\n"
    } else {
        "targets: not met\n"
    });
    out
}

/// The facts the context lacks, and the superseded ones it shows as
/// current (value | kind | class | source | first message). In markdown
/// (the report BENCHMARKS.md records) the lost ones stop at
/// [`MARKDOWN_LOST`]; the log lists every one.
pub fn lost_listing(session: &Session, s: &Score, markdown: bool) -> String {
    let mut out = String::new();
    let rows = |out: &mut String, title: &str, indices: &[usize], cap: usize| {
        if indices.is_empty() {
            return;
        }
        let (indices, more) = indices.split_at(indices.len().min(cap));
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
        if !more.is_empty() {
            let _ = writeln!(
                out,
                "\n… and {} more (the run's `quality.log` lists every one).",
                more.len()
            );
        }
    };
    let cap = if markdown { MARKDOWN_LOST } else { usize::MAX };
    rows(&mut out, "lost", &s.lost, cap);
    rows(
        &mut out,
        "superseded, shown as current",
        &s.stale,
        usize::MAX,
    );
    out
}

/// Lost facts a markdown report lists per row.
const MARKDOWN_LOST: usize = 40;

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
            format!("{prefix}/near_duplicate_pairs"),
            s.near_duplicate_pairs as f64,
            "pairs",
        );
        if let Some(b) = &run.baselines {
            emit(
                format!("{prefix}/window/values_pct"),
                b.window.values.pct(),
                "%",
            );
            emit(
                format!("{prefix}/window/context_tokens"),
                b.window.context_tokens as f64,
                "tokens",
            );
            emit(
                format!("{prefix}/full/values_pct"),
                b.full.values.pct(),
                "%",
            );
            emit(
                format!("{prefix}/full/context_tokens"),
                b.full.context_tokens as f64,
                "tokens",
            );
        }
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
        format!("{p}/current_shown_superseded"),
        s.current_shown_superseded as f64,
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
/// tool-only, decisions & constraints, superseded shown / superseded,
/// current facts shown only as superseded.
fn score_cells(s: &Score) -> String {
    format!(
        "{} | {} | {} | {} / {} | {}",
        cell(&s.values),
        cell(&s.tool_only),
        cell(&s.statements),
        s.superseded_shown,
        s.superseded,
        s.current_shown_superseded
    )
}

/// Everything in Markdown: the summary over sessions and modes, then per
/// session the rounds, the kinds and the lost facts of each mode.
pub fn markdown(results: &[(Session, Vec<SessionRun>)]) -> String {
    let mut out = String::new();
    out.push_str(
        "| session | summarizer | exact values kept | of which only in tool output | current decisions & constraints | superseded shown as current | current shown as superseded | context / trigger | sliding window (same tokens) | full history | near-duplicate line pairs | targets |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut lines = String::new();
    for (session, runs) in results {
        for run in runs {
            let Some(last) = run.last() else { continue };
            let s = &last.score;
            let (window, full) = baseline_cells(run);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} / {} | {window} | {full} | {} | {} |",
                session.spec.shape.title(),
                run.mode.title(),
                score_cells(s),
                thousands(s.context_tokens),
                thousands(run.trigger_tokens),
                s.near_duplicate_pairs,
                if meets_targets(run) {
                    "met"
                } else {
                    "**not met**"
                }
            );
            let _ = writeln!(
                lines,
                "- {}, {}: {}",
                session.spec.shape.title(),
                run.mode.title(),
                targets_line(run)
            );
        }
    }
    if !lines.is_empty() {
        let _ = write!(
            out,
            "\nTargets per row (after the last round; the baselines see the same messages):\n\n{lines}"
        );
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
                "\n#### {}: {} (window {window} tokens, trigger {trigger})\n\n| round | messages | values | tool-only | decisions & constraints | superseded shown | current shown as superseded | context tokens | run |\n|---|---|---|---|---|---|---|---|---|",
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
