//! `[hook]`: the optional pre-compaction hook (off while `url` is unset).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::outbox::WebhookSecret;

/// `[hook]`: an HTTP endpoint asked before each compaction summarizes
/// (see [`crate::hook`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HookSettings {
    /// Where the request is POSTed: `https://…`, or `http://` to a
    /// loopback host. Unset: no hook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Longest one call may take (connecting, sending, the whole answer);
    /// then the compaction proceeds without the hook (it fails open).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Signing secret, `whsec_<base64>`: the request is signed as the
    /// event webhooks are (Standard Webhooks). Prefer `secret_env`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<WebhookSecret>,
    /// The name of an environment variable holding the secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// Most characters of message text the request carries (the span's
    /// text parts, oldest first; each message cut to a tenth of this);
    /// 0 sends ids and sizes only.
    pub max_message_chars: usize,
}

impl Default for HookSettings {
    fn default() -> Self {
        HookSettings {
            url: None,
            timeout: Duration::from_secs(2),
            secret: None,
            secret_env: None,
            max_message_chars: 32_000,
        }
    }
}

impl HookSettings {
    /// Checks the URL (absolute, https or loopback http, no credentials),
    /// the timeout and that at most one secret is given.
    pub fn validate(&self) -> Result<(), String> {
        let Some(url) = &self.url else {
            return Ok(());
        };
        let url = crate::outbox::config::check_endpoint_url(url)
            .map_err(|problem| format!("hook.url: {problem}"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err("hook.url: must not carry credentials".into());
        }
        if self.timeout < Duration::from_millis(1) || self.timeout > Duration::from_secs(60) {
            return Err("hook.timeout: must be between 1ms and 60s".into());
        }
        if self.secret.is_some() && self.secret_env.is_some() {
            return Err("hook: give at most one of secret and secret_env".into());
        }
        Ok(())
    }

    /// The signing secret, if any: `secret`, or the value of the variable
    /// `secret_env` names (looked up with `env`).
    pub fn resolve_secret(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<WebhookSecret>, String> {
        if let Some(secret) = &self.secret {
            return Ok(Some(secret.clone()));
        }
        let Some(name) = &self.secret_env else {
            return Ok(None);
        };
        let value = env(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("hook.secret_env names {name}, which is not set (or empty)"))?;
        WebhookSecret::parse(&value)
            .map(Some)
            .map_err(|e| format!("hook.secret_env: {name}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_url(url: &str) -> HookSettings {
        HookSettings {
            url: Some(url.into()),
            ..HookSettings::default()
        }
    }

    #[test]
    fn no_url_is_no_hook_and_valid() {
        HookSettings::default().validate().unwrap();
    }

    #[test]
    fn the_url_must_be_https_or_loopback_http() {
        for ok in [
            "https://hooks.example.com/pre",
            "http://127.0.0.1:9/x",
            "http://localhost/x",
        ] {
            with_url(ok).validate().unwrap();
        }
        for bad in [
            "nope",
            "http://example.com/x",
            "ftp://127.0.0.1/",
            "https://u:p@example.com/",
        ] {
            assert!(with_url(bad).validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn one_secret_at_most_resolved_from_the_environment() {
        let mut s = with_url("https://a.example/");
        s.secret_env = Some("HOOK_SECRET".into());
        s.validate().unwrap();
        let env = |name: &str| (name == "HOOK_SECRET").then(|| "whsec_a2V5".to_owned());
        assert_eq!(s.resolve_secret(env).unwrap().unwrap().key(), b"key");
        assert!(s.resolve_secret(|_| None).is_err());
        s.secret = Some(WebhookSecret::parse("whsec_a2V5").unwrap());
        assert!(s.validate().is_err());
        assert!(with_url("https://a.example/")
            .resolve_secret(|_| None)
            .unwrap()
            .is_none());
    }
}
