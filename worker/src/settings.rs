//! The worker's settings: every section of `config/default.toml`, loaded by
//! [`compactor_producer::settings::load`] (defaults, `--config FILE`,
//! `COMPACTOR__SECTION__KEY`, `REDIS_URL`, `DATABASE_URL`) and checked as a
//! whole before anything starts.

use std::path::Path;

use compactor_producer::queue::QueueConfig;
use compactor_producer::settings::{self, DatabaseSettings, RedisSettings, SettingsError};
use compactor_shared::config::EngineConfig;
use serde::{Deserialize, Serialize};

use crate::llm::LlmConfig;
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
        Ok(())
    }
}
