//! The quality benchmark's instrument (`tests/src/quality`), checked so CI
//! exercises it: the generator is deterministic and plants what it says
//! where it says; the scorer finds everything in an uncompacted context and
//! catches a superseded value shown as current; a reduced benchmark runs
//! end to end (one shape, 3 rounds, the extractive summarizer and the
//! malformed LLM) and scores what it should.
//!
//! These assert only properties of the instrument, which hold whatever the
//! engine keeps; the benchmark's targets are not asserted here.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::time::Duration;

use compactor_e2e::db::Backend;
use compactor_e2e::quality::fake_llms::strip_values;
use compactor_e2e::quality::score::contains_value;
use compactor_e2e::quality::sessions::check;
use compactor_e2e::quality::{
    drive, report, score, Class, ContextView, Mode, RunSpec, Session, SessionSpec, Shape, Source,
};

fn session(shape: Shape, seed: u64) -> Session {
    Session::generate(SessionSpec::new(shape, seed))
}

#[test]
fn the_generator_is_deterministic_and_the_seed_matters() {
    for shape in Shape::ALL {
        let a = session(shape, 7);
        let b = session(shape, 7);
        assert_eq!(a, b, "{shape:?}: same seed, same session");
        let c = session(shape, 8);
        assert_ne!(
            a.facts.iter().map(|f| &f.value).collect::<Vec<_>>(),
            c.facts.iter().map(|f| &f.value).collect::<Vec<_>>(),
            "{shape:?}: another seed plants other values"
        );
    }
}

#[test]
fn sessions_hold_what_the_benchmark_promises() {
    for shape in Shape::ALL {
        for seed in [1, 2, 3, 42] {
            let s = session(shape, seed);
            check(&s).unwrap();
            let n = s.messages.len();
            assert!(
                (shape.default_messages()..shape.default_messages() + 40).contains(&n),
                "{shape:?}: {n} messages"
            );
            assert!(s.facts.len() >= 60, "{shape:?}: {} facts", s.facts.len());
            let statements = s.count(|f| f.class.is_statement());
            assert!(
                statements >= 10,
                "{shape:?}: {statements} decisions/constraints"
            );
            assert!(
                s.count(|f| f.superseded.is_some()) >= 5,
                "{shape:?}: superseded"
            );
            assert!(
                s.count(|f| f.source == Source::ToolOutputOnly) >= 12,
                "{shape:?}: tool-output-only values"
            );
            let kinds: std::collections::BTreeSet<_> = s.facts.iter().map(|f| f.kind).collect();
            assert!(kinds.len() >= 10, "{shape:?}: {} kinds", kinds.len());
            // Planted facts spread over the session, not bunched at one end.
            let slices = s.slices(10);
            assert_eq!(slices.len(), 10);
            for (i, slice) in slices.iter().enumerate() {
                assert!(
                    s.facts.iter().any(|f| slice.contains(&f.message)),
                    "{shape:?}: slice {i} plants nothing"
                );
            }
        }
    }
}

#[test]
fn slices_cover_the_session_and_start_turns() {
    let s = session(Shape::Coding, 1);
    let slices = s.slices(10);
    assert_eq!(slices[0].start, 0);
    assert_eq!(slices.last().unwrap().end, s.messages.len());
    for w in slices.windows(2) {
        assert_eq!(w[0].end, w[1].start);
        assert_eq!(s.messages[w[1].start].role, compactor_shared::Role::User);
    }
}

#[test]
fn an_uncompacted_context_scores_everything() {
    for shape in Shape::ALL {
        let s = session(shape, 1);
        let n = s.messages.len();
        let view = ContextView::verbatim(&s.messages);
        let sc = score(&s, n, &view);
        assert_eq!(sc.values.kept, sc.values.total, "{shape:?}: {:?}", sc.lost);
        assert_eq!(sc.tool_only.kept, sc.tool_only.total);
        assert_eq!(sc.statements.kept, sc.statements.total);
        assert_eq!(sc.superseded, s.count(|f| f.superseded.is_some()));
        assert_eq!(sc.superseded_shown, 0, "the verbatim tail is history");
        assert_eq!(
            sc.values.total + sc.statements.total + sc.superseded,
            s.facts.len()
        );
        // Half way, only what was said so far is due.
        let half = n / 2;
        let sc = score(&s, half, &ContextView::verbatim(&s.messages[..half]));
        assert_eq!(sc.values.kept, sc.values.total);
        assert_eq!(
            sc.values.total + sc.statements.total + sc.superseded,
            s.count(|f| f.message < half)
        );
    }
}

#[test]
fn values_match_whole_tokens_only() {
    assert!(contains_value(
        "customer KD-5512-0937.",
        "KD-5512-0937",
        false
    ));
    assert!(
        !contains_value("customer KD-5512-0937", "KD-5512", false),
        "truncated"
    );
    assert!(!contains_value("timeout 137s", "37s", false));
    assert!(!contains_value("rust 1.74.1", "1.74", false));
    assert!(contains_value("MSRV 1.74, then", "1.74", false));
    assert!(contains_value(
        "(at 10.42.7.19:5432)",
        "10.42.7.19:5432",
        false
    ));
    assert!(contains_value(
        "panicked at src/a/round.rs:212:9:",
        "src/a/round.rs",
        false
    ));
    assert!(!contains_value(
        "see src/a/round.rs.bak",
        "src/a/round.rs",
        false
    ));
    assert!(!contains_value("sqlite", "SQLite", false));
    assert!(contains_value("Use sqlite.", "SQLite", true));
    assert!(contains_value("paid €249.99 today", "€249.99", false));
}

#[test]
fn a_superseded_value_shown_as_current_is_caught() {
    let s = session(Shape::Coding, 1);
    let n = s.messages.len();
    let old = s
        .facts
        .iter()
        .find(|f| f.value == "SQLite")
        .expect("the coding session replaces SQLite");
    let new = &s.facts[old.superseded.as_ref().unwrap().by].value;
    let with = |preamble: &str| {
        let view = ContextView {
            preamble: format!("Compacted context summary:\n\n{preamble}"),
            tail: vec!["Scrap SQLite, use Postgres instead".into()],
            tokens: 0,
        };
        score(&s, n, &view)
    };
    let current = with(&format!(
        "KEY FACTS:\n- the job store uses SQLite\nCONVERSATION FLOW:\n- #5 chose a store\nOPEN THREADS:\n- none\nWorkstream state:\nKey decisions:\n- {new}\n"
    ));
    assert_eq!(current.superseded_shown, 1);
    assert_eq!(s.facts[current.stale[0]].value, "SQLite");
    for fine in [
        "KEY FACTS:\n- job store: SQLite (superseded by Postgres)\n",
        "CONVERSATION FLOW:\n- #5 the user first chose SQLite\n- #900 then Postgres\nOPEN THREADS:\n- none\n",
        "Key decisions:\n- Scrap SQLite, use Postgres instead\n",
    ] {
        assert_eq!(with(fine).superseded_shown, 0, "{fine}");
    }
    // A statement said after the cut-off is not scored yet.
    let early = score(&s, old.message, &ContextView::default());
    assert_eq!(early.statements.total + early.superseded, {
        s.count(|f| f.class != Class::Value && f.message < old.message)
    });
}

#[test]
fn the_value_free_llm_keeps_no_value() {
    let s = session(Shape::Support, 3);
    for m in &s.messages {
        for p in &m.parts {
            if let compactor_shared::Part::Text { text } = p {
                let stripped = strip_values(text);
                for f in s.facts.iter().filter(|f| f.class == Class::Value) {
                    assert!(
                        !contains_value(&stripped, &f.value, false),
                        "{:?} survived in {stripped:?}",
                        f.value
                    );
                }
            }
        }
    }
}

/// A reduced benchmark through the product: one shape, a shorter session,
/// 3 rounds, the extractive summarizer and the malformed LLM. It checks
/// that the instrument measures (rounds, due facts, a context to score),
/// not how well the engine does.
async fn reduced_run(backend: Backend) {
    let mut spec = SessionSpec::new(Shape::Coding, 5);
    spec.messages = 400;
    let session = Session::generate(spec);
    let run_spec = RunSpec {
        rounds: 3,
        backend,
        context_window: None,
        round_timeout: Duration::from_secs(90),
        dump: None,
    };
    let slices = session.slices(3);
    for mode in [Mode::Extractive, Mode::Malformed] {
        let run = drive::run(&session, mode, &run_spec).await;
        print!("{}", report::human(&session, &run));
        assert_eq!(run.rounds.len(), 3, "{mode:?}");
        assert!(run.trigger_tokens > 0);
        for (r, slice) in run.rounds.iter().zip(&slices) {
            let sc = &r.score;
            assert_eq!(sc.appended, slice.end);
            let due = session.count(|f| f.message < slice.end);
            assert_eq!(
                sc.values.total + sc.statements.total + sc.superseded,
                due,
                "{mode:?} round {}",
                r.round
            );
            assert_eq!(sc.lost.len(), sc.values.lost() + sc.statements.lost());
            assert!(sc.context_tokens > 0, "a context was built");
        }
        if mode == Mode::Malformed {
            let llm = run.llm.expect("the fake LLM was used");
            assert!(llm.compaction_calls >= 1);
        } else {
            assert!(run.llm.is_none());
        }
        let md = report::markdown(&[(session.clone(), vec![run])]);
        assert!(md.contains("| session | summarizer |"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_benchmark_runs_end_to_end_on_sqlite() {
    reduced_run(Backend::Sqlite).await;
}

/// The targets, after 10 compactions of both generated sessions
/// through the worker, with every summarizer, on two seeds (other values,
/// other noise, other orders): ≥ 95 % of planted values (tool-only ones
/// too), every current decision and constraint, no superseded item shown
/// as current, and the context under the trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_compactions_meet_the_targets_on_two_seeds() {
    // (shape, values %, tool-only %, current statements %, superseded shown at most)
    let targets = [
        (Shape::Coding, 95.0, 95.0, 100.0, 0),
        (Shape::Support, 95.0, 95.0, 100.0, 0),
    ];
    for seed in [1, 3] {
        for (shape, values, tool_only, statements, stale) in targets {
            let session = Session::generate(SessionSpec::new(shape, seed));
            for mode in Mode::ALL {
                let run = drive::run(&session, mode, &RunSpec::default()).await;
                let last = run.rounds.last().expect("ten rounds");
                assert!(
                    last.committed,
                    "seed {seed} {shape:?} {mode:?}: the last round committed"
                );
                let sc = &last.score;
                let report = report::human(&session, &run);
                assert!(
                    sc.values.pct() >= values,
                    "seed {seed} {shape:?} {mode:?}: values\n{report}"
                );
                assert!(
                    sc.tool_only.pct() >= tool_only,
                    "seed {seed} {shape:?} {mode:?}: tool-only values\n{report}"
                );
                assert!(
                    sc.statements.pct() >= statements,
                    "seed {seed} {shape:?} {mode:?}: current statements\n{report}"
                );
                assert!(
                    sc.superseded_shown <= stale,
                    "seed {seed} {shape:?} {mode:?}: superseded shown as current\n{report}"
                );
                assert!(
                    sc.context_tokens < run.trigger_tokens,
                    "seed {seed} {shape:?} {mode:?}: the context stays under the trigger"
                );
            }
        }
    }
}
