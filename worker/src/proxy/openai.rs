//! OpenAI Chat Completions on the wire: a request's `messages` read into
//! compactor's messages, compactor's context written back as `messages`,
//! and the model's answer (a whole response, or the chunks of a stream)
//! read into the message the proxy stores.
//!
//! What is read is what compactor models (text, tool calls and results,
//! files and images by reference). What is sent on is the client's own
//! JSON wherever a message is forwarded as it was: only messages the
//! context changed (the summary, a tool half whose partner was compacted)
//! are written from compactor's parts.

use std::collections::HashMap;

use compactor_producer::client::IncomingMessage;
use compactor_shared::context::ContextMessage;
use compactor_shared::trigger::Usage;
use compactor_shared::{Part, Role};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// A request message, read.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Read {
    /// `system` or `developer`: instructions the client sends every turn.
    /// Not stored (they are not the conversation), forwarded as sent.
    Instructions,
    /// A message of the conversation.
    Message { role: Role, parts: Vec<Part> },
}

/// Why a request's messages could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ReadError {
    #[error("`messages` is missing or not an array")]
    NoMessages,
    #[error("messages[{index}]: {reason}")]
    Message { index: usize, reason: String },
}

/// Reads every message of a request body's `messages`.
pub(super) fn read_messages(body: &Value) -> Result<Vec<Read>, ReadError> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or(ReadError::NoMessages)?;
    let mut tool_of = ToolNames::new();
    messages
        .iter()
        .enumerate()
        .map(|(index, m)| read_message(index, m, &mut tool_of))
        .collect()
}

/// The tool each call id names, from the calls read so far: a tool
/// result names its call only, the call says which tool it was.
pub(super) type ToolNames = HashMap<String, String>;

/// Reads the message at `index` of a request's `messages`; the tool calls
/// it makes go into `tool_of`.
pub(super) fn read_message(
    index: usize,
    m: &Value,
    tool_of: &mut ToolNames,
) -> Result<Read, ReadError> {
    let bad = |reason: &str| ReadError::Message {
        index,
        reason: reason.to_owned(),
    };
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no `role`"))?;
    let content = m.get("content").unwrap_or(&Value::Null);
    let (role, mut parts) = match role {
        "system" | "developer" => return Ok(Read::Instructions),
        "user" => (Role::User, content_parts(content).map_err(|r| bad(&r))?),
        "assistant" => {
            let mut parts = content_parts(content).map_err(|r| bad(&r))?;
            if let Some(refusal) = m.get("refusal").and_then(Value::as_str) {
                parts.push(Part::text(refusal));
            }
            for call in m
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                let function = call.get("function").unwrap_or(&Value::Null);
                let name = function
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                tool_of.insert(id.to_owned(), name.to_owned());
                parts.push(tool_call(id, name, function.get("arguments")));
            }
            (Role::Assistant, parts)
        }
        "tool" | "function" => {
            let call_id = m
                .get("tool_call_id")
                .and_then(Value::as_str)
                .or_else(|| m.get("name").and_then(Value::as_str))
                .unwrap_or_default();
            let tool_name = m
                .get("name")
                .and_then(Value::as_str)
                .or_else(|| tool_of.get(call_id).map(String::as_str))
                .unwrap_or_default();
            let result = Part::ToolResult {
                call_id: call_id.to_owned(),
                tool_name: tool_name.to_owned(),
                output: text_of(content),
                is_error: false,
                pruned: false,
            };
            (Role::Tool, vec![result])
        }
        other => return Err(bad(&format!("unknown role {other:?}"))),
    };
    settle(&mut parts);
    Ok(Read::Message { role, parts })
}

/// A message's parts as compactor names them. An empty text says nothing
/// beside other parts: SDKs write `""` or `null` for an answer that only
/// calls tools, and a message's name must not depend on which (else the
/// answer stored would not be found when the client sends it back). A
/// message of nothing is still a message of the history: one empty text.
pub(super) fn settle(parts: &mut Vec<Part>) {
    if parts.len() > 1 {
        parts.retain(|p| !matches!(p, Part::Text { text } if text.is_empty()));
    }
    if parts.is_empty() {
        parts.push(Part::text(""));
    }
}

/// A tool call; its `arguments` string is kept as JSON when it is JSON
/// (what a summarizer reads best), else as the string.
fn tool_call(id: &str, name: &str, arguments: Option<&Value>) -> Part {
    let input = match arguments {
        Some(Value::String(s)) => {
            serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
        }
        Some(other) => other.clone(),
        None => Value::Null,
    };
    Part::ToolCall {
        call_id: id.to_owned(),
        tool_name: name.to_owned(),
        input,
    }
}

/// The parts of a `content`: a string, an array of parts, or null.
fn content_parts(content: &Value) -> Result<Vec<Part>, String> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(vec![Part::text(s.clone())]),
        Value::Array(items) => items.iter().map(content_part).collect(),
        _ => Err("`content` is neither a string nor an array".to_owned()),
    }
}

fn content_part(item: &Value) -> Result<Part, String> {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
    let str_at = |path: &[&str]| {
        path.iter()
            .try_fold(item, |v, k| v.get(*k))
            .and_then(Value::as_str)
    };
    Ok(match kind {
        "text" => Part::text(str_at(&["text"]).unwrap_or_default()),
        "refusal" => Part::text(str_at(&["refusal"]).unwrap_or_default()),
        "image_url" => file(str_at(&["image_url", "url"]).unwrap_or_default(), None),
        "input_audio" => Part::File {
            uri: digest_uri(str_at(&["input_audio", "data"]).unwrap_or_default()),
            media_type: str_at(&["input_audio", "format"]).map(|f| format!("audio/{f}")),
            name: None,
        },
        "file" => {
            let name = str_at(&["file", "filename"]).map(str::to_owned);
            match str_at(&["file", "file_id"]) {
                Some(id) => file(id, name),
                None => file(str_at(&["file", "file_data"]).unwrap_or_default(), name),
            }
        }
        other => return Err(format!("unknown content part {other:?}")),
    })
}

/// A file or image by reference: a URL or id as given; inline data (a
/// `data:` URL of megabytes) by its digest, which still tells one image
/// from another.
fn file(uri: &str, name: Option<String>) -> Part {
    let (uri, media_type) = match uri.strip_prefix("data:") {
        Some(rest) => (
            digest_uri(uri),
            rest.split([';', ',']).next().map(str::to_owned),
        ),
        None => (uri.to_owned(), None),
    };
    Part::File {
        uri,
        media_type,
        name,
    }
}

pub(super) fn digest_uri(data: &str) -> String {
    let digest = Sha256::digest(data.as_bytes());
    format!("data:sha256,{}", hex(&digest[..16]))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// The text of a `content` (a tool's output): a string, or its text parts
/// joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A context message written as a Chat Completions message: the summary
/// and messages the context changed (those the client sent as they were
/// go on as sent). A tool result with no call left becomes text already
/// (the context neutralizes orphans).
pub(super) fn write_message(m: &ContextMessage) -> Value {
    let text = || {
        m.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    match m.role {
        Role::System => json!({"role": "system", "content": text()}),
        Role::User => json!({"role": "user", "content": text()}),
        Role::Tool => {
            let result = m.parts.iter().find_map(|p| match p {
                Part::ToolResult {
                    call_id, output, ..
                } => Some((call_id, output)),
                _ => None,
            });
            match result {
                Some((call_id, output)) => {
                    json!({"role": "tool", "tool_call_id": call_id, "content": output})
                }
                // A result whose call was compacted, turned into text by
                // the context: a tool message would name no call.
                None => json!({"role": "user", "content": text()}),
            }
        }
        Role::Assistant => {
            let calls: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall {
                        call_id,
                        tool_name,
                        input,
                    } => Some(json!({
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool_name, "arguments": arguments(input)},
                    })),
                    _ => None,
                })
                .collect();
            let mut out = Map::new();
            out.insert("role".into(), "assistant".into());
            let text = text();
            out.insert(
                "content".into(),
                if text.is_empty() && !calls.is_empty() {
                    Value::Null
                } else {
                    text.into()
                },
            );
            if !calls.is_empty() {
                out.insert("tool_calls".into(), calls.into());
            }
            Value::Object(out)
        }
    }
}

fn arguments(input: &Value) -> String {
    match input {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The answer of a non-streamed completion: its first choice's message,
/// and the usage it reports.
pub(super) fn read_answer(response: &Value) -> (Option<IncomingMessage>, Option<Usage>) {
    let message = response
        .pointer("/choices/0/message")
        .map(|m| json!({"messages": [m]}))
        .and_then(|body| read_messages(&body).ok())
        .and_then(|mut read| read.pop())
        .and_then(|read| match read {
            Read::Message { role, parts } if !parts.is_empty() => {
                Some(IncomingMessage::new(role, parts))
            }
            _ => None,
        });
    (message, response.get("usage").and_then(usage))
}

/// OpenAI's usage in compactor's terms: cached prompt tokens are read from
/// the cache, the rest are input.
fn usage(u: &Value) -> Option<Usage> {
    let prompt = u.get("prompt_tokens")?.as_u64()?;
    let cached = u
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(prompt);
    Some(Usage {
        input_tokens: prompt - cached,
        cache_read_tokens: cached,
        output_tokens: u
            .get("completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    })
}

/// The answer of a streamed completion, put together chunk by chunk.
#[derive(Debug, Default)]
pub(super) struct StreamedAnswer {
    text: String,
    /// Tool calls by their `index` in the deltas: id, name, arguments.
    calls: Vec<(String, String, String)>,
    usage: Option<Usage>,
}

impl StreamedAnswer {
    /// Takes in one chunk (the JSON of one `data:` event).
    pub(super) fn chunk(&mut self, chunk: &Value) {
        if let Some(u) = chunk.get("usage").and_then(usage) {
            self.usage = Some(u);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            })
        else {
            return;
        };
        let Some(delta) = choice.get("delta") else {
            return;
        };
        for key in ["content", "refusal"] {
            if let Some(text) = delta.get(key).and_then(Value::as_str) {
                self.text.push_str(text);
            }
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .map_or(self.calls.len(), |i| i as usize);
            if index >= self.calls.len() {
                self.calls.resize(index + 1, Default::default());
            }
            let slot = &mut self.calls[index];
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                slot.0.push_str(id);
            }
            if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                slot.1.push_str(name);
            }
            if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str) {
                slot.2.push_str(args);
            }
        }
    }

    /// The message streamed (none when nothing was), and the usage.
    pub(super) fn finish(self) -> (Option<IncomingMessage>, Option<Usage>) {
        let mut parts = Vec::new();
        if !self.text.is_empty() {
            parts.push(Part::text(self.text));
        }
        for (id, name, args) in self.calls {
            parts.push(tool_call(&id, &name, Some(&Value::String(args))));
        }
        let message = (!parts.is_empty()).then(|| IncomingMessage::new(Role::Assistant, parts));
        (message, self.usage)
    }
}

/// What an upstream's 400 says when the prompt was longer than the
/// model's window (OpenAI's `context_length_exceeded`, and the wording
/// compatible servers use), lower-cased.
pub(super) const TOO_LONG: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "too many tokens",
    "prompt is too long",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_s_messages_are_read_with_tool_calls_and_results() {
        let body = json!({"messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "-3 °C"},
        ]});
        let read = read_messages(&body).unwrap();
        assert_eq!(read[0], Read::Instructions);
        let Read::Message { parts, .. } = &read[1] else {
            panic!()
        };
        assert_eq!(parts[0], Part::text("Weather in Oslo?"));
        assert!(
            matches!(&parts[1], Part::File { uri, media_type: Some(t), .. }
            if uri.starts_with("data:sha256,") && t == "image/png")
        );
        let Read::Message { parts, .. } = &read[2] else {
            panic!()
        };
        assert_eq!(
            parts[0],
            Part::ToolCall {
                call_id: "c1".into(),
                tool_name: "weather".into(),
                input: json!({"city": "Oslo"}),
            }
        );
        let Read::Message { parts, .. } = &read[3] else {
            panic!()
        };
        assert!(
            matches!(&parts[0], Part::ToolResult { tool_name, output, .. }
            if tool_name == "weather" && output == "-3 °C")
        );
    }

    #[test]
    fn an_answer_that_only_calls_a_tool_reads_the_same_with_empty_or_no_content() {
        let call = json!([{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]);
        let read = |content: Value| {
            read_messages(&json!({"messages": [
                {"role": "assistant", "content": content, "tool_calls": call}]}))
            .unwrap()
        };
        assert_eq!(read(json!("")), read(Value::Null));
        assert_eq!(
            read(json!([{"type": "text", "text": ""}])),
            read(Value::Null)
        );
        let nothing = read_messages(&json!({"messages": [{"role": "assistant", "content": null}]}));
        assert_eq!(
            nothing.unwrap(),
            vec![Read::Message {
                role: Role::Assistant,
                parts: vec![Part::text("")]
            }]
        );
    }

    #[test]
    fn a_message_of_unknown_role_is_refused_by_index() {
        let err = read_messages(&json!({"messages": [{"role": "user", "content": "a"},
            {"role": "robot", "content": "b"}]}))
        .unwrap_err();
        assert_eq!(err.to_string(), "messages[1]: unknown role \"robot\"");
        assert_eq!(
            read_messages(&json!({})).unwrap_err(),
            ReadError::NoMessages
        );
    }

    #[test]
    fn a_streamed_answer_is_the_same_message_as_the_whole_one() {
        let whole = json!({"choices": [{"index": 0, "message": {"role": "assistant",
            "content": "Checking.", "tool_calls": [{"id": "c9", "type": "function",
            "function": {"name": "search", "arguments": "{\"q\":\"x\"}"}}]}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 9,
                "prompt_tokens_details": {"cached_tokens": 100}}});
        let mut streamed = StreamedAnswer::default();
        for chunk in [
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Check"}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "ing."}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c9",
                "type": "function", "function": {"name": "search", "arguments": "{\"q\""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
                "function": {"arguments": ":\"x\"}"}}]}}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 9,
                "prompt_tokens_details": {"cached_tokens": 100}}}),
        ] {
            streamed.chunk(&chunk);
        }
        let (a, ua) = read_answer(&whole);
        let (b, ub) = streamed.finish();
        assert_eq!(a, b);
        assert_eq!(ua, ub);
        assert_eq!(
            ua,
            Some(Usage {
                input_tokens: 20,
                cache_read_tokens: 100,
                output_tokens: 9
            })
        );
    }

    #[test]
    fn what_the_context_changed_is_written_back_as_chat_messages() {
        let summary = ContextMessage {
            role: Role::System,
            parts: vec![Part::text("Summary: …")],
            source: None,
        };
        assert_eq!(
            write_message(&summary),
            json!({"role": "system", "content": "Summary: …"})
        );
        let call = ContextMessage {
            role: Role::Assistant,
            parts: vec![Part::ToolCall {
                call_id: "c1".into(),
                tool_name: "f".into(),
                input: json!({"a": 1}),
            }],
            source: None,
        };
        assert_eq!(
            write_message(&call),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]})
        );
    }
}
