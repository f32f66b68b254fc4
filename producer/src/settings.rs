//! Loading configuration, the same way for every binary: the defaults of
//! `config/default.toml` (compiled in), then an optional file
//! (`--config FILE`), then environment variables `COMPACTOR__SECTION__KEY`
//! (e.g. `COMPACTOR__WORKER__CONCURRENCY=4`), then the conventional
//! `REDIS_URL` and `DATABASE_URL`. Each binary deserializes the sections it
//! knows into its own typed settings; a key that is misspelt or of the wrong
//! type is refused with its dotted name.

use std::path::Path;

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
/// `Debug` and errors; [`ConnectionUrl::expose`] gives the real one.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        crate::store::redact_url(&self.0)
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

/// `[database]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// `sqlite://file?mode=rwc` (the embedded default) or `postgres://…`.
    pub url: ConnectionUrl,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        DatabaseSettings {
            url: ConnectionUrl::new("sqlite://compactor.db?mode=rwc"),
        }
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
        let urls = crate::store::split_url_list(self.url.expose());
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
}
