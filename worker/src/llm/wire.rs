//! JSON helpers both providers share.

use super::error::{excerpt, is_context_length_body, LlmError, EXCERPT_CHARS};

/// Serializes a request body. The bodies are strings, integers and an
/// optional float, which always serialize; should one ever not, the empty
/// body is refused by the server as a bad request.
pub(crate) fn to_json<T: serde::Serialize>(body: &T) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_default()
}

/// Parses a 2xx reply body. An `error` object in it (some gateways answer
/// 200 with one) is a context-length error when it says so, else malformed.
pub(crate) fn json(body: &[u8], key: Option<&str>) -> Result<serde_json::Value, LlmError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| LlmError::Malformed {
            detail: short(format!("reply of {} bytes is not JSON: {e}", body.len())),
        })?;
    if value.get("error").is_some_and(|e| !e.is_null()) {
        return Err(if is_context_length_body(body) {
            LlmError::ContextLength {
                excerpt: excerpt(body, key),
            }
        } else {
            LlmError::Malformed {
                detail: format!("error in a success reply: {}", excerpt(body, key)),
            }
        });
    }
    Ok(value)
}

/// Reads the parsed reply as the provider's reply type.
pub(crate) fn shape<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> Result<T, LlmError> {
    serde_json::from_value(value).map_err(|e| LlmError::Malformed {
        detail: short(format!("reply has an unexpected shape: {e}")),
    })
}

fn short(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(EXCERPT_CHARS) {
        text.truncate(cut);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_json_and_cut_json_are_malformed() {
        for body in ["<html>bad gateway</html>", r#"{"choices":[{"mess"#, ""] {
            assert!(matches!(
                json(body.as_bytes(), None),
                Err(LlmError::Malformed { .. })
            ));
        }
    }

    #[test]
    fn an_error_object_in_a_success_reply_is_classified() {
        assert!(matches!(
            json(br#"{"error":{"message":"upstream failed"}}"#, None),
            Err(LlmError::Malformed { .. })
        ));
        assert!(
            json(br#"{"error":{"message":"context length exceeded"}}"#, None)
                .unwrap_err()
                .is_context_length()
        );
        assert!(json(br#"{"error":null,"choices":[]}"#, None).is_ok());
    }
}
