//! What the next chat turn is sent: the compacted preamble (summary, state,
//! the user's statements, evidence, memory) as the first message, then the
//! un-compacted messages.
//!
//! Two guarantees are enforced here rather than hoped for:
//! - **No orphaned tool halves.** A tool result whose call is not in the
//!   context, or a call whose result is not (other than a call in the very
//!   last message, still being executed), is turned into plain text that
//!   says what it was. Providers reject orphans with a 400 on every later
//!   turn; a text note costs nothing.
//! - **Overflow guard** (CoWork). When preamble plus messages (plus the
//!   branch summaries the caller attaches after the build: it builds for
//!   the [`window_leaving`] them) would exceed
//!   `overflow_guard_ratio` (95 %) of the window, the summary is shrunk —
//!   oldest conversation-flow (or completed-work) bullets first — keeping
//!   its sections and the hand-off framing, never the evidence.
//! - **The summary's own format.** A summary is rendered in the format it
//!   was written in: a `handoff9` summary opens the preamble with CoWork's
//!   hand-off framing ([`HANDOFF9_FRAMING`]), a `sections` one with
//!   [`SUMMARY_HEADER`] as before.
//! - **Nothing superseded shown as current.** The user's current decisions
//!   and constraints come first, each with its source message; superseded
//!   ones are listed as such, and a summary bullet that still states a
//!   superseded value is marked "superseded" (see [`crate::stated`]).

use serde::{Deserialize, Serialize};

use crate::message::{Message, MessageId, Part, Role, PRUNED_PLACEHOLDER};
use crate::state::WorkstreamState;
use crate::summary::{Summary, SummaryFormat};
use crate::tokens::TokenEstimator;

mod tail;
pub use tail::{PreparedTail, TailContext, Unwritable};

/// First line of the preamble, as the seed's summary injection reads.
pub const SUMMARY_HEADER: &str = "Compacted context summary:";

/// Hand-off framing (Codex / CoWork): the model treats the summary as
/// authoritative work of a previous agent, not as a lossy memory.
pub const HANDOFF_PREAMBLE: &str =
    "A previous agent produced the summary below to hand off the work. \
Use it to build on the work already done and avoid duplicating effort. \
The messages after this one are the most recent part of the conversation, verbatim.";

/// CoWork's hand-off framing, the first words of a context whose summary is
/// in the `handoff9` format.
pub const HANDOFF9_FRAMING: &str =
    "A previous agent produced the structured summary below to hand off the work. \
Use this to build on the work that has already been done and avoid duplicating effort.";

/// What follows the framing of a `handoff9` summary: the tail is verbatim.
const HANDOFF9_TAIL_NOTE: &str =
    "The messages after this one are the most recent part of the conversation, verbatim.";

/// OpenCode's synthetic message after an automatic compaction.
pub const CONTINUE_MESSAGE: &str = "Continue if you have next steps.";

/// Context-building settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextConfig {
    /// Role of the preamble message (`system` as in the seed; `user` for
    /// providers that take no system messages in the list).
    pub summary_role: Role,
    /// Share of the context window the built context may fill before the
    /// summary is shrunk.
    pub overflow_guard_ratio: f64,
    /// Append [`CONTINUE_MESSAGE`] right after an automatic compaction.
    pub continue_after_auto: bool,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            summary_role: Role::System,
            overflow_guard_ratio: 0.95,
            continue_after_auto: false,
        }
    }
}

/// Everything stored about a workstream that goes into its context.
#[derive(Debug, Clone, Copy)]
pub struct ContextInput<'a> {
    pub summary: Option<&'a Summary>,
    pub state: &'a WorkstreamState,
    pub memory_block_summary: Option<&'a str>,
    /// Memory entries not folded yet, oldest first.
    pub memory_entries: &'a [String],
    /// Un-compacted messages in order (pinned ones before the watermark
    /// included).
    pub messages: &'a [Message],
    /// The latest compaction was automatic and nothing was said since.
    pub just_auto_compacted: bool,
    /// The model's context window (0 = unlimited: no overflow guard).
    pub context_window: u64,
    /// `state`'s part of the preamble as [`state_text`] writes it, when the
    /// caller keeps it beside the state (it changes only with the state:
    /// a long workstream's is hundreds of kilobytes, written again every
    /// turn otherwise); `None`: written here.
    pub state_text: Option<&'a str>,
}

/// A message of the built context; `source` is `None` for synthesized ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextMessage {
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<MessageId>,
}

/// The built context and what the guards did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BuiltContext {
    pub messages: Vec<ContextMessage>,
    /// Estimated tokens of the whole context.
    pub tokens: u64,
    /// Summary bullets the overflow guard dropped.
    pub summary_bullets_dropped: usize,
    /// Tool halves turned into text because their partner is missing.
    pub orphans_neutralized: usize,
    /// Still over the guard after shrinking the summary (the tail alone is
    /// too big: a compaction with a smaller tail is needed).
    pub over_budget: bool,
}

/// Builds the context for the next turn.
pub fn build(
    input: &ContextInput<'_>,
    config: &ContextConfig,
    estimator: &dyn TokenEstimator,
) -> BuiltContext {
    build_owned(input, input.messages.to_vec(), config, estimator)
}

/// [`build`] from messages given by value (`input.messages` is ignored):
/// their parts move into the context instead of being copied. Why: a
/// context of 10k un-compacted messages is megabytes of text, read from
/// the database only to be returned; copying it again is a measurable share
/// of `GET …/context`.
pub fn build_owned(
    input: &ContextInput<'_>,
    messages: Vec<Message>,
    config: &ContextConfig,
    estimator: &dyn TokenEstimator,
) -> BuiltContext {
    let (mut messages, orphans_neutralized) = sanitize(messages);
    if let Some(m) = continue_message(input, config) {
        messages.push(m);
    }
    let tail_tokens: u64 = messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| estimator.part_tokens(p))
        .sum();
    let framed = frame(input, tail_tokens, config, estimator);
    let mut out = Vec::with_capacity(messages.len() + 1);
    out.extend(framed.preamble);
    out.extend(messages);
    BuiltContext {
        messages: out,
        tokens: framed.tokens,
        summary_bullets_dropped: framed.summary_bullets_dropped,
        orphans_neutralized,
        over_budget: framed.over_budget,
    }
}

/// [`CONTINUE_MESSAGE`], when the context ends with it.
fn continue_message(input: &ContextInput<'_>, config: &ContextConfig) -> Option<ContextMessage> {
    (config.continue_after_auto && input.just_auto_compacted).then(|| ContextMessage {
        role: Role::User,
        parts: vec![Part::text(CONTINUE_MESSAGE)],
        source: None,
    })
}

/// What frames the messages of a context: its preamble (none when there
/// is nothing to say), and the totals once the overflow guard has shrunk
/// the summary to fit beside `tail_tokens`.
struct Framed {
    preamble: Option<ContextMessage>,
    /// The whole context's tokens.
    tokens: u64,
    summary_bullets_dropped: usize,
    over_budget: bool,
}

fn frame(
    input: &ContextInput<'_>,
    tail_tokens: u64,
    config: &ContextConfig,
    estimator: &dyn TokenEstimator,
) -> Framed {
    let mut summary = shown_summary(input);
    let rest = render_rest(input);
    let mut dropped = 0;
    let limit = guard_limit(input.context_window, config.overflow_guard_ratio);
    if let (Some(limit), Some(s)) = (limit, summary.as_mut()) {
        // The framing and the headings are fixed: only bullets are cut.
        let fixed = estimator.count(&render_preamble(s.format, None, &rest)) + tail_tokens;
        let total = fixed + s.tokens(estimator);
        if total > limit {
            dropped = s.fit_to(limit.saturating_sub(fixed), estimator);
        }
    }
    let mut tokens = tail_tokens;
    let mut preamble = None;
    if summary.is_some() || !rest.is_empty() {
        let format = summary
            .as_ref()
            .map_or_else(SummaryFormat::default, |s| s.format);
        let text = render_preamble(format, summary.as_ref(), &rest);
        tokens += estimator.count(&text);
        preamble = Some(ContextMessage {
            role: config.summary_role,
            parts: vec![Part::Text { text }],
            source: None,
        });
    }
    Framed {
        preamble,
        tokens,
        summary_bullets_dropped: dropped,
        over_budget: limit.is_some_and(|l| tokens > l),
    }
}

/// The window to build a context with when `reserved` tokens are added to
/// it after it is built (a workstream's branch summaries): the overflow
/// guard's limit, `ratio` of it, is then `reserved` lower, and the whole
/// stays under the guard. An unlimited window (0) stays unlimited.
pub fn window_leaving(window: u64, reserved: u64, ratio: f64) -> u64 {
    if window == 0 || reserved == 0 {
        return window;
    }
    let ratio = ratio.clamp(0.01, 1.0);
    let room = (reserved as f64 / ratio).ceil() as u64;
    window.saturating_sub(room).max(1)
}

fn guard_limit(window: u64, ratio: f64) -> Option<u64> {
    (window > 0).then(|| (window as f64 * ratio.clamp(0.0, 1.0)) as u64)
}

/// Tokens of the preamble (the first message) a context built from
/// `input` starts with, before any overflow guard: what a compaction leaves
/// behind besides the un-compacted messages. `input.messages` is ignored.
pub fn preamble_tokens(input: &ContextInput<'_>, estimator: &dyn TokenEstimator) -> u64 {
    estimator.count(&preamble_text(input))
}

/// The preamble's text a context built from `input` starts with, before
/// any overflow guard (`input.messages` is ignored).
pub fn preamble_text(input: &ContextInput<'_>) -> String {
    preamble_texts(input).0
}

/// [`preamble_text`], and the preamble as it would read without a summary
/// (the state, the user's statements, the evidence and memory
/// under the summary's empty headings): what is not the summary is
/// rendered once for both.
pub fn preamble_texts(input: &ContextInput<'_>) -> (String, String) {
    let summary = shown_summary(input);
    let format = summary
        .as_ref()
        .map_or_else(SummaryFormat::default, |s| s.format);
    let rest = render_rest(input);
    (
        render_preamble(format, summary.as_ref(), &rest),
        render_preamble(SummaryFormat::default(), None, &rest),
    )
}

/// The summary as it is shown: bullets that still state what the user
/// superseded (whichever summarizer wrote them) are marked so.
fn shown_summary(input: &ContextInput<'_>) -> Option<Summary> {
    let mut summary = input.summary.cloned();
    if let Some(s) = summary.as_mut() {
        input.state.stated.outdated().mark_summary(s);
    }
    summary
}

/// The preamble's part that `state` alone decides: the user's statements,
/// the workstream state and the evidence (the memory follows it).
pub fn state_text(state: &WorkstreamState) -> String {
    let mut rest = state.stated.render();
    let rendered = state.render();
    if !rendered.is_empty() {
        if !rest.is_empty() {
            rest.push('\n');
        }
        rest.push_str("Workstream state:\n");
        rest.push_str(&rendered);
    }
    let evidence = state.evidence.render_beside(&state.stated);
    if !evidence.is_empty() {
        if !rest.is_empty() {
            rest.push('\n');
        }
        rest.push_str(crate::evidence::EVIDENCE_HEADING);
        rest.push('\n');
        rest.push_str(&evidence);
    }
    rest
}

fn render_rest(input: &ContextInput<'_>) -> String {
    let mut rest = match input.state_text {
        Some(text) => text.to_owned(),
        None => state_text(input.state),
    };
    let memory_summary = input.memory_block_summary.filter(|s| !s.trim().is_empty());
    if memory_summary.is_some() || !input.memory_entries.is_empty() {
        if !rest.is_empty() {
            rest.push('\n');
        }
        rest.push_str("Memory:\n");
        if let Some(s) = memory_summary {
            rest.push_str(s.trim_end());
            rest.push('\n');
        }
        for entry in input.memory_entries {
            rest.push_str("- ");
            rest.push_str(entry);
            rest.push('\n');
        }
    }
    rest
}

/// The preamble: the framing of `format`, the summary (its empty headings
/// when there is none) and the rest.
fn render_preamble(format: SummaryFormat, summary: Option<&Summary>, rest: &str) -> String {
    let mut text = String::new();
    match format {
        SummaryFormat::Sections => {
            text.push_str(SUMMARY_HEADER);
            text.push('\n');
            text.push_str(HANDOFF_PREAMBLE);
        }
        SummaryFormat::Handoff9 => {
            text.push_str(HANDOFF9_FRAMING);
            text.push('\n');
            text.push_str(HANDOFF9_TAIL_NOTE);
        }
    }
    text.push_str("\n\n");
    match summary {
        Some(s) => text.push_str(&s.render()),
        None => text.push_str(&Summary::empty(format).render()),
    }
    if !rest.is_empty() {
        text.push('\n');
        text.push_str(rest);
    }
    text
}

/// Copies the messages for a model: pruned output becomes the placeholder,
/// and orphaned tool halves become text. Returns the count neutralized.
/// Pairs ([`tail::Pairs`], the one definition of pairing) are decided
/// before anything is rewritten, so neutralizing one half can never orphan
/// the other.
fn sanitize(messages: Vec<Message>) -> (Vec<ContextMessage>, usize) {
    let mut pairs = tail::Pairs::default();
    for (mi, m) in messages.iter().enumerate() {
        pairs.push(m, mi);
    }
    let last = messages.len().saturating_sub(1);
    let mut orphans = 0;
    let mut out = Vec::with_capacity(messages.len());
    for (mi, m) in messages.into_iter().enumerate() {
        let first = pairs.first_part[mi];
        let parts = m
            .parts
            .into_iter()
            .enumerate()
            .map(|(pi, part)| {
                let paired = pairs.partner[first + pi].is_some();
                let (shown, orphan) = show_part(part, paired, mi == last);
                orphans += usize::from(orphan);
                shown
            })
            .collect();
        out.push(ContextMessage {
            role: m.role,
            parts,
            source: Some(m.id),
        });
    }
    (out, orphans)
}

/// Whether `part` is a half whose partner is missing, and turned to text.
/// A call of the last message may still be running.
fn orphaned(part: &Part, paired: bool, in_last: bool) -> bool {
    match part {
        Part::ToolCall { .. } => !paired && !in_last,
        Part::ToolResult { .. } => !paired,
        _ => false,
    }
}

/// A part as a model is sent it: pruned output as the placeholder, an
/// orphaned half (see [`orphaned`]) as text that says what it was; and
/// whether it was an orphan.
fn show_part(part: Part, paired: bool, in_last: bool) -> (Part, bool) {
    let orphan = orphaned(&part, paired, in_last);
    let shown = match part {
        Part::ToolCall {
            tool_name, input, ..
        } if orphan => Part::text(format!(
            "[call of tool {tool_name} with input {input}; its result was not recorded]"
        )),
        Part::ToolResult {
            call_id,
            tool_name,
            output,
            pruned,
            is_error,
        } => {
            let shown = if pruned {
                PRUNED_PLACEHOLDER.to_owned()
            } else {
                output
            };
            if orphan {
                Part::text(format!(
                    "[earlier result of tool {tool_name}, whose call is summarized above]\n{shown}"
                ))
            } else {
                Part::ToolResult {
                    call_id,
                    tool_name,
                    output: shown,
                    is_error,
                    pruned,
                }
            }
        }
        other => other,
    };
    (shown, orphan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::CharEstimator;

    fn input<'a>(
        summary: Option<&'a Summary>,
        state: &'a WorkstreamState,
        messages: &'a [Message],
    ) -> ContextInput<'a> {
        ContextInput {
            summary,
            state,
            memory_block_summary: None,
            memory_entries: &[],
            messages,
            just_auto_compacted: false,
            context_window: 200_000,
            state_text: None,
        }
    }

    fn call(id: i64, call_id: &str) -> Message {
        let input = serde_json::json!({"cmd": "make"});
        Message::new(
            id,
            Role::Assistant,
            vec![Part::tool_call(call_id, "bash", input)],
        )
    }

    fn result(id: i64, call_id: &str, pruned: bool) -> Message {
        let mut part = Part::tool_result(call_id, "bash", "build ok");
        if let Part::ToolResult { pruned: p, .. } = &mut part {
            *p = pruned;
        }
        Message::new(id, Role::Tool, vec![part])
    }

    #[test]
    fn no_summary_and_no_state_means_just_the_messages() {
        let state = WorkstreamState::default();
        let msgs = vec![Message::text(1, Role::User, "hi")];
        let built = build(
            &input(None, &state, &msgs),
            &ContextConfig::default(),
            &CharEstimator::default(),
        );
        assert_eq!(built.messages.len(), 1);
        assert_eq!(built.messages[0].source, Some(MessageId(1)));
    }

    #[test]
    fn the_preamble_comes_first_with_summary_state_and_memory() {
        let summary = Summary {
            key_facts: vec!["uses Postgres 16".into()],
            ..Default::default()
        };
        let mut state = WorkstreamState::default();
        state
            .tasks
            .push(crate::state::StateItem::new("ship it").with_status("open"));
        let msgs = vec![Message::text(9, Role::User, "next")];
        let entries = vec!["likes tabs".to_string()];
        let ci = ContextInput {
            memory_block_summary: Some("- prefers short answers"),
            memory_entries: &entries,
            ..input(Some(&summary), &state, &msgs)
        };
        let built = build(&ci, &ContextConfig::default(), &CharEstimator::default());
        assert_eq!(built.messages.len(), 2);
        assert_eq!(built.messages[0].role, Role::System);
        let Part::Text { text } = &built.messages[0].parts[0] else {
            panic!()
        };
        assert!(text.starts_with("Compacted context summary:\n"));
        for needle in [
            "hand off",
            "KEY FACTS:",
            "- uses Postgres 16",
            "Tasks:",
            "- ship it (open)",
            "prefers short answers",
            "- likes tabs",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }

    #[test]
    fn user_statements_come_first_and_nothing_superseded_reads_as_current() {
        let mut state = WorkstreamState::default();
        for (id, text) in [
            (1, "Set the request timeout to 37s."),
            (2, "Never push to main."),
            (9, "make the timeout 45s"),
        ] {
            state.stated.record(
                crate::stated::extract(&[Message::text(id, Role::User, text)]),
                &crate::stated::StatedCaps::default(),
                crate::evidence::EvidenceConfig::default().scope_messages,
            );
        }
        state
            .key_decisions
            .push(crate::state::StateItem::new("Timeout: 37s"));
        let summary = Summary {
            key_facts: vec!["The request timeout is 37s.".into(), "Use SQLite.".into()],
            conversation_flow: vec![
                "#1 user: Set the request timeout to 37s. → assistant: Done.".into(),
            ],
            open_threads: vec![],
            ..Default::default()
        };
        let msgs = vec![Message::text(10, Role::User, "next")];
        let ci = input(Some(&summary), &state, &msgs);
        let built = build(&ci, &ContextConfig::default(), &CharEstimator::default());
        let Part::Text { text } = &built.messages[0].parts[0] else {
            panic!()
        };
        let current = text
            .find(crate::stated::CURRENT_HEADING)
            .expect("the user's block");
        assert!(current < text.find("Workstream state:").unwrap());
        assert!(
            text.contains("- #2 constraint: Never push to main.\n"),
            "{text}"
        );
        assert!(
            text.contains("- #9 request: make the timeout 45s\n"),
            "{text}"
        );
        let stale: Vec<&str> = text.lines().filter(|l| l.contains("37s")).collect();
        assert_eq!(stale.len(), 4, "{text}");
        for line in stale {
            assert!(line.contains("superseded"), "shown as current: {line}");
        }
        assert!(text.contains("- Use SQLite.\n"));
        assert_eq!(
            preamble_tokens(&ci, &CharEstimator::default()),
            CharEstimator::default().count(text)
        );
    }

    #[test]
    fn a_result_before_its_call_leaves_neither_half_orphaned() {
        let state = WorkstreamState::default();
        let msgs = vec![
            result(1, "x", false),
            call(2, "x"),
            Message::text(3, Role::User, "go on"),
        ];
        let built = build(
            &input(None, &state, &msgs),
            &ContextConfig::default(),
            &CharEstimator::default(),
        );
        assert_eq!(built.orphans_neutralized, 2);
        assert!(built
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .all(|p| matches!(p, Part::Text { .. })));
    }

    #[test]
    fn reused_call_ids_pair_by_position() {
        // The second "c0" call was never answered; its id's earlier result
        // belongs to the first call and must not make it look answered.
        let state = WorkstreamState::default();
        let msgs = vec![
            call(1, "c0"),
            result(2, "c0", false),
            call(3, "c0"),
            Message::text(4, Role::User, "and now?"),
            call(5, "c0"),
            result(6, "c0", false),
        ];
        let built = build(
            &input(None, &state, &msgs),
            &ContextConfig::default(),
            &CharEstimator::default(),
        );
        assert_eq!(built.orphans_neutralized, 1);
        assert!(matches!(&built.messages[0].parts[0], Part::ToolCall { .. }));
        assert!(matches!(
            &built.messages[1].parts[0],
            Part::ToolResult { .. }
        ));
        assert!(
            matches!(&built.messages[2].parts[0], Part::Text { text } if text.contains("not recorded"))
        );
        assert!(matches!(&built.messages[4].parts[0], Part::ToolCall { .. }));
        assert!(matches!(
            &built.messages[5].parts[0],
            Part::ToolResult { .. }
        ));
    }

    #[test]
    fn pruned_output_is_shown_as_the_placeholder() {
        let state = WorkstreamState::default();
        let msgs = vec![call(1, "a"), result(2, "a", true)];
        let built = build(
            &input(None, &state, &msgs),
            &ContextConfig::default(),
            &CharEstimator::default(),
        );
        let Part::ToolResult { output, .. } = &built.messages[1].parts[0] else {
            panic!()
        };
        assert_eq!(output, PRUNED_PLACEHOLDER);
    }

    #[test]
    fn orphaned_results_and_calls_become_text() {
        let state = WorkstreamState::default();
        let msgs = vec![
            result(1, "gone", false),
            call(2, "never-answered"),
            Message::text(3, Role::User, "and now?"),
            call(4, "in-flight"),
        ];
        let built = build(
            &input(None, &state, &msgs),
            &ContextConfig::default(),
            &CharEstimator::default(),
        );
        assert_eq!(built.orphans_neutralized, 2);
        assert!(
            matches!(&built.messages[0].parts[0], Part::Text { text } if text.contains("build ok"))
        );
        assert!(
            matches!(&built.messages[1].parts[0], Part::Text { text } if text.contains("make") && text.contains("not recorded"))
        );
        assert!(
            matches!(&built.messages[3].parts[0], Part::ToolCall { .. }),
            "the last message's call is in flight"
        );
    }

    /// A fact, a thread, and a story of 2,000 steps that cannot fit a
    /// 10,000-token window.
    fn long_summary() -> Summary {
        let mut summary = Summary {
            key_facts: vec!["the one fact".into()],
            open_threads: vec!["what next".into()],
            ..Default::default()
        };
        let story = (0..2_000).map(|i| format!("step {i} of a very long story"));
        summary.conversation_flow.extend(story);
        summary
    }

    #[test]
    fn overflow_guard_shrinks_the_summary_but_keeps_its_sections() {
        let summary = long_summary();
        let state = WorkstreamState::default();
        let msgs = vec![Message::text(1, Role::User, "x".repeat(3_000))];
        let ci = ContextInput {
            context_window: 10_000,
            state_text: None,
            ..input(Some(&summary), &state, &msgs)
        };
        let built = build(&ci, &ContextConfig::default(), &CharEstimator::default());
        assert!(built.summary_bullets_dropped > 0);
        assert!(built.tokens <= 9_500, "{}", built.tokens);
        assert!(!built.over_budget);
        let Part::Text { text } = &built.messages[0].parts[0] else {
            panic!()
        };
        assert!(
            text.contains("the one fact")
                && text.contains("OPEN THREADS:")
                && text.contains("step 1999")
        );
        assert!(!text.contains("step 0 "));
    }

    #[test]
    fn a_handoff9_summary_opens_with_the_framing_which_the_overflow_guard_keeps() {
        // The story becomes the completed work, the fact a technical detail.
        let mut summary = long_summary().into_format(SummaryFormat::Handoff9);
        summary.next_step = vec!["run the load test".into()];
        let state = WorkstreamState::default();
        let msgs = vec![Message::text(1, Role::User, "x".repeat(3_000))];
        for window in [200_000, 10_000] {
            let ci = ContextInput {
                context_window: window,
                state_text: None,
                ..input(Some(&summary), &state, &msgs)
            };
            let built = build(&ci, &ContextConfig::default(), &CharEstimator::default());
            let Part::Text { text } = &built.messages[0].parts[0] else {
                panic!()
            };
            assert!(text.starts_with(HANDOFF9_FRAMING), "{window}: {text}");
            assert!(!text.contains(SUMMARY_HEADER) && !text.contains("KEY FACTS"));
            for section in crate::summary::Section::HANDOFF9 {
                assert!(text.contains(section.heading()), "{window}: {section:?}");
            }
            assert!(text.contains("- the one fact") && text.contains("- run the load test"));
            assert!(text.contains("step 1999"));
            assert_eq!(built.summary_bullets_dropped > 0, window == 10_000);
            assert!(built.tokens <= 9_500 || window > 10_000, "{}", built.tokens);
            assert_eq!(
                preamble_tokens(&ci, &CharEstimator::default()),
                CharEstimator::default().count(&render_preamble(
                    SummaryFormat::Handoff9,
                    Some(&summary),
                    ""
                ))
            );
        }
    }

    /// Branch summaries are attached after the build: built for the window
    /// they leave, the whole stays under the guard (it went over by their
    /// size when the guard did not count them).
    #[test]
    fn the_guard_leaves_room_for_what_is_attached_after_the_build() {
        use crate::branch::{self, Attached};
        let summary = long_summary();
        let state = WorkstreamState::default();
        let msgs = vec![Message::text(1, Role::User, "x".repeat(3_000))];
        let attached = [Attached {
            branch_point: MessageId(1),
            text: "branch: ".repeat(600),
        }];
        let estimator = CharEstimator::default();
        let reserved = branch::tokens(&attached, &estimator);
        assert!(reserved > 1_000, "{reserved}");
        let config = ContextConfig::default();
        let built_for = |window| {
            let ci = ContextInput {
                context_window: window,
                state_text: None,
                ..input(Some(&summary), &state, &msgs)
            };
            let mut built = build(&ci, &config, &estimator);
            branch::attach(&mut built, &attached, &estimator);
            built
        };
        let unaware = built_for(10_000);
        assert!(unaware.tokens > 9_500, "over the guard: {}", unaware.tokens);
        let aware = built_for(window_leaving(
            10_000,
            reserved,
            config.overflow_guard_ratio,
        ));
        assert!(aware.tokens <= 9_500, "{}", aware.tokens);
        assert!(aware.summary_bullets_dropped > unaware.summary_bullets_dropped);
        assert_eq!(window_leaving(0, reserved, 0.95), 0, "unlimited stays so");
        assert_eq!(window_leaving(10_000, 0, 0.95), 10_000);
        assert_eq!(window_leaving(100, 1_000, 0.95), 1);
    }

    #[test]
    fn a_tail_too_big_for_the_window_is_reported() {
        let state = WorkstreamState::default();
        let msgs = vec![Message::text(1, Role::User, "x".repeat(60_000))];
        let ci = ContextInput {
            context_window: 10_000,
            state_text: None,
            ..input(None, &state, &msgs)
        };
        assert!(build(&ci, &ContextConfig::default(), &CharEstimator::default()).over_budget);
    }

    #[test]
    fn continue_message_follows_an_automatic_compaction_when_enabled() {
        let state = WorkstreamState::default();
        let msgs = vec![Message::text(1, Role::User, "hi")];
        let config = ContextConfig {
            continue_after_auto: true,
            ..Default::default()
        };
        let ci = ContextInput {
            just_auto_compacted: true,
            ..input(None, &state, &msgs)
        };
        let built = build(&ci, &config, &CharEstimator::default());
        assert_eq!(
            built.messages.last().unwrap().parts,
            vec![Part::text(CONTINUE_MESSAGE)]
        );
        let off = build(&ci, &ContextConfig::default(), &CharEstimator::default());
        assert_eq!(off.messages.len(), 1);
    }
}
