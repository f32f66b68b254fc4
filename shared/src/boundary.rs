//! Where to cut: which un-compacted messages are folded into the summary
//! (the prefix) and which stay verbatim (the tail).
//!
//! Rules, in the order they are applied:
//! 1. Keep the last `tail_messages` (6, the seed's `WORKSTREAM_RAW_TAIL_MESSAGES`).
//! 2. If `keep_recent_tokens` is set, move the cut earlier until the tail
//!    holds at least that many tokens (pi keeps 20,000).
//! 3. If `max_tail_tokens` is set, move the cut later until the tail fits,
//!    so one enormous recent turn cannot keep the context overflowing.
//! 4. A cut never separates a tool call from its result: it moves earlier to
//!    the call (or, when rule 3 forbids that, later past the result). A tool
//!    call still waiting for its result in the latest turn is never
//!    compacted (its result would arrive as an orphan); an unanswered call
//!    from an older turn is abandoned and may be compacted.
//! 5. Pinned messages, and the partners of their tool calls and results,
//!    stay uncompacted wherever they are.
//!
//! When the cut lands inside a turn (the user message that started it is
//! compacted, its continuation is kept), the plan says so: the summarizer is
//! told to record what was asked (pi's split turn), because the kept tail
//! would otherwise begin with an answer to a question nobody can see.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::message::{Message, MessageId, Part};
use crate::tokens::TokenEstimator;

/// Boundary settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BoundaryConfig {
    /// Messages kept verbatim at the end (at least).
    pub tail_messages: usize,
    /// Also keep at least this many tokens verbatim.
    pub keep_recent_tokens: Option<u64>,
    /// Never keep more than this many tokens verbatim (wins over the two
    /// above); at least one message is always kept.
    pub max_tail_tokens: Option<u64>,
}

impl Default for BoundaryConfig {
    fn default() -> Self {
        BoundaryConfig {
            tail_messages: 6,
            keep_recent_tokens: None,
            max_tail_tokens: None,
        }
    }
}

/// What one compaction will do to a list of un-compacted messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPlan {
    /// Indices (into the planned slice, ascending) of the messages to fold
    /// into the summary and mark compacted.
    pub compact: Vec<usize>,
    /// Indices before the cut kept uncompacted because they are pinned (or
    /// the partner of a pinned message's tool call or result).
    pub kept_pinned: Vec<usize>,
    /// Index of the first message of the verbatim tail.
    pub tail_start: usize,
    /// The new `last_compacted_message_id`: the last message before the cut.
    pub watermark: MessageId,
    /// Index of the user message that started a turn which the cut splits.
    pub split_turn: Option<usize>,
}

/// A tool part, as far as planning cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRef {
    Call(String),
    Result(String),
}

/// What planning needs to know of a message, without its content, so a
/// workstream of any length can be planned with a few dozen bytes per
/// message in memory (the content is streamed separately).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageShape {
    pub id: MessageId,
    pub tokens: u64,
    pub pinned: bool,
    pub starts_turn: bool,
    /// Tool calls and results, in part order.
    pub tools: Vec<ToolRef>,
}

impl MessageShape {
    pub fn of(message: &Message, estimator: &dyn TokenEstimator) -> MessageShape {
        MessageShape {
            id: message.id,
            tokens: estimator.message_tokens(message),
            pinned: message.pinned,
            starts_turn: message.starts_turn(),
            tools: message
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall { call_id, .. } => Some(ToolRef::Call(call_id.clone())),
                    Part::ToolResult { call_id, .. } => Some(ToolRef::Result(call_id.clone())),
                    _ => None,
                })
                .collect(),
        }
    }
}

/// Plans a compaction of `messages` (the un-compacted ones, in order).
/// `None` when there is nothing that may be compacted.
pub fn plan(
    messages: &[Message],
    config: &BoundaryConfig,
    estimator: &dyn TokenEstimator,
) -> Option<CompactionPlan> {
    let shapes: Vec<MessageShape> = messages
        .iter()
        .map(|m| MessageShape::of(m, estimator))
        .collect();
    plan_shapes(&shapes, config)
}

/// [`plan`] over the shapes of the messages.
pub fn plan_shapes(messages: &[MessageShape], config: &BoundaryConfig) -> Option<CompactionPlan> {
    let n = messages.len();
    if n < 2 {
        return None;
    }
    // suffix[i] = tokens of messages[i..]
    let mut suffix = vec![0u64; n + 1];
    for i in (0..n).rev() {
        suffix[i] = suffix[i + 1].saturating_add(messages[i].tokens);
    }
    let pairs = Pairs::of(messages);

    // At least one message is always kept verbatim: a context that is only
    // a summary has nothing for the model to answer.
    let mut cut = n.saturating_sub(config.tail_messages.max(1));
    if let Some(keep) = config.keep_recent_tokens {
        while cut > 0 && suffix[cut] < keep {
            cut -= 1;
        }
    }
    let mut forced_later = false;
    if let Some(max) = config.max_tail_tokens {
        while cut < n - 1 && suffix[cut] > max {
            cut += 1;
            forced_later = true;
        }
    }

    let earlier = (1..=cut).rev().find(|&c| pairs.valid_cut(c));
    let later = || (cut.max(1)..n).find(|&c| pairs.valid_cut(c));
    let cut = match earlier {
        // Rule 3 moved the cut later: honour it, compacting past the pair
        // rather than keeping it, when the earlier valid cut is too big.
        Some(c) if forced_later && config.max_tail_tokens.is_some_and(|max| suffix[c] > max) => {
            later().unwrap_or(c)
        }
        Some(c) => c,
        None if forced_later => later()?,
        None => return None,
    };

    let pinned = pairs.pinned_closure(messages, cut);
    let (kept_pinned, compact): (Vec<usize>, Vec<usize>) = (0..cut).partition(|i| pinned[*i]);
    if compact.is_empty() {
        return None;
    }
    let first_kept = messages.get(cut)?;
    let watermark = messages.get(cut.checked_sub(1)?)?.id;
    let split_turn = if first_kept.starts_turn {
        None
    } else {
        (0..cut).rev().find(|&i| messages[i].starts_turn)
    };
    Some(CompactionPlan {
        compact,
        kept_pinned,
        tail_start: cut,
        watermark,
        split_turn,
    })
}

/// Where each tool call and its result(s) are, and which cuts they forbid.
struct Pairs {
    /// (call index, result index) for every answered call.
    spans: Vec<(usize, usize)>,
    /// `blocked[c] > 0` when a cut before index `c` would straddle a pair
    /// or compact a pending call. Built with a difference array so planning
    /// stays linear in the number of messages and parts.
    blocked: Vec<u32>,
}

impl Pairs {
    /// A result pairs with the nearest earlier unanswered call of its id:
    /// clients that restart call ids per request reuse them, and pairing
    /// with the *first* call of an id would make one span cover everything
    /// between its uses and forbid every cut inside it.
    fn of(messages: &[MessageShape]) -> Pairs {
        let n = messages.len();
        // Unanswered calls per id, most recent last.
        let mut open: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut spans = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            for tool in &m.tools {
                match tool {
                    ToolRef::Call(call_id) => {
                        open.entry(call_id.as_str()).or_default().push(i);
                    }
                    ToolRef::Result(call_id) => {
                        if let Some(c) = open.get_mut(call_id.as_str()).and_then(Vec::pop) {
                            spans.push((c, i));
                        }
                    }
                }
            }
        }
        let last_turn_start = messages.iter().rposition(|m| m.starts_turn).unwrap_or(0);
        // diff over cut positions 0..=n
        let mut diff = vec![0i64; n + 2];
        for &(call, result) in &spans {
            // cuts call+1 ..= result are invalid
            diff[call + 1] += 1;
            diff[result + 1] -= 1;
        }
        for &at in open.values().flatten() {
            if at >= last_turn_start {
                // cuts after a pending call of the latest turn are invalid
                diff[at + 1] += 1;
                diff[n + 1] -= 1;
            }
        }
        let mut blocked = Vec::with_capacity(n + 1);
        let mut running = 0i64;
        for d in diff.iter().take(n + 1) {
            running += d;
            blocked.push(u32::try_from(running).unwrap_or(u32::MAX));
        }
        Pairs { spans, blocked }
    }

    /// A cut before index `c` is valid when no call/result pair straddles
    /// it and no pending call of the latest turn would be compacted.
    fn valid_cut(&self, c: usize) -> bool {
        self.blocked.get(c).is_some_and(|&b| b == 0)
    }

    /// Which messages before `cut` stay uncompacted: pinned ones and,
    /// transitively, the partners of their tool pairs.
    fn pinned_closure(&self, messages: &[MessageShape], cut: usize) -> Vec<bool> {
        let mut keep: Vec<bool> = messages[..cut].iter().map(|m| m.pinned).collect();
        loop {
            let mut changed = false;
            for &(call, result) in &self.spans {
                if call < cut && result < cut && keep[call] != keep[result] {
                    keep[call] = true;
                    keep[result] = true;
                    changed = true;
                }
            }
            if !changed {
                return keep;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;
    use crate::tokens::CharEstimator;

    fn user(id: i64) -> Message {
        Message::text(id, Role::User, format!("question {id}"))
    }
    fn assistant(id: i64) -> Message {
        Message::text(id, Role::Assistant, format!("answer {id}"))
    }
    fn call(id: i64, call_id: &str) -> Message {
        let input = serde_json::json!({"cmd": "ls"});
        Message::new(
            id,
            Role::Assistant,
            vec![Part::tool_call(call_id, "bash", input)],
        )
    }
    fn result(id: i64, call_id: &str) -> Message {
        Message::new(
            id,
            Role::Tool,
            vec![Part::tool_result(call_id, "bash", "ok")],
        )
    }
    fn plan_default(messages: &[Message]) -> Option<CompactionPlan> {
        plan(
            messages,
            &BoundaryConfig::default(),
            &CharEstimator::default(),
        )
    }

    #[test]
    fn keeps_the_last_six_messages() {
        let msgs: Vec<Message> = (1..=10)
            .map(|i| if i % 2 == 1 { user(i) } else { assistant(i) })
            .collect();
        let p = plan_default(&msgs).unwrap();
        assert_eq!(p.tail_start, 4);
        assert_eq!(p.compact, vec![0, 1, 2, 3]);
        assert_eq!(p.watermark, MessageId(4));
        assert_eq!(p.split_turn, None, "message 5 is a user message");
    }

    #[test]
    fn nothing_to_compact_within_the_tail() {
        let msgs: Vec<Message> = (1..=6).map(user).collect();
        assert_eq!(plan_default(&msgs), None);
        assert_eq!(plan_default(&[]), None);
    }

    #[test]
    fn the_cut_moves_earlier_instead_of_separating_a_tool_pair() {
        // 0 user, 1 assistant, 2 user, 3 call, 4 result, 5..=9 assistant/user
        let msgs = vec![
            user(1),
            assistant(2),
            user(3),
            call(4, "c1"),
            result(5, "c1"),
            assistant(6),
            user(7),
            assistant(8),
            user(9),
            assistant(10),
        ];
        let p = plan_default(&msgs).unwrap();
        // the default cut (index 4) would keep the result and compact the call
        assert_eq!(p.tail_start, 3);
        assert_eq!(p.compact, vec![0, 1, 2]);
        assert!(
            p.split_turn.is_some(),
            "turn started at index 2 continues in the tail"
        );
        assert_eq!(p.split_turn, Some(2));
    }

    #[test]
    fn reused_call_ids_pair_by_position_and_compact_normally() {
        // A client that restarts call ids per request: every turn calls
        // "call_0". Each result pairs with the nearest earlier unanswered
        // call of its id, so the pairs are short and the usual cut holds.
        let mut msgs = Vec::new();
        let mut id = 0;
        for _ in 0..10 {
            id += 1;
            msgs.push(user(id));
            id += 1;
            msgs.push(call(id, "call_0"));
            id += 1;
            msgs.push(result(id, "call_0"));
            id += 1;
            msgs.push(assistant(id));
        }
        let p = plan_default(&msgs).unwrap();
        // 40 messages, tail of 6: the default cut (before index 34) would
        // separate the call at 33 from its result at 34, so it moves to 33.
        assert_eq!(p.tail_start, 33, "{p:?}");
        assert_eq!(p.compact.len(), 33);
        assert!(p.kept_pinned.is_empty());
    }

    #[test]
    fn a_reused_id_whose_latest_call_is_pending_keeps_only_that_call() {
        let mut msgs = vec![
            user(1),
            call(2, "call_0"),
            result(3, "call_0"),
            assistant(4),
            user(5),
            assistant(6),
            user(7),
            assistant(8),
            user(9),
        ];
        msgs.push(call(10, "call_0"));
        let p = plan_default(&msgs).unwrap();
        // The pending call (index 9) is in the tail; the answered pair
        // earlier does not block the cut.
        assert_eq!(p.tail_start, 4, "{p:?}");
    }

    #[test]
    fn a_pending_call_in_the_latest_turn_is_never_compacted() {
        let mut msgs: Vec<Message> = (1..=4)
            .map(|i| if i % 2 == 1 { user(i) } else { assistant(i) })
            .collect();
        msgs.push(user(5));
        msgs.push(call(6, "waiting"));
        for i in 7..=12 {
            msgs.push(Message::text(i, Role::Assistant, "thinking aloud"));
        }
        let p = plan_default(&msgs).unwrap();
        assert!(
            p.tail_start <= 5,
            "call at index 5 stays in the tail: {p:?}"
        );
    }

    #[test]
    fn an_abandoned_call_in_an_older_turn_may_be_compacted() {
        let mut msgs = vec![user(1), call(2, "lost")];
        for i in 3..=10 {
            msgs.push(if i % 2 == 1 { user(i) } else { assistant(i) });
        }
        let p = plan_default(&msgs).unwrap();
        assert_eq!(p.tail_start, 4);
        assert!(p.compact.contains(&1));
    }

    #[test]
    fn keep_recent_tokens_extends_the_tail() {
        let msgs: Vec<Message> = (1..=20)
            .map(|i| {
                Message::text(
                    i,
                    if i % 2 == 1 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    "x".repeat(300),
                )
            })
            .collect();
        let config = BoundaryConfig {
            keep_recent_tokens: Some(1_000),
            ..Default::default()
        };
        let p = plan(&msgs, &config, &CharEstimator::default()).unwrap();
        assert_eq!(p.tail_start, 10, "10 messages of 100 tokens");
    }

    #[test]
    fn max_tail_tokens_splits_one_huge_turn() {
        // one turn: a user request followed by 20 tool pairs of 1,000 tokens each
        let mut msgs = vec![user(0)];
        for k in 0..20 {
            let id = 1 + 2 * k;
            msgs.push(call(id, &format!("c{k}")));
            let mut r = result(id + 1, &format!("c{k}"));
            if let Part::ToolResult { output, .. } = &mut r.parts[0] {
                *output = "y".repeat(3_000);
            }
            msgs.push(r);
        }
        let config = BoundaryConfig {
            tail_messages: 6,
            keep_recent_tokens: Some(100_000),
            max_tail_tokens: Some(4_500),
        };
        let p = plan(&msgs, &config, &CharEstimator::default()).unwrap();
        assert!(
            msgs[p.tail_start].tool_calls().next().is_some(),
            "cut lands on a call, never on a result"
        );
        let e = CharEstimator::default();
        let tail: u64 = msgs[p.tail_start..]
            .iter()
            .map(|m| e.message_tokens(m))
            .sum();
        assert!(tail <= 4_500, "tail {tail}");
        assert_eq!(p.split_turn, Some(0));
    }

    #[test]
    fn pinned_messages_and_their_partners_are_never_compacted() {
        let mut msgs = vec![user(1), call(2, "p"), result(3, "p"), assistant(4)];
        msgs[2].pinned = true;
        msgs[0].pinned = true;
        for i in 5..=12 {
            msgs.push(if i % 2 == 1 { user(i) } else { assistant(i) });
        }
        let p = plan_default(&msgs).unwrap();
        assert_eq!(p.kept_pinned, vec![0, 1, 2]);
        assert_eq!(p.compact, vec![3, 4, 5]);
    }

    #[test]
    fn all_pinned_means_nothing_to_compact() {
        let mut msgs: Vec<Message> = (1..=10).map(user).collect();
        for m in &mut msgs[..4] {
            m.pinned = true;
        }
        assert_eq!(plan_default(&msgs), None);
    }
}
