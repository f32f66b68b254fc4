//! Anthropic Messages on the wire: a request's `messages` read into
//! compactor's messages, compactor's context written back, and the
//! model's answer (a whole message, or the events of a stream) read into
//! the message the proxy stores.
//!
//! The system prompt is the request's `system` field, not a message: it
//! goes on as sent, and compactor's summary is added to it (a message
//! list must open with the user's turn).

use compactor_producer::client::IncomingMessage;
use compactor_shared::context::ContextMessage;
use compactor_shared::trigger::Usage;
use compactor_shared::{Part, Role};
use serde_json::{json, Value};

use super::openai::{digest_uri, settle, Read, ReadError};

/// Reads every message of a request body's `messages`.
#[cfg(test)]
pub(super) fn read_messages(body: &Value) -> Result<Vec<Read>, ReadError> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or(ReadError::NoMessages)?;
    messages
        .iter()
        .enumerate()
        .map(|(index, m)| read_message(index, m))
        .collect()
}

/// Reads the message at `index` of a request's `messages`.
pub(super) fn read_message(index: usize, m: &Value) -> Result<Read, ReadError> {
    let bad = |reason: String| ReadError::Message { index, reason };
    let role = match m.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => return Err(bad(format!("unknown role {other:?}"))),
        None => return Err(bad("no `role`".to_owned())),
    };
    let mut parts = match m.get("content") {
        Some(Value::String(s)) => vec![Part::text(s.clone())],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(block)
            .collect::<Result<_, _>>()
            .map_err(bad)?,
        _ => return Err(bad("`content` is neither a string nor an array".to_owned())),
    };
    // Tool results are the user's turn on the wire, a tool's to
    // compactor (when that is all the turn holds).
    let role = if role == Role::User
        && !parts.is_empty()
        && parts.iter().all(|p| matches!(p, Part::ToolResult { .. }))
    {
        Role::Tool
    } else {
        role
    };
    settle(&mut parts);
    Ok(Read::Message { role, parts })
}

/// One content block.
fn block(b: &Value) -> Result<Part, String> {
    let s = |key: &str| b.get(key).and_then(Value::as_str).unwrap_or_default();
    Ok(match s("type") {
        "text" => Part::text(s("text")),
        "thinking" => Part::Reasoning {
            text: s("thinking").to_owned(),
        },
        // Not readable: what it is, not what it says.
        "redacted_thinking" => Part::Reasoning {
            text: String::new(),
        },
        "tool_use" | "server_tool_use" => Part::ToolCall {
            call_id: s("id").to_owned(),
            tool_name: s("name").to_owned(),
            input: b.get("input").cloned().unwrap_or(Value::Null),
        },
        "tool_result" => Part::ToolResult {
            call_id: s("tool_use_id").to_owned(),
            tool_name: String::new(),
            output: match b.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(inner)) => inner
                    .iter()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            },
            is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            pruned: false,
        },
        "image" | "document" => {
            let source = b.get("source").unwrap_or(&Value::Null);
            let field = |k: &str| source.get(k).and_then(Value::as_str);
            let uri = match field("type") {
                Some("url") => field("url").unwrap_or_default().to_owned(),
                Some("file") => field("file_id").unwrap_or_default().to_owned(),
                _ => digest_uri(&source.to_string()),
            };
            Part::File {
                uri,
                media_type: field("media_type").map(str::to_owned),
                name: b.get("title").and_then(Value::as_str).map(str::to_owned),
            }
        }
        other => return Err(format!("unknown content block {other:?}")),
    })
}

/// A context message written as a Messages API message: the messages the
/// context changed (the summary goes into `system`: [`system_with`]).
pub(super) fn write_message(m: &ContextMessage) -> Value {
    let blocks: Vec<Value> = m
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(json!({"type": "text", "text": text})),
            Part::ToolCall {
                call_id,
                tool_name,
                input,
            } => {
                Some(json!({"type": "tool_use", "id": call_id, "name": tool_name, "input": input}))
            }
            Part::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => Some(json!({"type": "tool_result", "tool_use_id": call_id,
                "content": output, "is_error": is_error})),
            Part::File { uri, .. } => {
                Some(json!({"type": "text", "text": format!("[file {uri}]")}))
            }
            // A thinking block cannot be sent back without its signature.
            Part::Reasoning { .. } => None,
        })
        .collect();
    let role = if m.role == Role::Assistant {
        "assistant"
    } else {
        "user"
    };
    json!({"role": role, "content": blocks})
}

/// The request's `system` with compactor's `preamble` after it.
pub(super) fn system_with(system: Option<&Value>, preamble: &ContextMessage) -> Value {
    let text: String = preamble
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let added = json!({"type": "text", "text": text});
    match system {
        Some(Value::String(s)) if !s.is_empty() => json!([{"type": "text", "text": s}, added]),
        Some(Value::Array(blocks)) => {
            let mut blocks = blocks.clone();
            blocks.push(added);
            Value::Array(blocks)
        }
        _ => json!([added]),
    }
}

/// A message list must open with the user's turn: what a context whose
/// kept messages start with the assistant's opens with.
pub(super) fn opening() -> Value {
    json!({"role": "user", "content": "[The earlier conversation is summarized in the system prompt.]"})
}

/// The answer of a whole response, and the usage it reports.
pub(super) fn read_answer(response: &Value) -> (Option<IncomingMessage>, Option<Usage>) {
    let message = response
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| block(b).ok())
                .collect::<Vec<_>>()
        })
        .filter(|parts| !parts.is_empty())
        .map(|mut parts| {
            settle(&mut parts);
            IncomingMessage::new(Role::Assistant, parts)
        });
    (message, response.get("usage").map(usage))
}

fn usage(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("input_tokens") + n("cache_creation_input_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        output_tokens: n("output_tokens"),
    }
}

/// The answer of a stream, put together event by event.
#[derive(Debug, Default)]
pub(super) struct StreamedAnswer {
    /// Blocks by index: the block as started, and its streamed text or
    /// JSON.
    blocks: Vec<(Value, String)>,
    usage: Option<Usage>,
}

impl StreamedAnswer {
    /// Takes in one event's data; `true` once the message is complete.
    pub(super) fn event(&mut self, event: &Value) -> bool {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "message_start" => {
                if let Some(u) = event.pointer("/message/usage") {
                    self.usage = Some(usage(u));
                }
            }
            "content_block_start" => {
                if index >= self.blocks.len() {
                    self.blocks.resize(index + 1, (Value::Null, String::new()));
                }
                self.blocks[index].0 = event.get("content_block").cloned().unwrap_or_default();
            }
            "content_block_delta" => {
                if let Some((_, text)) = self.blocks.get_mut(index) {
                    let delta = event.get("delta").unwrap_or(&Value::Null);
                    for key in ["text", "partial_json", "thinking"] {
                        if let Some(piece) = delta.get(key).and_then(Value::as_str) {
                            text.push_str(piece);
                        }
                    }
                }
            }
            "message_delta" => {
                if let (Some(u), Some(out)) = (
                    self.usage.as_mut(),
                    event
                        .pointer("/usage/output_tokens")
                        .and_then(Value::as_u64),
                ) {
                    u.output_tokens = out;
                }
            }
            "message_stop" => return true,
            _ => {}
        }
        false
    }

    /// The message streamed (none when nothing was), and the usage.
    pub(super) fn finish(self) -> (Option<IncomingMessage>, Option<Usage>) {
        let parts: Vec<Part> = self
            .blocks
            .into_iter()
            .filter_map(|(mut started, streamed)| {
                match started.get("type").and_then(Value::as_str) {
                    Some("text") => started["text"] = Value::String(streamed),
                    Some("thinking") => started["thinking"] = Value::String(streamed),
                    Some("tool_use" | "server_tool_use") if !streamed.is_empty() => {
                        started["input"] =
                            serde_json::from_str(&streamed).unwrap_or(Value::String(streamed));
                    }
                    _ => {}
                }
                block(&started).ok()
            })
            .collect();
        let message = (!parts.is_empty()).then(|| {
            let mut parts = parts;
            settle(&mut parts);
            IncomingMessage::new(Role::Assistant, parts)
        });
        (message, self.usage)
    }
}

/// What an upstream's 400 says when the prompt was longer than the
/// model's window, lower-cased.
pub(super) const TOO_LONG: &[&str] = &["prompt is too long", "context window", "too many tokens"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_use_and_results_are_read_and_a_result_only_turn_is_a_tool_s() {
        let body = json!({"system": "Be brief.", "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "tu1", "name": "weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "-3 °C"}]},
        ]});
        let read = read_messages(&body).unwrap();
        assert_eq!(read.len(), 3);
        let Read::Message { role, parts } = &read[1] else {
            panic!()
        };
        assert_eq!(*role, Role::Assistant);
        assert_eq!(
            parts[1],
            Part::tool_call("tu1", "weather", json!({"city": "Oslo"}))
        );
        let Read::Message { role, parts } = &read[2] else {
            panic!()
        };
        assert_eq!(*role, Role::Tool);
        assert!(
            matches!(&parts[0], Part::ToolResult { call_id, output, .. } if call_id == "tu1" && output == "-3 °C")
        );
    }

    #[test]
    fn a_streamed_answer_is_the_same_message_as_the_whole_one() {
        let whole = json!({"type": "message", "role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "tu9", "name": "search", "input": {"q": "x"}}],
            "usage": {"input_tokens": 20, "cache_read_input_tokens": 100, "output_tokens": 9}});
        let mut streamed = StreamedAnswer::default();
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 20, "cache_read_input_tokens": 100, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Check"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ing."}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "tu9", "name": "search", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"q\":"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"x\"}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        ];
        for e in &events {
            assert!(!streamed.event(e));
        }
        assert!(streamed.event(&json!({"type": "message_stop"})));
        assert_eq!(streamed.finish(), read_answer(&whole));
    }

    #[test]
    fn an_empty_text_block_beside_a_tool_use_names_the_answer_as_without_it() {
        let tool = json!({"type": "tool_use", "id": "tu1", "name": "f", "input": {}});
        let whole = json!({"content": [{"type": "text", "text": ""}, tool]});
        let mut streamed = StreamedAnswer::default();
        for e in [
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_start", "index": 1, "content_block": tool}),
        ] {
            streamed.event(&e);
        }
        let resent =
            read_messages(&json!({"messages": [{"role": "assistant", "content": [tool]}]}))
                .unwrap();
        let Read::Message { parts, .. } = &resent[0] else {
            panic!()
        };
        assert_eq!(read_answer(&whole).0.unwrap().parts, *parts);
        assert_eq!(streamed.finish().0.unwrap().parts, *parts);
    }

    #[test]
    fn the_summary_goes_after_the_system_prompt() {
        let preamble = ContextMessage {
            role: Role::System,
            parts: vec![Part::text("Summary")],
            source: None,
        };
        assert_eq!(
            system_with(Some(&json!("Be brief.")), &preamble),
            json!([{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Summary"}])
        );
        assert_eq!(
            system_with(None, &preamble),
            json!([{"type": "text", "text": "Summary"}])
        );
    }
}
