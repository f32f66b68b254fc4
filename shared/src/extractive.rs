//! The extractive summarizer: no network, no model, deterministic.
//!
//! It is the zero-configuration default and the degraded-mode fallback when
//! the LLM stays unavailable, so it produces exactly what an LLM summarizer
//! produces — the three sections and a state delta — from the same input: a
//! transcript chunk plus the summary so far. Like an anchored iterative
//! summary (pi, Factory) it starts from the previous summary and adds what
//! the new messages bring, so information accumulates across chunks and
//! compactions, while per-section caps and the token budget keep it from
//! growing:
//! - CONVERSATION FLOW: one bullet per user turn (`#id user: … → assistant: …`);
//! - KEY FACTS: sentences that state decisions, constraints, corrections or
//!   carry an exact value (path, command, id, number with unit…);
//! - OPEN THREADS: unanswered user questions and stated next steps near the
//!   end of the span, and the request of a turn the cut splits.

use serde::{Deserialize, Serialize};

use crate::ledger::has_artifact;
use crate::prompt::CompactionInput;
use crate::state::{normalize, StateDelta, StateItem};
use std::collections::HashSet;

use crate::summary::{Section, SummarizerOutput, Summary};
use crate::tokens::TokenEstimator;

/// Extractive summarizer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExtractiveConfig {
    pub max_key_facts: usize,
    pub max_flow: usize,
    pub max_open_threads: usize,
    /// Longest bullet, in chars.
    pub bullet_chars: usize,
}

impl Default for ExtractiveConfig {
    fn default() -> Self {
        ExtractiveConfig {
            max_key_facts: 40,
            max_flow: 60,
            max_open_threads: 12,
            bullet_chars: 240,
        }
    }
}

const DECISION_MARKERS: &[&str] = &[
    " decided ",
    " decide to ",
    " we'll use ",
    " we will use ",
    " let's go with ",
    " lets go with ",
    " chose ",
    " choose ",
    " going with ",
    " agreed ",
    " settled on ",
    " instead of ",
    " the fix was ",
    " root cause ",
];
const CONSTRAINT_MARKERS: &[&str] = &[
    " must ",
    " must not ",
    " never ",
    " always ",
    " don't ",
    " do not ",
    " make sure ",
    " should not ",
    " shouldn't ",
    " prefer ",
    " only use ",
    " avoid ",
];
const CORRECTION_MARKERS: &[&str] = &[
    " actually ",
    " correction ",
    " not what i ",
    " that's wrong ",
    " because ",
];
const TASK_MARKERS: &[&str] = &[
    " todo ",
    " todo: ",
    " need to ",
    " next step ",
    " please ",
    " still need ",
    " pending ",
];
const DONE_MARKERS: &[&str] = &[
    " done ",
    " fixed ",
    " implemented ",
    " completed ",
    " merged ",
    " finished ",
    " resolved ",
];
const RISK_MARKERS: &[&str] = &[
    " risk ",
    " risky ",
    " might break ",
    " careful ",
    " warning ",
    " danger ",
    " could break ",
];

/// Who wrote a transcript block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaker {
    User,
    Assistant,
    Other,
}

/// One message of the transcript, as far as the summarizer cares.
#[derive(Debug)]
struct Block<'a> {
    id: &'a str,
    speaker: Speaker,
    /// Text lines (tool and file lines excluded).
    text: String,
    /// Allowed tools called in this block.
    tools: Vec<&'a str>,
}

/// Splits a transcript into blocks at its header lines.
fn blocks(transcript: &str) -> Vec<Block<'_>> {
    let mut out: Vec<Block<'_>> = Vec::new();
    for line in transcript.split('\n') {
        if let Some((id, speaker)) = header(line) {
            out.push(Block {
                id,
                speaker,
                text: String::new(),
                tools: Vec::new(),
            });
            continue;
        }
        let Some(block) = out.last_mut() else {
            continue;
        };
        if let Some(rest) = line.strip_prefix("[tool call ") {
            if let Some((name, _)) = rest.split_once(']') {
                if !block.tools.contains(&name) {
                    block.tools.push(name);
                }
            }
        } else if line.starts_with("[tool ")
            || line.starts_with("[file ")
            || line.starts_with("…[truncated")
        {
            continue;
        } else {
            block.text.push_str(line);
            block.text.push('\n');
        }
    }
    out
}

/// Parses `[#<id> <ROLE>]`.
fn header(line: &str) -> Option<(&str, Speaker)> {
    let inner = line.strip_prefix("[#")?.strip_suffix(']')?;
    let (id, role) = inner.split_once(' ')?;
    let digits = id.strip_prefix('-').unwrap_or(id);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let speaker = match role {
        "USER" => Speaker::User,
        "ASSISTANT" => Speaker::Assistant,
        "SYSTEM" | "TOOL" => Speaker::Other,
        _ => return None,
    };
    Some((id, speaker))
}

/// Sentences of `text`: split at line breaks and after `.`, `?`, `!`
/// followed by white space.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let end = match b {
            b'\n' => Some(i),
            b'.' | b'?' | b'!' if bytes.get(i + 1).is_some_and(|n| n.is_ascii_whitespace()) => {
                Some(i + 1)
            }
            _ => None,
        };
        if let Some(end) = end {
            if let Some(s) = text.get(start..end) {
                let s = s.trim();
                if s.chars().count() >= 3 {
                    out.push(s);
                }
            }
            start = end;
        }
    }
    if let Some(s) = text.get(start..) {
        let s = s.trim();
        if s.chars().count() >= 3 {
            out.push(s);
        }
    }
    out
}

/// Cuts `text` to `max` chars, marking the cut with `…`.
fn shorten(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn has_marker(lower_padded: &str, markers: &[&str]) -> bool {
    markers.iter().any(|m| lower_padded.contains(m))
}

/// Lower-cased sentence with spaces around it and punctuation turned into
/// spaces, so markers match as whole words.
fn padded(sentence: &str) -> String {
    let mut s = String::with_capacity(sentence.len() + 2);
    s.push(' ');
    for c in sentence.chars() {
        if matches!(c, ',' | '.' | ';' | ':' | '!' | '?' | '(' | ')' | '"') {
            s.push(' ');
        } else {
            s.extend(c.to_lowercase());
        }
    }
    s.push(' ');
    s
}

/// Pushes `bullet` unless an equal one (normalized) is already there.
/// For one-off use; [`Bullets`] does the same in bulk without re-normalizing.
fn push_unique(list: &mut Vec<String>, bullet: String) {
    let key = normalize(&bullet);
    if key.is_empty() || list.iter().any(|b| normalize(b) == key) {
        return;
    }
    list.push(bullet);
}

/// A summary being built, with the normalized keys of each section's
/// bullets, so deduplicating a 120,000-char chunk's hundreds of candidate
/// sentences stays linear.
struct Bullets {
    summary: Summary,
    keys: [HashSet<String>; 3],
}

impl Bullets {
    fn new(summary: Summary) -> Bullets {
        let keys = Section::ALL.map(|s| summary.section(s).iter().map(|b| normalize(b)).collect());
        Bullets { summary, keys }
    }

    fn push(&mut self, section: Section, bullet: String) {
        let key = normalize(&bullet);
        if !key.is_empty() && self.keys[section as usize].insert(key) {
            self.summary.section_mut(section).push(bullet);
        }
    }
}

fn keep_newest(list: &mut Vec<String>, max: usize) {
    let excess = list.len().saturating_sub(max);
    list.drain(..excess);
}

fn first_sentence(text: &str) -> Option<&str> {
    sentences(text).into_iter().next()
}

/// Summarizes one transcript chunk on top of the previous summary.
pub fn summarize(
    input: &CompactionInput<'_>,
    config: &ExtractiveConfig,
    max_output_tokens: u64,
    estimator: &dyn TokenEstimator,
) -> SummarizerOutput {
    let mut bullets = Bullets::new(input.previous_summary.cloned().unwrap_or_default());
    let mut delta = StateDelta::default();
    let blocks = blocks(input.new_messages);
    let width = config.bullet_chars.max(16);

    if let Some(instructions) = input.instructions.filter(|i| !i.trim().is_empty()) {
        bullets.push(
            Section::KeyFacts,
            shorten(&format!("Operator note: {}", instructions.trim()), width),
        );
    }

    // CONVERSATION FLOW: one bullet per user turn.
    let mut i = 0;
    while i < blocks.len() {
        let block = &blocks[i];
        let start = i;
        i += 1;
        while i < blocks.len() && blocks[i].speaker != Speaker::User {
            i += 1;
        }
        let turn = &blocks[start..i];
        let lead = match block.speaker {
            Speaker::User => first_sentence(&block.text)
                .map(|s| format!("#{} user: {}", block.id, shorten(s, width / 2))),
            _ => turn.iter().find_map(|b| {
                first_sentence(&b.text)
                    .map(|s| format!("#{} assistant: {}", b.id, shorten(s, width / 2)))
            }),
        };
        let Some(mut bullet) = lead else { continue };
        if block.speaker == Speaker::User {
            if let Some(answer) = turn[1..]
                .iter()
                .filter(|b| b.speaker == Speaker::Assistant)
                .find_map(|b| first_sentence(&b.text))
            {
                bullet.push_str(" → assistant: ");
                bullet.push_str(&shorten(answer, width / 3));
            }
        }
        let mut tools: Vec<&str> = Vec::new();
        for b in turn {
            for t in &b.tools {
                if !tools.contains(t) {
                    tools.push(t);
                }
            }
        }
        if !tools.is_empty() {
            bullet.push_str(&format!(" (tools: {})", tools.join(", ")));
        }
        bullets.push(Section::ConversationFlow, shorten(&bullet, width));
    }

    // KEY FACTS and the delta, sentence by sentence.
    let last_user = blocks.iter().rposition(|b| b.speaker == Speaker::User);
    for (index, block) in blocks.iter().enumerate() {
        if block.speaker == Speaker::Other {
            continue;
        }
        let answered_later = blocks[index + 1..]
            .iter()
            .any(|b| b.speaker == Speaker::Assistant && !b.text.trim().is_empty());
        for sentence in sentences(&block.text) {
            let lower = padded(sentence);
            let decision = has_marker(&lower, DECISION_MARKERS);
            let constraint = has_marker(&lower, CONSTRAINT_MARKERS);
            let correction = has_marker(&lower, CORRECTION_MARKERS);
            let short = shorten(sentence, width);
            if decision || constraint || correction || has_artifact(sentence) {
                bullets.push(Section::KeyFacts, short.clone());
            }
            if decision {
                delta.key_decisions.push(StateItem::new(short.clone()));
            }
            if constraint && block.speaker == Speaker::User {
                delta.active_constraints.push(StateItem::new(short.clone()));
            }
            if has_marker(&lower, RISK_MARKERS) {
                delta.risks.push(StateItem::new(short.clone()));
            }
            if block.speaker == Speaker::User && has_marker(&lower, TASK_MARKERS) {
                delta
                    .tasks
                    .push(StateItem::new(short.clone()).with_status("open"));
            }
            if block.speaker == Speaker::Assistant && has_marker(&lower, DONE_MARKERS) {
                let said = normalize(sentence);
                for task in &input.state.tasks {
                    let t = normalize(&task.text);
                    if !t.is_empty() && said.contains(&t) {
                        let mut done = task.clone();
                        done.status = Some("done".into());
                        delta.tasks.push(done);
                    }
                }
            }
            let question = sentence.ends_with('?');
            if block.speaker == Speaker::User && question && !answered_later {
                delta.open_questions.push(StateItem::new(short.clone()));
                bullets.push(Section::OpenThreads, short.clone());
            }
            // Next steps near the end of the span.
            let near_end = last_user.is_none_or(|lu| index >= lu);
            if near_end && has_marker(&lower, TASK_MARKERS) && !question {
                bullets.push(Section::OpenThreads, short);
            }
        }
        for path in paths_in(&block.text) {
            delta.artifacts.push(StateItem::new(path));
        }
    }

    let mut summary = bullets.summary;
    if input.split_turn {
        summary
            .open_threads
            .retain(|b| !b.starts_with("Turn in progress: "));
        if let Some(request) = last_user.and_then(|lu| first_sentence(&blocks[lu].text)) {
            summary
                .open_threads
                .push(shorten(&format!("Turn in progress: {request}"), width));
        }
    }

    keep_newest(&mut summary.conversation_flow, config.max_flow);
    keep_newest(&mut summary.key_facts, config.max_key_facts);
    keep_newest(&mut summary.open_threads, config.max_open_threads);
    summary.fit_to(max_output_tokens, estimator);
    SummarizerOutput { summary, delta }
}

fn paths_in(text: &str) -> Vec<String> {
    use crate::ledger::ArtifactKind;
    use crate::message::{Message, Role};
    crate::ledger::extract(&[Message::text(0, Role::User, text)])
        .into_iter()
        .filter(|a| a.kind == ArtifactKind::Path)
        .map(|a| a.value)
        .collect()
}

/// Extractive rollup: duplicate bullets removed, then cut to `target_tokens`.
pub fn rollup(summary: &Summary, target_tokens: u64, estimator: &dyn TokenEstimator) -> Summary {
    let mut out = Summary::default();
    for section in Section::ALL {
        for bullet in summary.section(section) {
            push_unique(out.section_mut(section), bullet.clone());
        }
    }
    out.fit_to(target_tokens, estimator);
    out
}

/// Extractive memory-block fold: the previous summary's lines and one
/// bullet per folded entry, deduplicated, newest kept within `max_chars`.
pub fn fold_memory_block(previous: Option<&str>, entries: &[String], max_chars: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let previous_lines = previous
        .unwrap_or("")
        .lines()
        .map(|l| l.trim().trim_start_matches("- ").trim());
    let entry_lines = entries.iter().map(|e| e.trim());
    for line in previous_lines.chain(entry_lines) {
        if !line.is_empty() {
            let key = normalize(line);
            lines.retain(|l| normalize(l) != key);
            lines.push(line.to_owned());
        }
    }
    let mut total: usize = lines.iter().map(|l| l.chars().count() + 3).sum();
    while total > max_chars && !lines.is_empty() {
        total -= lines.remove(0).chars().count() + 3;
    }
    lines.iter().map(|l| format!("- {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::WorkstreamState;
    use crate::tokens::CharEstimator;

    fn run(
        transcript: &str,
        previous: Option<&Summary>,
        state: &WorkstreamState,
    ) -> SummarizerOutput {
        let input = CompactionInput {
            previous_summary: previous,
            state,
            new_messages: transcript,
            instructions: None,
            split_turn: false,
        };
        summarize(
            &input,
            &ExtractiveConfig::default(),
            4_096,
            &CharEstimator::default(),
        )
    }

    const T: &str =
        "[#1 USER]\nWe must not touch the billing schema. Can you fix the bug in src/pay.rs?\n\
[#2 ASSISTANT]\nLooking at it now.\n[tool call linearSearch] {\"q\":\"pay\"}\n\
[#3 TOOL]\n[tool result linearSearch] found ENG-42\n\
[#4 ASSISTANT]\nWe decided to round half-even. The fix was in src/pay.rs:88.\n\
[#5 USER]\nGreat. What about refunds?\n";

    #[test]
    fn one_flow_bullet_per_user_turn_with_ids_answers_and_tools() {
        let out = run(T, None, &WorkstreamState::default());
        assert_eq!(out.summary.conversation_flow.len(), 2);
        assert_eq!(
            out.summary.conversation_flow[0],
            "#1 user: We must not touch the billing schema. → assistant: Looking at it now. (tools: linearSearch)"
        );
        assert!(out.summary.conversation_flow[1].starts_with("#5 user: Great."));
    }

    #[test]
    fn facts_decisions_constraints_and_questions_land_where_they_belong() {
        let out = run(T, None, &WorkstreamState::default());
        let facts = out.summary.key_facts.join("\n");
        assert!(facts.contains("We must not touch the billing schema."));
        assert!(facts.contains("We decided to round half-even."));
        assert!(facts.contains("The fix was in src/pay.rs:88."));
        assert_eq!(
            out.delta.key_decisions.len(),
            2,
            "{:?}",
            out.delta.key_decisions
        );
        assert_eq!(
            out.delta.active_constraints[0].text,
            "We must not touch the billing schema."
        );
        assert_eq!(
            out.delta.open_questions.len(),
            1,
            "the answered question is not open"
        );
        assert_eq!(out.delta.open_questions[0].text, "What about refunds?");
        assert_eq!(out.summary.open_threads, ["What about refunds?"]);
        assert!(out.delta.artifacts.iter().any(|a| a.text == "src/pay.rs"));
    }

    #[test]
    fn the_previous_summary_is_carried_and_not_duplicated() {
        let previous = Summary {
            key_facts: vec![
                "Old fact about v1.".into(),
                "We decided to round half-even".into(),
            ],
            conversation_flow: vec!["#0 user: hello".into()],
            open_threads: vec!["Deploy?".into()],
        };
        let out = run(T, Some(&previous), &WorkstreamState::default());
        assert_eq!(out.summary.key_facts[0], "Old fact about v1.");
        assert_eq!(
            out.summary
                .key_facts
                .iter()
                .filter(|f| f.contains("half-even"))
                .count(),
            1
        );
        assert_eq!(out.summary.conversation_flow[0], "#0 user: hello");
        assert!(out.summary.open_threads.contains(&"Deploy?".to_string()));
    }

    #[test]
    fn a_done_sentence_closes_a_known_task() {
        let mut state = WorkstreamState::default();
        state.tasks.push(
            StateItem::new("migrate the invoices table")
                .with_id("T1")
                .with_status("open"),
        );
        let t = "[#9 ASSISTANT]\nI have completed: migrate the invoices table, all green.\n";
        let out = run(t, None, &state);
        assert_eq!(out.delta.tasks.len(), 1);
        assert_eq!(out.delta.tasks[0].id.as_deref(), Some("T1"));
        assert_eq!(out.delta.tasks[0].status.as_deref(), Some("done"));
    }

    #[test]
    fn split_turn_and_operator_notes() {
        let state = WorkstreamState::default();
        let input = CompactionInput {
            previous_summary: None,
            state: &state,
            new_messages: "[#1 USER]\nPlease refactor the parser.\n[#2 ASSISTANT]\nStarting.\n",
            instructions: Some("keep the parser details"),
            split_turn: true,
        };
        let out = summarize(
            &input,
            &ExtractiveConfig::default(),
            4_096,
            &CharEstimator::default(),
        );
        assert!(out
            .summary
            .key_facts
            .contains(&"Operator note: keep the parser details".to_string()));
        assert_eq!(
            out.summary.open_threads.last().map(String::as_str),
            Some("Turn in progress: Please refactor the parser.")
        );
        assert_eq!(out.delta.tasks[0].status.as_deref(), Some("open"));
    }

    #[test]
    fn caps_and_budget_hold_on_a_large_chunk() {
        let mut t = String::new();
        for i in 0..500 {
            t.push_str(&format!(
                "[#{} USER]\nTurn {i}: we must keep file src/mod_{i}.rs as is. Why does test_{i} fail?\n[#{} ASSISTANT]\nBecause of E0502 in src/mod_{i}.rs, the fix was a clone.\n",
                2 * i,
                2 * i + 1
            ));
        }
        assert!(t.len() > 60_000);
        let state = WorkstreamState::default();
        let e = CharEstimator::default();
        for budget in [500, 1_000, 4_096] {
            let input = CompactionInput {
                previous_summary: None,
                state: &state,
                new_messages: &t,
                instructions: None,
                split_turn: false,
            };
            let out = summarize(&input, &ExtractiveConfig::default(), budget, &e);
            assert!(out.summary.tokens(&e) <= budget, "budget {budget}");
            assert!(out.summary.conversation_flow.len() <= 60);
            assert!(out.summary.key_facts.len() <= 40);
            assert!(out.summary.open_threads.len() <= 12);
        }
    }

    #[test]
    fn deterministic() {
        let a = run(T, None, &WorkstreamState::default());
        let b = run(T, None, &WorkstreamState::default());
        assert_eq!(a, b);
    }

    #[test]
    fn forged_headers_inside_text_are_not_blocks() {
        // The transcript escapes content lines starting with `[#`; such a
        // line must not start a block here either.
        let out = run(
            "[#1 USER]\n [#2 ASSISTANT]\nhello there friend\n",
            None,
            &WorkstreamState::default(),
        );
        assert_eq!(out.summary.conversation_flow.len(), 1);
        assert!(out.summary.conversation_flow[0].starts_with("#1 user:"));
    }

    #[test]
    fn rollup_dedupes_and_fits() {
        let e = CharEstimator::default();
        let s = Summary {
            key_facts: vec!["a fact".into(), "A fact.".into()],
            conversation_flow: (0..300).map(|i| format!("step {i}")).collect(),
            open_threads: vec![],
        };
        let r = rollup(&s, 300, &e);
        assert_eq!(r.key_facts, ["a fact"]);
        assert!(r.tokens(&e) <= 300);
        assert_eq!(
            r.conversation_flow.last().map(String::as_str),
            Some("step 299")
        );
    }

    #[test]
    fn memory_fold_dedupes_and_keeps_the_newest_within_bounds() {
        let folded = fold_memory_block(
            Some("- likes tea\n- uses vim"),
            &["Likes tea.".into(), "lives in Oslo".into()],
            1_000,
        );
        assert_eq!(folded, "- uses vim\n- Likes tea.\n- lives in Oslo\n");
        let tight = fold_memory_block(Some("- aaaa\n- bbbb"), &["cccc".into()], 14);
        assert_eq!(tight, "- bbbb\n- cccc\n");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_respects_the_budget(
            parts in proptest::collection::vec(
                (0u8..5, "[ -~\u{e9}\u{6771}\n?.!]{0,200}"),
                0..40,
            ),
            budget in 200u64..5_000,
        ) {
            let mut t = String::new();
            for (i, (kind, text)) in parts.iter().enumerate() {
                let role = ["USER", "ASSISTANT", "TOOL", "SYSTEM", "USER"][usize::from(*kind)];
                t.push_str(&format!("[#{i} {role}]\n{text}\n"));
            }
            let state = WorkstreamState::default();
            let e = CharEstimator::default();
            let input = CompactionInput { previous_summary: None, state: &state, new_messages: &t, instructions: None, split_turn: true };
            let out = summarize(&input, &ExtractiveConfig::default(), budget, &e);
            proptest::prop_assert!(out.summary.tokens(&e) <= budget);
        }
    }
}
