//! A request's conversation: its messages named by the chain
//! ([`super::history`]), read where they are new, and taken from the
//! memory of the workstream's last turn ([`super::seen`]) where they are
//! the bytes it was sent then.

use compactor_producer::client::IncomingMessage;
use compactor_shared::context::ContextMessage;
use compactor_shared::{CharEstimator, MessageId, Part, Role, TokenEstimator};
use serde_json::Value;

use super::history::Link;
use super::openai::{Read, ReadError, ToolNames};
use super::request::Payload;
use super::seen::Seen;
use super::wire::Wire;

/// The conversation a request carries.
#[derive(Debug, Clone)]
pub(super) struct Conversation {
    /// For each of the request's messages, the conversation message it is
    /// (`None`: an instruction, which is not stored).
    pub(super) at: Vec<Option<usize>>,
    /// The conversation's messages, oldest first.
    pub(super) messages: Vec<Said>,
    /// The tools the calls so far name (a Chat Completions tool result
    /// names its call only).
    pub(super) tool_of: ToolNames,
    /// How much of it the workstream stores already, as the last turn
    /// left it; `None` when the history is not the last turn's plus more.
    pub(super) known: Option<Known>,
}

/// A message of the conversation.
#[derive(Debug, Clone)]
pub(super) struct Said {
    /// Where it is among the request's messages.
    pub(super) at: usize,
    /// The chain before it.
    pub(super) before: Link,
    /// The chain up to it: its name.
    pub(super) link: Link,
    /// Its estimated tokens.
    pub(super) tokens: u64,
    /// Its role and parts, when read this turn (what the last one did not
    /// have).
    pub(super) read: Option<(Role, Vec<Part>)>,
}

/// The conversation's first messages as the workstream stores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Known {
    /// How many of its first messages are stored.
    pub(super) count: usize,
    /// The newest of them, stored: where what follows is appended.
    pub(super) parent: MessageId,
}

impl Conversation {
    /// Reads the messages at `spans` of a request. Those that are the last
    /// turn's (`seen`), byte for byte and in place, are not read again.
    pub(super) fn read(
        wire: Wire,
        payload: &Payload,
        spans: &[std::ops::Range<usize>],
        seen: Option<&Seen>,
        estimator: &CharEstimator,
    ) -> Result<Conversation, ReadError> {
        let seen = seen.filter(|s| s.is_start_of(payload, spans));
        let mut conversation = match seen {
            Some(seen) => seen.conversation(),
            None => Conversation {
                at: Vec::with_capacity(spans.len()),
                messages: Vec::with_capacity(spans.len()),
                tool_of: ToolNames::new(),
                known: None,
            },
        };
        let mut link = conversation.link();
        for (index, span) in spans.iter().enumerate().skip(conversation.at.len()) {
            let value: Value =
                serde_json::from_str(payload.message(span)).map_err(|e| ReadError::Message {
                    index,
                    reason: e.to_string(),
                })?;
            match wire.read_message(index, &value, &mut conversation.tool_of)? {
                Read::Instructions => conversation.at.push(None),
                Read::Message { role, parts } => {
                    let before = link;
                    link = before.after(role, &parts);
                    let tokens = parts.iter().map(|p| estimator.part_tokens(p)).sum();
                    conversation.at.push(Some(conversation.messages.len()));
                    conversation.messages.push(Said {
                        at: index,
                        before,
                        link,
                        tokens,
                        read: Some((role, parts)),
                    });
                }
            }
        }
        conversation.known = seen.map(|seen| {
            let (count, parent) = seen.stored();
            // The answer the last turn stored, sent back as its first new
            // message: stored too.
            match (seen.answer(), conversation.messages.get(count)) {
                (Some((link, id)), Some(next)) if next.link == link => Known {
                    count: count + 1,
                    parent: id,
                },
                _ => Known { count, parent },
            }
        });
        Ok(conversation)
    }

    /// The chain's end: what names the message after the conversation.
    pub(super) fn link(&self) -> Link {
        self.messages.last().map_or_else(Link::default, |m| m.link)
    }

    /// Whether the request's message `index` is an instruction.
    pub(super) fn is_instruction(&self, index: usize) -> bool {
        self.at.get(index).is_some_and(Option::is_none)
    }

    /// The estimated tokens of messages `from..`.
    pub(super) fn tokens(&self, from: usize) -> u64 {
        self.messages.iter().skip(from).map(|m| m.tokens).sum()
    }

    /// Messages `from..` as messages to store, named by the chain; `None`
    /// when one of them was not read this turn.
    pub(super) fn incoming(&self, from: usize) -> Option<Vec<IncomingMessage>> {
        self.messages
            .iter()
            .skip(from)
            .map(|m| {
                let (role, parts) = m.read.clone()?;
                Some(IncomingMessage::new(role, parts).with_client_id(m.link.id()))
            })
            .collect()
    }

    /// Whether `shown` (a message of the context) is message `i` as the
    /// client sent it: the same role and parts, told by the chain.
    pub(super) fn is_as_sent(&self, i: usize, shown: &ContextMessage) -> bool {
        let Some(sent) = self.messages.get(i) else {
            return false;
        };
        match &sent.read {
            Some((role, parts)) => *role == shown.role && *parts == shown.parts,
            None => sent.before.after(shown.role, &shown.parts) == sent.link,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use std::sync::Arc;

    fn payload(body: &str) -> (Payload, Vec<std::ops::Range<usize>>) {
        let p = Payload::parse(Bytes::copy_from_slice(body.as_bytes())).unwrap();
        let spans = p.spans.clone().unwrap();
        (p, spans)
    }

    fn read(body: &str, seen: Option<&Seen>) -> Conversation {
        let (p, spans) = payload(body);
        Conversation::read(Wire::OpenAi, &p, &spans, seen, &CharEstimator::new(4)).unwrap()
    }

    const TURN: &str = r#"{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"grep","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"found"}]}"#;

    #[test]
    fn a_message_seen_last_turn_is_named_as_if_read_again() {
        let whole = read(TURN, None);
        let (p, spans) = payload(TURN);
        let seen = Seen::of(&p, &spans, Arc::new(whole.clone()), MessageId(7), None);
        let next = TURN.replace(
            r#""content":"found"}]"#,
            r#""content":"found"},{"role":"user","content":"b"}]"#,
        );
        let again = read(&next, None);
        let remembered = read(&next, Some(&seen));
        let links = |c: &Conversation| c.messages.iter().map(|m| m.link).collect::<Vec<_>>();
        assert_eq!(links(&again), links(&remembered));
        assert_eq!(again.at, remembered.at);
        // Only the new message was read; the tool result kept its tool's
        // name though its call was not read again.
        assert_eq!(
            remembered
                .messages
                .iter()
                .map(|m| m.read.is_some())
                .collect::<Vec<_>>(),
            [false, false, false, true]
        );
        assert_eq!(
            remembered.known,
            Some(Known {
                count: 3,
                parent: MessageId(7)
            })
        );
        assert_eq!(remembered.tokens(0), again.tokens(0));
    }

    #[test]
    fn a_history_that_is_not_the_last_turns_plus_more_is_read_whole() {
        let whole = read(TURN, None);
        let (p, spans) = payload(TURN);
        let seen = Seen::of(&p, &spans, Arc::new(whole.clone()), MessageId(7), None);
        // An edited earlier message, the same message shorter: read again.
        for other in [
            TURN.replace(r#""content":"a""#, r#""content":"A""#),
            TURN.replace(
                r#",{"role":"tool","tool_call_id":"c1","content":"found"}"#,
                "",
            ),
        ] {
            let c = read(&other, Some(&seen));
            assert!(c.known.is_none());
            assert!(c.messages.iter().all(|m| m.read.is_some()));
        }
    }

    #[test]
    fn the_answer_stored_last_turn_is_known_when_sent_back() {
        let whole = read(TURN, None);
        let (p, spans) = payload(TURN);
        let answer = whole.link().after(Role::Assistant, &[Part::text("done")]);
        let seen = Seen::of(
            &p,
            &spans,
            Arc::new(whole),
            MessageId(7),
            Some((answer, MessageId(8))),
        );
        let next = TURN.replace(
            r#""content":"found"}]"#,
            r#""content":"found"},{"role":"assistant","content":"done"},{"role":"user","content":"b"}]"#,
        );
        let c = read(&next, Some(&seen));
        assert_eq!(
            c.known,
            Some(Known {
                count: 4,
                parent: MessageId(8)
            })
        );
        // Another answer than the one stored is new.
        let other = next.replace(r#""content":"done""#, r#""content":"not done""#);
        assert_eq!(read(&other, Some(&seen)).known.map(|k| k.count), Some(3));
    }
}
