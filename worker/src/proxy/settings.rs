//! `[proxy]`: the drop-in proxy's listener and upstream.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[proxy]`. Off unless `listen` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxySettings {
    /// Address of the proxy's listener; unset: no proxy. Beyond loopback
    /// it needs the admin token (`admin.token_env`), which clients then
    /// send in `X-Compactor-Token`, as the admin API does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Base URL of the OpenAI-compatible provider requests are sent on to
    /// (the path of each request is appended: `/v1/chat/completions`).
    pub openai_upstream: String,
    /// Base URL of the Anthropic-compatible provider `POST /v1/messages`
    /// (and any request carrying `anthropic-version`) is sent on to.
    pub anthropic_upstream: String,
    /// Name of the environment variable holding a provider key, sent when
    /// a client sends none (as `Authorization: Bearer …` to OpenAI, as
    /// `x-api-key` to Anthropic). Unset: the client's own key is what goes
    /// on (always, when it sends one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_key_env: Option<String>,
    /// A body field naming the workstream when the request has no
    /// `X-Compactor-Workstream` header, as a dotted path (`user`). Unset:
    /// the header only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workstream_field: Option<String>,
    /// The domain of a workstream named without one (`entity` rather than
    /// `domain/entity`, and every one named by `workstream_field`).
    pub domain: String,
    /// Longest a request waits for a compaction in flight, when the
    /// context would not fit the model's window without it (and, after
    /// the provider refused a context as too long, for the urgent one).
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Longest wait for a connection to the provider.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Largest request body read.
    pub max_body_bytes: usize,
    /// Memory for each workstream's last request (its body, each message's
    /// name), so the next turn reads only what it adds; the least recently
    /// served are forgotten first, and their next turn is read whole. 0:
    /// nothing is remembered.
    pub remember_bytes: usize,
}

impl Default for ProxySettings {
    fn default() -> Self {
        ProxySettings {
            listen: None,
            openai_upstream: "https://api.openai.com".to_owned(),
            anthropic_upstream: "https://api.anthropic.com".to_owned(),
            upstream_key_env: None,
            workstream_field: None,
            domain: "proxy".to_owned(),
            max_wait: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_body_bytes: 32 * 1024 * 1024,
            remember_bytes: 256 * 1024 * 1024,
        }
    }
}

impl ProxySettings {
    /// Checks each setting; `token`: whether the admin token is set.
    pub fn validate(&self, token: bool) -> Result<(), String> {
        let Some(listen) = self.listen else {
            return Ok(());
        };
        if !token && !listen.ip().is_loopback() {
            return Err(format!(
                "proxy.listen: {listen} is beyond loopback without a token: set admin.token_env \
                 (clients send it in X-Compactor-Token), or listen on 127.0.0.1"
            ));
        }
        for (name, url) in [
            ("openai_upstream", &self.openai_upstream),
            ("anthropic_upstream", &self.anthropic_upstream),
        ] {
            let url = reqwest::Url::parse(url).map_err(|e| format!("proxy.{name}: {e}"))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(format!("proxy.{name}: must be an http or https URL"));
            }
        }
        compactor_shared::EntityKey::parse(&self.domain, "x")
            .map_err(|e| format!("proxy.domain: {e}"))?;
        if self.max_body_bytes < 1024 {
            return Err("proxy.max_body_bytes: must be at least 1024".into());
        }
        Ok(())
    }
}
