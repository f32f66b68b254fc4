//! The HTTP client: one completion with retries, within the caller's
//! deadline, and the provider's health (see [`super::health`]).

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use compactor_producer::events::catalogue::LlmOutcome;
use reqwest::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;
use tracing::Instrument;

use super::completion::{Calls, LlmRequest, LlmResponse, TokenUsage};
use super::config::{LlmConfig, LlmConfigError, Provider};
use super::error::{classify_status, LlmError};
use super::health::{Health, Transition};
use super::{anthropic, openai, retry_after};
use crate::events::{
    InternalEvent, LlmHealthChanged, LlmRequestFinished, LlmRetried, LlmTokensUsed,
};

/// Largest reply body read; a longer one is malformed (a summary is a few
/// thousand tokens).
pub const MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;

/// The health probe: the smallest request that shows the provider answers.
const PROBE: LlmRequest<'static> = LlmRequest {
    system: "You are a health check. Answer with the single word OK.",
    user: "Health check: answer OK.",
    max_output_tokens: 16,
};

/// The wire protocol of a network provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    OpenAi,
    Anthropic,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::OpenAi => Provider::OpenAi.as_str(),
            Api::Anthropic => Provider::Anthropic.as_str(),
        }
    }
}

/// A client of one configured provider and model. Cheap to clone.
#[derive(Clone)]
pub struct LlmClient {
    inner: Arc<Inner>,
}

struct Inner {
    api: Api,
    model: String,
    endpoint: String,
    http: reqwest::Client,
    config: LlmConfig,
    key: Option<SecretString>,
    /// The key's header, marked sensitive.
    auth: Option<(HeaderName, HeaderValue)>,
    /// Shared by every clone, so by every job of the process: one outage is
    /// seen once, and every compaction after it skips the LLM.
    health: Health,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("LlmClient")
            .field("provider", &i.api.name())
            .field("model", &i.model)
            .field("endpoint", &without_credentials(&i.endpoint))
            .field("api_key", &i.key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// `url` without a user name or password (a gateway URL may carry them).
fn without_credentials(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            // Cannot fail for the http(s) URLs validation lets through.
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => url.to_owned(),
    }
}

/// A failed attempt, when the server said to come back (kept apart from
/// the error because a 5xx may carry a `Retry-After` too), and the tokens
/// it reported (a reply without text still reports them).
struct Failure {
    error: LlmError,
    retry_after: Option<Duration>,
    usage: TokenUsage,
}

impl From<LlmError> for Failure {
    fn from(error: LlmError) -> Self {
        Failure {
            error,
            retry_after: None,
            usage: TokenUsage::default(),
        }
    }
}

impl LlmClient {
    /// Validates `config`, reads the key from the environment variable it
    /// names, and builds the HTTP client. Fails for `extractive` (nothing to
    /// build) and when a required key is missing (the message names the
    /// variable, never a value).
    pub fn from_config(config: &LlmConfig) -> Result<LlmClient, LlmError> {
        let key = config
            .effective_api_key_env()
            .and_then(|name| std::env::var(name).ok())
            .filter(|k| !k.trim().is_empty())
            .map(SecretString::from);
        LlmClient::new(config, key)
    }

    /// As [`LlmClient::from_config`], with the key given (from a secrets
    /// file, a vault, a test) instead of read from the environment.
    pub fn new(config: &LlmConfig, api_key: Option<SecretString>) -> Result<LlmClient, LlmError> {
        config.validate()?;
        let api = match config.provider {
            Provider::Extractive => return Err(LlmConfigError::Extractive.into()),
            Provider::OpenAi => Api::OpenAi,
            Provider::Anthropic => Api::Anthropic,
        };
        let env_var = config
            .effective_api_key_env()
            .unwrap_or_default()
            .to_owned();
        let key = api_key.filter(|k| !k.expose_secret().trim().is_empty());
        if key.is_none() && config.api_key_required() {
            return Err(LlmConfigError::MissingApiKey {
                provider: api.name(),
                env_var,
            }
            .into());
        }
        let auth = match &key {
            None => None,
            Some(key) => {
                let (name, value) = match api {
                    Api::OpenAi => (
                        AUTHORIZATION,
                        format!("Bearer {}", key.expose_secret().trim()),
                    ),
                    Api::Anthropic => (
                        HeaderName::from_static("x-api-key"),
                        key.expose_secret().trim().to_owned(),
                    ),
                };
                let mut value = HeaderValue::from_str(&value)
                    .map_err(|_| LlmConfigError::InvalidApiKey { env_var })?;
                value.set_sensitive(true);
                Some((name, value))
            }
        };
        let base = config.effective_base_url().unwrap_or_default();
        let endpoint = match api {
            Api::OpenAi => openai::endpoint(base),
            Api::Anthropic => anthropic::endpoint(base),
        };
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .user_agent(concat!("compactor/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.request_timeout.min(Duration::from_secs(30)))
            .build()
            .map_err(|e| LlmConfigError::HttpClient(e.to_string()))?;
        Ok(LlmClient {
            inner: Arc::new(Inner {
                api,
                model: config.effective_model().to_owned(),
                endpoint,
                http,
                config: config.clone(),
                key,
                auth,
                health: Health::new(config.unhealthy_after),
            }),
        })
    }

    /// The model requests ask for (`compaction_model`, else `model`).
    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// `openai` or `anthropic`, as in the configuration and metric labels.
    pub fn provider(&self) -> &'static str {
        self.inner.api.name()
    }

    /// The configuration the client was built from.
    pub fn config(&self) -> &LlmConfig {
        &self.inner.config
    }

    /// The provider's health, shared by every clone of this client.
    pub fn health(&self) -> &Health {
        &self.inner.health
    }

    /// Whether requests are sent (false while the provider is marked
    /// unhealthy, until a probe is answered).
    pub fn is_healthy(&self) -> bool {
        self.inner.health.is_healthy()
    }

    /// One completion, with retries. A retryable failure is retried at
    /// most `max_retries` times, after an exponential backoff with jitter
    /// (from `retry_base_delay`, doubling, capped by `retry_max_delay`) and
    /// never sooner than the server's `Retry-After` (capped by
    /// `max_retry_after`). Nothing runs past `deadline`: each request's
    /// timeout is the smaller of `request_timeout` and the time left, and a
    /// wait that would reach the deadline ends the retries with
    /// [`LlmError::DeadlineExceeded`]. Other failures return at once; when
    /// the retries are used up, the last failure is returned.
    ///
    /// While the provider is unhealthy nothing is sent
    /// ([`LlmError::Unhealthy`]); a failure that makes it unhealthy ends
    /// the retries at once and is returned as it is.
    pub async fn complete(
        &self,
        request: &LlmRequest<'_>,
        deadline: Instant,
    ) -> Result<LlmResponse, LlmError> {
        self.complete_counted(request, deadline, &mut Calls::default())
            .await
    }

    /// As [`LlmClient::complete`], adding every request it sends to
    /// `calls` (failed ones included), for the audit trail.
    pub async fn complete_counted(
        &self,
        request: &LlmRequest<'_>,
        deadline: Instant,
        calls: &mut Calls,
    ) -> Result<LlmResponse, LlmError> {
        let config = &self.inner.config;
        let health = &self.inner.health;
        if !health.is_healthy() {
            return Err(LlmError::Unhealthy {
                consecutive_failures: health.consecutive_failures(),
            });
        }
        let mut backoff = ExponentialBuilder::new()
            .with_min_delay(config.retry_base_delay)
            .with_max_delay(config.retry_max_delay)
            .with_factor(2.0)
            .with_jitter()
            .with_max_times(usize::try_from(config.max_retries).unwrap_or(usize::MAX))
            .build();
        let mut attempt: u32 = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LlmError::DeadlineExceeded {
                    attempts: attempt,
                    last: Box::new(LlmError::Timeout {
                        after: Duration::ZERO,
                    }),
                });
            }
            attempt += 1;
            let timeout = config.request_timeout.min(left);
            let span = tracing::info_span!(
                "llm_request",
                provider = self.provider(),
                model = %self.inner.model,
                attempt
            );
            let failure = match self.attempt(request, timeout, calls).instrument(span).await {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            };
            let error = failure.error;
            if !error.is_retryable() {
                return Err(error);
            }
            if !health.is_healthy() {
                // This failure (or one of another job's) marked the provider
                // unhealthy: retrying would only delay the fallback.
                return Err(error);
            }
            let Some(step) = backoff.next() else {
                return Err(error);
            };
            // Jitter may double a step; the configured maximum still holds.
            let step = step.min(config.retry_max_delay);
            let delay = match failure.retry_after {
                Some(after) => step.max(after.min(config.max_retry_after)),
                None => step,
            };
            if Instant::now() + delay >= deadline {
                tracing::warn!(
                    provider = self.provider(),
                    attempt,
                    status = error.status(),
                    outcome = error.outcome_label(),
                    delay_ms = crate::telemetry::millis(delay),
                    %error,
                    "LLM request failed; no time left before the deadline to retry"
                );
                return Err(LlmError::DeadlineExceeded {
                    attempts: attempt,
                    last: Box::new(error),
                });
            }
            LlmRetried {
                provider: self.provider(),
            }
            .emit();
            tracing::warn!(
                provider = self.provider(),
                attempt,
                status = error.status(),
                outcome = error.outcome_label(),
                delay_ms = crate::telemetry::millis(delay),
                %error,
                "LLM request failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// Sends one small request, without retries, and says whether the
    /// provider answered. An answer without text counts (the server is up;
    /// a reasoning model may spend a small budget before writing). An
    /// answer marks an unhealthy provider healthy again.
    pub async fn probe(&self) -> Result<(), LlmError> {
        let timeout = self.inner.config.request_timeout;
        let span =
            tracing::info_span!("llm_probe", provider = self.provider(), model = %self.inner.model);
        match self
            .attempt(&PROBE, timeout, &mut Calls::default())
            .instrument(span)
            .await
        {
            Ok(_)
            | Err(Failure {
                error: LlmError::Empty,
                ..
            }) => Ok(()),
            Err(failure) => Err(failure.error),
        }
    }

    /// Logs and counts a change of health; on turning unhealthy, starts the
    /// probe that ends the outage.
    fn health_changed(&self, transition: Transition) {
        match transition {
            Transition::None => {}
            Transition::BecameUnhealthy => {
                let interval = self.inner.config.probe_interval;
                tracing::warn!(
                    provider = self.provider(),
                    model = %self.inner.model,
                    consecutive_failures = self.inner.health.consecutive_failures(),
                    probe_interval_ms = crate::telemetry::millis(interval),
                    "LLM provider marked unhealthy: no more requests, compactions summarize offline (degraded) until a probe is answered"
                );
                LlmHealthChanged {
                    provider: self.provider(),
                    healthy: false,
                }
                .emit();
                self.start_probe();
            }
            Transition::Recovered => {
                tracing::info!(
                    provider = self.provider(),
                    model = %self.inner.model,
                    "LLM provider answers again: marked healthy"
                );
                LlmHealthChanged {
                    provider: self.provider(),
                    healthy: true,
                }
                .emit();
            }
        }
    }

    /// Probes every `probe_interval` in the background until the provider
    /// answers (or the client is dropped: the task holds only a weak
    /// reference, so it never keeps a client alive).
    fn start_probe(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no async runtime to run the LLM health probe on");
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        runtime.spawn(probe_until_healthy(weak));
    }

    /// One HTTP request, bounded by `timeout` from sending to the last
    /// byte of the reply, recorded in the metrics, in `calls` and in the
    /// provider's health.
    async fn attempt(
        &self,
        request: &LlmRequest<'_>,
        timeout: Duration,
        calls: &mut Calls,
    ) -> Result<LlmResponse, Failure> {
        tracing::debug!(
            system_chars = request.system.len(),
            user_chars = request.user.len(),
            max_output_tokens = request.max_output_tokens,
            "sending LLM request"
        );
        let started = Instant::now();
        let result = match tokio::time::timeout(timeout, self.exchange(request, timeout)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(LlmError::Timeout { after: timeout }.into()),
        };
        let outcome = match &result {
            Ok(_) => Some(LlmOutcome::Ok),
            Err(failure) => failure.error.request_outcome(),
        };
        // Always `Some`: one request never ends unhealthy, past the
        // deadline or misconfigured (those are errors of the whole call).
        if let Some(outcome) = outcome {
            LlmRequestFinished {
                provider: self.provider(),
                outcome,
                elapsed: started.elapsed(),
            }
            .emit();
        }
        let health = &self.inner.health;
        let transition = match &result {
            Ok(response) => {
                calls.record(false, response.usage, Some(&response.model));
                health.succeeded()
            }
            Err(failure) => {
                calls.record(true, failure.usage, None);
                if failure.error.counts_against_health() {
                    health.failed()
                } else if matches!(failure.error, LlmError::Empty) {
                    // A reply without text is still a reply: the server is up.
                    health.succeeded()
                } else {
                    Transition::None
                }
            }
        };
        self.health_changed(transition);
        match &result {
            Ok(response) => tracing::debug!(
                text_chars = response.text.len(),
                input_tokens = response.usage.input_tokens,
                output_tokens = response.usage.output_tokens,
                truncated = response.truncated,
                "LLM reply"
            ),
            Err(failure) => tracing::debug!(
                outcome = failure.error.outcome_label(),
                error = %failure.error,
                "LLM request failed"
            ),
        }
        result
    }

    async fn exchange(
        &self,
        request: &LlmRequest<'_>,
        timeout: Duration,
    ) -> Result<LlmResponse, Failure> {
        let inner = &self.inner;
        let temperature = inner.config.temperature;
        let body = match inner.api {
            Api::OpenAi => openai::body(&inner.model, request, temperature),
            Api::Anthropic => anthropic::body(&inner.model, request, temperature),
        };
        let mut builder = inner
            .http
            .post(&inner.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if inner.api == Api::Anthropic {
            builder = builder.header("anthropic-version", anthropic::API_VERSION);
        }
        if let Some((name, value)) = &inner.auth {
            builder = builder.header(name.clone(), value.clone());
        }
        let response = builder
            .send()
            .await
            .map_err(|e| LlmError::from_transport(e, timeout))?;
        let status = response.status();
        let retry_after = retry_after::from_headers(response.headers(), chrono::Utc::now());
        let body = read_body(response, timeout).await?;
        let key = inner.key.as_ref().map(|k| k.expose_secret().trim());
        if !status.is_success() {
            let error = classify_status(status, retry_after, &body, key);
            return Err(Failure {
                error,
                retry_after,
                usage: TokenUsage::default(),
            });
        }
        let response = match inner.api {
            Api::OpenAi => openai::parse(&body, &inner.model, key),
            Api::Anthropic => anthropic::parse(&body, &inner.model, key),
        }?;
        LlmTokensUsed {
            provider: self.provider(),
            usage: response.usage,
        }
        .emit();
        if response.text.trim().is_empty() {
            return Err(Failure {
                error: LlmError::Empty,
                retry_after: None,
                usage: response.usage,
            });
        }
        Ok(response)
    }
}

/// The background probe of an unhealthy provider (see
/// [`LlmClient::start_probe`]).
async fn probe_until_healthy(inner: Weak<Inner>) {
    loop {
        let Some(interval) = inner.upgrade().map(|i| i.config.probe_interval) else {
            return;
        };
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let client = LlmClient { inner };
        if client.is_healthy() {
            // A request in flight when the outage began was answered.
            return;
        }
        match client.probe().await {
            Ok(()) => return,
            Err(error) => tracing::debug!(
                provider = client.provider(),
                %error,
                "LLM health probe failed; the provider stays unhealthy"
            ),
        }
    }
}

/// Reads the reply body, at most [`MAX_REPLY_BYTES`].
async fn read_body(
    mut response: reqwest::Response,
    timeout: Duration,
) -> Result<Vec<u8>, LlmError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| LlmError::from_transport(e, timeout))?
    {
        if body.len() + chunk.len() > MAX_REPLY_BYTES {
            return Err(LlmError::Malformed {
                detail: format!("reply longer than {MAX_REPLY_BYTES} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_neither_the_key_nor_url_credentials() {
        let config = LlmConfig {
            provider: Provider::OpenAi,
            base_url: Some("https://user:hunter2@gateway.example/v1".into()),
            model: "m".into(),
            ..LlmConfig::default()
        };
        let client = LlmClient::new(&config, Some(SecretString::from("sk-xyz-secret"))).unwrap();
        let debug = format!("{client:?}");
        assert!(
            !debug.contains("sk-xyz-secret") && !debug.contains("hunter2"),
            "{debug}"
        );
        assert!(
            debug.contains("https://gateway.example/v1/chat/completions"),
            "{debug}"
        );
    }
}
