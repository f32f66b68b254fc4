//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`):
//! OpenAI, vLLM, the llama.cpp server, Ollama, gateways.

use super::completion::{LlmRequest, LlmResponse, TokenUsage};
use super::error::LlmError;
use super::wire;

/// The endpoint under `base_url` (given without a trailing slash).
pub(crate) fn endpoint(base_url: &str) -> String {
    format!("{base_url}/chat/completions")
}

#[derive(serde::Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

#[derive(serde::Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

/// The request body: a system message (left out when empty) and the user
/// message.
pub(crate) fn body(model: &str, request: &LlmRequest<'_>, temperature: Option<f64>) -> Vec<u8> {
    let mut messages = Vec::with_capacity(2);
    if !request.system.is_empty() {
        messages.push(Message {
            role: "system",
            content: request.system,
        });
    }
    messages.push(Message {
        role: "user",
        content: request.user,
    });
    wire::to_json(&Body {
        model,
        messages,
        max_tokens: request.max_output_tokens,
        temperature,
    })
}

#[derive(serde::Deserialize)]
struct Reply {
    choices: Vec<Choice>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(serde::Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ReplyMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(serde::Deserialize)]
struct ReplyMessage {
    /// A string; some gateways send an array of `{type: "text", text}`
    /// parts; `null` when the model produced no text.
    #[serde(default)]
    content: Option<serde_json::Value>,
}

#[derive(serde::Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// Reads a successful reply. The text may be empty; the caller decides.
pub(crate) fn parse(
    body: &[u8],
    requested_model: &str,
    key: Option<&str>,
) -> Result<LlmResponse, LlmError> {
    let value = wire::json(body, key)?;
    let reply: Reply = wire::shape(value)?;
    let choice = reply.choices.into_iter().next();
    let text = choice
        .as_ref()
        .and_then(|c| c.message.as_ref())
        .and_then(|m| m.content.as_ref())
        .map(content_text)
        .unwrap_or_default();
    let truncated = choice
        .as_ref()
        .and_then(|c| c.finish_reason.as_deref())
        .is_some_and(|r| r == "length");
    let usage = reply
        .usage
        .map_or_else(TokenUsage::default, |u| TokenUsage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
        });
    Ok(LlmResponse {
        text,
        model: reply
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        usage,
        truncated,
    })
}

fn content_text(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(|t| t.as_str()) == Some("text"))
            .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
            .collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_both_messages_and_the_budget() {
        let r = LlmRequest {
            system: "sys",
            user: "usr",
            max_output_tokens: 500,
        };
        let v: serde_json::Value = serde_json::from_slice(&body("m", &r, Some(0.0))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "model": "m",
                "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "usr"}],
                "max_tokens": 500,
                "temperature": 0.0
            })
        );
        let v: serde_json::Value =
            serde_json::from_slice(&body("m", &LlmRequest { system: "", ..r }, None)).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 1);
        assert!(v.get("temperature").is_none());
    }

    #[test]
    fn replies_are_read_leniently() {
        let r = parse(
            br#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}]}"#,
            "asked",
            None,
        )
        .unwrap();
        assert_eq!(r.text, "hi");
        assert!(r.truncated);
        assert_eq!(r.model, "asked");
        assert_eq!(r.usage, TokenUsage::default());

        let r = parse(
            br#"{"model":"m-2024","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2}}"#,
            "asked",
            None,
        )
        .unwrap();
        assert_eq!(r.text, "ab");
        assert!(!r.truncated);
        assert_eq!(r.model, "m-2024");
        assert_eq!(
            r.usage,
            TokenUsage {
                input_tokens: 10,
                output_tokens: 2
            }
        );

        for empty in [
            r#"{"choices":[{"message":{"content":null}}]}"#,
            r#"{"choices":[]}"#,
        ] {
            assert_eq!(parse(empty.as_bytes(), "m", None).unwrap().text, "");
        }
    }

    #[test]
    fn wrong_shapes_are_malformed() {
        for bad in [r#"{"id":"x"}"#, r#"{"choices":{}}"#, "[]"] {
            assert!(
                matches!(
                    parse(bad.as_bytes(), "m", None),
                    Err(LlmError::Malformed { .. })
                ),
                "{bad}"
            );
        }
    }
}
