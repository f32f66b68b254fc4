//! The compaction job: one attempt at compacting one workstream.
//!
//! ```text
//! stale auto request? → nothing to do
//! take the entity lease (waiters see isCompacting), renewed while we work
//! ask the pre-compaction hook, when configured (`super::hooked`): skip
//!   (a `skipped` run, nothing else), a replacement summary, or extra
//!   instructions and context; it fails open
//! the compaction pipeline (compactor_shared::pipeline::compact): the cut,
//!   the user's statements, the summary chunk by chunk, rollups, the
//!   evidence, the memory fold, the tail's pruning — fed pages from the
//!   store, its LLM calls bounded by the attempt's deadline
//! fenced commit (lease owner + expected watermark), which releases the lease
//! announce the outcome to waiters
//! ```
//!
//! The rules of compaction live in the pipeline, which does no I/O; this
//! job owns the I/O around it: the store, the lease, the LLM client, the
//! fallback to the extractive summarizer and the commit.
//!
//! Once the lease is taken, every way out releases it and announces the
//! outcome — commit, nothing to do, conflict, failure, and cancellation by
//! the runtime (a drop guard) — so chat requests never wait for a lease
//! deadline while a worker is alive. Failures are retried by the runtime.
//! When enabled, the extractive summarizer stands in for the LLM (the run
//! is marked degraded, with its reason on the run row): at once while the
//! provider is unhealthy, after the failure that made it unhealthy, after a
//! chunk too long even at the minimum size, and after any LLM failure on
//! the last attempt (a third of that attempt's time is kept for it) — so a
//! workstream still shrinks while the LLM is down or answers junk.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use compactor_producer::events::{CompactionEvent, EventOutcome};
use compactor_producer::metrics::domain_label;
use compactor_producer::queue::payload::JobKind;
use compactor_producer::queue::{Queue, Trigger};
use compactor_producer::store::{
    Commit, CommitOutcome, ConflictReason, DegradedReason, EventKind, LeaseTaken, MemoryFold,
    NewEvent, NewRun, ReadAheadPages, RunHook, RunOutcome, Store, StoreError, WorkstreamRow,
};
use compactor_shared::config::EngineConfig;
use compactor_shared::pipeline::{self, PipelineError};
use compactor_shared::prompt::CompactionInput;
use compactor_shared::summary::SummarizerOutput;
use compactor_shared::CharEstimator;
use compactor_shared::{extractive, stated};
use compactor_shared::{EntityKey, Message, MessageId, Summary, TokenEstimator};
use futures::future::BoxFuture;
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use super::hooked::{self, Asked, Plan};
use super::summarizer::{Fallback, LlmUsage, SummarizeError, Summarizer};
use crate::events::{
    Compacted, CompactionConflicted, CompactionFailed, CompactionSkipped, FellBack, InternalEvent,
    ReleaseNotAnnounced,
};
use crate::llm::Calls;
use crate::runtime::lease::{self, Lost};
use crate::runtime::{Job, JobError, JobHandler};

/// How often a held entity lease is looked at again while waiting for it.
const LEASE_POLL: Duration = Duration::from_millis(100);

/// Settings of the compaction job.
#[derive(Debug, Clone)]
pub struct CompactSettings {
    pub engine: EngineConfig,
    /// How long the entity lease lasts without renewal (the queue's lease
    /// TTL: a crashed worker's entity is free again as soon as its job is).
    pub lease_ttl: Duration,
    /// How often the entity lease is renewed.
    pub renew_interval: Duration,
    /// Time kept free at the end of an attempt (before the runtime cancels
    /// it at the lock duration) for the commit: LLM retries stop before.
    pub commit_margin: Duration,
    /// Messages read per database round trip, at most…
    pub page_size: u64,
    /// …and at most this many tokens of them (by their stored estimates):
    /// pages of huge messages are shorter, so memory stays bounded.
    pub page_tokens: u64,
    /// On the last attempt, summarize offline when the LLM fails.
    pub fallback_to_extractive: bool,
    /// A chunk the model finds too long is halved down to this size; below
    /// it, the context-length error is permanent.
    pub min_chunk_chars: usize,
}

impl CompactSettings {
    pub fn new(engine: EngineConfig) -> CompactSettings {
        CompactSettings {
            engine,
            lease_ttl: Duration::from_secs(30),
            renew_interval: Duration::from_secs(10),
            commit_margin: Duration::from_secs(15),
            page_size: 1_000,
            page_tokens: 4_000_000,
            fallback_to_extractive: true,
            min_chunk_chars: 4_000,
        }
    }
}

/// A test hook: runs right before the commit, with the entity key.
pub type BeforeCommit = Arc<dyn Fn(EntityKey) -> BoxFuture<'static, ()> + Send + Sync>;

/// Points where tests can step in (to force races).
#[derive(Clone, Default)]
pub struct Hooks {
    pub before_commit: Option<BeforeCommit>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("before_commit", &self.before_commit.is_some())
            .finish()
    }
}

/// The compaction job handler.
#[derive(Clone)]
pub struct CompactHandler {
    pub(super) store: Store,
    pub(super) queue: Queue,
    pub(super) summarizer: Summarizer,
    pub(super) settings: Arc<CompactSettings>,
    pub(super) estimator: Arc<dyn TokenEstimator>,
    hooks: Hooks,
    /// Lease releases of cancelled attempts, still running: the process
    /// waits for them before it exits (see [`CompactHandler::cleanups`]).
    cleanups: TaskTracker,
    /// Woken right after an attempt wrote an event to the outbox, so the
    /// relay picks it up at once rather than at its next poll.
    pub(super) outbox_wake: Arc<Notify>,
    /// The pre-compaction hook, when `[hook] url` is set.
    hook: Option<crate::hook::Hook>,
}

impl std::fmt::Debug for CompactHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactHandler")
            .field("summarizer", &self.summarizer)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Why an attempt failed.
#[derive(Debug, thiserror::Error)]
enum CompactError {
    #[error("database: {0}")]
    Store(#[from] StoreError),
    #[error("summarizer: {0}")]
    Summarizer(#[from] SummarizeError),
    #[error("a chunk is too long for the model even at {chars} chars: {source}")]
    ChunkTooLong {
        chars: usize,
        source: SummarizeError,
    },
    #[error("the entity lease was lost")]
    LeaseLost,
    #[error("another run holds the entity lease for {left:?} more")]
    LeaseHeld { left: Duration },
    #[error("unknown workstream")]
    UnknownWorkstream,
}

impl CompactError {
    fn is_summarizer(&self) -> bool {
        matches!(
            self,
            CompactError::Summarizer(_) | CompactError::ChunkTooLong { .. }
        )
    }

    /// Will fail the same way on every attempt.
    fn is_permanent(&self) -> bool {
        matches!(
            self,
            CompactError::Store(StoreError::CorruptRow { .. })
                | CompactError::ChunkTooLong { .. }
                | CompactError::UnknownWorkstream
        )
    }

    fn into_job_error(self) -> JobError {
        if self.is_permanent() {
            return JobError::permanent(self.to_string());
        }
        if let CompactError::Store(e) = &self {
            if e.is_transient() {
                // The database is down: not this job's failure.
                return JobError::unavailable(self.to_string());
            }
        }
        let retry_after = match &self {
            CompactError::Summarizer(e) => e.retry_after(),
            CompactError::LeaseHeld { left } => Some(*left),
            _ => None,
        };
        match retry_after {
            Some(after) => JobError::retry_after(self.to_string(), after),
            None => JobError::retryable(self.to_string()),
        }
    }
}

impl CompactError {
    /// The summarizer's failure, when that is what this is.
    fn summarize_error(&self) -> Option<&SummarizeError> {
        match self {
            CompactError::Summarizer(e) | CompactError::ChunkTooLong { source: e, .. } => Some(e),
            _ => None,
        }
    }

    /// Why a run that falls back after this failure is degraded.
    fn degraded_reason(&self) -> DegradedReason {
        match self {
            CompactError::ChunkTooLong { .. } => DegradedReason::ContextLength,
            other => other.summarize_error().map_or(
                DegradedReason::LlmUnavailable,
                SummarizeError::degraded_reason,
            ),
        }
    }
}

/// What a successful attempt did.
enum Done {
    /// Under the trigger, or too few messages: nothing changed.
    Skipped,
    Committed(Report),
    Conflict(ConflictReason),
}

/// Figures of a committed compaction: the pipeline's, and what the
/// attempt adds to them.
#[derive(Debug, Clone, Default)]
struct Report {
    figures: pipeline::Report,
    /// Summarized offline in place of the LLM.
    degraded: bool,
    /// The workstream's version after the commit.
    version: i64,
    /// From the attempt's start to the commit.
    duration_ms: i64,
}

/// Everything a commit writes, prepared while holding the lease.
struct Prepared {
    compacted: pipeline::Compacted,
    /// What the summarizer's calls cost, and why the LLM was stood in for.
    usage: LlmUsage,
    /// Summarized offline in place of the LLM.
    degraded: bool,
    /// What the pre-compaction hook did.
    hook: RunHook,
}

impl CompactHandler {
    pub fn new(
        store: Store,
        queue: Queue,
        summarizer: Summarizer,
        settings: CompactSettings,
    ) -> CompactHandler {
        let estimator = Arc::new(CharEstimator::new(settings.engine.chars_per_token));
        CompactHandler {
            store,
            queue,
            summarizer,
            settings: Arc::new(settings),
            estimator,
            hooks: Hooks::default(),
            cleanups: TaskTracker::new(),
            outbox_wake: Arc::new(Notify::new()),
            hook: None,
        }
    }

    /// Asks `hook` before each compaction summarizes (none: no hook).
    pub fn with_hook(mut self, hook: Option<crate::hook::Hook>) -> CompactHandler {
        self.hook = hook;
        self
    }

    /// Wakes `wake` (the outbox relay's) after each event an attempt
    /// writes.
    pub fn with_outbox_wake(mut self, wake: Arc<Notify>) -> CompactHandler {
        self.outbox_wake = wake;
        self
    }

    /// The releases of attempts cancelled while holding their lease (at
    /// shutdown, the ones handed back after the grace period). Wait for
    /// them before exiting, or waiters would sleep until the lease deadline.
    pub fn cleanups(&self) -> TaskTracker {
        self.cleanups.clone()
    }

    /// Installs test hooks.
    pub fn with_hooks(mut self, hooks: Hooks) -> CompactHandler {
        self.hooks = hooks;
        self
    }

    /// Whether the workstream is over its trigger now.
    fn due(&self, ws: &WorkstreamRow) -> bool {
        pipeline::due(
            &self.settings.engine,
            ws.summary_tokens,
            ws.uncompacted_tokens,
        )
    }

    /// One attempt. Once the entity lease is taken, every way out releases
    /// it and announces the outcome to waiters (see [`LeaseGuard`]).
    async fn attempt(&self, job: &Job) -> Result<Done, CompactError> {
        let started = Utc::now();
        let ws = self
            .store
            .workstream(&job.key)
            .await?
            .ok_or(CompactError::UnknownWorkstream)?;
        // An automatic request (or its follow-up) that is stale by now, or
        // a retry after a commit that already happened: nothing to do.
        if !job.trigger.is_manual() && !self.due(&ws) {
            info!(
                reason = "under_trigger",
                duration_ms = since_ms(started),
                "skipped: the workstream is under its trigger"
            );
            return Ok(Done::Skipped);
        }
        let owner = job.lease_token.as_str();
        let taken = self.take_lease(job, ws.id, owner).await?;
        let mut guard = LeaseGuard::new(self, job, ws.id, started);
        // An operator may have cancelled the job while this attempt waited
        // for the entity lease, before it could revoke it: then the attempt
        // stops here, fenced off (a Redis outage here is the heartbeat's
        // business: the attempt goes on).
        let revoked = self.queue.lease_revoked(owner).await.unwrap_or(false);
        // What the pre-compaction hook did, once asked: a failed run's row
        // records it too.
        let mut hook = RunHook::default();
        let outcome = if revoked {
            info!("the job was cancelled before its attempt took the entity lease");
            Ok(Held::Conflict(ConflictReason::LeaseLost))
        } else {
            self.under_lease(job, ws.id, owner, started, taken, &mut hook)
                .await
        };
        let (done, event) = match outcome {
            Ok(Held::Skipped { no_progress }) => {
                if no_progress {
                    info!(
                        reason = "nothing_to_cut",
                        duration_ms = since_ms(started),
                        "skipped: due, but nothing may be cut (counts towards the breaker)"
                    );
                } else {
                    info!(
                        reason = "under_trigger",
                        duration_ms = since_ms(started),
                        "skipped: the workstream is under its trigger"
                    );
                }
                if no_progress {
                    // Due, yet nothing may be cut (a few huge messages): a
                    // fruitless compaction, counted towards the breaker.
                    let run = self.run_row(
                        job,
                        started,
                        RunOutcome::NoProgress,
                        None,
                        &Calls::default(),
                    );
                    if let Err(e) = self.store.record_failure(ws.id, owner, &run, true).await {
                        warn!(error = %e, "could not record the fruitless run");
                        self.release(ws.id, owner).await;
                    }
                } else {
                    self.release(ws.id, owner).await;
                }
                (
                    Ok(Done::Skipped),
                    self.event(job, EventOutcome::Skipped, &Report::default(), None),
                )
            }
            Ok(Held::Committed(report)) => {
                // The commit released the lease.
                let event = self.event(job, EventOutcome::Compacted, &report, None);
                (Ok(Done::Committed(report)), event)
            }
            Ok(Held::Conflict(reason)) => {
                // Fenced by owner: a no-op when the lease is someone else's.
                self.release(ws.id, owner).await;
                let event = self.event(job, EventOutcome::Conflict, &Report::default(), None);
                (Ok(Done::Conflict(reason)), event)
            }
            Err(error) => {
                let message: String = error.to_string().chars().take(1_000).collect();
                let no_calls = Calls::default();
                let calls = error
                    .summarize_error()
                    .map_or(&no_calls, SummarizeError::calls);
                let mut run = self.run_row(
                    job,
                    started,
                    RunOutcome::Failed,
                    Some(message.clone()),
                    calls,
                );
                run.hook = hook;
                // A database outage is nobody's failure: it neither ends the
                // job nor counts towards the breaker.
                let outage = matches!(&error, CompactError::Store(e) if e.is_transient());
                let final_failure = (job.is_last_attempt() && !outage) || error.is_permanent();
                let failed = self.outbox_event(
                    job,
                    EventKind::CompactionFailed,
                    json!({
                        "error": message.chars().take(300).collect::<String>(),
                        "final": final_failure,
                    }),
                );
                match self
                    .store
                    .record_failure_with_event(ws.id, owner, &run, final_failure, Some(&failed))
                    .await
                {
                    Ok(true) => self.outbox_wake.notify_one(),
                    Ok(false) => {}
                    Err(e) => {
                        warn!(error = %e, "could not record the failure; releasing the lease");
                        self.release(ws.id, owner).await;
                    }
                }
                let short = message.chars().take(300).collect();
                let event = self.event(job, EventOutcome::Failed, &Report::default(), Some(short));
                (Err(error), event)
            }
        };
        guard.disarm();
        self.announce(&job.key, &event).await;
        done
    }

    /// The part of an attempt that holds the entity lease. `taken` is the
    /// workstream as the lease was taken, when taking it read it; `hook` is
    /// set to what the pre-compaction hook did as soon as it answers.
    async fn under_lease(
        &self,
        job: &Job,
        workstream_id: i64,
        owner: &str,
        started: chrono::DateTime<Utc>,
        taken: Option<WorkstreamRow>,
        hook: &mut RunHook,
    ) -> Result<Held, CompactError> {
        // Read again under the lease: while we waited for it, the previous
        // holder may have committed.
        let ws = match taken {
            Some(ws) => ws,
            None => self
                .store
                .workstream_by_id(workstream_id)
                .await?
                .ok_or(CompactError::UnknownWorkstream)?,
        };
        if !job.trigger.is_manual() && !self.due(&ws) {
            return Ok(Held::Skipped { no_progress: false });
        }
        let (asked, prepared) = tokio::select! {
            p = self.ask_and_prepare(job, &ws, hook) => p?,
            lost = self.keep_lease(ws.id, owner) => return Err(lost),
        };
        if let Plan::Skip = asked.plan {
            // Nothing compacted; the row tells operators why.
            let mut run = self.run_row(job, started, RunOutcome::Skipped, None, &Calls::default());
            run.hook = asked.record;
            run.llm_model = None;
            self.store.record_run(ws.id, &run).await?;
            info!(
                reason = "hook_skip",
                "skipped: the pre-compaction hook said skip"
            );
            return Ok(Held::Skipped { no_progress: false });
        }
        let Some(prepared) = prepared else {
            return Ok(Held::Skipped {
                no_progress: !job.trigger.is_manual(),
            });
        };
        if let Some(hook) = &self.hooks.before_commit {
            hook(job.key.clone()).await;
        }
        self.commit(job, &ws, owner, prepared, started).await
    }

    /// Releases the entity lease (fenced by `owner`); a failure is logged:
    /// the lease then expires on its own.
    async fn release(&self, workstream_id: i64, owner: &str) {
        if let Err(e) = self.store.release_lease(workstream_id, owner).await {
            warn!(error = %e, "could not release the entity lease; it expires on its own");
        }
    }

    /// The audit row of an attempt that did not commit, with the LLM
    /// requests it made (`calls`; failed ones included).
    fn run_row(
        &self,
        job: &Job,
        started: chrono::DateTime<Utc>,
        outcome: RunOutcome,
        error: Option<String>,
        calls: &Calls,
    ) -> NewRun {
        NewRun {
            job_id: i64::try_from(job.job_id).unwrap_or(i64::MAX),
            attempt: job.attempt,
            trigger: job.trigger.label().to_owned(),
            started_at: started,
            finished_at: Utc::now(),
            outcome,
            degraded: false,
            degraded_reason: None,
            tokens_before: 0,
            tokens_after: 0,
            messages_compacted: 0,
            chunks: 0,
            rollups: 0,
            evidence_kept: 0,
            evidence_dropped: 0,
            llm_model: calls.model.clone().or_else(|| self.summarizer.model()),
            llm_calls: calls.sent,
            llm_failed_calls: calls.failed,
            llm_tokens_in: calls.input_tokens,
            llm_tokens_out: calls.output_tokens,
            error,
            summary: None,
            hook: RunHook::default(),
        }
    }

    /// Takes the entity lease. A lease still held by someone else is most
    /// likely the previous attempt's: handed back at a shutdown (released
    /// any moment now) or left by a worker that crashed (the queue returns
    /// its job when the queue lease expires, about when the entity lease
    /// does). Waiting for its release or deadline (at most two lease TTLs,
    /// and never past the attempt's deadline) instead of failing keeps
    /// either from using up an attempt.
    ///
    /// Writes `compaction.started` in the transaction that takes the lease.
    /// Returns the workstream as taken when the lease was free (one
    /// statement took it and read the row); `None` when it had to be waited
    /// for or taken over, and the caller reads the row itself.
    async fn take_lease(
        &self,
        job: &Job,
        workstream_id: i64,
        owner: &str,
    ) -> Result<Option<WorkstreamRow>, CompactError> {
        let deadline = job.deadline;
        let ttl = self.settings.lease_ttl;
        let give_up = (Instant::now() + ttl * 2).min(
            deadline
                .checked_sub(self.settings.commit_margin)
                .unwrap_or(deadline),
        );
        let started = self.outbox_event(job, EventKind::CompactionStarted, json!({}));
        if let Some(ws) = self
            .store
            .take_free_lease_with_event(workstream_id, owner, ttl, Some(&started))
            .await?
        {
            self.outbox_wake.notify_one();
            return Ok(Some(ws));
        }
        loop {
            match self
                .store
                .take_lease_with_event(workstream_id, owner, ttl, Some(&started))
                .await?
            {
                LeaseTaken::Taken { reclaimed } => {
                    self.outbox_wake.notify_one();
                    if let Some(old) = reclaimed {
                        info!(
                            previous_owner_deadline_ms = old.deadline_ms,
                            "took over an expired entity lease"
                        );
                    }
                    return Ok(None);
                }
                LeaseTaken::Held(lease) => {
                    let left_ms = lease
                        .deadline_ms
                        .saturating_sub(Utc::now().timestamp_millis())
                        .max(0);
                    let left = Duration::from_millis(u64::try_from(left_ms).unwrap_or(0));
                    if Instant::now() + left > give_up {
                        return Err(CompactError::LeaseHeld { left });
                    }
                    debug!(
                        left_ms,
                        "entity lease held by another run: waiting for its release or deadline"
                    );
                    // Looked at again every LEASE_POLL, not only at the
                    // deadline: a run handed back at shutdown releases its
                    // lease at once, and the next taker should not sleep
                    // out the rest of a TTL.
                    tokio::time::sleep((left + Duration::from_millis(20)).min(LEASE_POLL)).await;
                }
            }
        }
    }

    /// Renews the entity lease until it is lost — refused (someone took it
    /// over: [`CompactError::LeaseLost`]) or not renewable within its TTL
    /// (the database is unreachable: that store error) — or the surrounding
    /// work ends (this future is dropped).
    async fn keep_lease(&self, workstream_id: i64, owner: &str) -> CompactError {
        let ttl = self.settings.lease_ttl;
        let lost = lease::keep(
            ttl,
            self.settings.renew_interval,
            move || self.store.renew_lease(workstream_id, owner, ttl),
            |e| warn!(error = %e, "entity lease renewal failed"),
        )
        .await;
        match lost {
            Lost::Refused => {
                warn!("entity lease lost: renewal refused");
                CompactError::LeaseLost
            }
            Lost::Unreachable(e) => {
                warn!("entity lease lost: not renewed within its TTL");
                // Unreachable, not refused: the database's fault.
                CompactError::Store(e)
            }
        }
    }

    /// Asks the hook (when one is configured), then prepares as it says:
    /// nothing on skip, with its replacement summary, or with the
    /// configured summarizer and the hook's instructions and context.
    async fn ask_and_prepare(
        &self,
        job: &Job,
        ws: &WorkstreamRow,
        record: &mut RunHook,
    ) -> Result<(Asked, Option<Prepared>), CompactError> {
        let asked = match &self.hook {
            Some(hook) => {
                let mut pages = self.pages(ws);
                let engine = &self.settings.engine;
                hooked::ask(hook, job, ws, engine, self.estimator.as_ref(), &mut pages).await?
            }
            None => Asked::default(),
        };
        *record = asked.record;
        let prepared = match &asked.plan {
            Plan::Skip => None,
            Plan::Replace(output) => {
                let replaced = Summarizer::Replaced(output.clone());
                self.prepare(job, ws, &replaced, &asked, job.deadline)
                    .await?
            }
            Plan::Proceed | Plan::Steer { .. } => {
                self.prepare_with_fallback(job, ws, &asked).await?
            }
        };
        let prepared = prepared.map(|p| Prepared {
            hook: asked.record,
            ..p
        });
        Ok((asked, prepared))
    }

    /// The workstream's un-compacted messages, page by page.
    fn pages(&self, ws: &WorkstreamRow) -> StorePages {
        StorePages {
            pages: self
                .store
                .uncompacted_reader(ws.id)
                .long_history(ws.uncompacted_tokens)
                .read_ahead(self.settings.page_size, self.settings.page_tokens),
        }
    }

    /// Prepares with the configured summarizer. When the fallback is
    /// allowed, the extractive summarizer stands in (the run is degraded,
    /// with its reason):
    /// - at once, without asking the LLM, while the provider is unhealthy;
    /// - after an LLM failure on the last attempt, after one that made the
    ///   provider unhealthy (a dead LLM costs a few seconds, not every
    ///   attempt's retries), and after a permanent one (a chunk too long
    ///   even at the minimum size: no retry can help).
    async fn prepare_with_fallback(
        &self,
        job: &Job,
        ws: &WorkstreamRow,
        asked: &Asked,
    ) -> Result<Option<Prepared>, CompactError> {
        let end = job
            .deadline
            .checked_sub(self.settings.commit_margin)
            .unwrap_or(job.deadline);
        let fallback_allowed = self.settings.fallback_to_extractive
            && !matches!(self.summarizer, Summarizer::Extractive);
        if fallback_allowed && self.summarizer.is_unhealthy() {
            info!("the LLM is marked unhealthy: summarizing offline (degraded)");
            let calls = Calls {
                model: self.summarizer.model(),
                ..Calls::default()
            };
            let fallback = Fallback {
                reason: DegradedReason::LlmUnhealthy,
                error: None,
            };
            return self.fall_back(job, ws, asked, end, calls, fallback).await;
        }
        let may_fall_back = job.is_last_attempt() && fallback_allowed;
        // On the last attempt a third of the time is kept for the offline
        // summarizer, which re-reads the whole span.
        let llm_deadline = if may_fall_back {
            let now = Instant::now();
            now + end.saturating_duration_since(now) * 2 / 3
        } else {
            end
        };
        match self
            .prepare(job, ws, &self.summarizer, asked, llm_deadline)
            .await
        {
            Err(e)
                if fallback_allowed
                    && e.is_summarizer()
                    && (may_fall_back || e.is_permanent() || self.summarizer.is_unhealthy()) =>
            {
                let reason = e.degraded_reason();
                warn!(error = %e, reason = reason.as_str(), "the LLM failed: summarizing offline (degraded)");
                let calls = e
                    .summarize_error()
                    .map(|s| s.calls().clone())
                    .unwrap_or_default();
                let fallback = Fallback {
                    reason,
                    error: Some(e.to_string().chars().take(1_000).collect()),
                };
                self.fall_back(job, ws, asked, end, calls, fallback).await
            }
            other => other,
        }
    }

    /// Prepares with the extractive summarizer, recording the LLM's
    /// `calls` so far and why it stood in.
    async fn fall_back(
        &self,
        job: &Job,
        ws: &WorkstreamRow,
        asked: &Asked,
        deadline: Instant,
        calls: Calls,
        fallback: Fallback,
    ) -> Result<Option<Prepared>, CompactError> {
        FellBack {
            provider: self.summarizer.provider(),
            reason: fallback.reason,
        }
        .emit();
        let mut prepared = self
            .prepare(job, ws, &Summarizer::Extractive, asked, deadline)
            .await?;
        if let Some(p) = prepared.as_mut() {
            p.degraded = true;
            p.usage = LlmUsage {
                calls,
                fallback: Some(fallback),
            };
        }
        Ok(prepared)
    }

    /// One run of the compaction pipeline (`compactor_shared::pipeline`)
    /// over this workstream, with `summarizer`: the pipeline decides, this
    /// feeds it pages from the store and bounds its calls by `deadline`.
    async fn prepare(
        &self,
        job: &Job,
        ws: &WorkstreamRow,
        summarizer: &Summarizer,
        asked: &Asked,
        deadline: Instant,
    ) -> Result<Option<Prepared>, CompactError> {
        let engine = &self.settings.engine;
        let estimator = self.estimator.as_ref();
        let workstream = pipeline::Workstream {
            summary: ws.summary.clone(),
            state: ws.state.clone(),
            memory_block_summary: ws.memory_block_summary.clone(),
            memory_entries: self.store.unfolded_memory_entries(ws.id).await?,
            summary_tokens: ws.summary_tokens,
            uncompacted_tokens: ws.uncompacted_tokens,
        };
        let request = pipeline::Request {
            instructions: asked.instructions(match &job.trigger {
                Trigger::Manual { instructions } => instructions.clone(),
                _ => None,
            }),
            context: asked.context(),
        };
        let mut pages = self.pages(ws);
        let mut step = Step {
            summarizer,
            engine,
            estimator,
            deadline,
            usage: LlmUsage::default(),
            judgements: extractive::Judgements::default(),
        };
        let outcome = pipeline::compact(
            &workstream,
            &request,
            engine,
            estimator,
            self.settings.min_chunk_chars,
            &mut pages,
            &mut step,
        )
        .await;
        let compacted = match outcome {
            Ok(pipeline::Outcome::Compacted(compacted)) => *compacted,
            Ok(pipeline::Outcome::NothingToCut) => {
                debug!("nothing may be compacted");
                return Ok(None);
            }
            Err(PipelineError::Page(e)) => return Err(e.into()),
            Err(PipelineError::Summarize(e)) => return Err(e.into()),
            Err(PipelineError::ChunkTooLong { chars, source }) => {
                return Err(CompactError::ChunkTooLong { chars, source })
            }
        };
        Ok(Some(Prepared {
            compacted,
            usage: step.usage,
            degraded: false,
            hook: RunHook::default(),
        }))
    }

    async fn commit(
        &self,
        job: &Job,
        ws: &WorkstreamRow,
        owner: &str,
        prepared: Prepared,
        started: chrono::DateTime<Utc>,
    ) -> Result<Held, CompactError> {
        let Prepared {
            compacted,
            usage,
            degraded,
            hook,
        } = prepared;
        let pipeline::Compacted {
            watermark,
            keep,
            compacted_tokens,
            summary,
            summary_tokens,
            state,
            memory_fold,
            pruned,
            report: figures,
        } = compacted;
        let progress = figures.progress;
        let run = NewRun {
            job_id: i64::try_from(job.job_id).unwrap_or(i64::MAX),
            attempt: job.attempt,
            trigger: job.trigger.label().to_owned(),
            started_at: started,
            finished_at: Utc::now(),
            outcome: if progress {
                RunOutcome::Committed
            } else {
                RunOutcome::NoProgress
            },
            degraded,
            degraded_reason: usage.fallback.as_ref().map(|f| f.reason),
            tokens_before: figures.tokens_before,
            tokens_after: figures.tokens_after,
            messages_compacted: figures.messages_compacted,
            chunks: figures.chunks,
            rollups: figures.rollups,
            evidence_kept: figures.evidence_kept,
            evidence_dropped: figures.evidence_dropped,
            llm_model: usage
                .calls
                .model
                .clone()
                .or_else(|| self.summarizer.model()),
            llm_calls: usage.calls.sent,
            llm_failed_calls: usage.calls.failed,
            llm_tokens_in: usage.calls.input_tokens,
            llm_tokens_out: usage.calls.output_tokens,
            error: usage.fallback.and_then(|f| f.error),
            summary: Some(summary.render()),
            hook,
        };
        let commit = Commit {
            workstream_id: ws.id,
            lease_owner: owner,
            expected_watermark: ws.last_compacted_message_id,
            new_watermark: watermark,
            keep: &keep,
            compacted_tokens,
            summary: &summary,
            summary_tokens,
            state: &state,
            memory_fold: memory_fold.as_ref().map(|fold| MemoryFold {
                summary: &fold.summary,
                folded: &fold.folded,
            }),
            pruned: &pruned,
            just_auto_compacted: !job.trigger.is_manual(),
            progress,
            run: &run,
        };
        let completed = self.outbox_event(
            job,
            EventKind::CompactionCompleted,
            json!({
                "tokens_before": figures.tokens_before,
                "tokens_after": figures.tokens_after,
                "tokens_freed": figures.tokens_before.saturating_sub(figures.tokens_after),
                "messages_compacted": figures.messages_compacted,
                "progress": progress,
                "degraded": degraded,
                "degraded_reason": run.degraded_reason.map(DegradedReason::as_str),
                "summary": { "sections": summary_sections(&summary) },
            }),
        );
        match self
            .store
            .commit_with_event(&commit, Some(&completed))
            .await?
        {
            CommitOutcome::Committed { version } => {
                self.outbox_wake.notify_one();
                // Logged with its metrics when the attempt ends
                // (`events::Compacted`).
                Ok(Held::Committed(Report {
                    figures,
                    degraded,
                    version,
                    duration_ms: since_ms(started),
                }))
            }
            CommitOutcome::Conflict(reason) => Ok(Held::Conflict(reason)),
        }
    }

    /// An outbox event about `job`: `data` with the job's id, attempt and
    /// trigger (`auto`, `manual`, `follow_up`, …: the trigger's label).
    fn outbox_event(&self, job: &Job, kind: EventKind, mut data: serde_json::Value) -> NewEvent {
        if let Some(object) = data.as_object_mut() {
            object.insert("job_id".into(), job.job_id.into());
            object.insert("attempt".into(), job.attempt.into());
            object.insert("trigger".into(), job.trigger.label().into());
        }
        NewEvent::new(kind, &job.key, data)
    }

    fn event(
        &self,
        job: &Job,
        outcome: EventOutcome,
        report: &Report,
        error: Option<String>,
    ) -> CompactionEvent {
        CompactionEvent {
            domain: job.key.domain().to_owned(),
            entity_id: job.key.entity_id().to_owned(),
            outcome,
            trigger: job.trigger.label().to_owned(),
            job_id: job.job_id,
            attempt: job.attempt,
            tokens_before: report.figures.tokens_before,
            tokens_after: report.figures.tokens_after,
            messages_compacted: report.figures.messages_compacted,
            chunks: report.figures.chunks,
            rollups: report.figures.rollups,
            evidence_kept: report.figures.evidence_kept,
            evidence_dropped: report.figures.evidence_dropped,
            degraded: report.degraded,
            error,
        }
    }

    async fn announce(&self, key: &EntityKey, event: &CompactionEvent) {
        if let Err(e) = self.queue.publish_release(key, event).await {
            ReleaseNotAnnounced { error: &e }.emit();
        }
    }
}

/// The store's un-compacted messages as the pipeline's page source: pages
/// bounded in count and in tokens (by their stored estimates), so memory
/// stays bounded whatever the history length; one statement per page, the
/// workstream's branches looked at once (see
/// [`UncompactedReader`](compactor_producer::store::UncompactedReader)), and
/// the next page read while the engine works on this one
/// ([`ReadAheadPages`]).
struct StorePages {
    pages: ReadAheadPages,
}

impl pipeline::PageSource for StorePages {
    type Error = StoreError;

    fn page(
        &mut self,
        after: Option<MessageId>,
    ) -> impl Future<Output = Result<Vec<Message>, StoreError>> + Send {
        self.pages.page(after)
    }
}

/// The worker's summarizer as the pipeline's: every call bounded by the
/// attempt's deadline, and what the calls cost added up for the run row.
struct Step<'a> {
    summarizer: &'a Summarizer,
    engine: &'a EngineConfig,
    estimator: &'a dyn TokenEstimator,
    deadline: Instant,
    usage: LlmUsage,
    /// What the extractive summarizer judged, kept between chunks.
    judgements: extractive::Judgements,
}

impl pipeline::SummarizeFailure for SummarizeError {
    fn is_context_length(&self) -> bool {
        SummarizeError::is_context_length(self)
    }
}

impl pipeline::Summarize for Step<'_> {
    type Error = SummarizeError;

    fn summarize(
        &mut self,
        input: &CompactionInput<'_>,
    ) -> impl Future<Output = Result<SummarizerOutput, SummarizeError>> + Send {
        self.summarizer.summarize_judged(
            input,
            self.engine,
            self.estimator,
            self.deadline,
            &mut self.usage,
            &mut self.judgements,
        )
    }

    fn know_statements(&mut self, classified: stated::Classified) {
        self.judgements.know(classified);
    }

    fn rollup(
        &mut self,
        summary: &Summary,
        target_tokens: u64,
    ) -> impl Future<Output = Result<Summary, SummarizeError>> + Send {
        self.summarizer.rollup(
            summary,
            target_tokens,
            self.estimator,
            self.deadline,
            &mut self.usage,
        )
    }

    fn fold_memory(
        &mut self,
        previous: Option<&str>,
        entries: &[String],
        max_chars: usize,
    ) -> impl Future<Output = Result<String, SummarizeError>> + Send {
        self.summarizer
            .fold_memory(previous, entries, max_chars, self.deadline, &mut self.usage)
    }
}

impl JobHandler for CompactHandler {
    async fn run(&self, job: Job) -> Result<(), JobError> {
        if let JobKind::SummarizeBranch { leaf, branch_point } = job.kind {
            // A job of its own (`jobs::branch`): no entity lease.
            return self.summarize_branch(&job, leaf, branch_point).await;
        }
        let domain = &domain_label(job.key.domain());
        match self.attempt(&job).await {
            Ok(Done::Skipped) => {
                CompactionSkipped { domain }.emit();
                Ok(())
            }
            Ok(Done::Committed(report)) => {
                Compacted {
                    domain,
                    version: report.version,
                    tokens_before: report.figures.tokens_before,
                    tokens_after: report.figures.tokens_after,
                    messages_compacted: report.figures.messages_compacted,
                    chunks: report.figures.chunks,
                    rollups: report.figures.rollups,
                    evidence_kept: report.figures.evidence_kept,
                    evidence_dropped: report.figures.evidence_dropped,
                    degraded: report.degraded,
                    progress: report.figures.progress,
                    duration_ms: report.duration_ms,
                }
                .emit();
                Ok(())
            }
            Ok(Done::Conflict(reason)) => {
                CompactionConflicted {
                    domain,
                    reason: &reason,
                }
                .emit();
                Ok(())
            }
            Err(error) => {
                CompactionFailed {
                    domain,
                    entity_lease_lost: matches!(error, CompactError::LeaseLost),
                }
                .emit();
                Err(error.into_job_error())
            }
        }
    }
}

/// How the part of an attempt under the lease ended.
enum Held {
    /// Nothing done; `no_progress` when the workstream is due but nothing
    /// may be cut (it counts towards the circuit breaker).
    Skipped {
        no_progress: bool,
    },
    Committed(Report),
    Conflict(ConflictReason),
}

/// Releases the entity lease and announces a failure should the attempt's
/// future be dropped while it holds the lease (the runtime cancels an
/// attempt that outlives its lock duration, loses its queue lease, or is
/// still running when the shutdown grace ends). Without it, waiters would
/// stall until the lease deadline and the re-run would wait for it. The
/// release records the attempt as a failed run and writes its
/// `compaction.failed` event in the same transaction, as any other failed
/// attempt does; whether the job is retried or dead-lettered is the
/// runtime's call (a dead letter writes its own event), so the event says
/// `final: false` and the failure does not count towards the breaker.
struct LeaseGuard {
    armed: Option<Armed>,
}

/// What a [`LeaseGuard`] needs to give the lease back.
struct Armed {
    handler: CompactHandler,
    job: Job,
    workstream_id: i64,
    started: chrono::DateTime<Utc>,
}

/// The error recorded on a cancelled attempt's run and event.
const CANCELLED: &str =
    "the attempt was cancelled (its lock duration ended, its queue lease was lost, or the worker shut down)";

impl LeaseGuard {
    fn new(
        handler: &CompactHandler,
        job: &Job,
        workstream_id: i64,
        started: chrono::DateTime<Utc>,
    ) -> LeaseGuard {
        LeaseGuard {
            armed: Some(Armed {
                handler: handler.clone(),
                job: job.clone(),
                workstream_id,
                started,
            }),
        }
    }

    /// The attempt ended normally and took care of the lease itself.
    fn disarm(&mut self) {
        self.armed = None;
    }
}

/// The summary's sections as a timeline shows them: each section's name
/// and its text (its bullets, one per line), read through the `Summary`
/// API, in the summary's own order.
fn summary_sections(summary: &Summary) -> Vec<serde_json::Value> {
    summary
        .sections()
        .map(|(section, bullets)| {
            let text = bullets
                .iter()
                .map(|bullet| format!("- {bullet}"))
                .collect::<Vec<_>>()
                .join("\n");
            json!({ "name": section.heading(), "text": text })
        })
        .collect()
}

/// Milliseconds since `started` (the attempt's start), for log lines.
fn since_ms(started: chrono::DateTime<Utc>) -> i64 {
    Utc::now()
        .signed_duration_since(started)
        .num_milliseconds()
        .max(0)
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let Some(Armed {
            handler,
            job,
            workstream_id,
            started,
        }) = self.armed.take()
        else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        warn!("attempt cancelled while holding the entity lease: releasing it");
        let cleanups = handler.cleanups.clone();
        cleanups.spawn(async move {
            let owner = job.lease_token.as_str();
            let run = handler.run_row(
                &job,
                started,
                RunOutcome::Failed,
                Some(CANCELLED.to_owned()),
                &Calls::default(),
            );
            let failed = handler.outbox_event(
                &job,
                EventKind::CompactionFailed,
                json!({ "error": CANCELLED, "final": false }),
            );
            match handler
                .store
                .record_failure_with_event(workstream_id, owner, &run, false, Some(&failed))
                .await
            {
                Ok(true) => handler.outbox_wake.notify_one(),
                Ok(false) => {}
                Err(e) => {
                    warn!(error = %e, "could not record the cancelled attempt; releasing the lease");
                    handler.release(workstream_id, owner).await;
                }
            }
            let event = handler.event(
                &job,
                EventOutcome::Failed,
                &Report::default(),
                Some(CANCELLED.to_owned()),
            );
            handler.announce(&job.key, &event).await;
        });
    }
}
