//! The pre-compaction hook (`[hook]`): an HTTP endpoint the compaction job
//! asks, once the span is planned and before anything is summarized, what
//! to do with it — pi's `session_before_compact`, Claude Code's PreCompact.
//!
//! ```text
//! plan the span (span::plan) → POST HookRequest (signed when a secret is set)
//!   → 204 / {}                         proceed unchanged
//!   → {"instructions", "context"}      summarize with them
//!   → {"replace": "<summary>"}         the summary, parsed and checked by
//!                                      the format's parser; no LLM call
//!   → {"skip": true}                   no compaction this time
//!   → timeout, refused, non-2xx, junk  proceed as if there were no hook
//! ```
//!
//! The hook fails open: a compaction never waits longer than
//! `hook.timeout` for it and never fails because of it. Every call is
//! counted (`compactor_hook_calls_total{outcome}`, with its duration in
//! `compactor_hook_call_seconds`) and its outcome is written on the run
//! row (`hook_outcome`, `hook_duration_ms`).
//!
//! - [`config`]: the `[hook]` settings.
//! - [`wire`]: the request and the answer.
//! - [`span`]: the span and its bounded message text.

pub mod config;
pub mod span;
pub mod wire;

pub use config::HookSettings;
pub use wire::{AnswerError, HookAnswer, HookRequest};

use std::time::{Duration, Instant};

use chrono::Utc;
use compactor_producer::store::HookOutcome;

use crate::outbox::sign::signature;
use crate::outbox::WebhookSecret;

/// Largest answer body read, in bytes (a `replace` summary of
/// [`wire::MAX_REPLACE_CHARS`] fits): a longer one is malformed.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// A configured hook. Cheap to clone.
#[derive(Clone)]
pub struct Hook {
    url: String,
    timeout: Duration,
    secret: Option<WebhookSecret>,
    max_message_chars: usize,
    http: reqwest::Client,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL (it may carry a token in its path) or the secret.
        f.debug_struct("Hook")
            .field("timeout", &self.timeout)
            .field("signed", &self.secret.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a call gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookFailure {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the hook could not be reached: {0}")]
    Unreachable(String),
    #[error("the hook answered HTTP {0}")]
    Http(u16),
    #[error("{0}")]
    Malformed(AnswerError),
}

impl HookFailure {
    pub fn outcome(&self) -> HookOutcome {
        match self {
            HookFailure::Timeout(_) => HookOutcome::Timeout,
            HookFailure::Unreachable(_) => HookOutcome::Unreachable,
            HookFailure::Http(_) => HookOutcome::HttpError,
            HookFailure::Malformed(_) => HookOutcome::Malformed,
        }
    }
}

/// One call: its answer (or why there is none) and how long it took.
#[derive(Debug)]
pub struct Called {
    pub answer: Result<HookAnswer, HookFailure>,
    pub duration: Duration,
}

impl Hook {
    /// The hook `settings` configure, `None` without a URL; the secret is
    /// looked up with `env`. Refuses what `HookSettings::validate` refuses
    /// and a `secret_env` that is not set.
    pub fn from_settings(
        settings: &HookSettings,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Hook>, String> {
        settings.validate()?;
        let Some(url) = &settings.url else {
            return Ok(None);
        };
        let secret = settings.resolve_secret(env)?;
        // No redirects: the signature is for the configured endpoint.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("hook: the HTTP client: {e}"))?;
        Ok(Some(Hook {
            url: url.clone(),
            timeout: settings.timeout,
            secret,
            max_message_chars: settings.max_message_chars,
            http,
        }))
    }

    /// `hook.max_message_chars`.
    pub fn max_message_chars(&self) -> usize {
        self.max_message_chars
    }

    /// POSTs `request`, within `hook.timeout` in all.
    pub async fn call(&self, request: &HookRequest) -> Called {
        let started = Instant::now();
        let answer = match tokio::time::timeout(self.timeout, self.post(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(HookFailure::Timeout(self.timeout)),
        };
        Called {
            answer,
            duration: started.elapsed(),
        }
    }

    async fn post(&self, request: &HookRequest) -> Result<HookAnswer, HookFailure> {
        let body = serde_json::to_string(request)
            .map_err(|e| HookFailure::Unreachable(format!("encoding the request: {e}")))?;
        let mut post = self
            .http
            .post(&self.url)
            .timeout(self.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        if let Some(secret) = &self.secret {
            // Standard Webhooks, as the event webhooks: the id names the
            // job's attempt, so a receiver can tell a retry's call.
            let id = format!("hook_{}_{}", request.job_id, request.attempt);
            let timestamp = Utc::now().timestamp();
            post = post
                .header(
                    "webhook-signature",
                    signature(secret.key(), &id, timestamp, &body),
                )
                .header("webhook-id", id)
                .header("webhook-timestamp", timestamp.to_string());
        }
        let mut response = post.body(body).send().await.map_err(|e| self.failure(e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(HookFailure::Http(status.as_u16()));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failure(e))? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(HookFailure::Malformed(AnswerError::TooLong {
                    field: "answer",
                    max: MAX_ANSWER_BYTES,
                }));
            }
            bytes.extend_from_slice(&chunk);
        }
        HookAnswer::parse(&bytes).map_err(HookFailure::Malformed)
    }

    /// A transport error, never naming the URL.
    fn failure(&self, error: reqwest::Error) -> HookFailure {
        if error.is_timeout() {
            return HookFailure::Timeout(self.timeout);
        }
        HookFailure::Unreachable(error.without_url().to_string().chars().take(300).collect())
    }
}
