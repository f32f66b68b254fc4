//! The two wire formats the proxy speaks, behind one set of calls: what
//! differs between OpenAI Chat Completions and Anthropic Messages is how
//! messages, answers and refusals are written, not what the proxy does.

use compactor_producer::client::IncomingMessage;
use compactor_shared::context::ContextMessage;
use compactor_shared::trigger::Usage;
use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::openai::{Read, ReadError, ToolNames};
use super::request::Payload;
use super::{anthropic, openai, Route};

/// A wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire {
    /// `POST /v1/chat/completions`.
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
}

impl Wire {
    pub(super) fn route(self) -> Route {
        match self {
            Wire::OpenAi => Route::ChatCompletions,
            Wire::Anthropic => Route::Messages,
        }
    }

    /// Reads the message at `index` of a request's `messages` (`tool_of`:
    /// the tool calls read before it, which a Chat Completions tool result
    /// names by id only).
    pub(super) fn read_message(
        self,
        index: usize,
        m: &Value,
        tool_of: &mut ToolNames,
    ) -> Result<Read, ReadError> {
        match self {
            Wire::OpenAi => openai::read_message(index, m, tool_of),
            Wire::Anthropic => anthropic::read_message(index, m),
        }
    }

    pub(super) fn write_message(self, m: &ContextMessage) -> Value {
        match self {
            Wire::OpenAi => openai::write_message(m),
            Wire::Anthropic => anthropic::write_message(m),
        }
    }

    pub(super) fn read_answer(self, body: &Value) -> (Option<IncomingMessage>, Option<Usage>) {
        match self {
            Wire::OpenAi => openai::read_answer(body),
            Wire::Anthropic => anthropic::read_answer(body),
        }
    }

    /// Whether an upstream's 400 says the prompt was longer than the
    /// model's window.
    pub(super) fn is_context_length_error(self, body: &[u8]) -> bool {
        let phrases = match self {
            Wire::OpenAi => openai::TOO_LONG,
            Wire::Anthropic => anthropic::TOO_LONG,
        };
        let text = String::from_utf8_lossy(body).to_lowercase();
        phrases.iter().any(|p| text.contains(p))
    }

    /// Puts compactor's preamble (the summary) where this format takes
    /// it: a message before the kept ones (Chat Completions), or after the
    /// system prompt (Messages, whose list opens with the user's turn).
    pub(super) fn place_preamble(
        self,
        body: &mut Map<String, Value>,
        messages: &mut Vec<Out>,
        preamble: &ContextMessage,
    ) {
        match self {
            Wire::OpenAi => messages.push(Out::Written(openai::write_message(preamble))),
            Wire::Anthropic => {
                let system = anthropic::system_with(body.get("system"), preamble);
                body.insert("system".to_owned(), system);
            }
        }
    }

    /// Makes a message list this format accepts.
    pub(super) fn settle(self, payload: &Payload, messages: &mut Vec<Out>) {
        if self == Wire::Anthropic && messages.first().is_some_and(|m| !m.is_user(payload)) {
            messages.insert(0, Out::Written(anthropic::opening()));
        }
    }

    pub(super) fn streamed(self) -> Streamed {
        match self {
            Wire::OpenAi => Streamed::OpenAi(openai::StreamedAnswer::default()),
            Wire::Anthropic => Streamed::Anthropic(anthropic::StreamedAnswer::default()),
        }
    }
}

/// A message of the list sent on.
#[derive(Debug)]
pub(super) enum Out {
    /// One the client sent, as it sent it: its span of the request body.
    Sent(Range<usize>),
    /// One compactor wrote (the summary, a message the context changed).
    Written(Value),
}

impl Out {
    /// Whether it is the user's turn.
    fn is_user(&self, payload: &Payload) -> bool {
        #[derive(Deserialize)]
        struct Role<'a> {
            #[serde(borrow)]
            role: Option<Cow<'a, str>>,
        }
        match self {
            Out::Written(m) => m["role"] == "user",
            Out::Sent(span) => serde_json::from_str::<Role<'_>>(payload.message(span))
                .is_ok_and(|m| m.role.as_deref() == Some("user")),
        }
    }
}

/// The body sent on: the request's fields (`rest`) with `messages`, each
/// message the client sent written as its own bytes.
pub(super) fn write_body(
    payload: &Payload,
    rest: &Map<String, Value>,
    messages: &[Out],
) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(
        messages
            .iter()
            .map(|m| match m {
                Out::Sent(span) => span.len() + 1,
                Out::Written(_) => 256,
            })
            .sum::<usize>()
            + 256,
    );
    out.push(b'{');
    for (key, value) in rest {
        serde_json::to_writer(&mut out, key)?;
        out.push(b':');
        serde_json::to_writer(&mut out, value)?;
        out.push(b',');
    }
    out.extend_from_slice(br#""messages":["#);
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match m {
            Out::Sent(span) => out.extend_from_slice(&payload.raw[span.clone()]),
            Out::Written(value) => serde_json::to_writer(&mut out, value)?,
        }
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}

/// A streamed answer being put together.
#[derive(Debug)]
pub(super) enum Streamed {
    OpenAi(openai::StreamedAnswer),
    Anthropic(anthropic::StreamedAnswer),
}

impl Streamed {
    /// Takes in one event's `data`; `true` once the answer is complete.
    pub(super) fn data(&mut self, data: &[u8]) -> bool {
        match self {
            Streamed::OpenAi(answer) => {
                if data == b"[DONE]" {
                    return true;
                }
                if let Ok(chunk) = serde_json::from_slice::<Value>(data) {
                    answer.chunk(&chunk);
                }
                false
            }
            Streamed::Anthropic(answer) => {
                serde_json::from_slice::<Value>(data).is_ok_and(|event| answer.event(&event))
            }
        }
    }

    pub(super) fn finish(self) -> (Option<IncomingMessage>, Option<Usage>) {
        match self {
            Streamed::OpenAi(answer) => answer.finish(),
            Streamed::Anthropic(answer) => answer.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_length_errors_are_told_from_other_400s() {
        assert!(Wire::OpenAi.is_context_length_error(
            br#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 8192 tokens"}}"#
        ));
        assert!(Wire::Anthropic.is_context_length_error(
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#
        ));
        assert!(!Wire::OpenAi
            .is_context_length_error(br#"{"error":{"message":"Invalid value for temperature"}}"#));
    }
}
