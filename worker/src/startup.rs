//! Starting the worker: one [`Application::build`] that `main` and the
//! end-to-end tests both use. It connects to the database (waiting for it,
//! as for Redis), checks the schema, connects to Redis, builds the
//! summarizer and the compaction job, installs the metrics recorder and
//! binds the admin HTTP API; [`Application::run`] then runs the queue
//! runtime and serves the API until `shutdown` is cancelled.
//!
//! The schema: a brand-new database (no migration applied yet, e.g. the
//! SQLite file of a first run) is created on the spot, so the first command
//! on a fresh machine just works; a database that is behind (an upgrade) is
//! refused with a clear message, because migrating a production schema is a
//! deliberate step (`compactor migrate`), not a side effect of a restart.
//!
//! With an LLM summarizer, the provider, base URL (without credentials) and
//! model are logged, and [`probe`] asks the server, in the background,
//! whether it can serve them; start-up never waits for the answer.
//!
//! Shutdown: the runtime stops claiming and drains its jobs; meanwhile the
//! admin API keeps answering (`/readyz` says 503, long polls end, `/metrics`
//! covers the drain), and stops once the runtime has returned.

pub mod probe;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use compactor_producer::client::Compactor;
use compactor_producer::events::EventNotWritten;
use compactor_producer::events::InternalEvent;
use compactor_producer::store::{EventKind, NewEvent, Refusal, SchemaStatus, Store, StoreError};
use futures::future::BoxFuture;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::connect::connect_with_retry;
use crate::hook::Hook;
use crate::http::{descriptors, AdminServer, AppState, ConnectionLimits, Listener};
use crate::jobs::{CompactHandler, CompactSettings, Summarizer};
use crate::llm::{LlmClient, LlmError, Provider};
use crate::observability::{self, ObservabilityError};
use crate::outbox::{Relay, Webhook};
use crate::proxy::ProxyState;
use crate::runtime::{DeadLetterHook, DeadLettered, Runtime, RuntimeError};
use crate::settings::{MissingAdminToken, Settings};
use probe::Probe;

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
    /// Redis refused the credentials of `[redis] url`: not retried.
    #[error(
        "Redis refused the credentials of [redis] url (REDIS_URL); fix the password or user: {0}"
    )]
    RedisAuth(#[source] compactor_producer::queue::QueueError),
    /// Stopped (SIGTERM) while waiting for Redis to answer.
    #[error("stopped while waiting for Redis, which did not answer: {0}")]
    RedisUnreachable(#[source] compactor_producer::queue::QueueError),
    /// Stopped (SIGTERM) while waiting for the database to answer.
    #[error("stopped while waiting for the database, which did not answer: {0}")]
    DatabaseUnreachable(#[source] StoreError),
    /// The database refused the credentials or the database name of
    /// `[database] url`: not retried.
    #[error("{}; fix [database] url (DATABASE_URL): {source}", .refusal.as_str())]
    DatabaseRefused {
        refusal: Refusal,
        #[source]
        source: StoreError,
    },
    #[error("LLM: {0}")]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    AdminToken(#[from] MissingAdminToken),
    #[error(transparent)]
    Proxy(#[from] crate::proxy::ProxyStartError),
    #[error("admin API: cannot listen on {addr}: {source}")]
    AdminBind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("admin API stopped: {0}")]
    AdminServe(#[source] std::io::Error),
    #[error(transparent)]
    Metrics(#[from] ObservabilityError),
    /// A webhook's secret could not be had (`secret_env` names a variable
    /// that is not set, or holds no `whsec_` secret).
    #[error("{0}")]
    WebhookSecret(String),
    /// `[hook]` is unusable (its secret is not to be had).
    #[error("{0}")]
    Hook(String),
}

impl StartupError {
    /// The process's exit status for this error: 2 when the configuration
    /// cannot work until someone changes it (a missing admin token or API
    /// key, a URL that is not one, credentials Redis refuses, a setting out
    /// of range), which systemd does not restart (`RestartPreventExitStatus=2`);
    /// 1 when a restart may succeed (a database still down, a schema the
    /// migration job will bring up, a port in use).
    pub fn exit_code(&self) -> u8 {
        use compactor_producer::queue::QueueError;
        match self {
            StartupError::AdminToken(_)
            | StartupError::WebhookSecret(_)
            | StartupError::Hook(_)
            | StartupError::Proxy(crate::proxy::ProxyStartError::MissingKey(_))
            | StartupError::RedisAuth(_)
            | StartupError::DatabaseRefused { .. }
            | StartupError::Llm(LlmError::Config(_))
            | StartupError::Queue(QueueError::Url { .. } | QueueError::Config(_))
            | StartupError::Runtime(RuntimeError::Config(_)) => 2,
            _ => 1,
        }
    }
}

/// Builds the worker and runs it until `shutdown` is cancelled.
pub async fn run(settings: Settings, shutdown: CancellationToken) -> Result<(), StartupError> {
    Application::build(settings, shutdown).await?.run().await
}

/// A worker connected and bound, ready to run.
pub struct Application {
    runtime: Runtime<CompactHandler>,
    admin: Option<AdminServer>,
    admin_addr: Option<SocketAddr>,
    /// The probe listener (`admin.health_listen`), when configured.
    probes: Option<AdminServer>,
    probe_addr: Option<SocketAddr>,
    /// The drop-in proxy (`[proxy] listen`), when configured.
    proxy: Option<AdminServer>,
    proxy_addr: Option<SocketAddr>,
    reconcile: Option<Reconciler>,
    /// The event outbox's relay: runs beside the runtime, stops after it.
    relay: Relay,
    /// Lease releases of attempts cancelled at shutdown.
    cleanups: tokio_util::task::TaskTracker,
    shutdown: CancellationToken,
}

impl Application {
    /// Connects, prepares the schema, builds the job and binds the admin
    /// API (when `[admin] enabled`). Waits for the database and Redis until
    /// they answer or `shutdown` is cancelled; an admin token that is
    /// configured but missing fails at once, before any waiting.
    pub async fn build(
        settings: Settings,
        shutdown: CancellationToken,
    ) -> Result<Application, StartupError> {
        // The proxy takes the admin token too (in its own header).
        let admin_token = if settings.admin.enabled || settings.proxy.listen.is_some() {
            settings
                .admin
                .resolve_token(|name| std::env::var(name).ok())?
        } else {
            None
        };
        let admin_token_for_proxy = admin_token.clone();
        let webhooks = resolve_webhooks(&settings)?;
        let hook = Hook::from_settings(&settings.hook, |name| std::env::var(name).ok())
            .map_err(StartupError::Hook)?;
        // The summarizer first: a missing API key is a configuration
        // error, reported at once rather than after waiting for the
        // database and Redis.
        let summarizer = match settings.llm.provider {
            Provider::Extractive => Summarizer::Extractive,
            _ => Summarizer::Llm(LlmClient::from_config(&settings.llm)?),
        };
        let store = connect_store(&settings, &shutdown).await?;
        prepare_schema(&store).await?;
        let queue = connect_with_retry(
            &settings.redis,
            settings.queue.clone(),
            shutdown.clone().cancelled_owned(),
        )
        .await
        .map_err(|error| {
            if crate::connect::is_auth_failure(&error) {
                StartupError::RedisAuth(error)
            } else if shutdown.is_cancelled() {
                StartupError::RedisUnreachable(error)
            } else {
                StartupError::Queue(error)
            }
        })?;
        if let Summarizer::Llm(client) = &summarizer {
            start_probe(client, &settings, &shutdown);
        }
        let mut probe_server = None;
        let mut probe_addr = None;
        // What the admin API and the proxy share: one client (one kept
        // history cache, one release subscription), the connection cap
        // fitted to the descriptor limit once.
        let served = if settings.admin.enabled || settings.proxy.listen.is_some() {
            Some((
                Compactor::from_parts(store.clone(), queue.clone(), settings.engine.clone()).await,
                descriptors::fit_to_process(
                    &settings.admin,
                    settings.worker.concurrency,
                    settings.proxy.listen.is_some(),
                ),
            ))
        } else {
            None
        };
        let bind_error = |addr| move |source| StartupError::AdminBind { addr, source };
        let (admin, admin_addr) = if let (
            true,
            Some((compactor, descriptors::Fitted { admin: fitted, .. })),
        ) = (settings.admin.enabled, served.as_ref())
        {
            let metrics = observability::install()?;
            let endpoints: Vec<String> = webhooks.iter().map(|w| w.name.clone()).collect();
            observability::register_known_series(
                settings.queue.name.as_str(),
                settings.llm.provider,
                &settings.metrics.domains,
                &endpoints,
            );
            if hook.is_some() {
                observability::register_hook_series();
            }
            let listen = settings.admin.listen;
            if admin_token.is_none() && !listen.ip().is_loopback() {
                warn!(%listen, "the admin API listens beyond loopback without a token: anyone who reaches it can read and write every workstream");
            }
            let state = AppState::new(
                compactor.clone(),
                metrics,
                admin_token,
                shutdown.clone(),
                settings.admin.ready_timeout,
                settings.admin.bulk_budget(),
            );
            let limits = ConnectionLimits::from_settings(fitted);
            let server = AdminServer::bind(
                Listener::Api,
                listen,
                crate::http::router(state.clone(), fitted),
                limits,
            )
            .await
            .map_err(bind_error(listen))?;
            let addr = server.local_addr().map_err(bind_error(listen))?;
            if let Some(health) = fitted.health_listen {
                let probe_limits = ConnectionLimits {
                    max_connections: descriptors::PROBE_MAX_CONNECTIONS,
                    ..limits
                };
                let probes = AdminServer::bind(
                    Listener::Probes,
                    health,
                    crate::http::probe_router(state, fitted),
                    probe_limits,
                )
                .await
                .map_err(bind_error(health))?;
                probe_addr = Some(probes.local_addr().map_err(bind_error(health))?);
                probe_server = Some(probes);
            }
            (Some(server), Some(addr))
        } else {
            (None, None)
        };
        let (proxy, proxy_addr) = match (settings.proxy.listen, served) {
            (Some(listen), Some((compactor, fitted))) => {
                let limits = ConnectionLimits {
                    max_connections: fitted.proxy_connections,
                    ..ConnectionLimits::from_settings(&fitted.admin)
                };
                if !settings.admin.enabled {
                    // The recorder is installed with the admin API.
                    observability::install()?;
                }
                observability::register_proxy_series();
                let state =
                    ProxyState::new(compactor, settings.proxy.clone(), admin_token_for_proxy)
                        .map_err(StartupError::Proxy)?;
                let server =
                    AdminServer::bind(Listener::Proxy, listen, crate::proxy::router(state), limits)
                        .await
                        .map_err(bind_error(listen))?;
                let addr = server.local_addr().map_err(bind_error(listen))?;
                (Some(server), Some(addr))
            }
            _ => (None, None),
        };
        info!(
            summarizer = summarizer.model().as_deref().unwrap_or("extractive"),
            database = %settings.database.url,
            redis = %settings.redis.url,
            redis_cluster = settings.redis.cluster,
            admin = %admin_addr.map_or_else(|| "disabled".to_owned(), |a| a.to_string()),
            probes = %probe_addr.map_or_else(|| "with the API".to_owned(), |a| a.to_string()),
            proxy = %proxy_addr.map_or_else(|| "disabled".to_owned(), |a| a.to_string()),
            "compactor-worker ready"
        );
        let store_for_sweep = store.clone();
        let outbox_wake = Arc::new(Notify::new());
        let relay = Relay::new(
            store.clone(),
            queue.clone(),
            settings.events.clone(),
            webhooks,
            relay_owner(&settings.worker.name),
            Arc::clone(&outbox_wake),
        );
        let dead_letters = dead_letter_events(store.clone(), Arc::clone(&outbox_wake));
        let handler = CompactHandler::new(
            store,
            queue.clone(),
            summarizer,
            CompactSettings {
                lease_ttl: settings.queue.lease_ttl,
                renew_interval: settings.worker.renew_interval,
                commit_margin: settings.commit_margin(),
                fallback_to_extractive: settings.llm.fallback_to_extractive,
                ..CompactSettings::new(settings.engine.clone())
            },
        )
        .with_outbox_wake(outbox_wake)
        .with_hook(hook);
        let reconcile = (!settings.reconcile.interval.is_zero()).then(|| Reconciler {
            store: store_for_sweep,
            queue: queue.clone(),
            engine: settings.engine.clone(),
            every: settings.reconcile.interval,
        });
        let cleanups = handler.cleanups();
        let runtime =
            Runtime::new(queue, settings.worker, handler)?.with_dead_letter_hook(dead_letters);
        Ok(Application {
            runtime,
            admin,
            admin_addr,
            probes: probe_server,
            probe_addr,
            proxy,
            proxy_addr,
            reconcile,
            relay,
            cleanups,
            shutdown,
        })
    }

    /// Where the admin API listens (the port actually bound when the
    /// settings said 0); `None` when it is disabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Where the probe listener (`admin.health_listen`) listens, when it
    /// is configured (the port actually bound).
    pub fn probe_addr(&self) -> Option<SocketAddr> {
        self.probe_addr
    }

    /// Where the drop-in proxy listens (`[proxy] listen`, the port
    /// actually bound), when it is configured.
    pub fn proxy_addr(&self) -> Option<SocketAddr> {
        self.proxy_addr
    }

    /// Runs the queue runtime and serves the admin API until the shutdown
    /// token given to [`Application::build`] is cancelled and the runtime
    /// has drained; then the API stops too.
    pub async fn run(self) -> Result<(), StartupError> {
        let stop_admin = CancellationToken::new();
        let server = self.admin.map(|server| {
            let stop = stop_admin.clone();
            tokio::spawn(async move { server.serve(stop).await })
        });
        let probes = self.probes.map(|server| {
            let stop = stop_admin.clone();
            tokio::spawn(async move { server.serve(stop).await })
        });
        let proxy = self.proxy.map(|server| {
            let stop = stop_admin.clone();
            tokio::spawn(async move { server.serve(stop).await })
        });
        let sweep = self
            .reconcile
            .map(|r| tokio::spawn(r.run(self.shutdown.clone())));
        let stop_relay = CancellationToken::new();
        let relay = tokio::spawn(self.relay.run(stop_relay.clone()));
        let result = self.runtime.run(self.shutdown.cancelled_owned()).await;
        // The runtime has drained: the relay's round in progress (with the
        // events of the last commits, if it was woken for them) finishes;
        // whatever is left waits in the outbox for the next worker.
        stop_relay.cancel();
        if tokio::time::timeout(Duration::from_secs(5), relay)
            .await
            .is_err()
        {
            warn!("the event relay did not stop in time; its claims expire on their own");
        }
        // Attempts handed back after the grace period release their entity
        // leases in the background; let them finish (briefly).
        self.cleanups.close();
        if tokio::time::timeout(Duration::from_secs(5), self.cleanups.wait())
            .await
            .is_err()
        {
            warn!("entity leases of cancelled attempts not all released; they expire on their own");
        }
        stop_admin.cancel();
        if let Some(sweep) = sweep {
            sweep.abort();
        }
        for server in [server, probes, proxy].into_iter().flatten() {
            match server.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    result?;
                    return Err(StartupError::AdminServe(e));
                }
                Err(e) => warn!(error = %e, "the admin API task ended abnormally"),
            }
        }
        result?;
        Ok(())
    }
}

/// Logs which LLM the worker summarizes with, and probes it in the
/// background (see [`probe`]).
fn start_probe(client: &LlmClient, settings: &Settings, shutdown: &CancellationToken) {
    let llm = &settings.llm;
    info!(
        provider = client.provider(),
        base_url = %llm.effective_base_url().map(probe::shown_url).unwrap_or_default(),
        model = client.model(),
        request_timeout_ms = crate::telemetry::millis(llm.request_timeout),
        "LLM summarizer configured"
    );
    let call_tokens = settings.engine.summarization_call().total();
    let Some(probe) = Probe::new(llm, Probe::key_from_env(llm), call_tokens) else {
        return;
    };
    let fallback = llm.fallback_to_extractive;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            finding = probe.run() => probe.report(&finding, fallback),
            () = stop.cancelled() => {}
        }
    });
}

/// The webhooks of `[events]`, with their secrets (from the file or the
/// environment).
fn resolve_webhooks(settings: &Settings) -> Result<Vec<Webhook>, StartupError> {
    settings
        .events
        .webhooks
        .iter()
        .map(|hook| {
            Ok(Webhook {
                name: hook.name.clone(),
                url: hook.url.clone(),
                secret: hook
                    .resolve_secret(|name| std::env::var(name).ok())
                    .map_err(StartupError::WebhookSecret)?,
                timeout: hook.timeout,
            })
        })
        .collect()
}

/// A unique claim owner for this process's relay.
fn relay_owner(name: &str) -> String {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let name: String = name.chars().take(32).collect();
    format!("{name}-relay-{}-{started:x}", std::process::id())
}

/// Writes `compaction.dead_lettered` after the queue dead-lettered a job,
/// and wakes the relay. The dead letter is in Redis: the event follows it
/// (a crash in between loses the event; see `docs/INTERNALS.md`).
fn dead_letter_events(store: Store, wake: Arc<Notify>) -> DeadLetterHook {
    Arc::new(move |job: &DeadLettered| -> BoxFuture<'static, ()> {
        let event = NewEvent::new(
            EventKind::CompactionDeadLettered,
            &job.key,
            serde_json::json!({
                "job_id": job.job_id,
                "attempt": job.attempt,
                "trigger": job.trigger,
                "reason": job.reason.chars().take(300).collect::<String>(),
            }),
        );
        let store = store.clone();
        let wake = Arc::clone(&wake);
        Box::pin(async move {
            match store.record_event(&event).await {
                Ok(_) => wake.notify_one(),
                Err(error) => EventNotWritten {
                    kind: event.kind,
                    error: &error,
                }
                .emit(),
            }
        })
    })
}

/// The periodic reconciliation sweep of one worker.
struct Reconciler {
    store: Store,
    queue: compactor_producer::queue::Queue,
    engine: compactor_shared::config::EngineConfig,
    every: Duration,
}

impl Reconciler {
    async fn run(self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(self.every) => {}
                () = shutdown.cancelled() => return,
            }
            match compactor_producer::reconcile::reconcile(&self.store, &self.queue, &self.engine)
                .await
            {
                Ok(report) => tracing::debug!(
                    over_trigger = report.over_trigger,
                    requested = report.requested,
                    in_hand = report.in_hand,
                    breaker_open = report.breaker_open,
                    dead_lettered = report.dead_lettered,
                    "reconciliation sweep"
                ),
                Err(error) => warn!(%error, "reconciliation sweep failed; next one in an interval"),
            }
        }
    }
}

/// Connects to the database, retrying with backoff until it answers or
/// `shutdown` is cancelled (a worker started before its database should
/// come up on its own); then the last error is the cause given.
async fn connect_store(
    settings: &Settings,
    shutdown: &CancellationToken,
) -> Result<Store, StartupError> {
    let mut delays =
        compactor_producer::backoff::reconnect(Duration::from_millis(250), Duration::from_secs(10));
    loop {
        match Store::connect_with(&settings.database).await {
            Ok(store) => return Ok(store),
            Err(error) => {
                if let Some(refusal) = error.refusal() {
                    return Err(StartupError::DatabaseRefused {
                        refusal,
                        source: error,
                    });
                }
                let delay = delays.next().unwrap_or(Duration::from_secs(10));
                warn!(
                    %error,
                    retry_in_ms = crate::telemetry::millis(delay),
                    "database not reachable yet"
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shutdown.cancelled() => return Err(StartupError::DatabaseUnreachable(error)),
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
