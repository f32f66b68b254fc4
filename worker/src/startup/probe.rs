//! The LLM's start-up probe: one cheap request, the provider's model list,
//! so an operator learns at start-up rather than at the first compaction
//! that the summarizer is unreachable, refuses the key, does not serve the
//! configured model, or serves a context too small for the calls the
//! engine will make.
//!
//! The probe never blocks or fails start-up: it runs in the background and
//! only logs (info on success, with its latency; a WARN naming the cause
//! otherwise). A summarizer that is down is the extractive fallback's job,
//! not a reason to stay down. It sends no completion, so it costs nothing
//! on a metered API and leaves a fake LLM's call log untouched.
//!
//! - OpenAI-compatible servers: `GET {base_url}/models`. The entry whose
//!   `id` (or llama.cpp alias) is the model is looked up, and its context
//!   size read where the server reports one (llama.cpp `meta.n_ctx`, vLLM
//!   `max_model_len`, gateways' `context_length` / `context_window`). A
//!   server without the route (404, 405) is reachable: nothing more is
//!   checked.
//! - Anthropic: `GET /v1/models/{model}` (404: no such model).

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::llm::{LlmConfig, Provider};

/// Longest the probe waits for the server.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most model ids a warning lists.
const LISTED_IDS: usize = 5;

/// What the probe asks and of whom.
#[derive(Clone)]
pub struct Probe {
    provider: Provider,
    /// The URL requested (may carry credentials; never logged as is).
    url: String,
    model: String,
    key: Option<SecretString>,
    /// Tokens one summarization call may need (the engine's estimate).
    call_tokens: u64,
    timeout: Duration,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("provider", &self.provider)
            .field("url", &shown_url(&self.url))
            .field("model", &self.model)
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The server answered and nothing is wrong that it could tell.
    Ready {
        latency: Duration,
        /// The context the server serves the model with, when it says.
        served_context: Option<u64>,
        /// The server has no model list: only reachability was checked.
        unchecked: bool,
    },
    /// No connection, or no answer within the probe's timeout.
    Unreachable { detail: String },
    /// 401 or 403: the key is missing, wrong or not allowed.
    Auth { status: u16 },
    /// The server lists models, and not this one.
    ModelNotFound { listed: Vec<String> },
    /// The server serves a context smaller than one summarization call.
    ContextTooSmall { served: u64, needed: u64 },
    /// Any other answer.
    Unexpected { status: u16, detail: String },
}

impl Probe {
    /// The probe of the configured provider (`None` for `extractive`).
    /// `key` is the one the client sends; `call_tokens` what one
    /// summarization call may need
    /// ([`compactor_shared::config::CallSize::total`]).
    pub fn new(config: &LlmConfig, key: Option<SecretString>, call_tokens: u64) -> Option<Probe> {
        let base = config.effective_base_url()?;
        let model = config.effective_model().to_owned();
        let url = match config.provider {
            Provider::Extractive => return None,
            Provider::OpenAi => format!("{base}/models"),
            Provider::Anthropic if base.ends_with("/v1") => format!("{base}/models/{model}"),
            Provider::Anthropic => format!("{base}/v1/models/{model}"),
        };
        Some(Probe {
            provider: config.provider,
            url,
            model,
            key: key.filter(|k| !k.expose_secret().trim().is_empty()),
            call_tokens,
            timeout: config.request_timeout.min(PROBE_TIMEOUT),
        })
    }

    /// The key as the client reads it: from the variable the configuration
    /// names.
    pub fn key_from_env(config: &LlmConfig) -> Option<SecretString> {
        config
            .effective_api_key_env()
            .and_then(|name| std::env::var(name).ok())
            .map(SecretString::from)
    }

    /// Sends the request and says what it found.
    pub async fn run(&self) -> Finding {
        let started = Instant::now();
        let http = match reqwest::Client::builder()
            .use_rustls_tls()
            .user_agent(concat!("compactor/", env!("CARGO_PKG_VERSION")))
            .timeout(self.timeout)
            .build()
        {
            Ok(http) => http,
            Err(e) => {
                return Finding::Unreachable {
                    detail: format!("cannot build an HTTP client: {e}"),
                }
            }
        };
        let mut request = http.get(&self.url);
        if let Some(key) = &self.key {
            let key = key.expose_secret().trim();
            request = match self.provider {
                Provider::Anthropic => request
                    .header("x-api-key", key)
                    .header("anthropic-version", crate::llm::anthropic::API_VERSION),
                _ => request.bearer_auth(key),
            };
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                return Finding::Unreachable {
                    detail: transport_detail(&e, self.timeout),
                }
            }
        };
        let status = response.status().as_u16();
        let body = match response.bytes().await {
            Ok(b) => b,
            Err(e) => {
                return Finding::Unreachable {
                    detail: transport_detail(&e, self.timeout),
                }
            }
        };
        self.judge(status, &body, started.elapsed())
    }

    /// What an answer means (the pure part of [`Probe::run`]).
    pub fn judge(&self, status: u16, body: &[u8], latency: Duration) -> Finding {
        match status {
            401 | 403 => return Finding::Auth { status },
            200..=299 => {}
            404 if self.provider == Provider::Anthropic => {
                return Finding::ModelNotFound { listed: Vec::new() }
            }
            // No model list on this server: it answered, that is all.
            404 | 405 => {
                return Finding::Ready {
                    latency,
                    served_context: None,
                    unchecked: true,
                }
            }
            _ => {
                return Finding::Unexpected {
                    status,
                    detail: excerpt(body),
                }
            }
        }
        let served_context = match self.provider {
            Provider::OpenAi => {
                let Ok(list) = serde_json::from_slice::<Value>(body) else {
                    return Finding::Unexpected {
                        status,
                        detail: format!("not a model list: {}", excerpt(body)),
                    };
                };
                let entries = list
                    .get("data")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let ours = entries.iter().find(|e| names(e).any(|n| n == self.model));
                match ours {
                    Some(entry) => context_of(entry),
                    None if entries.is_empty() => None,
                    None => {
                        return Finding::ModelNotFound {
                            listed: entries
                                .iter()
                                .filter_map(|e| e.get("id").and_then(Value::as_str))
                                .take(LISTED_IDS)
                                .map(str::to_owned)
                                .collect(),
                        }
                    }
                }
            }
            _ => None,
        };
        match served_context {
            Some(served) if served < self.call_tokens => Finding::ContextTooSmall {
                served,
                needed: self.call_tokens,
            },
            _ => Finding::Ready {
                latency,
                served_context,
                unchecked: false,
            },
        }
    }

    /// Logs `finding`: info when ready, a WARN naming the cause otherwise.
    /// `fallback` says what compactions do meanwhile.
    pub fn report(&self, finding: &Finding, fallback: bool) {
        let url = shown_url(&self.url);
        let meanwhile = if fallback {
            "compactions fall back to the extractive summarizer (marked degraded) while this lasts"
        } else {
            "compactions fail and are retried while this lasts (llm.fallback_to_extractive is off)"
        };
        match finding {
            Finding::Ready {
                latency,
                served_context,
                unchecked,
            } => info!(
                %url,
                latency_ms = crate::telemetry::millis(*latency),
                served_context,
                model_checked = !unchecked,
                "LLM probe: the server answered"
            ),
            Finding::Unreachable { detail } => warn!(
                %url,
                "LLM probe: the server is unreachable ({detail}); {meanwhile}"
            ),
            Finding::Auth { status } => warn!(
                %url,
                status,
                "LLM probe: the server refused the API key (HTTP {status}); check llm.api_key_env; {meanwhile}"
            ),
            Finding::ModelNotFound { listed } => warn!(
                %url,
                model = %self.model,
                listed = %listed.join(", "),
                "LLM probe: the server does not list model {:?} (llm.model / llm.compaction_model); \
                 servers that check the name will refuse every call (llama.cpp answers with the one \
                 model it serves: name it with --alias); {meanwhile}",
                self.model
            ),
            Finding::ContextTooSmall { served, needed } => warn!(
                %url,
                served,
                needed,
                "LLM probe: the server serves a context of {served} tokens, and one summarization \
                 call may need about {needed} (engine.chunk.max_chars, engine.summary.max_output_tokens, \
                 engine.trigger.context_window): lower them or serve a larger context, or calls will \
                 be refused as too long"
            ),
            Finding::Unexpected { status, detail } => warn!(
                %url,
                status,
                "LLM probe: unexpected answer (HTTP {status}): {detail}"
            ),
        }
    }
}

/// The names a model-list entry answers to: its `id`, and llama.cpp's
/// `aliases`.
fn names(entry: &Value) -> impl Iterator<Item = &str> {
    let id = entry.get("id").and_then(Value::as_str);
    let aliases = entry
        .get("aliases")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    id.into_iter().chain(aliases)
}

/// The context size a model-list entry reports, under the names servers
/// use for it.
fn context_of(entry: &Value) -> Option<u64> {
    let number = |v: Option<&Value>| v.and_then(Value::as_u64).filter(|&n| n > 0);
    number(entry.pointer("/meta/n_ctx"))
        .or_else(|| number(entry.get("max_model_len")))
        .or_else(|| number(entry.get("context_length")))
        .or_else(|| number(entry.get("context_window")))
}

/// Why a request got no answer, from the innermost error (the outer ones
/// repeat the URL, which may carry credentials).
fn transport_detail(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("no answer within {timeout:?}");
    }
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if e.is_connect() {
        format!("cannot connect: {cause}")
    } else {
        cause.to_string()
    }
}

/// The start of a body, for a log line.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut cut: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        cut.push('…');
    }
    cut
}

/// `url` as it may be logged: without user name, password or query (a
/// gateway may carry a key in either).
pub fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            // Cannot fail for the http(s) URLs validation lets through.
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "(unparseable URL)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(provider: Provider, model: &str, call_tokens: u64) -> Probe {
        let config = LlmConfig {
            provider,
            model: model.into(),
            base_url: Some("https://user:pw@llm.example/v1/".into()),
            ..LlmConfig::default()
        };
        Probe::new(&config, Some(SecretString::from("sk-secret")), call_tokens).unwrap()
    }

    const MS: Duration = Duration::from_millis(7);

    #[test]
    fn the_extractive_summarizer_has_nothing_to_probe() {
        assert!(Probe::new(&LlmConfig::default(), None, 0).is_none());
    }

    #[test]
    fn urls_are_shown_without_credentials_and_keys_never() {
        let p = probe(Provider::OpenAi, "m", 1);
        let shown = format!("{p:?}");
        for secret in ["pw", "sk-secret"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert_eq!(shown_url(&p.url), "https://llm.example/v1/models");
        assert_eq!(
            shown_url("http://gw.example:8080/v1?api-key=s3cret"),
            "http://gw.example:8080/v1"
        );
        let anthropic = LlmConfig {
            provider: Provider::Anthropic,
            model: "claude-haiku-4-5".into(),
            ..LlmConfig::default()
        };
        let a = Probe::new(&anthropic, None, 1).unwrap();
        assert_eq!(
            a.url,
            "https://api.anthropic.com/v1/models/claude-haiku-4-5"
        );
    }

    #[test]
    fn a_listed_model_with_room_is_ready_and_a_small_context_is_named() {
        let llama = br#"{"object":"list","data":[{"id":"/models/smol.gguf","aliases":["smol"],"meta":{"n_ctx":4096}}]}"#;
        assert_eq!(
            probe(Provider::OpenAi, "smol", 3_000).judge(200, llama, MS),
            Finding::Ready {
                latency: MS,
                served_context: Some(4_096),
                unchecked: false
            }
        );
        assert_eq!(
            probe(Provider::OpenAi, "smol", 5_000).judge(200, llama, MS),
            Finding::ContextTooSmall {
                served: 4_096,
                needed: 5_000
            }
        );
        let vllm = br#"{"data":[{"id":"qwen","max_model_len":2048}]}"#;
        assert!(matches!(
            probe(Provider::OpenAi, "qwen", 3_000).judge(200, vllm, MS),
            Finding::ContextTooSmall { served: 2_048, .. }
        ));
        let openai = br#"{"data":[{"id":"gpt-4o-mini"},{"id":"gpt-4o"}]}"#;
        assert!(matches!(
            probe(Provider::OpenAi, "gpt-4o", 50_000).judge(200, openai, MS),
            Finding::Ready {
                served_context: None,
                ..
            }
        ));
    }

    #[test]
    fn a_model_the_server_does_not_list_is_named_with_what_it_lists() {
        let body = br#"{"data":[{"id":"llama3:8b"},{"id":"qwen2:7b"}]}"#;
        assert_eq!(
            probe(Provider::OpenAi, "mistral", 1).judge(200, body, MS),
            Finding::ModelNotFound {
                listed: vec!["llama3:8b".into(), "qwen2:7b".into()]
            }
        );
        assert_eq!(
            probe(Provider::Anthropic, "claude-nope", 1).judge(404, b"{}", MS),
            Finding::ModelNotFound { listed: vec![] }
        );
    }

    #[test]
    fn refusals_and_odd_answers_are_told_apart() {
        let p = probe(Provider::OpenAi, "m", 1);
        assert_eq!(p.judge(401, b"", MS), Finding::Auth { status: 401 });
        assert_eq!(p.judge(403, b"", MS), Finding::Auth { status: 403 });
        assert_eq!(
            p.judge(404, b"not found", MS),
            Finding::Ready {
                latency: MS,
                served_context: None,
                unchecked: true
            },
            "a server without a model list is reachable, nothing more"
        );
        assert!(matches!(
            p.judge(500, b"boom", MS),
            Finding::Unexpected { status: 500, .. }
        ));
        assert!(matches!(
            p.judge(200, b"<html>", MS),
            Finding::Unexpected { status: 200, .. }
        ));
    }
}
