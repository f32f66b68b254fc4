//! The worker's settings: every section of `config/default.toml`, loaded by
//! [`compactor_producer::settings::load`] (defaults, `--config FILE`,
//! `COMPACTOR__SECTION__KEY`, `REDIS_URL`, `DATABASE_URL`) and checked as a
//! whole before anything starts.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use compactor_producer::metrics::MetricsSettings;
use compactor_producer::queue::QueueConfig;
use compactor_producer::settings::{self, DatabaseSettings, RedisSettings, SettingsError};
use compactor_shared::config::EngineConfig;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::hook::HookSettings;
use crate::llm::{LlmConfig, Provider};
use crate::outbox::EventsSettings;
use crate::proxy::ProxySettings;
use crate::runtime::RuntimeConfig;

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    /// `tracing` filter directives (`info`, `compactor_worker=debug,info`);
    /// `RUST_LOG` overrides.
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            format: LogFormat::Text,
            level: "info".to_owned(),
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    Json,
}

/// `[admin]`: the admin HTTP API (workstream routes under `/v1`,
/// `/metrics`, `/healthz`, `/readyz`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSettings {
    /// Serve the API (and `/metrics`) at all.
    pub enabled: bool,
    /// Address to listen on; loopback by default, because `/v1` can read
    /// and write every conversation. Any other address needs a token
    /// (`token_env`) or `allow_unauthenticated`.
    pub listen: SocketAddr,
    /// A second address serving only `/healthz`, `/readyz`,
    /// `/readyz/worker` and `/metrics`, with connections of its own (at
    /// most 16): liveness and readiness probes, and Prometheus, still get
    /// through while the API's connections are all taken (a flood, a stall
    /// of the database holding every request). Nothing on it reads or
    /// writes a conversation, so it needs no token on any address. Unset:
    /// the probes are served on `listen` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_listen: Option<SocketAddr>,
    /// Name of the environment variable holding the bearer token that
    /// `/v1` requires. Unset: no token required. Set but the variable is
    /// missing or empty: the worker refuses to start (an operator who
    /// asked for auth must not silently get none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Serve `/v1` without a token on an address beyond loopback. Off: such
    /// a configuration refuses to start (exit status 2), because anyone who
    /// reaches the port could read and write every conversation. Turn it on
    /// only behind something that authenticates (a mesh, a proxy).
    pub allow_unauthenticated: bool,
    /// Largest request body accepted: a larger one is answered 413 at once,
    /// from its `Content-Length` (or as soon as a chunked body passes the
    /// limit), and the connection closed without reading the rest. Room
    /// for a batch of messages of up to 16 MiB each.
    pub max_body_bytes: usize,
    /// How long `/readyz` waits for each of Redis and the database before
    /// calling it not ready (a dead host must not hang the probe).
    #[serde(with = "humantime_serde")]
    pub ready_timeout: Duration,
    /// Longest a request may take (503 `request_timeout` after it). Long
    /// polls (`…/wait`) get their own bound instead: the `timeout_ms` they
    /// ask for plus a margin.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// How long one bulk dead-letter call (`POST
    /// /v1/queue/dead-letters/retry`, `…/purge`) works before it answers
    /// with where it stopped (`next_cursor`): a set of any size is worked
    /// through in calls that each end within `request_timeout` (the
    /// clients repeat them), instead of one cut off by it. Unset: half of
    /// `request_timeout` (see [`AdminSettings::bulk_budget`]).
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub bulk_call_budget: Option<Duration>,
    /// Long polls (`…/wait`) served at once; one more is answered 503
    /// `overloaded` with `Retry-After` at once, not queued. Below
    /// `max_connections`, so probes and other calls still get through.
    pub max_long_polls: usize,
    /// Connections served at once. At the cap the slowest client (the
    /// one longest sending its request, or idle between requests) is shed
    /// to admit a new connection; when every connection has a request
    /// being answered, new ones wait in the listen backlog. Lowered at
    /// start-up to what the file-descriptor limit leaves beside the
    /// database, Redis and outgoing connections (`http::descriptors`,
    /// logged), so a flood cannot take their descriptors.
    pub max_connections: usize,
    /// How long a client has to send a request's headers, counted from
    /// when the server starts waiting for them — also between the requests
    /// of a keep-alive connection. Frees the slot of a client that
    /// trickles its headers (slowloris) or keeps a connection idle.
    #[serde(with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// A connection with no request in flight on which no byte moves for
    /// this long is closed (a client that stopped reading its response,
    /// or stalled between requests).
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// The token itself, given in code (tests, programs embedding the
    /// worker); wins over `token_env`. Never read from a file.
    #[serde(skip)]
    pub token: Option<AdminToken>,
}

impl Default for AdminSettings {
    fn default() -> Self {
        AdminSettings {
            enabled: true,
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 9464)),
            health_listen: None,
            token_env: None,
            allow_unauthenticated: false,
            max_body_bytes: 32 * 1024 * 1024,
            ready_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(30),
            bulk_call_budget: None,
            max_long_polls: 256,
            max_connections: 512,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            token: None,
        }
    }
}

/// Why the admin token could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("admin.token_env names {0}, which is not set (or empty) in the environment")]
pub struct MissingAdminToken(pub String);

impl AdminSettings {
    /// How long one bulk dead-letter call works before it answers with
    /// where it stopped: `bulk_call_budget`, or half of `request_timeout`
    /// (the other half for the batch under way and the answer).
    pub fn bulk_budget(&self) -> Duration {
        self.bulk_call_budget.unwrap_or(self.request_timeout / 2)
    }

    /// Checks each setting is usable, and that `/v1` is not open beyond
    /// this machine unless that was asked for.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_body_bytes < 1024 {
            return Err("admin.max_body_bytes: must be at least 1024".into());
        }
        for (key, value) in [
            ("ready_timeout", self.ready_timeout),
            ("request_timeout", self.request_timeout),
            ("header_read_timeout", self.header_read_timeout),
            ("idle_timeout", self.idle_timeout),
        ] {
            if value < Duration::from_millis(1) {
                return Err(format!("admin.{key}: must be at least 1ms"));
            }
        }
        if let Some(budget) = self.bulk_call_budget {
            if budget.is_zero() || budget >= self.request_timeout {
                return Err(format!(
                    "admin.bulk_call_budget: must be above 0 and below admin.request_timeout ({:?}), \
                     so a bulk call answers before it is cut off",
                    self.request_timeout
                ));
            }
        }
        if self.max_connections < 2 {
            return Err("admin.max_connections: must be at least 2".into());
        }
        if self.max_long_polls == 0 || self.max_long_polls >= self.max_connections {
            return Err(format!(
                "admin.max_long_polls: must be at least 1 and below admin.max_connections ({}), \
                 so long polls cannot take every connection",
                self.max_connections
            ));
        }
        if let Some(health) = self.health_listen {
            if health == self.listen && health.port() != 0 {
                return Err(format!(
                    "admin.health_listen: {health} is admin.listen too; give the probes an \
                     address of their own (another port), or leave it out"
                ));
            }
        }
        if self.token_env.as_deref().is_some_and(str::is_empty) {
            return Err("admin.token_env: must name a variable, or be left out".into());
        }
        let has_token = self.token_env.is_some() || self.token.is_some();
        if self.enabled
            && !has_token
            && !self.listen.ip().is_loopback()
            && !self.allow_unauthenticated
        {
            return Err(format!(
                "admin.listen: {} is reachable from other machines, but no token protects /v1 \
                 (which reads and writes every conversation): set admin.token_env to the name of \
                 a variable holding one (e.g. COMPACTOR_ADMIN_TOKEN), or set \
                 admin.allow_unauthenticated = true if something in front authenticates",
                self.listen
            ));
        }
        Ok(())
    }

    /// The token `/v1` requires: [`AdminSettings::token`] if set, else the
    /// value of the variable `token_env` names (looked up with `env`), else
    /// none.
    pub fn resolve_token(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<AdminToken>, MissingAdminToken> {
        if let Some(token) = &self.token {
            return Ok(Some(token.clone()));
        }
        let Some(name) = &self.token_env else {
            return Ok(None);
        };
        match env(name) {
            Some(value) if !value.is_empty() => Ok(Some(AdminToken::new(value))),
            _ => Err(MissingAdminToken(name.clone())),
        }
    }
}

/// The bearer token of the admin API: never printed, compared in constant
/// time.
#[derive(Clone)]
pub struct AdminToken(SecretString);

impl AdminToken {
    pub fn new(token: impl Into<String>) -> AdminToken {
        AdminToken(SecretString::from(token.into()))
    }

    /// Whether `presented` is the token. The time taken does not depend on
    /// where the first differing byte is (only on the lengths), so the
    /// token cannot be guessed byte by byte from response times.
    pub fn matches(&self, presented: &[u8]) -> bool {
        self.0.expose_secret().as_bytes().ct_eq(presented).into()
    }
}

impl AdminToken {
    /// The token as the key of an HMAC: the console's session cookies are
    /// MACs made with it (`http::console::session`), never the token.
    pub(crate) fn hmac_key(&self) -> &[u8] {
        self.0.expose_secret().as_bytes()
    }
}

impl PartialEq for AdminToken {
    fn eq(&self, other: &AdminToken) -> bool {
        self.matches(other.0.expose_secret().as_bytes())
    }
}

impl Eq for AdminToken {}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(***)")
    }
}

/// Everything `compactor-worker` is configured with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub engine: EngineConfig,
    pub queue: QueueConfig,
    pub worker: RuntimeConfig,
    pub llm: LlmConfig,
    pub database: DatabaseSettings,
    pub redis: RedisSettings,
    pub log: LogSettings,
    pub admin: AdminSettings,
    pub reconcile: ReconcileSettings,
    /// `[metrics]`: the domains labelled as themselves.
    pub metrics: MetricsSettings,
    /// `[events]`: the event stream and webhooks.
    pub events: EventsSettings,
    /// `[hook]`: the pre-compaction hook (none without a URL).
    pub hook: HookSettings,
    /// `[proxy]`: the drop-in proxy (off without a listen address).
    pub proxy: ProxySettings,
}

/// `[reconcile]`: the sweep that re-requests compactions the queue lost
/// (see `compactor_producer::reconcile`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReconcileSettings {
    /// How often each worker sweeps; `0s` turns the sweep off (run
    /// `compactor reconcile` instead). The first sweep runs one interval
    /// after start, so a fleet restarting together does not sweep at once.
    #[serde(with = "humantime_serde")]
    pub interval: std::time::Duration,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        ReconcileSettings {
            interval: std::time::Duration::from_secs(300),
        }
    }
}

impl Settings {
    /// Loads and validates the settings.
    pub fn load(file: Option<&Path>) -> Result<Settings, SettingsError> {
        Settings::load_from(file, std::env::vars())
    }

    /// [`Settings::load`] with the environment given.
    pub fn load_from<I>(file: Option<&Path>, env: I) -> Result<Settings, SettingsError>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let settings: Settings = settings::load_from(file, env)?;
        settings.validate()?;
        Ok(settings)
    }

    /// Checks every section, and the sections against each other.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let invalid = |e: String| SettingsError::Invalid(e);
        self.engine.validate().map_err(|e| invalid(e.to_string()))?;
        self.queue.validate().map_err(|e| invalid(e.to_string()))?;
        self.worker
            .validate(self.queue.lease_ttl)
            .map_err(|e| invalid(e.to_string()))?;
        self.llm.validate().map_err(|e| invalid(e.to_string()))?;
        if self.llm.provider != Provider::Extractive {
            self.engine
                .validate_llm_calls()
                .map_err(|e| invalid(e.to_string()))?;
            self.validate_request_timeout().map_err(invalid)?;
        }
        self.admin.validate().map_err(invalid)?;
        self.metrics.validate().map_err(invalid)?;
        self.events.validate().map_err(invalid)?;
        self.hook.validate().map_err(invalid)?;
        self.proxy
            .validate(self.admin.token.is_some() || self.admin.token_env.is_some())
            .map_err(invalid)?;
        self.database.validate().map_err(invalid)?;
        let window = self.engine.trigger.context_window();
        if window > 0 && self.database.context_max_tokens < window {
            return Err(invalid(format!(
                "database.context_max_tokens: {} is below engine.trigger.context_window ({window}): \
                 a history the model could take would be cut",
                self.database.context_max_tokens
            )));
        }
        self.redis
            .validate()
            .map_err(|problem| invalid(format!("redis.url: {problem}")))?;
        Ok(())
    }

    /// Room kept at the end of an attempt for the commit after the
    /// summarizer's last call: 15 s, or a quarter of a shorter lock
    /// duration.
    pub fn commit_margin(&self) -> Duration {
        COMMIT_MARGIN.min(self.worker.lock_duration / 4)
    }

    /// The longest one LLM request can run within an attempt before the
    /// attempt's deadline cuts it: `worker.lock_duration` less the commit
    /// margin, of which two thirds on a job's last attempt when
    /// `llm.fallback_to_extractive` is on (the compaction job keeps the
    /// last third for the offline summarizer, which re-reads the span).
    pub fn llm_request_room(&self) -> Duration {
        llm_room(self.worker.lock_duration, self.llm.fallback_to_extractive)
    }

    /// `llm.request_timeout` must fit [`Settings::llm_request_room`]:
    /// otherwise a slow model's call is cut by the attempt's deadline,
    /// not by the timeout the operator chose.
    fn validate_request_timeout(&self) -> Result<(), String> {
        let timeout = self.llm.request_timeout;
        let room = self.llm_request_room();
        if timeout <= room {
            return Ok(());
        }
        let fallback = self.llm.fallback_to_extractive;
        let needed = lock_duration_for(timeout, fallback);
        Err(format!(
            "llm.request_timeout: {} does not fit an attempt: worker.lock_duration = {} leaves \
             one LLM request {} ({}), so a slow call would be cut by the attempt's deadline; set \
             worker.lock_duration to at least {} or shorten llm.request_timeout",
            secs(timeout),
            secs(self.worker.lock_duration),
            secs(room),
            if fallback {
                "the lock duration less the commit margin, two thirds of it on a job's last \
                 attempt, the rest kept for the extractive fallback"
            } else {
                "the lock duration less the commit margin"
            },
            secs(needed),
        ))
    }
}

/// The commit margin of a long attempt (see [`Settings::commit_margin`]).
const COMMIT_MARGIN: Duration = Duration::from_secs(15);

fn llm_room(lock_duration: Duration, fallback: bool) -> Duration {
    let usable = lock_duration.saturating_sub(COMMIT_MARGIN.min(lock_duration / 4));
    if fallback {
        usable * 2 / 3
    } else {
        usable
    }
}

/// The shortest lock duration, in whole seconds, whose LLM room holds
/// `timeout`. The margin is 15 s from a 60 s lock up and a quarter below,
/// so the lock needs `min(2t, 1.5t + 15 s)` with the fallback's third kept
/// and `min(4t/3, t + 15 s)` without.
fn lock_duration_for(timeout: Duration, fallback: bool) -> Duration {
    let t = timeout.as_secs_f64();
    let margin = COMMIT_MARGIN.as_secs_f64();
    let needed = if fallback {
        (2.0 * t).min(1.5 * t + margin)
    } else {
        (4.0 * t / 3.0).min(t + margin)
    };
    Duration::from_secs(needed.ceil() as u64)
}

/// A duration as whole or fractional seconds, the way the configuration
/// writes them (`190s`, `1.5s`).
fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.3}s", d.as_secs_f64())
            .trim_end_matches('0')
            .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llm(timeout: Duration, lock: Duration, fallback: bool) -> Settings {
        let mut s = Settings::default();
        s.llm.provider = Provider::OpenAi;
        s.llm.model = "local".into();
        s.llm.base_url = Some("http://127.0.0.1:8080/v1".into());
        s.llm.request_timeout = timeout;
        s.llm.fallback_to_extractive = fallback;
        s.worker.lock_duration = lock;
        s.worker.renew_interval = Duration::from_secs(1);
        s
    }

    #[test]
    fn the_default_request_timeout_fits_the_default_attempt() {
        let s = llm(
            LlmConfig::default().request_timeout,
            RuntimeConfig::default().lock_duration,
            true,
        );
        s.validate().unwrap();
        assert_eq!(s.commit_margin(), Duration::from_secs(15));
        assert_eq!(
            s.llm_request_room(),
            Duration::from_secs(190),
            "(5 min - 15 s) x 2/3"
        );
    }

    #[test]
    fn a_request_timeout_the_attempt_would_cut_is_refused_with_the_lock_that_fits() {
        for (timeout, fallback, fits) in [
            (600, true, 915),  // 1.5 x 600 + 15
            (600, false, 615), // 600 + 15
            (10, true, 20),    // a short lock keeps a quarter: 2 x 10
            (10, false, 14),   // 4/3 x 10, rounded up
        ] {
            let timeout = Duration::from_secs(timeout);
            let fits = Duration::from_secs(fits);
            let err = llm(timeout, Duration::from_secs(5), fallback)
                .validate()
                .unwrap_err()
                .to_string();
            assert!(err.contains("llm.request_timeout: "), "{err}");
            assert!(err.contains("worker.lock_duration"), "{err}");
            assert!(
                err.contains(&format!("at least {}s", fits.as_secs())),
                "{err}"
            );
            llm(timeout, fits, fallback).validate().unwrap();
            let shorter = fits - Duration::from_secs(1);
            assert!(
                llm(timeout, shorter, fallback).validate().is_err(),
                "{fits:?} is the shortest that fits {timeout:?}"
            );
        }
    }

    #[test]
    fn the_extractive_summarizer_has_no_request_timeout_or_window_to_fit() {
        let mut s = Settings::default();
        s.llm.request_timeout = Duration::from_secs(3_600);
        s.engine.trigger = compactor_shared::trigger::TriggerPolicy::Threshold {
            context_window: 1_000,
            ratio: 0.7,
            output_reserve: 200,
            safety_margin: 100,
        };
        s.validate().unwrap();
        s.llm.provider = Provider::OpenAi;
        s.llm.model = "m".into();
        s.llm.request_timeout = Duration::from_secs(60);
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("engine.trigger.context_window"), "{err}");
    }

    #[test]
    fn the_probe_listener_needs_an_address_of_its_own_and_no_token() {
        let same = AdminSettings {
            health_listen: Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 9464))),
            ..AdminSettings::default()
        };
        let refused = same.validate().unwrap_err();
        assert!(refused.contains("admin.health_listen"), "{refused}");
        // Beyond loopback without a token: nothing on it reads or writes a
        // conversation.
        let own = AdminSettings {
            health_listen: Some(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 9465))),
            ..AdminSettings::default()
        };
        assert_eq!(own.validate(), Ok(()));
    }

    #[test]
    fn the_admin_token_comes_from_code_then_the_named_variable() {
        let none = AdminSettings::default();
        assert_eq!(none.resolve_token(|_| None), Ok(None));

        let named = AdminSettings {
            token_env: Some("ADMIN_TOKEN".into()),
            ..AdminSettings::default()
        };
        let env = |name: &str| (name == "ADMIN_TOKEN").then(|| "s3cret".to_owned());
        let token = named.resolve_token(env).unwrap().unwrap();
        assert!(token.matches(b"s3cret"));
        assert!(!token.matches(b"s3cre"));
        assert!(!token.matches(b"s3cret!"));
        assert_eq!(format!("{token:?}"), "AdminToken(***)");

        let err = named.resolve_token(|_| None).unwrap_err();
        assert!(err.to_string().contains("ADMIN_TOKEN"), "{err}");
        assert!(named.resolve_token(|_| Some(String::new())).is_err());

        let given = AdminSettings {
            token: Some(AdminToken::new("in-code")),
            ..named
        };
        assert!(given
            .resolve_token(|_| None)
            .unwrap()
            .unwrap()
            .matches(b"in-code"));
    }

    #[test]
    fn admin_keys_are_overridden_by_the_environment_and_checked() {
        let env = [
            (
                "COMPACTOR__ADMIN__LISTEN".to_owned(),
                "0.0.0.0:9000".to_owned(),
            ),
            (
                "COMPACTOR__ADMIN__MAX_BODY_BYTES".to_owned(),
                "4096".to_owned(),
            ),
            (
                "COMPACTOR__ADMIN__TOKEN_ENV".to_owned(),
                "MY_TOKEN".to_owned(),
            ),
        ];
        let settings = Settings::load_from(None, env).unwrap();
        assert_eq!(settings.admin.listen, "0.0.0.0:9000".parse().unwrap());
        assert_eq!(settings.admin.max_body_bytes, 4096);
        assert_eq!(settings.admin.token_env.as_deref(), Some("MY_TOKEN"));

        let tiny = [(
            "COMPACTOR__ADMIN__MAX_BODY_BYTES".to_owned(),
            "10".to_owned(),
        )];
        let err = Settings::load_from(None, tiny).unwrap_err();
        assert!(err.to_string().contains("admin.max_body_bytes"), "{err}");
        let bad = [(
            "COMPACTOR__ADMIN__LISTEN".to_owned(),
            "localhost".to_owned(),
        )];
        assert!(Settings::load_from(None, bad).is_err());
    }

    #[test]
    fn metric_domains_come_from_the_environment_and_are_checked() {
        assert!(Settings::load_from(None, [])
            .unwrap()
            .metrics
            .domains
            .is_empty());
        let env = [(
            "COMPACTOR__METRICS__DOMAINS".to_owned(),
            "chat,support".to_owned(),
        )];
        let settings = Settings::load_from(None, env).unwrap();
        assert_eq!(settings.metrics.domains, ["chat", "support"]);
        for bad in ["other", "Chat", "chat,chat"] {
            let env = [("COMPACTOR__METRICS__DOMAINS".to_owned(), bad.to_owned())];
            let err = Settings::load_from(None, env).unwrap_err();
            assert!(err.to_string().contains("metrics.domains"), "{bad}: {err}");
        }
    }
}
