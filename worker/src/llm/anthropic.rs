//! Anthropic's Messages API (`POST {base_url}/v1/messages`).

use super::completion::{LlmRequest, LlmResponse, TokenUsage};
use super::error::LlmError;
use super::wire;

/// The API version sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// The endpoint under `base_url` (given without a trailing slash); a base
/// that already ends in `/v1` is not given a second one.
pub(crate) fn endpoint(base_url: &str) -> String {
    if base_url.ends_with("/v1") {
        format!("{base_url}/messages")
    } else {
        format!("{base_url}/v1/messages")
    }
}

#[derive(serde::Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u64,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: [Message<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

#[derive(serde::Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

/// The request body: the system prompt (left out when empty) and one user
/// message.
pub(crate) fn body(model: &str, request: &LlmRequest<'_>, temperature: Option<f64>) -> Vec<u8> {
    wire::to_json(&Body {
        model,
        max_tokens: request.max_output_tokens,
        system: request.system,
        messages: [Message {
            role: "user",
            content: request.user,
        }],
        temperature,
    })
}

#[derive(serde::Deserialize)]
struct Reply {
    content: Vec<Block>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(serde::Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(serde::Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

/// Reads a successful reply: the `text` blocks concatenated (thinking and
/// other blocks skipped). The text may be empty; the caller decides.
pub(crate) fn parse(
    body: &[u8],
    requested_model: &str,
    key: Option<&str>,
) -> Result<LlmResponse, LlmError> {
    let value = wire::json(body, key)?;
    let reply: Reply = wire::shape(value)?;
    let text = reply
        .content
        .iter()
        .filter(|b| b.kind == "text")
        .filter_map(|b| b.text.as_deref())
        .collect();
    // Input tokens count cached prompt tokens too: they were all read.
    let usage = reply
        .usage
        .map_or_else(TokenUsage::default, |u| TokenUsage {
            input_tokens: u.input_tokens.unwrap_or(0)
                + u.cache_creation_input_tokens.unwrap_or(0)
                + u.cache_read_input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens.unwrap_or(0),
        });
    Ok(LlmResponse {
        text,
        model: reply
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        usage,
        truncated: reply.stop_reason.as_deref() == Some("max_tokens"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_takes_v1_once() {
        assert_eq!(
            endpoint("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            endpoint("https://gw.example/anthropic/v1"),
            "https://gw.example/anthropic/v1/messages"
        );
    }

    #[test]
    fn the_body_has_system_user_and_the_budget() {
        let r = LlmRequest {
            system: "sys",
            user: "usr",
            max_output_tokens: 700,
        };
        let v: serde_json::Value = serde_json::from_slice(&body("c", &r, None)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "model": "c",
                "max_tokens": 700,
                "system": "sys",
                "messages": [{"role": "user", "content": "usr"}]
            })
        );
    }

    #[test]
    fn text_blocks_are_joined_and_usage_summed() {
        let r = parse(
            br#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"KEY "},{"type":"text","text":"FACTS:"}],"stop_reason":"max_tokens","usage":{"input_tokens":5,"cache_read_input_tokens":100,"output_tokens":3}}"#,
            "asked",
            None,
        )
        .unwrap();
        assert_eq!(r.text, "KEY FACTS:");
        assert!(r.truncated);
        assert_eq!(r.model, "claude-x");
        assert_eq!(
            r.usage,
            TokenUsage {
                input_tokens: 105,
                output_tokens: 3
            }
        );
        let r = parse(br#"{"content":[],"stop_reason":"end_turn"}"#, "asked", None).unwrap();
        assert_eq!((r.text.as_str(), r.truncated), ("", false));
        assert!(matches!(
            parse(br#"{"content":"text"}"#, "asked", None),
            Err(LlmError::Malformed { .. })
        ));
    }
}
