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

use crate::message::{Message, Part};
use crate::tokens::TokenEstimator;

use super::{
    continue_message, frame, show_part, BuiltContext, ContextConfig, ContextInput, ContextMessage,
    Pairing,
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
    messages: Vec<Message>,
    /// Per message: its tokens as shown when paired.
    tokens: Vec<u64>,
    /// Every message's JSON, one after the other.
    json: Vec<u8>,
    /// Per message: where its JSON ends in `json`.
    ends: Vec<usize>,
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
            // Paired, and as if last: no part is an orphan (see
            // `Pairing::has_orphan` for those that are).
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
        self.tokens.push(estimator.message_tokens(&message));
        self.messages.push(message);
        Ok(())
    }

    /// The messages, given back.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    /// The messages, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The newest message.
    pub fn last(&self) -> Option<&Message> {
        self.messages.last()
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// About how many bytes the tail holds (its JSON, and the messages,
    /// about as big again, with their allocations): what a cache charges.
    pub fn bytes(&self) -> u64 {
        const PER_MESSAGE: usize = 160;
        (2 * self.json.len() + PER_MESSAGE * self.messages.len()) as u64
    }

    fn json_of(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.json[start..self.ends[i]]
    }

    /// The context [`super::build`] builds from `input` with these
    /// messages (`input.messages` is ignored).
    pub fn context<'a>(
        &'a self,
        input: &ContextInput<'_>,
        config: &ContextConfig,
        estimator: &dyn TokenEstimator,
    ) -> TailContext<'a> {
        let pairing = Pairing::of(&self.messages);
        let last = self.messages.len().saturating_sub(1);
        let mut rewritten = Vec::new();
        let mut orphans = 0;
        let mut tail_tokens: u64 = 0;
        for (mi, m) in self.messages.iter().enumerate() {
            if !pairing.has_orphan(&self.messages, mi) {
                tail_tokens += self.tokens[mi];
                continue;
            }
            let first = pairing.first_part[mi];
            let parts: Vec<Part> = m
                .parts
                .iter()
                .enumerate()
                .map(|(pi, part)| {
                    let (shown, orphan) =
                        show_part(part.clone(), pairing.paired[first + pi], mi == last);
                    orphans += usize::from(orphan);
                    shown
                })
                .collect();
            tail_tokens += parts.iter().map(|p| estimator.part_tokens(p)).sum::<u64>();
            rewritten.push((
                mi,
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
                    let m = &self.tail.messages[i];
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

    proptest! {
        /// Whatever the messages, their orphans and the framing, a context
        /// over the prepared tail is the one `build_owned` builds, and its
        /// JSON is serde's.
        #[test]
        fn a_context_over_a_prepared_tail_is_the_built_one(
            msgs in messages(),
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
            };
            let config = ContextConfig {
                continue_after_auto: true,
                ..ContextConfig::default()
            };
            let expected = build_owned(&input, msgs.clone(), &config, &estimator);
            let mut tail = PreparedTail::default();
            for m in msgs {
                tail.push(m, &estimator).unwrap();
            }
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
