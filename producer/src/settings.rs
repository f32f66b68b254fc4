//! Loading configuration, the same way for every binary: the defaults of
//! `config/default.toml` (compiled in), then an optional file
//! (`--config FILE`), then environment variables `COMPACTOR__SECTION__KEY`
//! (e.g. `COMPACTOR__WORKER__CONCURRENCY=4`), then the conventional
//! `REDIS_URL` and `DATABASE_URL`. Each binary deserializes the sections it
//! knows into its own typed settings; a key that is misspelt or of the wrong
//! type is refused with its dotted name.

use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// `config/default.toml`, as shipped: every key with its default.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read configuration file {path}: {detail}")]
    File { path: String, detail: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Loads `T` from the layers described in the module docs.
pub fn load<T: DeserializeOwned>(file: Option<&Path>) -> Result<T, SettingsError> {
    load_from(file, std::env::vars())
}

/// [`load`] with the environment given (so tests need not change the
/// process environment).
pub fn load_from<T, I>(file: Option<&Path>, env: I) -> Result<T, SettingsError>
where
    T: DeserializeOwned,
    I: IntoIterator<Item = (String, String)>,
{
    let mut builder = config::Config::builder().add_source(config::File::from_str(
        DEFAULT_TOML,
        config::FileFormat::Toml,
    ));
    if let Some(path) = file {
        if !path.is_file() {
            return Err(SettingsError::File {
                path: path.display().to_string(),
                detail: "no such file".into(),
            });
        }
        builder = builder.add_source(
            config::File::from(path)
                .format(config::FileFormat::Toml)
                .required(true),
        );
    }
    let mut env_map = config::Map::new();
    let mut conventional = Vec::new();
    for (name, value) in env {
        if let Some(rest) = name.strip_prefix("COMPACTOR__") {
            env_map.insert(format!("COMPACTOR__{rest}"), value);
        } else if name == "REDIS_URL" {
            conventional.push(("redis.url", value));
        } else if name == "DATABASE_URL" {
            conventional.push(("database.url", value));
        }
    }
    builder = builder.add_source(
        config::Environment::with_prefix("COMPACTOR")
            .prefix_separator("__")
            .separator("__")
            .try_parsing(true)
            .list_separator(",")
            .with_list_parse_key("engine.prune.protected_tools")
            .with_list_parse_key("engine.transcript.tools.names")
            .with_list_parse_key("engine.transcript.tools.prefixes")
            .with_list_parse_key("metrics.domains")
            .source(Some(env_map)),
    );
    for (key, value) in conventional {
        builder = builder
            .set_override(key, value)
            .map_err(|e| SettingsError::Invalid(e.to_string()))?;
    }
    let loaded = builder.build().map_err(|e| match e {
        config::ConfigError::Foreign(inner) => SettingsError::File {
            path: file.map(|p| p.display().to_string()).unwrap_or_default(),
            detail: inner.to_string(),
        },
        other => SettingsError::Invalid(other.to_string()),
    })?;
    loaded
        .try_deserialize()
        .map_err(|e| SettingsError::Invalid(e.to_string()))
}

/// A connection URL that may carry a password: shown redacted in logs,
/// `Debug`, `Display`, errors and when serialized (settings written out for
/// a support ticket or a debug dump must not carry it);
/// [`ConnectionUrl::expose`] gives the real one. Redaction does not depend
/// on the URL being well formed: a mistyped scheme or an unencoded password
/// is hidden too ([`crate::redact::redact_url`]).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ConnectionUrl(String);

impl ConnectionUrl {
    pub fn new(url: impl Into<String>) -> ConnectionUrl {
        ConnectionUrl(url.into())
    }

    /// The URL itself, for connecting. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `scheme://***@host/…` when the URL has credentials.
    pub fn redacted(&self) -> String {
        crate::redact::redact_url(&self.0)
    }
}

impl std::fmt::Debug for ConnectionUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::fmt::Display for ConnectionUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Serialized redacted: nothing that writes settings out can leak the
/// password (the real URL only ever comes from the configuration sources).
impl Serialize for ConnectionUrl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

/// `[database]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// `sqlite://file?mode=rwc` (the embedded default) or `postgres://…`.
    pub url: ConnectionUrl,
    /// Longest one statement may run: PostgreSQL's `statement_timeout` on
    /// every pooled connection (the server cancels it), SQLite's busy
    /// timeout (how long a statement waits for another writer's lock). A
    /// locked row or a runaway query then fails the request instead of
    /// holding a connection, and the request, for ever.
    #[serde(with = "humantime_serde")]
    pub statement_timeout: Duration,
    /// Most un-compacted messages one `build_context` loads. A workstream
    /// whose compactions keep failing grows without end; its context keeps
    /// the newest messages within the bound and says how many older ones it
    /// left out (`truncated`), so a read's memory stays bounded.
    pub context_max_messages: u64,
    /// Most estimated tokens of un-compacted messages one `build_context`
    /// loads (the same rule as `context_max_messages`; the newest message
    /// is always loaded). At least `engine.trigger.context_window`, so a
    /// history the model could take is never cut.
    pub context_max_tokens: u64,
    /// Most bytes of un-compacted history kept in memory between context
    /// reads (0: none kept). A turn then reads from the database only the
    /// messages appended since the workstream's previous turn; see
    /// `client::kept_tails` for why a kept history is never stale. A
    /// quarter more keeps the workstreams' summaries and states, read again
    /// only after a commit (`client::kept_compacted`).
    pub context_cache_bytes: u64,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        DatabaseSettings {
            url: ConnectionUrl::new("sqlite://compactor.db?mode=rwc"),
            statement_timeout: Duration::from_secs(30),
            context_max_messages: 50_000,
            context_max_tokens: 1_000_000,
            context_cache_bytes: 256 * 1024 * 1024,
        }
    }
}

impl DatabaseSettings {
    /// The settings for `url`, every other key at its default.
    pub fn for_url(url: impl Into<String>) -> DatabaseSettings {
        DatabaseSettings {
            url: ConnectionUrl::new(url),
            ..DatabaseSettings::default()
        }
    }

    /// Checks each setting is usable; returns the problem with its key.
    pub fn validate(&self) -> Result<(), String> {
        if self.statement_timeout < Duration::from_millis(1) {
            return Err("database.statement_timeout: must be at least 1ms".into());
        }
        if self.context_max_messages == 0 {
            return Err("database.context_max_messages: must be at least 1".into());
        }
        if self.context_max_tokens == 0 {
            return Err("database.context_max_tokens: must be at least 1".into());
        }
        Ok(())
    }
}

/// `[redis]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisSettings {
    /// One server, `redis://host:6379[/db]`; with `cluster`, the seed nodes
    /// of a Redis Cluster separated by commas
    /// (`redis://10.0.0.1:6379,redis://10.0.0.2:6379`).
    pub url: ConnectionUrl,
    /// `url` names nodes of a Redis Cluster: commands follow the cluster's
    /// slot map (and its redirections) instead of going to one server.
    pub cluster: bool,
}

impl RedisSettings {
    /// Checks the URL fits the mode: no URL is an error, and several only
    /// name a cluster (`redis://a,redis://b` without `cluster = true` is a
    /// mistake, refused rather than guessed at). Returns the problem.
    pub fn validate(&self) -> Result<(), &'static str> {
        let urls = crate::redact::split_url_list(self.url.expose());
        if urls.is_empty() {
            return Err("no Redis URL given");
        }
        if !self.cluster && urls.len() > 1 {
            return Err("several URLs given but redis.cluster is false; \
                        set it to true for a Redis Cluster, or give one URL");
        }
        Ok(())
    }

    /// One Redis server at `url` (not a cluster).
    pub fn single(url: impl Into<String>) -> RedisSettings {
        RedisSettings {
            url: ConnectionUrl::new(url),
            cluster: false,
        }
    }

    /// A Redis Cluster reached through `seeds` (any of its nodes).
    pub fn cluster<S: AsRef<str>>(seeds: impl IntoIterator<Item = S>) -> RedisSettings {
        let list: Vec<String> = seeds.into_iter().map(|s| s.as_ref().to_owned()).collect();
        RedisSettings {
            url: ConnectionUrl::new(list.join(",")),
            cluster: true,
        }
    }
}

impl Default for RedisSettings {
    fn default() -> Self {
        RedisSettings::single("redis://127.0.0.1:6379")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_urls_never_show_passwords() {
        for (url, secret) in [
            ("postgres://app:hunter2@db:5432/x", "hunter2"),
            (
                "postgres://app@db/x?password=hunter2&sslmode=require",
                "hunter2",
            ),
            ("redis://:hunter2@cache:6379/0", "hunter2"),
            ("redis://:hunter2@a:6379,redis://:hunter2@b:6379", "hunter2"),
        ] {
            let url = ConnectionUrl::new(url);
            for shown in [format!("{url}"), format!("{url:?}"), url.redacted()] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
    }

    /// The leak: a mistyped scheme (`redis//:pw@…`) was shown
    /// whole by `Display`/`Debug` (so in CLI errors and retry warnings),
    /// and `Serialize` wrote every URL as given.
    #[test]
    fn mistyped_urls_and_serialized_settings_never_show_passwords() {
        let secret = "hunter2";
        for url in [
            "redis//:hunter2@cache:6379",
            "redis:/:hunter2@cache:6379",
            "redis://:hun/ter2@cache:6379/0",
            "postgres//app:hunter2@db/x",
        ] {
            let url = ConnectionUrl::new(url);
            let secret = if url.expose().contains("hun/ter2") {
                "ter2"
            } else {
                secret
            };
            for shown in [format!("{url}"), format!("{url:?}"), url.redacted()] {
                assert!(!shown.contains(secret), "{shown}");
            }
            let json = serde_json::to_string(&url).unwrap();
            assert!(!json.contains(secret), "{json}");
        }
        let settings = DatabaseSettings::for_url("postgres://app:hunter2@db/x");
        let json = serde_json::to_string(&settings).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(json.contains("postgres://app:***@db/x"), "{json}");
        let redis = RedisSettings::single("redis://:hunter2@cache:6379");
        assert!(!format!("{redis:?}").contains("hunter2"));
        assert!(!serde_json::to_string(&redis).unwrap().contains("hunter2"));
        // Deserializing still reads the real URL.
        let read: ConnectionUrl = serde_json::from_str("\"redis://:pw@h\"").unwrap();
        assert_eq!(read.expose(), "redis://:pw@h");
    }
}
