//! The `[llm]` section of the configuration: which provider, which model,
//! where the key comes from, and how long and how often to try.

use std::time::Duration;

/// Which summarizer the worker uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// The offline extractive summarizer: no network, no key. The
    /// zero-configuration default.
    #[default]
    Extractive,
    /// Any OpenAI-compatible chat-completions server: OpenAI, vLLM, the
    /// llama.cpp server, Ollama, gateways.
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

impl Provider {
    /// The provider's name as configured and as the `provider` metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Extractive => "extractive",
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// The base URL used when none is configured (`None` for extractive).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::Extractive => None,
            Provider::OpenAi => Some("https://api.openai.com/v1"),
            Provider::Anthropic => Some("https://api.anthropic.com"),
        }
    }

    /// The environment variable read for the key when none is configured.
    pub fn default_api_key_env(self) -> Option<&'static str> {
        match self {
            Provider::Extractive => None,
            Provider::OpenAi => Some("OPENAI_API_KEY"),
            Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `[llm]` section. The API key itself is never part of it: only the
/// name of the environment variable that holds it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// `extractive` (default, no network), `openai` or `anthropic`.
    pub provider: Provider,
    /// Default per provider: `https://api.openai.com/v1` (the
    /// chat-completions path is appended) and `https://api.anthropic.com`
    /// (`/v1/messages` is appended; a base already ending in `/v1` gets
    /// `/messages`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model, e.g. `gpt-4o-mini`; required unless extractive.
    pub model: String,
    /// A separate, cheaper model for compaction; used instead of `model`
    /// when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_model: Option<String>,
    /// Name of the environment variable holding the key. Default
    /// `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`. A missing key is accepted only
    /// for `openai` with a non-default `base_url` (a local server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Longest one HTTP request may take, reading the reply included
    /// (shortened to the time left before the caller's deadline). A
    /// CPU-served model may need minutes per call: raise this, and
    /// `worker.lock_duration` with it, since an attempt's deadline cuts a
    /// call too (the worker refuses a timeout its lock duration would cut;
    /// see `Settings::llm_request_room`).
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Retries after the first request, for retryable failures.
    pub max_retries: u32,
    /// First backoff delay; each later one doubles it, plus jitter.
    #[serde(with = "humantime_serde")]
    pub retry_base_delay: Duration,
    /// Longest backoff delay.
    #[serde(with = "humantime_serde")]
    pub retry_max_delay: Duration,
    /// Longest `Retry-After` honoured; a longer one is cut to this.
    #[serde(with = "humantime_serde")]
    pub max_retry_after: Duration,
    /// Sampling temperature. Unset by default: the request then carries
    /// none and the server's default applies, because reasoning models
    /// (OpenAI o-series, gpt-5) refuse any explicit value. Set it (0–0.3)
    /// for steadier summaries from models that accept it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// When the LLM stays unavailable after retries, summarize extractively
    /// (the run is marked degraded) instead of failing the job.
    pub fallback_to_extractive: bool,
    /// Consecutive failed requests (connection, timeout, 5xx, 429, 401/403,
    /// malformed reply) after which the provider is unhealthy: no more
    /// requests, compactions fall back to the extractive summarizer at once,
    /// until a probe is answered (see `llm::health`). 0 turns this off.
    pub unhealthy_after: u32,
    /// While unhealthy, one small probe request is sent this often.
    #[serde(with = "humantime_serde")]
    pub probe_interval: Duration,
    /// An answer cut off at its output budget is asked for once more with
    /// twice the budget, at most this many output tokens (keep it within
    /// the model's output limit).
    pub retry_max_output_tokens: u64,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            provider: Provider::Extractive,
            base_url: None,
            model: String::new(),
            compaction_model: None,
            api_key_env: None,
            request_timeout: Duration::from_secs(120),
            max_retries: 4,
            retry_base_delay: Duration::from_secs(1),
            retry_max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            temperature: None,
            fallback_to_extractive: true,
            unhealthy_after: 3,
            probe_interval: Duration::from_secs(10),
            retry_max_output_tokens: 16_384,
        }
    }
}

/// Why an LLM configuration or client was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmConfigError {
    #[error("invalid llm setting {field}: {problem}")]
    Invalid {
        field: &'static str,
        problem: String,
    },
    /// The key is required and the variable is unset or empty.
    #[error("the {provider} API key is missing: set the environment variable {env_var}")]
    MissingApiKey {
        provider: &'static str,
        env_var: String,
    },
    /// The key cannot be sent in an HTTP header (its value is not shown).
    #[error("the API key in {env_var} contains characters not allowed in an HTTP header")]
    InvalidApiKey { env_var: String },
    /// `provider = "extractive"` needs no client.
    #[error("provider \"extractive\" makes no LLM requests; there is no client to build")]
    Extractive,
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(String),
}

impl LlmConfig {
    /// Checks the settings; does not read the environment.
    pub fn validate(&self) -> Result<(), LlmConfigError> {
        let bad = |field, problem: &str| {
            Err(LlmConfigError::Invalid {
                field,
                problem: problem.to_owned(),
            })
        };
        if self.provider != Provider::Extractive && self.model.trim().is_empty() {
            return bad(
                "model",
                &format!("is required with provider \"{}\"", self.provider),
            );
        }
        if self
            .compaction_model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty())
        {
            return bad("compaction_model", "must not be empty when set");
        }
        if self
            .api_key_env
            .as_deref()
            .is_some_and(|v| v.is_empty() || v.contains(['=', '\0']))
        {
            return bad("api_key_env", "must be an environment variable name");
        }
        if let Some(url) = &self.base_url {
            match reqwest::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
                _ => return bad("base_url", "must be an http:// or https:// URL"),
            }
        }
        if self.request_timeout.is_zero() {
            return bad("request_timeout", "must be positive");
        }
        if self.retry_base_delay.is_zero() {
            return bad("retry_base_delay", "must be positive");
        }
        if self.retry_max_delay < self.retry_base_delay {
            return bad("retry_max_delay", "must be at least retry_base_delay");
        }
        if self.probe_interval.is_zero() {
            return bad("probe_interval", "must be positive");
        }
        if self.retry_max_output_tokens == 0 {
            return bad("retry_max_output_tokens", "must be positive");
        }
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) {
                return bad("temperature", "must be between 0 and 2");
            }
        }
        Ok(())
    }

    /// The model requests use: `compaction_model` when set, else `model`.
    pub fn effective_model(&self) -> &str {
        self.compaction_model.as_deref().unwrap_or(&self.model)
    }

    /// The configured base URL or the provider's default, without a
    /// trailing slash.
    pub fn effective_base_url(&self) -> Option<&str> {
        self.base_url
            .as_deref()
            .or(self.provider.default_base_url())
            .map(|u| u.trim_end_matches('/'))
    }

    /// The name of the variable the key is read from.
    pub fn effective_api_key_env(&self) -> Option<&str> {
        self.api_key_env
            .as_deref()
            .or(self.provider.default_api_key_env())
    }

    /// Whether requests must carry a key: always, except for an
    /// OpenAI-compatible server other than OpenAI's (a local server).
    pub fn api_key_required(&self) -> bool {
        match self.provider {
            Provider::Extractive => false,
            Provider::Anthropic => true,
            Provider::OpenAi => {
                self.effective_base_url()
                    == Provider::OpenAi
                        .default_base_url()
                        .map(|u| u.trim_end_matches('/'))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai() -> LlmConfig {
        LlmConfig {
            provider: Provider::OpenAi,
            model: "gpt-4o-mini".into(),
            ..LlmConfig::default()
        }
    }

    #[test]
    fn the_default_is_extractive_and_valid() {
        let c = LlmConfig::default();
        assert_eq!(c.provider, Provider::Extractive);
        c.validate().unwrap();
        assert!(!c.api_key_required());
    }

    #[test]
    fn a_model_is_required_for_network_providers() {
        let c = LlmConfig {
            model: " ".into(),
            ..openai()
        };
        assert!(matches!(
            c.validate(),
            Err(LlmConfigError::Invalid { field: "model", .. })
        ));
        openai().validate().unwrap();
    }

    #[test]
    fn the_compaction_model_wins() {
        let c = LlmConfig {
            compaction_model: Some("small".into()),
            ..openai()
        };
        assert_eq!(c.effective_model(), "small");
        assert_eq!(openai().effective_model(), "gpt-4o-mini");
    }

    #[test]
    fn a_key_is_optional_only_for_other_openai_compatible_servers() {
        assert!(openai().api_key_required());
        let slash = LlmConfig {
            base_url: Some("https://api.openai.com/v1/".into()),
            ..openai()
        };
        assert!(slash.api_key_required());
        let local = LlmConfig {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            ..openai()
        };
        assert!(!local.api_key_required());
        let anthropic = LlmConfig {
            provider: Provider::Anthropic,
            base_url: Some("http://127.0.0.1:8080".into()),
            ..openai()
        };
        assert!(anthropic.api_key_required());
    }

    #[test]
    fn bad_values_are_refused() {
        for (c, field) in [
            (
                LlmConfig {
                    base_url: Some("localhost:8080".into()),
                    ..openai()
                },
                "base_url",
            ),
            (
                LlmConfig {
                    temperature: Some(3.0),
                    ..openai()
                },
                "temperature",
            ),
            (
                LlmConfig {
                    request_timeout: Duration::ZERO,
                    ..openai()
                },
                "request_timeout",
            ),
            (
                LlmConfig {
                    retry_max_delay: Duration::from_millis(1),
                    ..openai()
                },
                "retry_max_delay",
            ),
            (
                LlmConfig {
                    api_key_env: Some(String::new()),
                    ..openai()
                },
                "api_key_env",
            ),
        ] {
            match c.validate() {
                Err(LlmConfigError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_provider_names_are_snake_case() {
        #[derive(serde::Deserialize)]
        struct W {
            p: Provider,
        }
        for (text, p) in [
            ("extractive", Provider::Extractive),
            ("openai", Provider::OpenAi),
            ("anthropic", Provider::Anthropic),
        ] {
            let w: W = serde_json::from_str(&format!("{{\"p\":\"{text}\"}}")).unwrap();
            assert_eq!(w.p, p);
            assert_eq!(p.as_str(), text);
        }
    }

    #[test]
    fn durations_are_humantime_and_unknown_keys_are_refused() {
        let c: LlmConfig = serde_json::from_str(
            r#"{"provider":"anthropic","model":"claude-haiku-4-5","request_timeout":"30s","retry_base_delay":"250ms"}"#,
        )
        .unwrap();
        assert_eq!(c.request_timeout, Duration::from_secs(30));
        assert_eq!(c.retry_base_delay, Duration::from_millis(250));
        assert_eq!(c.max_retries, 4);
        assert!(serde_json::from_str::<LlmConfig>(r#"{"api_key":"sk-x"}"#).is_err());
    }
}
