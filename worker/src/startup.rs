//! Starting the worker: one `run` that `main` and the end-to-end tests both
//! use. It connects to the database (waiting for it, as for Redis), checks
//! the schema, connects to Redis, builds the summarizer and the compaction
//! job, and runs the queue runtime until `shutdown` is cancelled.
//!
//! The schema: a brand-new database (no migration applied yet, e.g. the
//! SQLite file of a first run) is created on the spot, so the first command
//! on a fresh machine just works; a database that is behind (an upgrade) is
//! refused with a clear message, because migrating a production schema is a
//! deliberate step (`compactor migrate`), not a side effect of a restart.

use std::time::Duration;

use compactor_producer::store::{SchemaStatus, Store, StoreError};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::connect::connect_with_retry;
use crate::jobs::{CompactHandler, CompactSettings, Summarizer};
use crate::llm::{LlmClient, LlmError, Provider};
use crate::runtime::{Runtime, RuntimeError};
use crate::settings::Settings;

/// Why the worker could not start (or stopped abnormally).
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("database: {0}")]
    Store(#[from] StoreError),
    #[error(
        "the database schema is behind this build (pending: {0}); run `compactor migrate` first"
    )]
    SchemaBehind(String),
    #[error("the database schema is newer than this build (unknown migrations: {0}); upgrade compactor-worker")]
    SchemaAhead(String),
    #[error("Redis: {0}")]
    Queue(#[from] compactor_producer::queue::QueueError),
    #[error("LLM: {0}")]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("stopped before the worker could start")]
    Cancelled,
}

/// Room left in the lock duration for the commit after the summarizer's
/// last call.
const COMMIT_MARGIN: Duration = Duration::from_secs(15);

/// Runs the worker until `shutdown` is cancelled.
pub async fn run(settings: Settings, shutdown: CancellationToken) -> Result<(), StartupError> {
    let store = connect_store(&settings, &shutdown).await?;
    prepare_schema(&store).await?;
    let queue = connect_with_retry(
        settings.redis.url.expose(),
        settings.queue.clone(),
        shutdown.clone().cancelled_owned(),
    )
    .await?;
    let summarizer = match settings.llm.provider {
        Provider::Extractive => Summarizer::Extractive,
        _ => Summarizer::Llm(LlmClient::from_config(&settings.llm)?),
    };
    info!(
        summarizer = summarizer.model().as_deref().unwrap_or("extractive"),
        database = %settings.database.url,
        redis = %settings.redis.url,
        "compactor-worker ready"
    );
    let handler = CompactHandler::new(
        store,
        queue.clone(),
        summarizer,
        CompactSettings {
            lease_ttl: settings.queue.lease_ttl,
            renew_interval: settings.worker.renew_interval,
            commit_margin: COMMIT_MARGIN.min(settings.worker.lock_duration / 4),
            fallback_to_extractive: settings.llm.fallback_to_extractive,
            ..CompactSettings::new(settings.engine.clone())
        },
    );
    Runtime::new(queue, settings.worker, handler)?
        .run(shutdown.cancelled_owned())
        .await?;
    Ok(())
}

/// Connects to the database, retrying with backoff until it answers or
/// `shutdown` is cancelled (a worker started before its database should
/// come up on its own).
async fn connect_store(
    settings: &Settings,
    shutdown: &CancellationToken,
) -> Result<Store, StartupError> {
    let mut delays =
        compactor_producer::backoff::reconnect(Duration::from_millis(250), Duration::from_secs(10));
    loop {
        match Store::connect(settings.database.url.expose()).await {
            Ok(store) => return Ok(store),
            Err(error) => {
                let delay = delays.next().unwrap_or(Duration::from_secs(10));
                warn!(%error, retry_in_ms = delay.as_millis(), "database not reachable yet");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shutdown.cancelled() => return Err(StartupError::Cancelled),
                }
            }
        }
    }
}

/// Creates the schema of a brand-new database; refuses one that is behind
/// or ahead.
async fn prepare_schema(store: &Store) -> Result<(), StartupError> {
    match store.schema_status().await? {
        SchemaStatus::Current => Ok(()),
        SchemaStatus::Behind { pending }
            if pending.len() == compactor_migrations::migration_names().len() =>
        {
            info!("new database: creating the schema");
            let applied = store.migrate().await?;
            info!(migrations = applied.len(), "schema created");
            Ok(())
        }
        SchemaStatus::Behind { pending } => Err(StartupError::SchemaBehind(pending.join(", "))),
        SchemaStatus::Ahead { unknown } => Err(StartupError::SchemaAhead(unknown.join(", "))),
    }
}
