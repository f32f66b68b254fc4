//! `[events]` and `[[events.webhooks]]`: the event stream and webhooks.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretSlice};
use serde::{Deserialize, Serialize};

/// `[events]`: what the outbox relay of each worker does with the events
/// compactions write (see `crate::outbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsSettings {
    /// Put every event on the Redis Stream `{cq:<queue>}:events`.
    pub stream: bool,
    /// The stream keeps about this many entries (`XADD … MAXLEN ~ N`:
    /// at least N, trimmed in whole blocks).
    pub stream_maxlen: usize,
    /// How often the relay looks for new events and due deliveries when
    /// nothing woke it (a commit of this worker wakes it at once).
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Events delivered everywhere are deleted this long after they were
    /// written; events with a delivery not delivered are kept.
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Attempts of one webhook delivery before it is `failed` (kept,
    /// listed, and retried by `compactor events retry`).
    pub max_attempts: u32,
    /// Backoff between attempts: this, doubled after each failed attempt…
    #[serde(with = "humantime_serde")]
    pub retry_base_delay: Duration,
    /// …up to this.
    #[serde(with = "humantime_serde")]
    pub retry_max_delay: Duration,
    /// The webhooks every event is posted to.
    pub webhooks: Vec<WebhookSettings>,
}

impl Default for EventsSettings {
    fn default() -> Self {
        EventsSettings {
            stream: true,
            stream_maxlen: 10_000,
            poll_interval: Duration::from_secs(1),
            retention: Duration::from_secs(7 * 24 * 3600),
            max_attempts: 12,
            retry_base_delay: Duration::from_secs(5),
            retry_max_delay: Duration::from_secs(3600),
            webhooks: Vec::new(),
        }
    }
}

/// `[[events.webhooks]]`: one receiver of every event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// 1-64 of `a-z 0-9 _ -`: the `endpoint` of its deliveries and of the
    /// metrics (never the URL).
    pub name: String,
    /// `https://…`; `http://` only to a loopback host.
    pub url: String,
    /// The signing secret, `whsec_<base64>` (Standard Webhooks). Prefer
    /// `secret_env`: secrets belong in the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<WebhookSecret>,
    /// The name of an environment variable holding the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// Longest one delivery may take (connecting, sending, the answer's
    /// head); then it counts as failed.
    #[serde(with = "humantime_serde", default = "default_webhook_timeout")]
    pub timeout: Duration,
}

fn default_webhook_timeout() -> Duration {
    Duration::from_secs(10)
}

/// A webhook signing secret: the key bytes of `whsec_<base64>`. Never
/// printed or serialized.
#[derive(Clone)]
pub struct WebhookSecret(Arc<SecretSlice<u8>>);

impl WebhookSecret {
    /// Parses `whsec_<base64>` (standard alphabet, padded or not).
    pub fn parse(text: &str) -> Result<WebhookSecret, String> {
        let encoded = text
            .strip_prefix("whsec_")
            .ok_or("must start with \"whsec_\" (Standard Webhooks)")?;
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let key = engine
            .decode(encoded.trim())
            .map_err(|e| format!("the part after \"whsec_\" is not base64: {e}"))?;
        if key.is_empty() {
            return Err("the key after \"whsec_\" is empty".into());
        }
        Ok(WebhookSecret(Arc::new(SecretSlice::from(key))))
    }

    /// The key bytes, for signing. Never log them.
    pub fn key(&self) -> &[u8] {
        self.0.expose_secret()
    }
}

impl PartialEq for WebhookSecret {
    fn eq(&self, other: &WebhookSecret) -> bool {
        self.key() == other.key()
    }
}

impl Eq for WebhookSecret {}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

impl Serialize for WebhookSecret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("whsec_***")
    }
}

impl<'de> Deserialize<'de> for WebhookSecret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WebhookSecret, D::Error> {
        let text = String::deserialize(d)?;
        WebhookSecret::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl EventsSettings {
    /// Checks every setting and every webhook (names unique, URLs HTTPS or
    /// loopback HTTP, one secret each).
    pub fn validate(&self) -> Result<(), String> {
        if self.stream_maxlen == 0 {
            return Err("events.stream_maxlen: must be at least 1".into());
        }
        if self.poll_interval < Duration::from_millis(10) {
            return Err("events.poll_interval: must be at least 10ms".into());
        }
        if self.max_attempts == 0 {
            return Err("events.max_attempts: must be at least 1".into());
        }
        if self.retry_base_delay.is_zero() || self.retry_max_delay < self.retry_base_delay {
            return Err(
                "events.retry_base_delay: must be positive and at most events.retry_max_delay"
                    .into(),
            );
        }
        let mut names = std::collections::BTreeSet::new();
        for hook in &self.webhooks {
            hook.validate()?;
            if !names.insert(hook.name.as_str()) {
                return Err(format!(
                    "events.webhooks: the name {:?} is used twice",
                    hook.name
                ));
            }
        }
        Ok(())
    }
}

impl WebhookSettings {
    fn validate(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(format!(
                "events.webhooks: name {:?}: use 1-64 of a-z, 0-9, '_' and '-'",
                self.name.chars().take(80).collect::<String>()
            ));
        }
        let problem = |p: &str| Err(format!("events.webhooks[{}]: {p}", self.name));
        let url = match check_endpoint_url(&self.url) {
            Ok(url) => url,
            Err(p) => return problem(&format!("url: {p}")),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return problem("url: must not carry credentials");
        }
        match (&self.secret, &self.secret_env) {
            (Some(_), None) | (None, Some(_)) => {}
            _ => return problem("give exactly one of secret and secret_env"),
        }
        if self.timeout < Duration::from_millis(1) || self.timeout > Duration::from_secs(300) {
            return problem("timeout: must be between 1ms and 5m");
        }
        Ok(())
    }

    /// The secret: `secret`, or the value of the variable `secret_env`
    /// names (looked up with `env`).
    pub fn resolve_secret(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<WebhookSecret, String> {
        if let Some(secret) = &self.secret {
            return Ok(secret.clone());
        }
        let Some(name) = &self.secret_env else {
            return Err(format!(
                "events.webhooks[{}]: no secret configured",
                self.name
            ));
        };
        let value = env(name).filter(|v| !v.is_empty()).ok_or_else(|| {
            format!(
                "events.webhooks[{}]: secret_env names {name}, which is not set (or empty)",
                self.name
            )
        })?;
        WebhookSecret::parse(&value)
            .map_err(|e| format!("events.webhooks[{}]: {name}: {e}", self.name))
    }
}

/// Checks the URL of an endpoint the worker POSTs to (a webhook, the
/// pre-compaction hook): `https://`, or `http://` to a loopback host only
/// (a plain-text request elsewhere would expose its signed body). The
/// problem, without the key's name, when it is not.
pub(crate) fn check_endpoint_url(url: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    let host = url.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err("must be https:// (http:// only to a loopback host)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(url: &str) -> WebhookSettings {
        WebhookSettings {
            name: "audit".into(),
            url: url.into(),
            secret: Some(WebhookSecret::parse("whsec_c2VjcmV0").unwrap()),
            secret_env: None,
            timeout: default_webhook_timeout(),
        }
    }

    #[test]
    fn secrets_are_standard_webhooks_and_never_shown() {
        let secret = WebhookSecret::parse("whsec_c2VjcmV0").unwrap();
        assert_eq!(secret.key(), b"secret");
        assert_eq!(format!("{secret:?}"), "WebhookSecret(***)");
        assert!(WebhookSecret::parse("c2VjcmV0").is_err());
        assert!(WebhookSecret::parse("whsec_!!").is_err());
        assert!(WebhookSecret::parse("whsec_").is_err());
    }

    #[test]
    fn webhooks_need_https_or_loopback_and_one_secret() {
        let mut settings = EventsSettings::default();
        settings.validate().unwrap();
        for ok in [
            "https://hooks.example.com/compactor",
            "http://127.0.0.1:8080/hook",
            "http://localhost/hook",
            "http://[::1]:9/x",
        ] {
            settings.webhooks = vec![hook(ok)];
            settings.validate().unwrap();
        }
        for bad in [
            "http://hooks.example.com/x",
            "ftp://127.0.0.1/x",
            "https://user:pw@example.com/",
            "nope",
        ] {
            settings.webhooks = vec![hook(bad)];
            assert!(settings.validate().is_err(), "{bad}");
        }
        let mut two = hook("https://a.example/");
        two.secret_env = Some("HOOK_SECRET".into());
        settings.webhooks = vec![two.clone()];
        assert!(settings.validate().is_err(), "two secrets");
        two.secret = None;
        settings.webhooks = vec![two.clone()];
        settings.validate().unwrap();
        let env = |name: &str| (name == "HOOK_SECRET").then(|| "whsec_a2V5".to_owned());
        assert_eq!(two.resolve_secret(env).unwrap().key(), b"key");
        assert!(two.resolve_secret(|_| None).is_err());
        settings.webhooks = vec![hook("https://a.example/"), hook("https://b.example/")];
        assert!(settings.validate().unwrap_err().contains("twice"));
    }
}
