//! The two wire formats the proxy speaks, behind one set of calls: what
//! differs between OpenAI Chat Completions and Anthropic Messages is how
//! messages, answers and refusals are written, not what the proxy does.

use compactor_producer::client::IncomingMessage;
use compactor_shared::context::ContextMessage;
use compactor_shared::trigger::Usage;
use serde_json::Value;

use super::openai::{Read, ReadError};
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

    pub(super) fn read_messages(self, body: &Value) -> Result<Vec<Read>, ReadError> {
        match self {
            Wire::OpenAi => openai::read_messages(body),
            Wire::Anthropic => anthropic::read_messages(body),
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
        body: &mut Value,
        messages: &mut Vec<Value>,
        preamble: &ContextMessage,
    ) {
        match self {
            Wire::OpenAi => messages.push(openai::write_message(preamble)),
            Wire::Anthropic => {
                body["system"] = anthropic::system_with(body.get("system"), preamble)
            }
        }
    }

    /// Makes a message list this format accepts.
    pub(super) fn settle(self, messages: &mut Vec<Value>) {
        if self == Wire::Anthropic && messages.first().is_some_and(|m| m["role"] != "user") {
            messages.insert(0, anthropic::opening());
        }
    }

    pub(super) fn streamed(self) -> Streamed {
        match self {
            Wire::OpenAi => Streamed::OpenAi(openai::StreamedAnswer::default()),
            Wire::Anthropic => Streamed::Anthropic(anthropic::StreamedAnswer::default()),
        }
    }
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
