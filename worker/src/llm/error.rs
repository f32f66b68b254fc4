//! What can go wrong with one completion, and how an HTTP failure is
//! classified: retry it, shrink the prompt, or give up.

use std::time::Duration;

use compactor_producer::events::catalogue::LlmOutcome;
use reqwest::StatusCode;

use super::config::LlmConfigError;

/// Longest error excerpt kept from a reply body, in characters.
pub const EXCERPT_CHARS: usize = 300;

/// Why a completion failed. The `Display` carries at most an excerpt of
/// the server's reply, never the request and never the key.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// No complete reply within the request timeout.
    #[error("LLM request timed out after {after:?}")]
    Timeout { after: Duration },
    /// Could not connect, or the connection broke.
    #[error("LLM connection failed: {detail}")]
    Connect { detail: String },
    /// 429, or Anthropic's 529 "overloaded".
    #[error("LLM rate limited (HTTP {status}){}", fmt_retry_after(*retry_after))]
    RateLimited {
        status: u16,
        /// As the server sent it (not capped).
        retry_after: Option<Duration>,
    },
    /// 5xx (and 408).
    #[error("LLM server error (HTTP {status}): {excerpt}")]
    Server { status: u16, excerpt: String },
    /// The prompt is too long for the model: retrying the same request is
    /// useless, a smaller chunk is not.
    #[error("LLM prompt too long for the model's context: {excerpt}")]
    ContextLength { excerpt: String },
    /// Another 4xx: the request itself is wrong (not retried).
    #[error("LLM request refused (HTTP {status}): {excerpt}")]
    BadRequest { status: u16, excerpt: String },
    /// 401/403: the key is missing, wrong or not allowed (not retried).
    #[error("LLM authentication failed (HTTP {status}); check the API key")]
    Auth { status: u16 },
    /// A reply that is not the JSON the API documents (or was cut short).
    #[error("LLM reply malformed: {detail}")]
    Malformed { detail: String },
    /// A well-formed reply without any text.
    #[error("LLM reply has no text content")]
    Empty,
    /// No request was sent: the provider failed `consecutive_failures`
    /// requests in a row and is marked unhealthy until a probe is answered
    /// (see [`super::health`]).
    #[error("LLM provider unhealthy after {consecutive_failures} failed requests in a row; no request sent until a probe is answered")]
    Unhealthy { consecutive_failures: u32 },
    /// Retrying stopped because the next attempt could not finish before
    /// the caller's deadline (`attempts` is 0, `last` a zero timeout, when
    /// the deadline had passed before the first).
    #[error("LLM retries stopped at the deadline after {attempts} attempt(s); last error: {last}")]
    DeadlineExceeded { attempts: u32, last: Box<LlmError> },
    #[error(transparent)]
    Config(#[from] LlmConfigError),
}

fn fmt_retry_after(retry_after: Option<Duration>) -> String {
    retry_after.map_or_else(String::new, |d| format!(", retry after {d:?}"))
}

impl LlmError {
    /// Whether the same request may succeed later. For
    /// [`LlmError::DeadlineExceeded`], whether its last error was.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Timeout { .. }
            | LlmError::Connect { .. }
            | LlmError::RateLimited { .. }
            | LlmError::Server { .. }
            | LlmError::Malformed { .. }
            | LlmError::Empty
            | LlmError::Unhealthy { .. } => true,
            LlmError::ContextLength { .. }
            | LlmError::BadRequest { .. }
            | LlmError::Auth { .. }
            | LlmError::Config(_) => false,
            LlmError::DeadlineExceeded { last, .. } => last.is_retryable(),
        }
    }

    /// The server's `Retry-After` (uncapped), if it sent one with a rate
    /// limit.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } => *retry_after,
            LlmError::DeadlineExceeded { last, .. } => last.retry_after(),
            _ => None,
        }
    }

    /// Whether the prompt was too long for the model.
    pub fn is_context_length(&self) -> bool {
        match self {
            LlmError::ContextLength { .. } => true,
            LlmError::DeadlineExceeded { last, .. } => last.is_context_length(),
            _ => false,
        }
    }

    /// The HTTP status of the reply, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::RateLimited { status, .. }
            | LlmError::Server { status, .. }
            | LlmError::BadRequest { status, .. }
            | LlmError::Auth { status } => Some(*status),
            LlmError::DeadlineExceeded { last, .. } => last.status(),
            _ => None,
        }
    }

    /// Whether this failure shows the provider is not serving us, and so
    /// counts towards marking it unhealthy: connection failures, timeouts,
    /// 5xx, rate limits, 401/403 and malformed replies. A context-length
    /// error or another 4xx is about the request; an empty answer is an
    /// answer.
    pub fn counts_against_health(&self) -> bool {
        match self {
            LlmError::Timeout { .. }
            | LlmError::Connect { .. }
            | LlmError::RateLimited { .. }
            | LlmError::Server { .. }
            | LlmError::Auth { .. }
            | LlmError::Malformed { .. } => true,
            LlmError::ContextLength { .. }
            | LlmError::BadRequest { .. }
            | LlmError::Empty
            | LlmError::Unhealthy { .. }
            | LlmError::Config(_) => false,
            LlmError::DeadlineExceeded { last, .. } => last.counts_against_health(),
        }
    }

    /// A bounded label for metrics: ok is not an error, so one of
    /// rate_limited, server_error, timeout, connect, context_length,
    /// bad_request, auth, malformed, empty, unhealthy, deadline_exceeded,
    /// config. (Per-request metrics never see the last three.)
    pub fn outcome_label(&self) -> &'static str {
        match self.request_outcome() {
            Some(outcome) => outcome.as_str(),
            None => match self {
                LlmError::Unhealthy { .. } => "unhealthy",
                LlmError::DeadlineExceeded { .. } => "deadline_exceeded",
                _ => "config",
            },
        }
    }

    /// The catalogue's `outcome` of one HTTP request that failed so (the
    /// one mapping [`LlmError::outcome_label`] spells too); `None` for the
    /// errors no single request ends with: unhealthy, deadline exceeded,
    /// config.
    pub fn request_outcome(&self) -> Option<LlmOutcome> {
        Some(match self {
            LlmError::Timeout { .. } => LlmOutcome::Timeout,
            LlmError::Connect { .. } => LlmOutcome::Connect,
            LlmError::RateLimited { .. } => LlmOutcome::RateLimited,
            LlmError::Server { .. } => LlmOutcome::ServerError,
            LlmError::ContextLength { .. } => LlmOutcome::ContextLength,
            LlmError::BadRequest { .. } => LlmOutcome::BadRequest,
            LlmError::Auth { .. } => LlmOutcome::Auth,
            LlmError::Malformed { .. } => LlmOutcome::Malformed,
            LlmError::Empty => LlmOutcome::Empty,
            LlmError::Unhealthy { .. }
            | LlmError::DeadlineExceeded { .. }
            | LlmError::Config(_) => return None,
        })
    }

    /// A transport failure from reqwest. The detail is the error and its
    /// causes (refused, reset, TLS), without the URL.
    pub(crate) fn from_transport(error: reqwest::Error, timeout: Duration) -> LlmError {
        // A connect timeout is a connect failure (its detail says so).
        if error.is_timeout() && !error.is_connect() {
            return LlmError::Timeout { after: timeout };
        }
        let error = error.without_url();
        let mut detail = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !detail.contains(&text) {
                detail.push_str(": ");
                detail.push_str(&text);
            }
            source = cause.source();
        }
        if let Some((cut, _)) = detail.char_indices().nth(EXCERPT_CHARS) {
            detail.truncate(cut);
        }
        LlmError::Connect { detail }
    }
}

/// Classifies a non-success reply. `body` is the reply body as received;
/// `key` (when set) is redacted from the excerpt.
pub(crate) fn classify_status(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
    key: Option<&str>,
) -> LlmError {
    let code = status.as_u16();
    match code {
        401 | 403 => LlmError::Auth { status: code },
        // 529: Anthropic's "overloaded", a rate limit of the whole service.
        429 | 529 => LlmError::RateLimited {
            status: code,
            retry_after,
        },
        // 413: the request is too large; a smaller one may pass.
        413 => LlmError::ContextLength {
            excerpt: excerpt(body, key),
        },
        400 | 422 if is_context_length_body(body) => LlmError::ContextLength {
            excerpt: excerpt(body, key),
        },
        408 | 500..=599 => LlmError::Server {
            status: code,
            excerpt: excerpt(body, key),
        },
        _ => LlmError::BadRequest {
            status: code,
            excerpt: excerpt(body, key),
        },
    }
}

/// Phrases servers use when the prompt does not fit the model's context
/// (lower case): OpenAI, vLLM, llama.cpp, Ollama, Mistral, Anthropic,
/// Gemini's OpenAI-compatible endpoint.
const CONTEXT_LENGTH_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "too many tokens",
    "exceeds the available context size",
    "exceed_context_size_error",
    "exceed context limit",
    "prompt is too long",
    "input is too long",
    "exceeds the maximum number of tokens",
];

/// Whether an error body says the prompt is too long: an OpenAI
/// `error.code` of `context_length_exceeded`, or one of the known phrases
/// anywhere in the body (case-insensitive).
pub fn is_context_length_body(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body).to_lowercase();
    CONTEXT_LENGTH_MARKERS.iter().any(|m| text.contains(m))
}

/// At most [`EXCERPT_CHARS`] characters of an error reply: the JSON
/// `error.message` (or an `error` string) when there is one, else the body,
/// whitespace collapsed, with the key (if it was echoed) redacted.
pub fn excerpt(body: &[u8], key: Option<&str>) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let error = v.get("error")?;
        error
            .get("message")
            .and_then(|m| m.as_str())
            .or_else(|| error.as_str())
            .map(str::to_owned)
    });
    let text = message.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let mut text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(key) = key.filter(|k| !k.is_empty()) {
        text = text.replace(key, "[redacted]");
    }
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => {
            text.truncate(cut);
            text.push('…');
            text
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16, body: &str) -> LlmError {
        classify_status(
            StatusCode::from_u16(status).unwrap(),
            None,
            body.as_bytes(),
            None,
        )
    }

    #[test]
    fn context_length_errors_of_known_servers_are_recognised() {
        for body in [
            // OpenAI
            r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            r#"{"error":{"message":"bad","code":"context_length_exceeded"}}"#,
            // vLLM
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
            // llama.cpp server
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#,
            // Ollama
            r#"{"error":"input length exceeds the context length"}"#,
            // Anthropic
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000"}}"#,
            "Input is too long for requested model.",
            "Too many tokens in request",
        ] {
            let e = classify(400, body);
            assert!(e.is_context_length(), "{body}");
            assert!(!e.is_retryable());
        }
        assert!(classify(413, "Request Entity Too Large").is_context_length());
        assert!(classify(422, "prompt is too long").is_context_length());
    }

    #[test]
    fn other_client_errors_are_not_context_length() {
        for body in [
            r#"{"error":{"message":"max_tokens is too large: 100000. This model supports at most 16384 completion tokens.","code":null}}"#,
            r#"{"error":{"message":"The model `gpt-9` does not exist","code":"model_not_found"}}"#,
            "",
        ] {
            let e = classify(400, body);
            assert!(
                matches!(e, LlmError::BadRequest { status: 400, .. }),
                "{body}"
            );
            assert!(!e.is_retryable());
        }
        // A phrase in a 5xx body does not make it a context-length error.
        assert!(matches!(
            classify(500, "prompt is too long"),
            LlmError::Server { .. }
        ));
    }

    #[test]
    fn statuses_are_classified() {
        assert!(matches!(classify(401, ""), LlmError::Auth { status: 401 }));
        assert!(matches!(classify(403, ""), LlmError::Auth { status: 403 }));
        assert!(matches!(
            classify(429, ""),
            LlmError::RateLimited { status: 429, .. }
        ));
        assert!(matches!(
            classify(529, ""),
            LlmError::RateLimited { status: 529, .. }
        ));
        assert!(matches!(
            classify(503, ""),
            LlmError::Server { status: 503, .. }
        ));
        assert!(matches!(
            classify(408, ""),
            LlmError::Server { status: 408, .. }
        ));
        assert!(matches!(
            classify(404, ""),
            LlmError::BadRequest { status: 404, .. }
        ));
        for (e, label, retry) in [
            (classify(429, ""), "rate_limited", true),
            (classify(502, ""), "server_error", true),
            (classify(401, ""), "auth", false),
            (classify(404, ""), "bad_request", false),
            (classify(400, "prompt is too long"), "context_length", false),
            (LlmError::Empty, "empty", true),
            (
                LlmError::Malformed { detail: "x".into() },
                "malformed",
                true,
            ),
            (
                LlmError::Timeout {
                    after: Duration::from_secs(1),
                },
                "timeout",
                true,
            ),
            (LlmError::Connect { detail: "x".into() }, "connect", true),
        ] {
            assert_eq!(e.outcome_label(), label);
            assert_eq!(e.is_retryable(), retry, "{label}");
        }
    }

    #[test]
    fn only_failures_of_the_provider_count_against_its_health() {
        for (e, counts) in [
            (classify(500, ""), true),
            (classify(429, ""), true),
            (classify(401, ""), true),
            (LlmError::Connect { detail: "x".into() }, true),
            (
                LlmError::Timeout {
                    after: Duration::from_secs(1),
                },
                true,
            ),
            (LlmError::Malformed { detail: "x".into() }, true),
            (classify(400, "prompt is too long"), false),
            (classify(404, ""), false),
            (LlmError::Empty, false),
            (
                LlmError::Unhealthy {
                    consecutive_failures: 3,
                },
                false,
            ),
            (
                LlmError::DeadlineExceeded {
                    attempts: 2,
                    last: Box::new(classify(503, "")),
                },
                true,
            ),
        ] {
            assert_eq!(e.counts_against_health(), counts, "{e:?}");
        }
        let unhealthy = LlmError::Unhealthy {
            consecutive_failures: 3,
        };
        assert!(unhealthy.is_retryable(), "the job may try again later");
        assert_eq!(unhealthy.outcome_label(), "unhealthy");
    }

    #[test]
    fn deadline_exceeded_reports_its_last_error() {
        let e = LlmError::DeadlineExceeded {
            attempts: 2,
            last: Box::new(LlmError::RateLimited {
                status: 429,
                retry_after: Some(Duration::from_secs(7)),
            }),
        };
        assert!(e.is_retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(e.status(), Some(429));
        assert_eq!(e.outcome_label(), "deadline_exceeded");
        assert!(e.to_string().contains("after 2 attempt(s)"));
    }

    #[test]
    fn excerpts_are_short_prefer_the_message_and_redact_the_key() {
        let long = "x".repeat(1_000);
        let e = excerpt(long.as_bytes(), None);
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert!(e.ends_with('…'));
        assert_eq!(
            excerpt(br#"{"error":{"message":"model   overloaded\n now"}}"#, None),
            "model overloaded now"
        );
        assert_eq!(excerpt(br#"{"error":"boom"}"#, None), "boom");
        assert_eq!(
            excerpt(b"bad key sk-secret-123 given", Some("sk-secret-123")),
            "bad key [redacted] given"
        );
        assert_eq!(excerpt(b"", None), "(empty body)");
        let multibyte = "é".repeat(400);
        assert_eq!(
            excerpt(multibyte.as_bytes(), None).chars().count(),
            EXCERPT_CHARS + 1
        );
    }
}
