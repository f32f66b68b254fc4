//! The one list of every metric compactor records — producer, worker
//! runtime, compaction job, LLM clients and admin HTTP API — with its kind,
//! help text, label names, the typed values of its bounded labels, and the
//! buckets of every histogram. Dashboards, alerts, `docs/OPERATIONS.md`
//! and the code read names from here, so they cannot drift apart.
//!
//! Conventions (ARCHITECTURE.md §6, vector's instrumentation spec): the
//! `compactor_` prefix, `_total` for counters, `_seconds` for durations,
//! snake_case, and labels of bounded cardinality — `queue` (the configured
//! queue name), `domain` (through the allow-list of
//! [`crate::metrics::domain_label`]), `provider`, `route`, and the enums
//! below — never an entity id, never error text. Tests check the
//! conventions and that every family has help text.
//!
//! Each label enum's `as_str()` is the only spelling of its values; its
//! `LABELS` is the list start-up creates the series from (at zero, so
//! `increase()` sees the first event).

/// What kind of metric a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric family: its name, kind, help text (shown by `/metrics`,
/// checked against the dashboard and the docs by tests) and label names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// The label names every series of the family carries, in the order
    /// the code passes them.
    pub labels: &'static [&'static str],
}

const fn family(
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
) -> Family {
    Family {
        name,
        kind,
        help,
        labels,
    }
}

/// Metric names.
pub mod names {
    /// Counter: compaction requests by `queue` and `outcome`
    /// ([`super::EnqueueResult`]).
    pub const ENQUEUE_TOTAL: &str = "compactor_enqueue_total";
    /// Counter: attempts started.
    pub const JOBS_STARTED_TOTAL: &str = "compactor_jobs_started_total";
    /// Counter: attempts that succeeded.
    pub const JOBS_COMPLETED_TOTAL: &str = "compactor_jobs_completed_total";
    /// Counter: attempts that failed, by `reason` ([`super::FailureReason`]).
    pub const JOBS_FAILED_TOTAL: &str = "compactor_jobs_failed_total";
    /// Counter: failed attempts scheduled to run again.
    pub const JOBS_RETRIED_TOTAL: &str = "compactor_jobs_retried_total";
    /// Counter: jobs moved to the dead-letter set, by `reason`
    /// ([`super::DeadLetterReason`]).
    pub const JOBS_DEAD_LETTERED_TOTAL: &str = "compactor_jobs_dead_lettered_total";
    /// Counter: jobs whose lease expired (worker crashed or hung), returned
    /// to the queue.
    pub const JOBS_RECOVERED_TOTAL: &str = "compactor_jobs_recovered_total";
    /// Counter: jobs handed back unfinished at shutdown.
    pub const JOBS_RELEASED_TOTAL: &str = "compactor_jobs_released_total";
    /// Counter: leases lost while running (the attempt was cancelled).
    pub const LEASES_LOST_TOTAL: &str = "compactor_leases_lost_total";
    /// Counter: Redis operations of the worker that failed, by `op`
    /// ([`super::QueueOp`]).
    pub const QUEUE_ERRORS_TOTAL: &str = "compactor_queue_errors_total";
    /// Counter: queue operations refused because a key of the queue holds
    /// another Redis type than the queue keeps there, by `key`
    /// ([`super::QueueKey`]). Nothing was changed; an operator moves the
    /// key aside.
    pub const QUEUE_WRONG_TYPE_KEYS_TOTAL: &str = "compactor_queue_wrong_type_keys_total";
    /// Gauge: jobs by `state` ([`super::QueueState`]).
    pub const QUEUE_DEPTH: &str = "compactor_queue_depth";
    /// Gauge: dead-lettered jobs kept.
    pub const DEAD_LETTER_SIZE: &str = "compactor_dead_letter_size";
    /// Gauge: age of the oldest waiting job (paused ones included), from
    /// when it could first run.
    pub const QUEUE_OLDEST_WAITING_SECONDS: &str = "compactor_queue_oldest_waiting_seconds";
    /// Gauge: age of the oldest job waiting to be claimed, the jobs parked
    /// behind a paused domain left out, from when it could first run.
    pub const QUEUE_OLDEST_RUNNABLE_SECONDS: &str = "compactor_queue_oldest_runnable_seconds";
    /// Gauge: 1 while the whole queue is paused, else 0.
    pub const QUEUE_PAUSED: &str = "compactor_queue_paused";
    /// Gauge: domains of the queue paused.
    pub const QUEUE_PAUSED_DOMAINS: &str = "compactor_queue_paused_domains";
    /// Histogram: run time of one attempt, by `outcome`
    /// ([`super::RunOutcome`]).
    pub const JOB_RUN_SECONDS: &str = "compactor_job_run_seconds";
    /// Histogram: time from being added to being claimed.
    pub const JOB_QUEUE_WAIT_SECONDS: &str = "compactor_job_queue_wait_seconds";

    /// Counter: compaction jobs by `outcome` ([`super::CompactionOutcome`])
    /// and `degraded` (true when the offline summarizer stood in for the
    /// LLM).
    pub const COMPACTIONS_TOTAL: &str = "compactor_compactions_total";
    /// Histogram: estimated context tokens of a committed compaction, by
    /// `stage` ([`super::TokenStage`]).
    pub const COMPACTION_TOKENS: &str = "compactor_compaction_tokens";
    /// Histogram: messages folded into the summary per committed compaction.
    pub const COMPACTION_MESSAGES: &str = "compactor_compaction_messages";
    /// Histogram: summarizer chunks per committed compaction.
    pub const COMPACTION_CHUNKS: &str = "compactor_compaction_chunks";
    /// Histogram: rollup passes per committed compaction.
    pub const COMPACTION_ROLLUPS: &str = "compactor_compaction_rollups";
    /// Histogram: candidate evidence lines per committed compaction, by
    /// `outcome` ([`super::EvidenceOutcome`]): kept for the next context,
    /// or left out.
    pub const COMPACTION_EVIDENCE_LINES: &str = "compactor_compaction_evidence_lines";
    /// Counter: commits refused by the fence (lease lost or another run
    /// committed first); each one is a wasted run.
    pub const FENCE_CONFLICTS_TOTAL: &str = "compactor_fence_conflicts_total";
    /// Counter: entity (database) leases lost while a compaction ran.
    pub const ENTITY_LEASES_LOST_TOTAL: &str = "compactor_entity_leases_lost_total";
    /// Counter: automatic requests not enqueued because the entity's
    /// circuit breaker is open (3 failed or fruitless compactions in a row).
    pub const BREAKER_SKIPS_TOTAL: &str = "compactor_breaker_skips_total";
    /// Counter: `finalize_turn` calls, by `outcome` ([`super::TurnResult`]).
    pub const TURNS_TOTAL: &str = "compactor_turns_total";
    /// Histogram: how long chat requests waited for a requested compaction
    /// (`Compactor::wait`), by `outcome` ([`super::WaitOutcome`]).
    pub const LEASE_WAIT_SECONDS: &str = "compactor_lease_wait_seconds";
    /// Counter: waits that ended at their timeout with the compaction still
    /// pending. Polls (a wait with a zero timeout: the client asked whether
    /// a compaction is pending, not to wait for it) are not counted: they
    /// end as `outcome="polled"` in [`LEASE_WAIT_SECONDS`].
    pub const LEASE_WAIT_TIMEOUTS_TOTAL: &str = "compactor_lease_wait_timeouts_total";
    /// Counter: release announcements that could not be published, or
    /// subscriptions to them that broke, by `op` ([`super::NotifyOp`]).
    pub const NOTIFY_ERRORS_TOTAL: &str = "compactor_notify_errors_total";
    /// Counter: compactions a reconciliation sweep requested again because
    /// the queue had lost them (Redis lost its data).
    pub const RECONCILE_REQUESTED_TOTAL: &str = "compactor_reconcile_requested_total";

    /// Counter: requests the admin HTTP API answered, by `route` (the
    /// matched route template, `unmatched` for any other path) and
    /// `status` ([`super::StatusClass`]).
    pub const HTTP_REQUESTS_TOTAL: &str = "compactor_http_requests_total";
    /// Histogram: time to answer one admin HTTP request (until the
    /// response head), by `route` and `status`.
    pub const HTTP_REQUEST_SECONDS: &str = "compactor_http_request_seconds";
    /// Counter: connections closed at the connection cap to admit a new
    /// one (the slowest to send a request), by `listener` (`api`,
    /// `probes`).
    pub const HTTP_CONNECTIONS_SHED_TOTAL: &str = "compactor_http_connections_shed_total";
    /// Gauge: 1, labelled with the `version` of the running build.
    pub const BUILD_INFO: &str = "compactor_build_info";

    /// Counter: calls of the pre-compaction hook, by `outcome`
    /// ([`super::HookOutcome`]).
    pub const HOOK_CALLS_TOTAL: &str = "compactor_hook_calls_total";
    /// Histogram: duration of one call of the pre-compaction hook (reading
    /// the answer included), by `outcome`.
    pub const HOOK_CALL_SECONDS: &str = "compactor_hook_call_seconds";

    /// Counter: requests through the drop-in proxy, by `route`
    /// (`chat_completions`, `other`), `context` (what the proxy sent on:
    /// `compacted`, `whole`, `forwarded`, `degraded`) and `status` (the
    /// class of the answer's status).
    pub const PROXY_REQUESTS_TOTAL: &str = "compactor_proxy_requests_total";
    /// Histogram: time from a proxied request to its answer's head (the
    /// provider's time included), by `route`.
    pub const PROXY_REQUEST_SECONDS: &str = "compactor_proxy_request_seconds";
    /// Histogram: what the proxy adds to a request before sending it on
    /// (storing the history, building the context, any wait), by `route`.
    pub const PROXY_OVERHEAD_SECONDS: &str = "compactor_proxy_overhead_seconds";
    /// Counter: estimated tokens of the messages of proxied chat requests,
    /// by `side`: `client` (as sent to the proxy) and `upstream` (as sent
    /// on). Their difference is what compaction saved.
    pub const PROXY_PROMPT_TOKENS_TOTAL: &str = "compactor_proxy_prompt_tokens_total";

    /// Counter: HTTP requests to the LLM, by `provider` and `outcome`
    /// ([`super::LlmOutcome`]).
    pub const LLM_REQUESTS_TOTAL: &str = "compactor_llm_requests_total";
    /// Histogram: duration of one HTTP request to the LLM (reading the
    /// reply included), by `provider` and `outcome`.
    pub const LLM_REQUEST_SECONDS: &str = "compactor_llm_request_seconds";
    /// Counter: tokens the server reported, by `provider` and `direction`
    /// ([`super::TokenDirection`]).
    pub const LLM_TOKENS_TOTAL: &str = "compactor_llm_tokens_total";
    /// Counter: requests sent again after a retryable failure, by
    /// `provider`.
    pub const LLM_RETRIES_TOTAL: &str = "compactor_llm_retries_total";
    /// Counter: answers the checks rejected (the summary is not used), by
    /// `provider` and `reason` (`compactor_shared::parse::Rejection::LABELS`).
    pub const LLM_ANSWERS_REJECTED_TOTAL: &str = "compactor_llm_answers_rejected_total";
    /// Counter: deviations from the answer format that were worked around,
    /// by `provider` and `problem`
    /// (`compactor_shared::parse::ParseProblem::LABELS`).
    pub const LLM_ANSWER_PROBLEMS_TOTAL: &str = "compactor_llm_answer_problems_total";
    /// Gauge: 1 while the provider is healthy, 0 while it is marked
    /// unhealthy (requests paused until a probe is answered), by
    /// `provider`.
    pub const LLM_HEALTHY: &str = "compactor_llm_healthy";
    /// Counter: compactions the extractive summarizer wrote instead of the
    /// LLM (degraded runs), by `provider` and `reason`
    /// ([`crate::store::DegradedReason`]).
    pub const LLM_FALLBACKS_TOTAL: &str = "compactor_llm_fallbacks_total";

    /// Counter: events written to the outbox, by `kind`
    /// ([`super::EventKind`]).
    pub const EVENTS_WRITTEN_TOTAL: &str = "compactor_events_written_total";
    /// Counter: events a relay put on the Redis Stream, by `queue`.
    pub const EVENTS_STREAMED_TOTAL: &str = "compactor_events_streamed_total";
    /// Counter: webhook delivery attempts, by `endpoint` (the configured
    /// name, never the URL) and `outcome` ([`super::DeliveryOutcome`]).
    pub const EVENT_DELIVERIES_TOTAL: &str = "compactor_event_deliveries_total";
    /// Gauge: outbox rows not done yet, by `state`
    /// ([`super::BacklogState`]).
    pub const EVENTS_BACKLOG: &str = "compactor_events_backlog";
    /// Gauge: age of the oldest event not yet relayed or not yet delivered
    /// everywhere (0 when there is none), by `queue`.
    pub const EVENTS_OLDEST_UNDELIVERED_SECONDS: &str =
        "compactor_events_oldest_undelivered_seconds";
}

/// Defines a label enum: its variants, their one spelling (`as_str`), and
/// `ALL` / `LABELS` in declaration order.
macro_rules! label_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident => $value:literal, )+ }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// How many values there are.
            pub const COUNT: usize = [$($value),+].len();
            /// Every value, in declaration order.
            pub const ALL: [$name; Self::COUNT] = [$($name::$variant),+];
            /// Every label value, in declaration order.
            pub const LABELS: [&'static str; Self::COUNT] = [$($value),+];

            /// The label value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $value,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

label_enum! {
    /// `outcome` of [`names::ENQUEUE_TOTAL`]: what the queue did with one
    /// compaction request.
    EnqueueResult {
        /// A new job was queued.
        Added => "added",
        /// A job for the entity was waiting already: this request joined it.
        Coalesced => "coalesced",
        /// A job for the entity was running: a follow-up run was recorded
        /// to start when it ends.
        FollowUp => "followup",
        /// Redis did not answer, or refused the request (it was not queued).
        Error => "error",
    }
}

label_enum! {
    /// `outcome` of [`names::TURNS_TOTAL`]: how `finalize_turn` ended.
    TurnResult {
        /// Under the trigger: nothing requested.
        NotDue => "not_due",
        /// Due, and the compaction was requested.
        Requested => "requested",
        /// Due, but the entity's circuit breaker is open (also counted in
        /// [`names::BREAKER_SKIPS_TOTAL`]).
        BreakerOpen => "breaker_open",
        /// Due, but Redis did not take the request: the turn is stored, the
        /// compaction is requested by the next turn or by reconciliation.
        Unavailable => "unavailable",
    }
}

label_enum! {
    /// `outcome` of [`names::LEASE_WAIT_SECONDS`]: how a chat request's
    /// wait for a compaction ended.
    WaitOutcome {
        /// Nothing was pending (any more).
        Ready => "ready",
        /// A compaction committed while waiting.
        Compacted => "compacted",
        /// The wait gave up at its timeout, the compaction still pending
        /// (also counted in [`names::LEASE_WAIT_TIMEOUTS_TOTAL`]).
        Timeout => "timeout",
        /// A compaction is pending but no worker is alive to run it.
        NoLiveWorker => "no_live_worker",
        /// A zero-timeout wait found the compaction pending: the client
        /// asked, it did not wait. Not a timeout.
        Polled => "polled",
    }
}

label_enum! {
    /// `op` of [`names::NOTIFY_ERRORS_TOTAL`].
    NotifyOp {
        /// The worker could not publish a release announcement (waiters
        /// fall back to polling).
        Publish => "publish",
        /// A client's subscription to release announcements could not be
        /// made or broke (it re-subscribes with backoff).
        Subscribe => "subscribe",
    }
}

label_enum! {
    /// `reason` of [`names::JOBS_FAILED_TOTAL`]: why one attempt failed.
    FailureReason {
        /// A retryable error: the attempt counts, the job runs again until
        /// its attempts are exhausted.
        Error => "error",
        /// An error retrying cannot fix: the job is dead-lettered.
        Permanent => "permanent",
        /// A service the job needs (the database) was down: the job runs
        /// again after a pause and the attempt is not counted, however
        /// long the outage.
        Unavailable => "unavailable",
        /// The attempt ran past the lock duration.
        Timeout => "timeout",
        /// The handler panicked (caught; the worker lives on).
        Panic => "panic",
        /// The worker lost the job's queue lease while running it.
        LeaseLost => "lease_lost",
    }
}

label_enum! {
    /// `reason` of [`names::JOBS_DEAD_LETTERED_TOTAL`].
    DeadLetterReason {
        /// The failed attempt's error was permanent.
        Permanent => "permanent",
        /// Retryable failures used up every attempt.
        Exhausted => "exhausted",
        /// A queue entry that could not be read (domain unknown: `other`).
        Unusable => "unusable",
        /// A job whose workers kept dying (domain unknown: `other`).
        Stalled => "stalled",
    }
}

impl DeadLetterReason {
    /// Whether the runtime dead-letters for this reason without knowing
    /// the job's domain (its series exist for `domain="other"` only).
    pub const fn domain_unknown(self) -> bool {
        matches!(self, DeadLetterReason::Unusable | DeadLetterReason::Stalled)
    }
}

label_enum! {
    /// `outcome` of [`names::JOB_RUN_SECONDS`]: how one attempt ended.
    RunOutcome {
        /// The handler succeeded.
        Completed => "completed",
        /// See [`FailureReason::Error`].
        Error => "error",
        /// See [`FailureReason::Permanent`].
        Permanent => "permanent",
        /// See [`FailureReason::Unavailable`].
        Unavailable => "unavailable",
        /// See [`FailureReason::Panic`].
        Panic => "panic",
        /// See [`FailureReason::Timeout`].
        Timeout => "timeout",
        /// See [`FailureReason::LeaseLost`].
        LeaseLost => "lease_lost",
        /// Handed back unfinished at shutdown.
        Released => "released",
    }
}

impl RunOutcome {
    /// The `reason` of [`names::JOBS_FAILED_TOTAL`] this outcome counts
    /// under: none for a completed or released attempt (not failures).
    pub const fn failure_reason(self) -> Option<FailureReason> {
        match self {
            RunOutcome::Completed | RunOutcome::Released => None,
            RunOutcome::Error => Some(FailureReason::Error),
            RunOutcome::Permanent => Some(FailureReason::Permanent),
            RunOutcome::Unavailable => Some(FailureReason::Unavailable),
            RunOutcome::Panic => Some(FailureReason::Panic),
            RunOutcome::Timeout => Some(FailureReason::Timeout),
            RunOutcome::LeaseLost => Some(FailureReason::LeaseLost),
        }
    }
}

label_enum! {
    /// `key` of [`names::QUEUE_WRONG_TYPE_KEYS_TOTAL`]: which of a queue's
    /// keys (`crate::queue::Keys`) held another type.
    QueueKey {
        /// An entity's job record (`job:<member>`).
        Job => "job",
        /// The normal lane of waiting jobs.
        Waiting => "waiting",
        /// The urgent lane of waiting jobs.
        Urgent => "urgent",
        /// Running jobs, by lease deadline.
        Running => "running",
        /// Finished jobs kept.
        Done => "done",
        /// Dead-lettered jobs.
        Dead => "dead",
        /// A dead letter's record (`dead:<member>|<job id>`).
        DeadRecord => "dead_record",
        /// The job id counter.
        Seq => "seq",
        /// The job id index.
        Ids => "ids",
        /// The mark of a revoked lease.
        Revoked => "revoked",
        /// Where the repair walk stands.
        RepairCursor => "repair_cursor",
        /// What is paused.
        Paused => "paused",
        /// The parked jobs of a paused domain.
        Parked => "parked",
        /// The worker registry.
        Workers => "workers",
        /// One registered worker.
        Worker => "worker",
        /// A key Redis' own refusal did not name, or a name no builder
        /// makes.
        Unknown => "unknown",
    }
}

label_enum! {
    /// `op` of [`names::QUEUE_ERRORS_TOTAL`]: the worker's Redis operation
    /// that failed.
    QueueOp {
        /// Taking waiting jobs.
        Claim => "claim",
        /// Acknowledging finished jobs in a batch.
        Settle => "settle",
        /// Extending a running job's queue lease.
        Renew => "renew",
        /// Marking one job done.
        Complete => "complete",
        /// Recording a failed attempt (retry or dead letter).
        Fail => "fail",
        /// Handing a job back unfinished (shutdown, no slot in time).
        Release => "release",
        /// Returning jobs whose lease expired.
        Recover => "recover",
        /// Reading the queue's depth for the gauges.
        Counts => "counts",
        /// Subscribing to wake-ups for new jobs.
        Subscribe => "subscribe",
        /// Refreshing this worker's entry in the worker registry.
        Heartbeat => "heartbeat",
        /// Removing this worker from the registry at shutdown.
        Deregister => "deregister",
    }
}

label_enum! {
    /// `state` of [`names::QUEUE_DEPTH`].
    QueueState {
        /// In the waiting set: queued, not claimed.
        Waiting => "waiting",
        /// Claimed by a worker, lease held.
        Running => "running",
        /// Finished records kept for inspection.
        Done => "done",
        /// In the dead-letter set.
        Dead => "dead",
    }
}

label_enum! {
    /// `outcome` of [`names::COMPACTIONS_TOTAL`].
    CompactionOutcome {
        /// A new summary was committed.
        Committed => "committed",
        /// A summary was committed but folded nothing new.
        NoProgress => "no_progress",
        /// Nothing to do (under the threshold, or too few messages).
        Skipped => "skipped",
        /// The fence refused the commit (see
        /// [`names::FENCE_CONFLICTS_TOTAL`]).
        Conflict => "conflict",
        /// The run failed.
        Failed => "failed",
    }
}

label_enum! {
    /// `stage` of [`names::COMPACTION_TOKENS`].
    TokenStage {
        /// The context before the compaction.
        Before => "before",
        /// The context after it (summary plus what was kept).
        After => "after",
    }
}

label_enum! {
    /// `outcome` of [`names::COMPACTION_EVIDENCE_LINES`]: what a
    /// compaction did with a candidate evidence line.
    EvidenceOutcome {
        /// Chosen for the next context.
        Kept => "kept",
        /// Left out: no budget, nothing new, or a repeat.
        Dropped => "dropped",
    }
}

label_enum! {
    /// `direction` of [`names::LLM_TOKENS_TOTAL`].
    TokenDirection {
        /// Prompt tokens.
        Input => "input",
        /// Completion tokens.
        Output => "output",
    }
}

label_enum! {
    /// `outcome` of [`names::LLM_REQUESTS_TOTAL`] and
    /// [`names::LLM_REQUEST_SECONDS`].
    LlmOutcome {
        /// An answer came back.
        Ok => "ok",
        /// 429.
        RateLimited => "rate_limited",
        /// 5xx.
        ServerError => "server_error",
        /// No reply within the request timeout.
        Timeout => "timeout",
        /// The connection could not be made.
        Connect => "connect",
        /// The prompt is over the model's context window.
        ContextLength => "context_length",
        /// Another 4xx (the request itself is wrong).
        BadRequest => "bad_request",
        /// 401 or 403.
        Auth => "auth",
        /// A reply that is not the provider's format.
        Malformed => "malformed",
        /// A well-formed reply with no text.
        Empty => "empty",
    }
}

label_enum! {
    /// `status` of [`names::HTTP_REQUESTS_TOTAL`] created at zero (the
    /// admin API answers no 1xx or 3xx).
    StatusClass {
        /// Answered.
        Success => "2xx",
        /// The caller's request was wrong.
        ClientError => "4xx",
        /// The worker or a service behind it failed.
        ServerError => "5xx",
    }
}

label_enum! {
    /// The kind of an outbox event: its `type` on the stream and in a
    /// webhook's body, and the `kind` label of
    /// [`names::EVENTS_WRITTEN_TOTAL`]. `branch.summarized` is named for
    /// branch summaries, which no code writes yet.
    EventKind {
        CompactionRequested => "compaction.requested",
        CompactionStarted => "compaction.started",
        CompactionCompleted => "compaction.completed",
        CompactionFailed => "compaction.failed",
        CompactionDeadLettered => "compaction.dead_lettered",
        BranchSummarized => "branch.summarized",
    }
}

impl EventKind {
    /// The kind spelled `label`, if any.
    pub fn parse(label: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == label)
    }
}

label_enum! {
    /// How one webhook delivery attempt ended.
    DeliveryOutcome {
        /// A 2xx answer.
        Delivered => "delivered",
        /// Anything else, or no answer in time: tried again later.
        Retried => "retried",
        /// Anything else on the last attempt: the delivery is `failed`
        /// (listed, and retryable by an operator).
        Failed => "failed",
    }
}

label_enum! {
    /// What the pre-compaction hook did: the `outcome` of
    /// [`names::HOOK_CALLS_TOTAL`] and the `hook_outcome` of a run row.
    /// The last five are failures, after which the compaction proceeds as
    /// if there were no hook (it fails open).
    HookOutcome {
        /// An empty answer (204, `{}`): compaction unchanged.
        Proceed => "proceed",
        /// Extra focus instructions (context lines possibly too).
        Instructions => "instructions",
        /// Extra context lines only.
        Context => "context",
        /// A replacement summary, used instead of the summarizer.
        Replaced => "replaced",
        /// No compaction this time.
        Skipped => "skipped",
        /// No answer within `hook.timeout`.
        Timeout => "timeout",
        /// The connection could not be made (or broke).
        Unreachable => "unreachable",
        /// An answer other than 2xx.
        HttpError => "http_error",
        /// A 2xx answer that is not a hook answer.
        Malformed => "malformed",
        /// A replacement summary the summary format's parser or checks
        /// refuse.
        InvalidReplacement => "invalid_replacement",
    }
}

impl HookOutcome {
    /// The outcome spelled `label`, if any.
    pub fn parse(label: &str) -> Option<HookOutcome> {
        HookOutcome::ALL.into_iter().find(|o| o.as_str() == label)
    }

    /// The hook failed: the compaction went ahead without it.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            HookOutcome::Timeout
                | HookOutcome::Unreachable
                | HookOutcome::HttpError
                | HookOutcome::Malformed
                | HookOutcome::InvalidReplacement
        )
    }
}

label_enum! {
    /// Outbox rows not done yet.
    BacklogState {
        /// Events not yet put on the stream (nor their deliveries created).
        Unrelayed => "unrelayed",
        /// Deliveries still to be tried.
        Pending => "pending",
        /// Deliveries that gave up (kept until retried).
        Failed => "failed",
    }
}

/// `route` of admin HTTP requests to a path no route matches (never the
/// path itself: any caller could create label values).
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// `(outcome, degraded)` of [`names::COMPACTIONS_TOTAL`]: only a commit
/// can be degraded.
pub const COMPACTION_OUTCOMES: [(&str, &str); 7] = [
    (CompactionOutcome::Committed.as_str(), "false"),
    (CompactionOutcome::Committed.as_str(), "true"),
    (CompactionOutcome::NoProgress.as_str(), "false"),
    (CompactionOutcome::NoProgress.as_str(), "true"),
    (CompactionOutcome::Skipped.as_str(), "false"),
    (CompactionOutcome::Conflict.as_str(), "false"),
    (CompactionOutcome::Failed.as_str(), "false"),
];

/// The label values start-up iterates to create every series at zero,
/// as flat lists (the enums' `LABELS`).
pub mod labels {
    use super::*;

    /// `outcome` of [`names::ENQUEUE_TOTAL`].
    pub const ENQUEUE_OUTCOMES: [&str; 4] = EnqueueResult::LABELS;
    /// `reason` of [`names::JOBS_FAILED_TOTAL`].
    pub const FAILURE_REASONS: [&str; 6] = FailureReason::LABELS;
    /// `reason` of [`names::JOBS_DEAD_LETTERED_TOTAL`]: the failed
    /// attempt's own (permanent, exhausted) and the runtime's (unusable,
    /// stalled: domain unknown, so `other`).
    pub const DEAD_LETTER_REASONS: [&str; 4] = DeadLetterReason::LABELS;
    /// `(outcome, degraded)` of [`names::COMPACTIONS_TOTAL`].
    pub const COMPACTION_OUTCOMES: [(&str, &str); 7] = super::COMPACTION_OUTCOMES;
    /// `outcome` of [`names::TURNS_TOTAL`].
    pub const TURN_OUTCOMES: [&str; 4] = TurnResult::LABELS;
    /// `outcome` of [`names::LEASE_WAIT_SECONDS`].
    pub const WAIT_OUTCOMES: [&str; 5] = WaitOutcome::LABELS;
    /// `op` of [`names::NOTIFY_ERRORS_TOTAL`].
    pub const NOTIFY_OPS: [&str; 2] = NotifyOp::LABELS;
    /// `status` of [`names::HTTP_REQUESTS_TOTAL`] created at zero.
    pub const HTTP_STATUS_CLASSES: [&str; 3] = StatusClass::LABELS;
    /// `route` of requests to a path no route matches.
    pub const UNMATCHED_ROUTE: &str = super::UNMATCHED_ROUTE;
}

const QUEUE: &[&str] = &["queue"];
const QUEUE_DOMAIN: &[&str] = &["queue", "domain"];
const DOMAIN: &[&str] = &["domain"];
const PROVIDER: &[&str] = &["provider"];

/// Every family recorded by the queue, the client, the worker runtime, the
/// compaction job and the admin API (the LLM clients' are
/// [`LLM_FAMILIES`]: they exist only when an LLM is configured).
pub const FAMILIES: &[Family] = &[
    family(
        names::ENQUEUE_TOTAL,
        Kind::Counter,
        &["queue", "outcome"],
        "Compaction requests, by outcome (added, coalesced, followup, error)",
    ),
    family(
        names::JOBS_STARTED_TOTAL,
        Kind::Counter,
        QUEUE_DOMAIN,
        "Job attempts started",
    ),
    family(
        names::JOBS_COMPLETED_TOTAL,
        Kind::Counter,
        QUEUE_DOMAIN,
        "Job attempts that succeeded",
    ),
    family(
        names::JOBS_FAILED_TOTAL,
        Kind::Counter,
        &["queue", "domain", "reason"],
        "Job attempts that failed, by reason",
    ),
    family(
        names::JOBS_RETRIED_TOTAL,
        Kind::Counter,
        QUEUE_DOMAIN,
        "Failed attempts scheduled to run again",
    ),
    family(
        names::JOBS_DEAD_LETTERED_TOTAL,
        Kind::Counter,
        &["queue", "domain", "reason"],
        "Jobs moved to the dead-letter set, by reason",
    ),
    family(
        names::JOBS_RECOVERED_TOTAL,
        Kind::Counter,
        QUEUE,
        "Jobs whose lease expired, returned to the queue",
    ),
    family(
        names::JOBS_RELEASED_TOTAL,
        Kind::Counter,
        QUEUE,
        "Jobs handed back unfinished or unstarted: at shutdown, or claimed ahead with no slot free in time",
    ),
    family(
        names::LEASES_LOST_TOTAL,
        Kind::Counter,
        QUEUE,
        "Queue leases lost while running",
    ),
    family(
        names::QUEUE_ERRORS_TOTAL,
        Kind::Counter,
        &["queue", "op"],
        "Redis operations of the worker that failed, by op",
    ),
    family(
        names::QUEUE_WRONG_TYPE_KEYS_TOTAL,
        Kind::Counter,
        &["queue", "key"],
        "Queue operations refused because a key of the queue holds another Redis type, by key",
    ),
    family(
        names::QUEUE_DEPTH,
        Kind::Gauge,
        &["queue", "state"],
        "Jobs by state (waiting, running, done, dead)",
    ),
    family(
        names::DEAD_LETTER_SIZE,
        Kind::Gauge,
        QUEUE,
        "Dead-lettered jobs kept",
    ),
    family(
        names::QUEUE_OLDEST_WAITING_SECONDS,
        Kind::Gauge,
        QUEUE,
        "Age of the oldest waiting job, paused ones included, from when it could first run",
    ),
    family(
        names::QUEUE_OLDEST_RUNNABLE_SECONDS,
        Kind::Gauge,
        QUEUE,
        "Age of the oldest job waiting to be claimed, jobs parked behind a paused domain left out",
    ),
    family(
        names::QUEUE_PAUSED,
        Kind::Gauge,
        QUEUE,
        "1 while the whole queue is paused, else 0",
    ),
    family(
        names::QUEUE_PAUSED_DOMAINS,
        Kind::Gauge,
        QUEUE,
        "Domains of the queue paused",
    ),
    family(
        names::JOB_RUN_SECONDS,
        Kind::Histogram,
        &["queue", "domain", "outcome"],
        "Run time of one attempt, by outcome",
    ),
    family(
        names::JOB_QUEUE_WAIT_SECONDS,
        Kind::Histogram,
        QUEUE_DOMAIN,
        "Time from a job being added to being claimed",
    ),
    family(
        names::COMPACTIONS_TOTAL,
        Kind::Counter,
        &["domain", "outcome", "degraded"],
        "Compaction jobs, by outcome and whether degraded",
    ),
    family(
        names::COMPACTION_TOKENS,
        Kind::Histogram,
        &["domain", "stage"],
        "Estimated context tokens of a committed compaction, by stage (before, after)",
    ),
    family(
        names::COMPACTION_MESSAGES,
        Kind::Histogram,
        DOMAIN,
        "Messages folded into the summary per committed compaction",
    ),
    family(
        names::COMPACTION_CHUNKS,
        Kind::Histogram,
        DOMAIN,
        "Summarizer chunks per committed compaction",
    ),
    family(
        names::COMPACTION_ROLLUPS,
        Kind::Histogram,
        DOMAIN,
        "Rollup passes per committed compaction",
    ),
    family(
        names::COMPACTION_EVIDENCE_LINES,
        Kind::Histogram,
        &["domain", "outcome"],
        "Candidate evidence lines per committed compaction, by outcome (kept, dropped)",
    ),
    family(
        names::FENCE_CONFLICTS_TOTAL,
        Kind::Counter,
        DOMAIN,
        "Commits refused by the fence (lease lost or another run committed first)",
    ),
    family(
        names::ENTITY_LEASES_LOST_TOTAL,
        Kind::Counter,
        DOMAIN,
        "Entity leases lost while a compaction ran",
    ),
    family(
        names::BREAKER_SKIPS_TOTAL,
        Kind::Counter,
        DOMAIN,
        "Automatic requests held back by an open circuit breaker",
    ),
    family(
        names::TURNS_TOTAL,
        Kind::Counter,
        &["domain", "outcome"],
        "finalize_turn calls, by outcome",
    ),
    family(
        names::LEASE_WAIT_SECONDS,
        Kind::Histogram,
        &["domain", "outcome"],
        "Time chat requests waited for a running compaction, by outcome",
    ),
    family(
        names::LEASE_WAIT_TIMEOUTS_TOTAL,
        Kind::Counter,
        DOMAIN,
        "Waits that ended at their timeout with the compaction still pending (polls with a zero timeout not counted)",
    ),
    family(
        names::NOTIFY_ERRORS_TOTAL,
        Kind::Counter,
        &["op"],
        "Release announcements not published, or subscriptions to them broken, by op",
    ),
    family(
        names::RECONCILE_REQUESTED_TOTAL,
        Kind::Counter,
        QUEUE,
        "Compactions a reconciliation sweep requested again because the queue had lost them",
    ),
    family(
        names::HTTP_REQUESTS_TOTAL,
        Kind::Counter,
        &["route", "status"],
        "Admin HTTP API requests, by route template and status class",
    ),
    family(
        names::HTTP_REQUEST_SECONDS,
        Kind::Histogram,
        &["route", "status"],
        "Time to answer one admin HTTP API request, by route template and status class",
    ),
    family(
        names::HTTP_CONNECTIONS_SHED_TOTAL,
        Kind::Counter,
        &["listener"],
        "Admin HTTP connections closed at the connection cap to admit new ones, by listener",
    ),
    family(
        names::BUILD_INFO,
        Kind::Gauge,
        &["version"],
        "1, labelled with the version of the running build",
    ),
];

/// The LLM clients' families (recorded only by a worker configured with
/// an LLM provider).
pub const LLM_FAMILIES: &[Family] = &[
    family(
        names::LLM_REQUESTS_TOTAL,
        Kind::Counter,
        &["provider", "outcome"],
        "HTTP requests to the LLM, by outcome",
    ),
    family(
        names::LLM_REQUEST_SECONDS,
        Kind::Histogram,
        &["provider", "outcome"],
        "Duration of one HTTP request to the LLM, by outcome",
    ),
    family(
        names::LLM_TOKENS_TOTAL,
        Kind::Counter,
        &["provider", "direction"],
        "Tokens the LLM reported, by direction",
    ),
    family(
        names::LLM_RETRIES_TOTAL,
        Kind::Counter,
        PROVIDER,
        "LLM requests sent again after a retryable failure",
    ),
    family(
        names::LLM_ANSWERS_REJECTED_TOTAL,
        Kind::Counter,
        &["provider", "reason"],
        "LLM answers rejected by the checks, by reason",
    ),
    family(
        names::LLM_ANSWER_PROBLEMS_TOTAL,
        Kind::Counter,
        &["provider", "problem"],
        "Deviations from the answer format that were worked around, by problem",
    ),
    family(
        names::LLM_HEALTHY,
        Kind::Gauge,
        PROVIDER,
        "1 while the LLM provider is healthy, 0 while requests are paused until a probe is answered",
    ),
    family(
        names::LLM_FALLBACKS_TOTAL,
        Kind::Counter,
        &["provider", "reason"],
        "Compactions summarized offline instead of by the LLM (degraded), by reason",
    ),
];

/// The event outbox's families (recorded by whatever writes events, and
/// by a worker's relay).
pub const EVENT_FAMILIES: &[Family] = &[
    family(
        names::EVENTS_WRITTEN_TOTAL,
        Kind::Counter,
        &["kind"],
        "Events written to the outbox, by kind",
    ),
    family(
        names::EVENTS_STREAMED_TOTAL,
        Kind::Counter,
        QUEUE,
        "Events put on the Redis Stream by a relay",
    ),
    family(
        names::EVENT_DELIVERIES_TOTAL,
        Kind::Counter,
        &["endpoint", "outcome"],
        "Webhook delivery attempts, by endpoint name and outcome (delivered, retried, failed)",
    ),
    family(
        names::EVENTS_BACKLOG,
        Kind::Gauge,
        &["state"],
        "Outbox rows not done yet: events not relayed, deliveries pending or failed",
    ),
    family(
        names::EVENTS_OLDEST_UNDELIVERED_SECONDS,
        Kind::Gauge,
        QUEUE,
        "Age of the oldest event not yet relayed or not yet delivered to every webhook",
    ),
];

/// The pre-compaction hook's families (recorded by a worker with
/// `[hook] url` set).
pub const HOOK_FAMILIES: &[Family] = &[
    family(
        names::HOOK_CALLS_TOTAL,
        Kind::Counter,
        &["outcome"],
        "Calls of the pre-compaction hook, by outcome (failures fail open)",
    ),
    family(
        names::HOOK_CALL_SECONDS,
        Kind::Histogram,
        &["outcome"],
        "Duration of one call of the pre-compaction hook, by outcome",
    ),
];

/// The drop-in proxy's families (their series exist once `[proxy]
/// listen` is set).
pub const PROXY_FAMILIES: &[Family] = &[
    family(
        names::PROXY_REQUESTS_TOTAL,
        Kind::Counter,
        &["route", "context", "status"],
        "Requests through the drop-in proxy, by route, what was sent on (compacted, whole, forwarded, degraded) and status class",
    ),
    family(
        names::PROXY_REQUEST_SECONDS,
        Kind::Histogram,
        &["route"],
        "Time from a proxied request to its answer's head, the provider's time included, by route",
    ),
    family(
        names::PROXY_OVERHEAD_SECONDS,
        Kind::Histogram,
        &["route"],
        "Time the proxy adds before sending a request on (storing, building the context, waiting), by route",
    ),
    family(
        names::PROXY_PROMPT_TOKENS_TOTAL,
        Kind::Counter,
        &["side"],
        "Estimated tokens of proxied chat messages, as the client sent them and as sent on",
    ),
];

/// Every family, the LLM clients' and the event outbox's included.
pub fn all_families() -> impl Iterator<Item = &'static Family> {
    FAMILIES
        .iter()
        .chain(LLM_FAMILIES)
        .chain(EVENT_FAMILIES)
        .chain(HOOK_FAMILIES)
        .chain(PROXY_FAMILIES)
}

/// The family named `name`, if any.
pub fn family_named(name: &str) -> Option<&'static Family> {
    all_families().find(|f| f.name == name)
}

/// Registers the help texts of [`FAMILIES`] with the installed recorder.
pub fn describe() {
    describe_families(FAMILIES);
}

/// Registers the help texts of `families` with the installed recorder.
pub fn describe_families(families: &[Family]) {
    for f in families {
        match f.kind {
            Kind::Counter => metrics::describe_counter!(f.name, f.help),
            Kind::Gauge => metrics::describe_gauge!(f.name, f.help),
            Kind::Histogram => metrics::describe_histogram!(f.name, f.help),
        }
    }
}

/// Histogram buckets: Prometheus histograms rather than the exporter's
/// default summaries, which cannot be aggregated across workers. Each list
/// covers the range its families really see.
pub mod buckets {
    /// From milliseconds to ten minutes: queue waits (a job claimed at
    /// once, or after a backlog drains) and chat-side waits on a running
    /// compaction.
    pub const WAIT_SECONDS: &[f64] = &[
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        120.0, 300.0, 600.0,
    ];

    /// From 50 ms to ten minutes: one job attempt (an instant extractive
    /// run up to the 5-minute lock duration) and one LLM request (up to a
    /// slow model's two-minute timeout, and beyond when configured).
    pub const RUN_SECONDS: &[f64] = &[
        0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 300.0, 600.0,
    ];

    /// From 100 tokens to a million: a context before and after compaction.
    pub const TOKENS: &[f64] = &[
        100.0,
        250.0,
        500.0,
        1_000.0,
        2_500.0,
        5_000.0,
        10_000.0,
        25_000.0,
        50_000.0,
        100_000.0,
        200_000.0,
        500_000.0,
        1_000_000.0,
    ];

    /// Messages folded by one compaction: a few to a 100,000-message
    /// backlog.
    pub const MESSAGES: &[f64] = &[
        1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0, 10_000.0,
        25_000.0, 50_000.0, 100_000.0,
    ];

    /// Summarizer chunks of one compaction (120,000 chars each).
    pub const CHUNKS: &[f64] = &[
        1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1_000.0,
    ];

    /// One admin HTTP request: a millisecond read to a minute-long poll.
    pub const HTTP_SECONDS: &[f64] = &[
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ];

    /// Rollup passes of one compaction: usually none.
    pub const ROLLUPS: &[f64] = &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0];

    /// Candidate evidence lines of one compaction, kept or dropped: none
    /// (evidence off, or nothing worth keeping) to the 16,384 lines the
    /// engine holds at most, plus the evidence shown before.
    pub const EVIDENCE_LINES: &[f64] = &[
        0.0, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1_000.0, 2_500.0, 5_000.0,
        10_000.0, 20_000.0,
    ];
}

/// The buckets of every histogram family. A histogram missing here would
/// be rendered as a summary (a unit test checks none is).
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[
    (names::JOB_QUEUE_WAIT_SECONDS, buckets::WAIT_SECONDS),
    (names::LEASE_WAIT_SECONDS, buckets::WAIT_SECONDS),
    (names::JOB_RUN_SECONDS, buckets::RUN_SECONDS),
    (names::LLM_REQUEST_SECONDS, buckets::RUN_SECONDS),
    (names::COMPACTION_TOKENS, buckets::TOKENS),
    (names::COMPACTION_MESSAGES, buckets::MESSAGES),
    (names::COMPACTION_CHUNKS, buckets::CHUNKS),
    (names::COMPACTION_ROLLUPS, buckets::ROLLUPS),
    (names::COMPACTION_EVIDENCE_LINES, buckets::EVIDENCE_LINES),
    (names::HTTP_REQUEST_SECONDS, buckets::HTTP_SECONDS),
    (names::HOOK_CALL_SECONDS, buckets::HTTP_SECONDS),
    (names::PROXY_REQUEST_SECONDS, buckets::RUN_SECONDS),
    (names::PROXY_OVERHEAD_SECONDS, buckets::HTTP_SECONDS),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn is_snake_case(name: &str) -> bool {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !name.starts_with('_')
            && !name.ends_with('_')
            && !name.contains("__")
    }

    #[test]
    fn every_family_is_listed_once_has_help_and_follows_the_conventions() {
        let mut seen = std::collections::HashSet::new();
        for f in all_families() {
            assert!(seen.insert(f.name), "{} listed twice", f.name);
            assert!(is_snake_case(f.name), "{}", f.name);
            assert!(f.name.starts_with("compactor_"), "{}", f.name);
            assert!(!f.help.trim().is_empty(), "{} has no help text", f.name);
            assert!(!f.labels.is_empty(), "{} has no labels", f.name);
            for label in f.labels {
                assert!(is_snake_case(label), "{}: label {label}", f.name);
            }
            match f.kind {
                Kind::Counter => assert!(f.name.ends_with("_total"), "{}", f.name),
                Kind::Gauge => assert!(!f.name.ends_with("_total"), "{}", f.name),
                Kind::Histogram => {
                    assert!(!f.name.ends_with("_total"), "{}", f.name);
                    // Named by their unit: durations in `_seconds`, the
                    // sizes of a compaction in what they count.
                    let units = [
                        "_seconds",
                        "_tokens",
                        "_messages",
                        "_chunks",
                        "_rollups",
                        "_lines",
                    ];
                    assert!(
                        units.iter().any(|unit| f.name.ends_with(unit)),
                        "{}: histograms end in a unit",
                        f.name
                    );
                    let buckets = HISTOGRAM_BUCKETS
                        .iter()
                        .find(|(name, _)| *name == f.name)
                        .map(|(_, b)| *b)
                        .unwrap_or_else(|| panic!("{} has no buckets", f.name));
                    assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{}", f.name);
                }
            }
        }
        // Every constant in `names` is a family.
        assert_eq!(FAMILIES.len(), 37);
        assert_eq!(LLM_FAMILIES.len(), 8);
        assert_eq!(EVENT_FAMILIES.len(), 5);
        assert_eq!(HOOK_FAMILIES.len(), 2);
        assert_eq!(PROXY_FAMILIES.len(), 4);
        for (name, _) in HISTOGRAM_BUCKETS {
            let f = family_named(name).unwrap_or_else(|| panic!("{name}: no family"));
            assert_eq!(f.kind, Kind::Histogram, "{name}");
        }
    }

    #[test]
    fn label_values_are_snake_case_and_distinct() {
        let lists: &[&[&str]] = &[
            &EnqueueResult::LABELS,
            &TurnResult::LABELS,
            &WaitOutcome::LABELS,
            &NotifyOp::LABELS,
            &FailureReason::LABELS,
            &DeadLetterReason::LABELS,
            &RunOutcome::LABELS,
            &QueueOp::LABELS,
            &QueueKey::LABELS,
            &QueueState::LABELS,
            &CompactionOutcome::LABELS,
            &TokenStage::LABELS,
            &EvidenceOutcome::LABELS,
            &TokenDirection::LABELS,
            &LlmOutcome::LABELS,
            &DeliveryOutcome::LABELS,
            &BacklogState::LABELS,
            &HookOutcome::LABELS,
        ];
        for list in lists {
            let distinct: std::collections::HashSet<_> = list.iter().collect();
            assert_eq!(distinct.len(), list.len(), "{list:?}");
            for value in *list {
                assert!(is_snake_case(value), "{value}");
            }
        }
        assert_eq!(EnqueueResult::ALL.len(), EnqueueResult::LABELS.len());
        for (value, label) in RunOutcome::ALL.iter().zip(RunOutcome::LABELS) {
            assert_eq!(value.as_str(), label);
        }
        // Every failure reason is also a run outcome, spelled the same.
        for reason in FailureReason::LABELS {
            assert!(RunOutcome::LABELS.contains(&reason), "{reason}");
        }
        for (outcome, degraded) in COMPACTION_OUTCOMES {
            assert!(CompactionOutcome::LABELS.contains(&outcome), "{outcome}");
            assert!(["true", "false"].contains(&degraded));
        }
    }
}
