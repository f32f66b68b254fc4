//! Property tests over random conversations: the invariants that make the
//! engine safe to run unattended.
//!
//! - A planned cut never separates a tool call from its result, and never
//!   compacts a call still waiting for its result in the latest turn.
//! - A built context never contains a tool result without its call, nor a
//!   call without its result (except in the last message, still running).
//! - The state merge respects every cap and is idempotent.
//! - In both summary formats (`sections` and `handoff9`): a rendered
//!   summary parses back to itself, the parser never panics and its output
//!   is consistent on arbitrary text, an answer in the other format is never
//!   accepted, and a built context keeps the format's framing and headings
//!   whatever the overflow guard cuts.

use std::collections::{HashMap, HashSet};

use compactor_shared::boundary::{self, BoundaryConfig};
use compactor_shared::context::{self, ContextConfig, ContextInput};
use compactor_shared::parse::{self, ParseError, ParseProblem, Parsed, Rejection};
use compactor_shared::state::{Field, StateCaps, StateDelta, StateItem, WorkstreamState};
use compactor_shared::summary::{Section, SummarizerOutput, Summary, SummaryFormat};
use compactor_shared::{CharEstimator, Message, Part, Role, TokenEstimator};
use proptest::prelude::*;

/// What one generated message does.
#[derive(Debug, Clone)]
enum Step {
    User(String),
    Assistant(String),
    /// An assistant message calling `n` tools (1..=3).
    Calls(u8),
    /// A tool message answering the `k`-th oldest unanswered call.
    Result(u8),
    /// A result whose call never existed (bad data from a backend).
    OrphanResult,
    /// A result stored before its call (out-of-order writes).
    EarlyResult,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => "[a-z ]{0,40}".prop_map(Step::User),
        3 => "[a-z ]{0,40}".prop_map(Step::Assistant),
        3 => (1u8..=3).prop_map(Step::Calls),
        4 => (0u8..4).prop_map(Step::Result),
        1 => Just(Step::OrphanResult),
        1 => Just(Step::EarlyResult),
    ]
}

/// Turns steps into messages with consistent call ids; `pinned` marks some.
fn conversation(steps: &[Step], pinned: &[bool]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut next_call = 0;
    for (i, s) in steps.iter().enumerate() {
        let id = i as i64 + 1;
        let mut m = match s {
            Step::User(t) => Message::text(id, Role::User, format!("u {t}")),
            Step::Assistant(t) => Message::text(id, Role::Assistant, format!("a {t}")),
            Step::Calls(n) => {
                let parts = (0..*n)
                    .map(|_| {
                        next_call += 1;
                        let call_id = format!("c{next_call}");
                        open.push(call_id.clone());
                        Part::ToolCall {
                            call_id,
                            tool_name: "bash".into(),
                            input: serde_json::json!({"command": "ls"}),
                        }
                    })
                    .collect();
                Message::new(id, Role::Assistant, parts)
            }
            Step::Result(k) => {
                if open.is_empty() {
                    Message::text(id, Role::Assistant, "nothing to answer")
                } else {
                    let call_id = open.remove(usize::from(*k) % open.len());
                    Message::new(id, Role::Tool, vec![result(&call_id)])
                }
            }
            Step::OrphanResult => Message::new(id, Role::Tool, vec![result("ghost")]),
            Step::EarlyResult => {
                Message::new(id, Role::Tool, vec![result(&format!("c{}", next_call + 1))])
            }
        };
        m.pinned = pinned.get(i).copied().unwrap_or(false);
        out.push(m);
    }
    out
}

fn result(call_id: &str) -> Part {
    Part::tool_result(call_id, "bash", "out")
}

fn boundary_config() -> impl Strategy<Value = BoundaryConfig> {
    (
        0usize..10,
        proptest::option::of(0u64..200),
        proptest::option::of(1u64..200),
    )
        .prop_map(
            |(tail_messages, keep_recent_tokens, max_tail_tokens)| BoundaryConfig {
                tail_messages,
                keep_recent_tokens,
                max_tail_tokens,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_cut_never_separates_a_tool_pair(
        steps in proptest::collection::vec(step(), 0..60),
        pinned in proptest::collection::vec(proptest::bool::weighted(0.1), 60),
        config in boundary_config(),
    ) {
        let messages = conversation(&steps, &pinned);
        let Some(plan) = boundary::plan(&messages, &config, &CharEstimator::default()) else {
            return Ok(());
        };
        let kept: HashSet<usize> = (plan.tail_start..messages.len()).chain(plan.kept_pinned.iter().copied()).collect();
        let compacted: HashSet<usize> = plan.compact.iter().copied().collect();
        prop_assert!(!compacted.is_empty());
        prop_assert!(plan.compact.iter().all(|&i| i < plan.tail_start && !messages[i].pinned));
        prop_assert!(plan.tail_start < messages.len(), "at least one message is kept");
        prop_assert_eq!(plan.watermark, messages[plan.tail_start - 1].id);
        // where each call and result lives
        let mut call_at = HashMap::new();
        for (i, m) in messages.iter().enumerate() {
            for c in m.tool_calls() {
                call_at.entry(c.to_owned()).or_insert(i);
            }
        }
        // A pair is a call and a later result (a result stored before its
        // call is an orphan; the context test covers those).
        for (i, m) in messages.iter().enumerate() {
            for r in m.tool_results() {
                if let Some(&c) = call_at.get(r).filter(|&&c| c <= i) {
                    prop_assert_eq!(
                        compacted.contains(&c),
                        compacted.contains(&i),
                        "call #{} and result #{} split", c + 1, i + 1
                    );
                }
            }
        }
        // a call of the latest turn still waiting for its result stays
        let answered: HashSet<&str> = messages.iter().flat_map(|m| m.tool_results()).collect();
        let last_turn = messages.iter().rposition(Message::starts_turn).unwrap_or(0);
        for (c, &i) in &call_at {
            if i >= last_turn && !answered.contains(c.as_str()) {
                prop_assert!(kept.contains(&i), "pending call #{} compacted", i + 1);
            }
        }
    }

    #[test]
    fn a_built_context_has_no_orphaned_tool_halves(
        steps in proptest::collection::vec(step(), 0..60),
        config in boundary_config(),
    ) {
        let messages = conversation(&steps, &[]);
        // What stays after a compaction: the tail (and pinned, none here).
        let live: Vec<Message> = match boundary::plan(&messages, &config, &CharEstimator::default()) {
            Some(plan) => messages[plan.tail_start..].to_vec(),
            None => messages.clone(),
        };
        let state = WorkstreamState::default();
        let built = context::build(
            &ContextInput {
                summary: None,
                state: &state,
                memory_block_summary: None,
                memory_entries: &[],
                messages: &live,
                just_auto_compacted: false,
                context_window: 0,
                state_text: None,
            },
            &ContextConfig::default(),
            &CharEstimator::default(),
        );
        let mut calls_so_far = HashSet::new();
        let all_results: HashSet<String> = built
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                Part::ToolResult { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        let last = built.messages.len().saturating_sub(1);
        for (i, m) in built.messages.iter().enumerate() {
            for p in &m.parts {
                if let Part::ToolCall { call_id, .. } = p {
                    calls_so_far.insert(call_id.clone());
                    prop_assert!(i == last || all_results.contains(call_id), "call {} without result", call_id);
                }
            }
            for p in &m.parts {
                if let Part::ToolResult { call_id, .. } = p {
                    prop_assert!(calls_so_far.contains(call_id), "result {} without call", call_id);
                }
            }
        }
    }
}

fn item() -> impl Strategy<Value = StateItem> {
    (
        proptest::option::of("[A-C][0-3]"),
        "[a-e]{1,3}( [a-e]{1,2})?\\.?",
        proptest::option::of(prop_oneof![
            Just("open"),
            Just("done"),
            Just("resolved"),
            Just("in_progress")
        ]),
    )
        .prop_map(|(id, text, status)| StateItem {
            id,
            text,
            status: status.map(String::from),
        })
}

fn delta() -> impl Strategy<Value = StateDelta> {
    proptest::collection::vec(proptest::collection::vec(item(), 0..14), 7).prop_map(|mut f| {
        StateDelta {
            key_decisions: f.remove(0),
            active_constraints: f.remove(0),
            tasks: f.remove(0),
            open_questions: f.remove(0),
            risks: f.remove(0),
            artifacts: f.remove(0),
            agent_contributions: f.remove(0),
        }
    })
}

fn caps() -> impl Strategy<Value = StateCaps> {
    proptest::collection::vec(0usize..12, 7).prop_map(|c| StateCaps {
        key_decisions: c[0],
        active_constraints: c[1],
        tasks: c[2],
        open_questions: c[3],
        risks: c[4],
        artifacts: c[5],
        agent_contributions: c[6],
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn merge_respects_every_cap_and_is_idempotent(
        history in proptest::collection::vec(delta(), 0..4),
        d in delta(),
        caps in caps(),
    ) {
        let mut state = WorkstreamState::default();
        for h in &history {
            state.merge(h, &caps);
        }
        state.merge(&d, &caps);
        for f in Field::ALL {
            prop_assert!(state.field(f).len() <= f.cap(&caps), "{} over its cap", f.name());
        }
        let once = state.clone();
        state.merge(&d, &caps);
        prop_assert_eq!(&state, &once, "merging the same delta twice changed the state");
    }

    #[test]
    fn merge_never_duplicates_an_item(d in delta()) {
        let mut state = WorkstreamState::default();
        state.merge(&d, &StateCaps::default());
        for f in Field::ALL {
            let items = state.field(f);
            for (i, a) in items.iter().enumerate() {
                for b in &items[i + 1..] {
                    let same_id = a.id.is_some() && a.id.as_deref().map(str::to_lowercase) == b.id.as_deref().map(str::to_lowercase);
                    let same_text = (a.id.is_none() || b.id.is_none())
                        && compactor_shared::state::normalize(&a.text) == compactor_shared::state::normalize(&b.text);
                    prop_assert!(!same_id && !same_text, "{:?} and {:?} in {}", a, b, f.name());
                }
            }
        }
    }
}

fn format() -> impl Strategy<Value = SummaryFormat> {
    prop_oneof![Just(SummaryFormat::Sections), Just(SummaryFormat::Handoff9)]
}

/// Whether `text` alone on a line is a heading in either format (such a
/// bullet cannot round-trip: the parser reads it as a heading).
fn is_heading(text: &str) -> bool {
    SummaryFormat::ALL.into_iter().any(|f| {
        parse::parse_rollup_as(&format!("{text}\n"), f).is_ok_and(|p| {
            p.problems
                .iter()
                .filter(|p| matches!(p, ParseProblem::MissingSection(_)))
                .count()
                < f.sections().len()
        })
    })
}

/// Bullet text that says something: placeholders (`none`, `n/a`, …) are
/// dropped by design and headings are read as headings, so neither can
/// round-trip.
fn bullet_text() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9 ,'.()/`-]{0,60}[a-z0-9]".prop_filter("says something, not a heading", |t| {
        let lower = t.to_ascii_lowercase();
        !["none", "n/a", "na", "nothing"].contains(&lower.trim_matches(['(', ')', '.']))
            && !is_heading(t)
    })
}

fn bullets() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(bullet_text(), 0..4)
}

/// A summary of `format` with up to 3 bullets in each of its sections.
fn summary_in(format: SummaryFormat) -> impl Strategy<Value = Summary> {
    proptest::collection::vec(bullets(), format.sections().len()).prop_map(move |lists| {
        let mut summary = Summary::empty(format);
        for (&section, list) in format.sections().iter().zip(lists) {
            *summary.section_mut(section) = list;
        }
        summary
    })
}

fn summary() -> impl Strategy<Value = Summary> {
    format().prop_flat_map(summary_in)
}

/// The answer a model following the prompt writes: the sections and the
/// state delta in a fence.
fn answer(summary: &Summary, delta: &StateDelta) -> String {
    format!(
        "{}\nSTATE DELTA:\n```json\n{}\n```\n",
        summary.render(),
        serde_json::to_string_pretty(delta).expect("a delta serializes")
    )
}

/// Invariants of one parse in `format`: bullets are trimmed single-line
/// pieces of the answer, only the format's sections are filled, each of its
/// sections is reported missing at most once, and an answer with no section
/// parsed only thanks to a valid delta.
fn check_parsed(text: &str, format: SummaryFormat, parsed: &Parsed) -> Result<(), TestCaseError> {
    let summary = &parsed.output.summary;
    prop_assert_eq!(summary.format, format);
    let mut count = 0;
    for section in Section::ALL {
        let list = summary.section(section);
        if section.format() != format {
            prop_assert!(list.is_empty(), "{:?} filled in {:?}", section, format);
        }
        for bullet in list {
            prop_assert!(!bullet.is_empty() && bullet.trim() == bullet && !bullet.contains('\n'));
            count += 1;
        }
    }
    prop_assert!(count <= text.lines().count());
    let missing = parsed
        .problems
        .iter()
        .filter(|p| matches!(p, ParseProblem::MissingSection(_)))
        .count();
    prop_assert!(missing <= format.sections().len());
    let delta_broken = parsed.problems.iter().any(|p| {
        matches!(
            p,
            ParseProblem::MissingDelta | ParseProblem::InvalidDeltaJson { .. }
        )
    });
    prop_assert!(missing < format.sections().len() || !delta_broken);
    Ok(())
}

/// Parses `text` both ways in `format` and checks both.
fn parse_both(text: &str, format: SummaryFormat) -> Result<(), TestCaseError> {
    let output = parse::parse_output_as(text, format);
    let rollup = parse::parse_rollup_as(text, format);
    let expected = output.clone().map(|mut p| {
        p.problems.retain(|p| *p != ParseProblem::MissingDelta);
        p
    });
    prop_assert_eq!(
        &expected,
        &rollup,
        "parse_rollup_as disagrees with parse_output_as"
    );
    match output {
        Ok(parsed) => {
            check_parsed(text, format, &parsed)?;
            // Whatever was salvaged, the checks judge it without panicking.
            let _ = parse::check(&parsed, Some(&parsed.output.summary));
        }
        Err(ParseError::Empty) => prop_assert!(text.trim().is_empty()),
        Err(ParseError::NoSummary { .. }) => prop_assert!(!text.trim().is_empty()),
    }
    Ok(())
}

/// Headings and fragments of both formats, shuffled.
fn heading_soup() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("KEY FACTS:\n"),
            Just("## Open Threads\n"),
            Just("## 1. Primary Request and Intent\n"),
            Just("**7. Pending/Incomplete Work:** x\n"),
            Just("Next steps: y\n"),
            Just("### 4) Errors & Fixes\n"),
            Just("STATE DELTA:\n"),
            Just("```json\n"),
            Just("```\n"),
            Just("{"),
            Just("}"),
            Just("\""),
            Just(",]"),
            Just("- x\n"),
            Just("  y\n"),
            Just("- (none)\n"),
            Just("//c\n"),
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_rendered_summary_parses_back_to_itself_in_both_formats(
        summary in summary(),
        decisions in proptest::collection::vec(item(), 0..3),
        tasks in proptest::collection::vec(item(), 0..3),
    ) {
        let delta = StateDelta { key_decisions: decisions, tasks, ..Default::default() };
        let format = summary.format;
        let parsed = parse::parse_output_as(&answer(&summary, &delta), format).expect("parses");
        prop_assert_eq!(parsed.problems, vec![]);
        prop_assert_eq!(parsed.output, SummarizerOutput { summary: summary.clone(), delta });
        let rolled = parse::parse_rollup_as(&summary.render(), format).expect("parses");
        prop_assert_eq!(rolled.problems, vec![]);
        prop_assert_eq!(rolled.output.summary, summary);
    }

    #[test]
    fn the_parser_never_panics_and_stays_consistent_in_both_formats(
        text in "(?s)[ -~\u{e9}\u{201c}\u{201d}\n\t{}\\[\\]\"`#*:,]{0,400}",
        soup in heading_soup(),
    ) {
        for format in SummaryFormat::ALL {
            parse_both(&text, format)?;
            parse_both(&soup, format)?;
        }
    }

    #[test]
    fn an_answer_in_the_other_format_never_replaces_a_summary(
        summary in summary(),
        previous in summary(),
    ) {
        let text = answer(&summary, &StateDelta::default());
        let other = match summary.format {
            SummaryFormat::Sections => SummaryFormat::Handoff9,
            SummaryFormat::Handoff9 => SummaryFormat::Sections,
        };
        let verdict = parse::parse_output_as(&text, other)
            .map_err(Rejection::from)
            .and_then(|parsed| parse::check(&parsed, Some(&previous)));
        prop_assert_eq!(verdict, Err(Rejection::NoSections));
    }

    #[test]
    fn placeholders_alone_never_pass_in_either_format(
        format in format(),
        placeholders in proptest::collection::vec(
            prop_oneof![Just("(none)"), Just("none"), Just("n/a"), Just("-"), Just("."), Just("*"), Just("nothing")],
            0..6,
        ),
        previous in summary(),
    ) {
        let mut text = String::new();
        for (i, &section) in format.sections().iter().enumerate() {
            text.push_str(section.heading());
            text.push_str(":\n");
            if let Some(p) = placeholders.get(i) {
                text.push_str("- ");
                text.push_str(p);
                text.push('\n');
            }
        }
        let parsed = parse::parse_output_as(&text, format).expect("headings parse");
        prop_assert!(parsed.output.summary.is_empty());
        let verdict = parse::check(&parsed, Some(&previous));
        prop_assert!(
            matches!(verdict, Err(Rejection::Empty | Rejection::Emptied { .. })),
            "{:?}", verdict
        );
    }

    #[test]
    fn a_built_context_keeps_the_framing_and_every_heading_in_both_formats(
        summary in summary(),
        flood in 0usize..400,
        window in prop_oneof![Just(0u64), 2_000u64..40_000],
        tail_chars in 0usize..6_000,
    ) {
        let mut summary = summary;
        // A long history in the section cut first.
        let history = summary.format.sections()[if summary.format == SummaryFormat::Sections { 1 } else { 2 }];
        summary.section_mut(history).extend((0..flood).map(|i| format!("step {i} of a long story")));
        let state = WorkstreamState::default();
        let messages = vec![Message::text(1, Role::User, "x".repeat(tail_chars.max(1)))];
        let e = CharEstimator::default();
        let built = context::build(
            &ContextInput {
                summary: Some(&summary),
                state: &state,
                memory_block_summary: None,
                memory_entries: &[],
                messages: &messages,
                just_auto_compacted: false,
                context_window: window,
                state_text: None,
            },
            &ContextConfig::default(),
            &e,
        );
        let Part::Text { text } = &built.messages[0].parts[0] else {
            panic!("the preamble is text")
        };
        let framing = match summary.format {
            SummaryFormat::Sections => context::SUMMARY_HEADER,
            SummaryFormat::Handoff9 => context::HANDOFF9_FRAMING,
        };
        prop_assert!(text.starts_with(framing), "{}", text);
        for &section in summary.format.sections() {
            prop_assert!(text.contains(section.heading()), "{:?} lost", section);
        }
        let tail: u64 = messages[0].parts.iter().map(|p| e.part_tokens(p)).sum();
        prop_assert_eq!(built.tokens, e.count(text) + tail);
        if window == 0 {
            prop_assert_eq!(built.summary_bullets_dropped, 0, "no window, no guard");
        }
    }
}
