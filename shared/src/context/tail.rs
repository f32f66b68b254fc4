//! A workstream's un-compacted messages kept ready for its next contexts.
//!
//! Why: at 10k messages a context is megabytes of history, and all of it
//! but the turn's new messages was in the context of the turn before.
//! Building it from scratch — copying every message, counting its tokens,
//! writing it as JSON — is most of `GET …/context` once the history is kept
//! between reads. A [`PreparedTail`] does that work once per message, when
//! the message is added; a context over it ([`TailContext`]) computes only
//! its framing (the preamble, the overflow guard) and the few messages
//! shown otherwise than prepared: those with a tool half whose partner is
//! not in the tail, which depends on the whole tail and so on each turn.
//!
//! What it gives is exactly what [`super::build_owned`] gives for the same
//! messages, and its JSON exactly serde's of those messages (tests below).

use std::collections::{BTreeMap, HashMap};

use crate::message::{Message, Part};
use crate::tokens::TokenEstimator;

use super::{
    continue_message, frame, orphaned, show_part, BuiltContext, ContextConfig, ContextInput,
    ContextMessage,
};

/// A message [`PreparedTail::push`] could not write as JSON.
#[derive(Debug)]
pub struct Unwritable {
    pub message: Message,
    pub error: serde_json::Error,
}

/// Un-compacted messages, in order, each with its tokens and its JSON as a
/// context message when its tool halves are paired (pruned output shown as
/// the placeholder), computed when it was added.
#[derive(Debug, Clone, Default)]
pub struct PreparedTail {
    /// The messages; those before `front` are dropped (see
    /// [`PreparedTail::drop_front`]), and so are their entries below.
    messages: Vec<Message>,
    /// Per message: its tokens as shown when paired.
    tokens: Vec<u64>,
    /// Every message's JSON, one after the other.
    json: Vec<u8>,
    /// Per message: where its JSON ends in `json`.
    ends: Vec<usize>,
    /// How many messages at the front are dropped.
    front: usize,
    /// The tokens of the messages not dropped.
    live_tokens: u64,
    /// Which tool halves have their partner among the messages not dropped.
    pairs: Pairs,
}

impl PreparedTail {
    /// Adds `message`, which follows every message of the tail. A message
    /// serde cannot write (none can be: a bug) is given back with the
    /// error, and the tail is left as it was.
    pub fn push(
        &mut self,
        message: Message,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), Box<Unwritable>> {
        let shown = ContextMessage {
            role: message.role,
            // Paired, and as if last: no part is an orphan (which are is
            // known per turn: `Pairs`).
            parts: message
                .parts
                .iter()
                .map(|p| show_part(p.clone(), true, true).0)
                .collect(),
            source: Some(message.id),
        };
        let start = self.json.len();
        if let Err(error) = serde_json::to_writer(&mut self.json, &shown) {
            self.json.truncate(start);
            return Err(Box::new(Unwritable { message, error }));
        }
        self.ends.push(self.json.len());
        let tokens = estimator.message_tokens(&message);
        self.tokens.push(tokens);
        self.live_tokens += tokens;
        self.pairs.push(&message, self.messages.len());
        self.messages.push(message);
        Ok(())
    }

    /// Drops the `n` oldest messages (all of them when there are fewer): a
    /// window that moves as messages are appended. Their memory is given
    /// back once the dropped outnumber the kept (so dropping is amortized
    /// constant time per message).
    pub fn drop_front(&mut self, n: usize) {
        let from = self.front;
        self.front = (self.front + n).min(self.messages.len());
        self.pairs.drop_messages(&self.messages, from, self.front);
        self.live_tokens -= self.tokens[from..self.front].iter().sum::<u64>();
        if self.front == 0 || self.front < self.len() {
            return;
        }
        let base = self.ends[self.front - 1];
        self.messages.drain(..self.front);
        self.tokens.drain(..self.front);
        self.ends.drain(..self.front);
        self.json.drain(..base);
        for end in &mut self.ends {
            *end -= base;
        }
        self.pairs.rebase(self.front);
        self.front = 0;
    }

    /// The messages, given back.
    pub fn into_messages(mut self) -> Vec<Message> {
        self.messages.drain(..self.front);
        self.messages
    }

    /// The messages, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages[self.front..]
    }

    /// The newest message.
    pub fn last(&self) -> Option<&Message> {
        self.messages().last()
    }

    pub fn len(&self) -> usize {
        self.messages.len() - self.front
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// About how many bytes the tail holds (its JSON, and the messages,
    /// about as big again, with their allocations): what a cache charges.
    pub fn bytes(&self) -> u64 {
        const PER_MESSAGE: usize = 160;
        (2 * self.json.len() + PER_MESSAGE * self.messages.len()) as u64
    }

    /// The JSON of message `i` (of [`PreparedTail::messages`]).
    fn json_of(&self, i: usize) -> &[u8] {
        let k = self.front + i;
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        &self.json[start..self.ends[k]]
    }

    /// The context [`super::build`] builds from `input` with these
    /// messages (`input.messages` is ignored).
    pub fn context<'a>(
        &'a self,
        input: &ContextInput<'_>,
        config: &ContextConfig,
        estimator: &dyn TokenEstimator,
    ) -> TailContext<'a> {
        let pairs = &self.pairs;
        let last = self.messages.len().saturating_sub(1);
        let mut rewritten = Vec::new();
        let mut orphans = 0;
        let mut tail_tokens = self.live_tokens;
        // Only messages with a half whose partner is missing can show
        // otherwise than prepared.
        for &mi in pairs.unpaired.range(self.front..).map(|(mi, _)| mi) {
            let m = &self.messages[mi];
            let first = pairs.first_part[mi];
            let paired = |pi: usize| pairs.partner[first + pi].is_some();
            if !m
                .parts
                .iter()
                .enumerate()
                .any(|(pi, part)| orphaned(part, paired(pi), mi == last))
            {
                continue;
            }
            let parts: Vec<Part> = m
                .parts
                .iter()
                .enumerate()
                .map(|(pi, part)| {
                    let (shown, orphan) = show_part(part.clone(), paired(pi), mi == last);
                    orphans += usize::from(orphan);
                    shown
                })
                .collect();
            tail_tokens -= self.tokens[mi];
            tail_tokens += parts.iter().map(|p| estimator.part_tokens(p)).sum::<u64>();
            rewritten.push((
                mi - self.front,
                ContextMessage {
                    role: m.role,
                    parts,
                    source: Some(m.id),
                },
            ));
        }
        let continued = continue_message(input, config);
        if let Some(c) = &continued {
            tail_tokens += c
                .parts
                .iter()
                .map(|p| estimator.part_tokens(p))
                .sum::<u64>();
        }
        let framed = frame(input, tail_tokens, config, estimator);
        TailContext {
            tail: self,
            preamble: framed.preamble,
            rewritten,
            continued,
            tokens: framed.tokens,
            summary_bullets_dropped: framed.summary_bullets_dropped,
            orphans_neutralized: orphans,
            over_budget: framed.over_budget,
        }
    }
}

/// Which tool halves of a list of messages have their partner in it, kept
/// as messages are added and dropped (a tail does not go over its whole
/// history each turn; `sanitize` pairs a list by adding its messages).
///
/// Pairing is by position, as the boundary pairs: a result pairs with the
/// nearest earlier unanswered call of its id (in an earlier message or the
/// same one), so clients that reuse call ids per request are paired right.
/// Dropping the oldest messages only unpairs the results whose call was
/// dropped: a result's call comes before it, and every call between a
/// result and its call was answered first.
#[derive(Debug, Clone, Default)]
pub(super) struct Pairs {
    /// Per message (by index in the list): its first part's number.
    pub(super) first_part: Vec<usize>,
    /// Per part: the message it is in.
    message_of: Vec<usize>,
    /// Per part: its partner's number, while both are in the list.
    pub(super) partner: Vec<Option<usize>>,
    /// Per call id: its unanswered calls, oldest first.
    open: HashMap<String, Vec<usize>>,
    /// Messages with halves that have no partner, and how many.
    unpaired: BTreeMap<usize, u32>,
}

impl Pairs {
    fn unpair(&mut self, message: usize) {
        *self.unpaired.entry(message).or_default() += 1;
    }

    fn paired(&mut self, message: usize) {
        if let Some(n) = self.unpaired.get_mut(&message) {
            *n -= 1;
            if *n == 0 {
                self.unpaired.remove(&message);
            }
        }
    }

    /// Adds the parts of `message`, message `mi` of the list.
    pub(super) fn push(&mut self, message: &Message, mi: usize) {
        let first = self.partner.len();
        self.first_part.push(first);
        for (pi, part) in message.parts.iter().enumerate() {
            let at = first + pi;
            self.message_of.push(mi);
            self.partner.push(None);
            match part {
                Part::ToolCall { call_id, .. } => {
                    self.open.entry(call_id.clone()).or_default().push(at);
                    self.unpair(mi);
                }
                Part::ToolResult { call_id, .. } => {
                    let call = self.open.get_mut(call_id.as_str()).and_then(Vec::pop);
                    if self.open.get(call_id.as_str()).is_some_and(Vec::is_empty) {
                        self.open.remove(call_id.as_str());
                    }
                    match call {
                        Some(call) => {
                            self.partner[call] = Some(at);
                            self.partner[at] = Some(call);
                            self.paired(self.message_of[call]);
                        }
                        None => self.unpair(mi),
                    }
                }
                _ => {}
            }
        }
    }

    /// Drops messages `from..to` of `messages` (the oldest in the tail).
    fn drop_messages(&mut self, messages: &[Message], from: usize, to: usize) {
        let live = self
            .first_part
            .get(to)
            .copied()
            .unwrap_or(self.partner.len());
        for (mi, message) in messages.iter().enumerate().take(to).skip(from) {
            self.unpaired.remove(&mi);
            let first = self.first_part[mi];
            for (pi, part) in message.parts.iter().enumerate() {
                let Part::ToolCall { call_id, .. } = part else {
                    continue;
                };
                match self.partner[first + pi] {
                    // Its result stays: now without a partner.
                    Some(result) if result >= live => {
                        self.partner[result] = None;
                        self.unpair(self.message_of[result]);
                    }
                    Some(_) => {}
                    None => {
                        if let Some(calls) = self.open.get_mut(call_id.as_str()) {
                            calls.retain(|&c| c != first + pi);
                            if calls.is_empty() {
                                self.open.remove(call_id.as_str());
                            }
                        }
                    }
                }
            }
        }
    }

    /// Renumbers after the first `messages` messages (all dropped) were
    /// removed from the tail's vectors.
    fn rebase(&mut self, messages: usize) {
        let parts = self
            .first_part
            .get(messages)
            .copied()
            .unwrap_or(self.partner.len());
        self.first_part.drain(..messages);
        self.first_part.iter_mut().for_each(|f| *f -= parts);
        self.message_of.drain(..parts);
        self.message_of.iter_mut().for_each(|m| *m -= messages);
        self.partner.drain(..parts);
        self.partner.iter_mut().flatten().for_each(|p| *p -= parts);
        self.open.values_mut().flatten().for_each(|c| *c -= parts);
        self.unpaired = std::mem::take(&mut self.unpaired)
            .into_iter()
            .map(|(m, n)| (m - messages, n))
            .collect();
    }
}

/// A context over a [`PreparedTail`], not copied out of it: the fields of
/// a [`BuiltContext`], whose messages are [`TailContext::to_built`] or
/// [`TailContext::write_messages_json`].
#[derive(Debug)]
pub struct TailContext<'a> {
    tail: &'a PreparedTail,
    preamble: Option<ContextMessage>,
    /// Messages shown otherwise than prepared, by their index in the tail,
    /// in order.
    rewritten: Vec<(usize, ContextMessage)>,
    continued: Option<ContextMessage>,
    pub tokens: u64,
    pub summary_bullets_dropped: usize,
    pub orphans_neutralized: usize,
    pub over_budget: bool,
}

impl TailContext<'_> {
    /// The context's messages, one by one: the preamble, each message of the
    /// tail (`Err(i)`: the tail's message `i` as prepared), the continuation.
    fn each(&self, mut f: impl FnMut(Result<&ContextMessage, usize>)) {
        if let Some(p) = &self.preamble {
            f(Ok(p));
        }
        let mut rewritten = self.rewritten.iter().peekable();
        for i in 0..self.tail.len() {
            match rewritten.next_if(|(j, _)| *j == i) {
                Some((_, m)) => f(Ok(m)),
                None => f(Err(i)),
            }
        }
        if let Some(c) = &self.continued {
            f(Ok(c));
        }
    }

    /// The context as [`super::build`] returns it (its messages copied).
    pub fn to_built(&self) -> BuiltContext {
        let mut messages = Vec::with_capacity(self.tail.len() + 2);
        self.each(|m| {
            messages.push(match m {
                Ok(m) => m.clone(),
                Err(i) => {
                    let m = &self.tail.messages()[i];
                    ContextMessage {
                        role: m.role,
                        parts: m
                            .parts
                            .iter()
                            .map(|p| show_part(p.clone(), true, true).0)
                            .collect(),
                        source: Some(m.id),
                    }
                }
            });
        });
        BuiltContext {
            messages,
            tokens: self.tokens,
            summary_bullets_dropped: self.summary_bullets_dropped,
            orphans_neutralized: self.orphans_neutralized,
            over_budget: self.over_budget,
        }
    }

    /// Appends the context's messages to `out` as a JSON array: the bytes
    /// `serde_json` writes for [`TailContext::to_built`]'s `messages`, the
    /// tail's prepared ones copied as they are.
    pub fn write_messages_json(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        out.reserve(self.tail.json.len() + self.tail.len() + 2);
        out.push(b'[');
        let mut first = true;
        let mut failed = None;
        self.each(|m| {
            if failed.is_some() {
                return;
            }
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            match m {
                Ok(m) => {
                    if let Err(err) = serde_json::to_writer(&mut *out, m) {
                        failed = Some(err);
                    }
                }
                Err(i) => out.extend_from_slice(self.tail.json_of(i)),
            }
        });
        if let Some(err) = failed {
            return Err(err);
        }
        out.push(b']');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::{build_owned, ContextInput};
    use super::*;
    use crate::message::{MessageId, Role};
    use crate::state::WorkstreamState;
    use crate::summary::Summary;
    use crate::tokens::CharEstimator;

    /// A part of a few shapes, tool halves among few call ids (so halves
    /// pair, repeat and go missing).
    fn part() -> impl Strategy<Value = Part> {
        prop_oneof![
            "[a-z \"\\\\\u{e9}\u{1F600}\n]{0,12}".prop_map(Part::text),
            "[a-z ]{0,8}".prop_map(|t| Part::Reasoning { text: t }),
            (0..4u8, "[a-z]{0,6}").prop_map(|(c, arg)| Part::tool_call(
                format!("c{c}"),
                "bash",
                serde_json::json!({ "cmd": arg, "n": c })
            )),
            (0..4u8, "[a-z\n]{0,8}", any::<bool>(), any::<bool>()).prop_map(
                |(c, out, pruned, is_error)| Part::ToolResult {
                    call_id: format!("c{c}"),
                    tool_name: "bash".into(),
                    output: out,
                    pruned,
                    is_error,
                }
            ),
        ]
    }

    fn messages() -> impl Strategy<Value = Vec<Message>> {
        prop::collection::vec(
            (
                prop_oneof![Just(Role::User), Just(Role::Assistant), Just(Role::Tool)],
                prop::collection::vec(part(), 0..4),
                any::<bool>(),
            ),
            0..12,
        )
        .prop_map(|ms| {
            ms.into_iter()
                .enumerate()
                .map(|(i, (role, parts, pinned))| Message {
                    id: MessageId(i as i64 * 3 + 1),
                    role,
                    parts,
                    pinned,
                })
                .collect()
        })
    }

    /// The stored messages a built context shows, by id (for the check
    /// that a tail holds the same messages).
    fn expected_messages(built: &BuiltContext) -> Vec<MessageId> {
        built.messages.iter().filter_map(|m| m.source).collect()
    }

    proptest! {
        /// Whatever the messages, their orphans and the framing, a context
        /// over the prepared tail is the one `build_owned` builds, and its
        /// JSON is serde's.
        #[test]
        fn a_context_over_a_prepared_tail_is_the_built_one(
            msgs in messages(),
            rounds in prop::collection::vec((0usize..6, 0usize..5), 1..5),
            with_summary in any::<bool>(),
            auto in any::<bool>(),
            window in prop_oneof![Just(0u64), Just(60u64), Just(200_000u64)],
            chars_per_token in 1u32..6,
        ) {
            let estimator = CharEstimator::new(chars_per_token);
            let summary = Summary {
                key_facts: vec!["uses Postgres 16".into(), "deploys on Fridays".into()],
                conversation_flow: vec!["set up the build".into(), "fixed the tests".into()],
                ..Default::default()
            };
            let state = WorkstreamState::default();
            let input = ContextInput {
                summary: with_summary.then_some(&summary),
                state: &state,
                memory_block_summary: None,
                memory_entries: &[],
                messages: &[],
                just_auto_compacted: auto,
                context_window: window,
                state_text: None,
            };
            let config = ContextConfig {
                continue_after_auto: true,
                ..ContextConfig::default()
            };
            // Rounds of some pushed, then the oldest dropped (a window that
            // moves on), then the rest pushed: the context of what is left,
            // checked after every round.
            let mut tail = PreparedTail::default();
            let (mut pushed, mut dropped) = (0, 0);
            let mut rest = msgs.iter().cloned();
            for (i, &(push, drop)) in rounds.iter().enumerate() {
                let push = if i + 1 == rounds.len() { usize::MAX } else { push };
                for m in rest.by_ref().take(push) {
                    tail.push(m, &estimator).unwrap();
                    pushed += 1;
                }
                let drop = drop.min(pushed - dropped);
                tail.drop_front(drop);
                dropped += drop;
                let now = build_owned(&input, msgs[dropped..pushed].to_vec(), &config, &estimator);
                prop_assert_eq!(&tail.context(&input, &config, &estimator).to_built(), &now);
            }
            let expected = build_owned(&input, msgs[dropped..].to_vec(), &config, &estimator);
            let ids: Vec<MessageId> = tail.messages().iter().map(|m| m.id).collect();
            prop_assert_eq!(ids, expected_messages(&expected));
            let context = tail.context(&input, &config, &estimator);
            prop_assert_eq!(&context.to_built(), &expected);
            let mut json = Vec::new();
            context.write_messages_json(&mut json).unwrap();
            prop_assert_eq!(
                String::from_utf8(json).unwrap(),
                serde_json::to_string(&expected.messages).unwrap()
            );
        }
    }

    #[test]
    fn a_call_shown_as_running_is_an_orphan_once_a_message_follows() {
        let estimator = CharEstimator::default();
        let state = WorkstreamState::default();
        let input = ContextInput {
            summary: None,
            state: &state,
            memory_block_summary: None,
            memory_entries: &[],
            messages: &[],
            just_auto_compacted: false,
            context_window: 0,
            state_text: None,
        };
        let config = ContextConfig::default();
        let mut tail = PreparedTail::default();
        let call = Part::tool_call("c1", "bash", serde_json::json!({"cmd": "make"}));
        tail.push(Message::new(1, Role::Assistant, vec![call]), &estimator)
            .unwrap();
        let running = tail.context(&input, &config, &estimator);
        assert_eq!(
            running.orphans_neutralized, 0,
            "the last message's call may run"
        );
        tail.push(Message::text(2, Role::User, "never mind"), &estimator)
            .unwrap();
        let after = tail.context(&input, &config, &estimator).to_built();
        assert_eq!(after.orphans_neutralized, 1);
        assert!(
            matches!(&after.messages[0].parts[0], Part::Text { text } if text.starts_with("[call of tool bash"))
        );
    }
}
