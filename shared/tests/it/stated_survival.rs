//! The user's decisions and constraints across 10 compactions: every
//! current one is in the built context with its source message, nothing
//! superseded reads as current, and casual remarks never become rules —
//! with the extractive summarizer, and with a summarizer that drops every
//! exact value and keeps proposing out-of-date decisions.
//!
//! The chat mixes domains (a delivery, a trip, a codebase) and plants each
//! statement once, its replacement several rounds later, among filler turns
//! and remarks that look like rules but are not.

use compactor_shared::context::{self, ContextConfig, ContextInput};
use compactor_shared::extractive::{self, ExtractiveConfig};
use compactor_shared::prompt::{summary_output_budget, CompactionInput};
use compactor_shared::stated::{self, StatedCaps};
use compactor_shared::summary::{SummarizerOutput, SummaryFormat};
use compactor_shared::transcript::{self, TranscriptConfig};
use compactor_shared::{
    CharEstimator, Message, Part, Role, StateCaps, StateDelta, StateItem, Summary, WorkstreamState,
};

/// Statements planted at a round, and the round (if any) that replaces them.
struct Plant {
    round: usize,
    text: &'static str,
    replaced: Option<(usize, &'static str)>,
    /// A value only the replaced statement has.
    old_value: Option<&'static str>,
}

fn plants() -> Vec<Plant> {
    let p = |round, text, replaced, old_value| Plant {
        round,
        text,
        replaced,
        old_value,
    };
    vec![
        p(
            0,
            "Please deliver to Kastanienallee 12.",
            Some((
                5,
                "please deliver to my office at Friedrichstraße 5 instead",
            )),
            Some("Kastanienallee 12"),
        ),
        p(
            0,
            "Set the request timeout to 37s.",
            Some((4, "make the timeout 45s")),
            Some("37s"),
        ),
        p(
            1,
            "Use Postgres for the ledger.",
            Some((6, "scrap Postgres, we'll go with SQLite instead")),
            None,
        ),
        p(
            1,
            "Ship the release on Friday.",
            Some((7, "actually ship the release on Monday")),
            Some("Friday"),
        ),
        p(
            2,
            "billing.invoice_v2_fx_cache is off",
            Some((8, "Turn billing.invoice_v2_fx_cache back on.")),
            None,
        ),
        p(
            2,
            "Move the standup to 10:30.",
            Some((9, "Actually, make it 11:15.")),
            Some("10:30"),
        ),
        p(0, "Never push to main.", None, None),
        p(1, "I'm vegetarian and allergic to peanuts.", None, None),
        p(2, "Don't call me before 9am.", None, None),
        p(3, "Only use the EU region.", None, None),
        p(3, "My budget is 180 EUR per night.", None, None),
        p(5, "We must not touch the billing schema.", None, None),
        p(7, "I prefer aisle seats.", None, None),
    ]
}

const CASUAL: &[&str] = &[
    "never mind, found it",
    "don't worry about it",
    "Hmm, must be the cache.",
    "should we never cache the tokens?",
    "I never thought of that.",
];

/// Round `r`'s 40 messages, starting at id `first`.
fn round(r: usize, first: i64, plants: &[Plant]) -> Vec<Message> {
    let mut said: Vec<String> = Vec::new();
    for p in plants {
        if p.round == r {
            said.push(p.text.to_owned());
        }
        if let Some((at, text)) = p.replaced {
            if at == r {
                said.push(text.to_owned());
            }
        }
    }
    let mut out = Vec::new();
    for turn in 0..20 {
        let id = first + out.len() as i64;
        let user = said
            .get(turn)
            .cloned()
            .unwrap_or_else(|| match (turn + r) % 4 {
                0 => CASUAL[(turn + r) % CASUAL.len()].to_owned(),
                1 => format!(
                    "Can you check the status of ticket {}?",
                    4_000 + r * 20 + turn
                ),
                2 => "Thanks, that helps.".to_owned(),
                _ => "What else do you need from me?".to_owned(),
            });
        out.push(Message::text(id, Role::User, user));
        out.push(Message::text(
            id + 1,
            Role::Assistant,
            "Thanks for the update! I'd be happy to help with that. Let me know if anything else comes up.",
        ));
    }
    out
}

/// A summarizer that writes fluent text without exact values and keeps
/// proposing the first decisions it heard, out of date or not.
fn value_free(_input: &CompactionInput<'_>) -> SummarizerOutput {
    SummarizerOutput {
        summary: Summary {
            key_facts: vec![
                "The user is arranging a delivery and a trip and works on billing.".into(),
                "The ledger is stored in Postgres.".into(),
                "The request timeout is 37s.".into(),
            ],
            conversation_flow: vec!["The user and the assistant discussed several topics.".into()],
            open_threads: vec![],
            ..Default::default()
        },
        delta: StateDelta {
            key_decisions: vec![
                StateItem::new("Use Postgres for the ledger."),
                StateItem::new("Ship the release on Friday"),
            ],
            active_constraints: vec![StateItem::new("Be careful with the billing code.")],
            ..Default::default()
        },
    }
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Extractive,
    ValueFree,
}

/// Runs 10 rounds (each adds 40 messages and compacts all but the last 6)
/// and returns the preamble of the final context.
fn run(mode: Mode) -> String {
    let plants = plants();
    let e = CharEstimator::default();
    let budget = summary_output_budget(200_000);
    let mut state = WorkstreamState::default();
    let mut summary: Option<Summary> = None;
    let mut live: Vec<Message> = Vec::new();
    let mut next_id = 1;
    for r in 0..10 {
        let batch = round(r, next_id, &plants);
        next_id += batch.len() as i64;
        live.extend(batch);
        let keep = live.split_off(live.len() - 6);
        let span = std::mem::replace(&mut live, keep);
        // What the pipeline does per compacted span.
        state.stated.record(
            stated::extract(&span),
            &StatedCaps::default(),
            compactor_shared::evidence::EvidenceConfig::default().scope_messages,
        );
        let t = transcript::extract(&span, &TranscriptConfig::default());
        let input = CompactionInput {
            previous_summary: summary.as_ref(),
            state: &state,
            new_messages: &t.text,
            instructions: None,
            split_turn: false,
            format: SummaryFormat::Sections,
        };
        let out = match mode {
            Mode::Extractive => {
                extractive::summarize(&input, &ExtractiveConfig::default(), budget, &e)
            }
            Mode::ValueFree => value_free(&input),
        };
        state.merge(&out.delta, &StateCaps::default());
        summary = Some(out.summary);
    }
    let built = context::build(
        &ContextInput {
            summary: summary.as_ref(),
            state: &state,
            memory_block_summary: None,
            memory_entries: &[],
            messages: &live,
            just_auto_compacted: false,
            context_window: 200_000,
            state_text: None,
        },
        &ContextConfig::default(),
        &e,
    );
    let Part::Text { text } = &built.messages[0].parts[0] else {
        panic!("the preamble is text")
    };
    text.clone()
}

fn check(mode: Mode) {
    let text = run(mode);
    let current_block: String = text
        .split(stated::CURRENT_HEADING)
        .nth(1)
        .unwrap_or_else(|| panic!("{mode:?}: no current statements in\n{text}"))
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("- "))
        .map(|l| format!("{l}\n"))
        .collect();
    for p in plants() {
        let current = p.replaced.map_or(p.text, |(_, by)| by);
        assert!(
            current_block.contains(current),
            "{mode:?}: current statement {current:?} missing from\n{current_block}"
        );
        if p.replaced.is_some() {
            assert!(
                !current_block.contains(p.text),
                "{mode:?}: superseded {:?} listed as current",
                p.text
            );
            for line in text.lines().filter(|l| l.contains(p.text)) {
                assert!(
                    line.contains("superseded"),
                    "{mode:?}: shown as current: {line}"
                );
            }
        }
        if let Some(old) = p.old_value {
            for line in text.lines().filter(|l| l.contains(old)) {
                assert!(
                    line.contains("superseded"),
                    "{mode:?}: {old} shown as current: {line}"
                );
            }
        }
    }
    for line in text.lines() {
        let rule_line = line.contains("constraint:")
            || line.contains("decision:")
            || text.split("Active constraints:\n").nth(1).is_some_and(|s| {
                s.lines()
                    .take_while(|l| l.starts_with("- "))
                    .any(|l| l == line)
            });
        if rule_line {
            for casual in CASUAL {
                assert!(
                    !line.contains(casual),
                    "{mode:?}: casual remark as a rule: {line}"
                );
            }
        }
    }
}

#[test]
fn with_the_extractive_summarizer() {
    check(Mode::Extractive);
}

#[test]
fn with_a_summarizer_that_drops_values_and_proposes_stale_decisions() {
    check(Mode::ValueFree);
}
