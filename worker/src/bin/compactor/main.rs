//! `compactor`: the operator CLI. Configuration as for the worker:
//! `config/default.toml` (compiled in), `--config FILE`,
//! `COMPACTOR__SECTION__KEY`, `DATABASE_URL`, `REDIS_URL`.
//!
//! Every command prints for people by default and one JSON document with
//! `--json` (for scripts). Exit codes: 0 done, 1 the command's answer is
//! "no" (pending migrations, a wait that timed out, nothing to retry), 2 bad
//! usage or configuration, 3 the database or Redis failed.

mod commands;
mod connect;
mod demo;
mod dlq;
mod failure;
mod human;
mod output;
mod queue_control;
mod queue_jobs;
mod recall;
mod workstreams;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use compactor_producer::client::ClientSettings;
use compactor_producer::settings;

/// Operate compactor: database schema, workstreams, the queue.
#[derive(Debug, Parser)]
#[command(name = "compactor", version, about, long_about = None)]
struct Cli {
    /// A TOML file overriding config/default.toml (any subset of its keys).
    #[arg(long, global = true, env = "COMPACTOR_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print one JSON document instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

/// A workstream, as `<domain> <entity>`.
#[derive(Debug, Clone, Args)]
struct Target {
    /// Domain of the workstream (e.g. `chat`).
    domain: String,
    /// Entity id within the domain.
    entity: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply pending database migrations (or, with --check, only report).
    Migrate {
        /// Exit 1 when migrations are pending instead of applying them.
        #[arg(long)]
        check: bool,
    },
    /// Append messages, read as JSON Lines (`{"role": …, "parts": […]}` per
    /// line, optionally with a `"client_id"`) from a file or stdin.
    Append {
        #[command(flatten)]
        target: Target,
        /// The JSON Lines file; `-` or absent reads stdin.
        #[arg(long, short)]
        file: Option<PathBuf>,
        /// Then end the turn: request compaction if over the trigger.
        #[arg(long)]
        finalize: bool,
        /// Makes the append safe to run again: message i (without a
        /// client_id of its own) is stored once, as `<KEY>#<i>`.
        #[arg(long, value_name = "KEY")]
        idempotency_key: Option<String>,
    },
    /// Request a compaction (as an automatic one would), whatever the size.
    Enqueue {
        #[command(flatten)]
        target: Target,
    },
    /// Request a manual compaction, with focus instructions for the
    /// summarizer; closes the workstream's circuit breaker.
    CompactNow {
        #[command(flatten)]
        target: Target,
        /// What the summary should focus on.
        #[arg(long)]
        instructions: Option<String>,
    },
    /// Show a workstream's compaction status: lease, last compaction,
    /// breaker, the queue's view of its job.
    Status {
        #[command(flatten)]
        target: Target,
    },
    /// Wait for the requested compaction: prints ready, compacted,
    /// timed_out (with its phase) or no_live_worker (exit 1 for the last
    /// two).
    Wait {
        #[command(flatten)]
        target: Target,
        /// Longest wait, in milliseconds.
        #[arg(long, default_value_t = 30_000)]
        timeout_ms: u64,
        /// What to wait for: the whole requested compaction (queued,
        /// running, backing off), or only one running now.
        #[arg(long, value_enum, default_value_t = WaitModeArg::Requested)]
        mode: WaitModeArg,
    },
    /// Print what the next model call would be sent.
    Context {
        #[command(flatten)]
        target: Target,
    },
    /// The queue.
    Queue {
        #[command(subcommand)]
        command: QueueCommand,
    },
    /// The dead-letter set.
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
    /// Webhook deliveries of compaction events.
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// Workstreams by state (breaker open, over the trigger, degraded last
    /// time), domain and entity id prefix, in key order.
    Workstreams {
        #[command(flatten)]
        args: workstreams::ListArgs,
    },
    /// Request compaction of every workstream over its trigger that has no
    /// job and no running compaction (after Redis lost its data, say).
    Reconcile,
    /// Recent compaction runs of a workstream (the audit trail), newest first.
    Runs {
        #[command(flatten)]
        target: Target,
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },
    /// Find a workstream's messages (compacted or not) that contain every
    /// word, newest first, with the compaction run that folded each.
    Recall {
        #[command(flatten)]
        target: Target,
        /// The words to find (case-insensitive, exact per word).
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
        /// Most messages shown (1-100).
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },
    /// Seed a long conversation, have a running worker compact it, and show
    /// tokens before and after, the summary and the next turn's context.
    Demo {
        /// Turns of conversation to seed (4 messages each).
        #[arg(long, default_value_t = 150)]
        turns: usize,
        /// How long to wait for a worker to compact it, in seconds.
        #[arg(long, default_value_t = 120)]
        timeout_secs: u64,
    },
}

/// `--mode` of `wait` (see `compactor_producer::client::WaitMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum WaitModeArg {
    Requested,
    Running,
}

impl From<WaitModeArg> for compactor_producer::client::WaitMode {
    fn from(mode: WaitModeArg) -> Self {
        match mode {
            WaitModeArg::Requested => compactor_producer::client::WaitMode::Requested,
            WaitModeArg::Running => compactor_producer::client::WaitMode::Running,
        }
    }
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    /// Jobs by state, what is paused, and the oldest waiting job's age.
    Stats,
    /// Stop handing out the queue's jobs (or one domain's); they stay
    /// queued, and running jobs finish.
    Pause {
        /// Only this domain's jobs.
        #[arg(long)]
        domain: Option<String>,
    },
    /// Hand out the queue's jobs again (or one domain's), at once.
    Resume {
        /// Only this domain's jobs.
        #[arg(long)]
        domain: Option<String>,
    },
    /// List the jobs of one state, a page at a time (`--cursor` the one
    /// the previous page printed for the next).
    Jobs {
        #[arg(long, value_enum, default_value_t = JobStateArg::Waiting)]
        state: JobStateArg,
        /// Jobs per page (1-500).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One job by the id its logs show.
    Job { id: u64 },
    /// Cancel a waiting or running job: dead-lettered with reason
    /// `cancelled` (retry it with `dlq retry`), or requeued with --requeue.
    Cancel {
        id: u64,
        #[arg(long)]
        requeue: bool,
    },
    /// The workers serving the queue, live and gone.
    Workers,
}

/// `--state` of `queue jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum JobStateArg {
    Waiting,
    Delayed,
    Running,
    Done,
    Dead,
}

impl From<JobStateArg> for compactor_producer::queue::JobView {
    fn from(state: JobStateArg) -> Self {
        use compactor_producer::queue::JobView;
        match state {
            JobStateArg::Waiting => JobView::Waiting,
            JobStateArg::Delayed => JobView::Delayed,
            JobStateArg::Running => JobView::Running,
            JobStateArg::Done => JobView::Done,
            JobStateArg::Dead => JobView::Dead,
        }
    }
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// The newest dead letters (those a filter matches, with one).
    List {
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[command(flatten)]
        filter: dlq::FilterArgs,
    },
    /// Request dead-lettered jobs again and remove their letters: one
    /// entry, or those a filter matches (`--all`: every letter).
    Retry {
        /// The entry, as `list` shows it (`compact:<domain>:<entity>|<job id>`).
        #[arg(required_unless_present_any = dlq::FILTERS)]
        entry: Option<String>,
        #[command(flatten)]
        bulk: dlq::BulkArgs,
    },
    /// Delete one dead letter, those a filter matches, or all with --all.
    Purge {
        entry: Option<String>,
        #[command(flatten)]
        bulk: dlq::BulkArgs,
    },
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    /// List deliveries, oldest first (one page; `--after` the last id
    /// shown for the next).
    Deliveries {
        /// Only deliveries in this state.
        #[arg(long, value_enum)]
        state: Option<DeliveryStateArg>,
        /// Only deliveries to this webhook (its configured name).
        #[arg(long)]
        endpoint: Option<String>,
        /// The page after this delivery id.
        #[arg(long)]
        after: Option<i64>,
        #[arg(long, default_value_t = 100)]
        limit: u64,
    },
    /// Retry one delivery, or every failed one with --all-failed: pending
    /// again, due now, attempts counted from 0.
    Retry {
        /// The delivery's id, as `deliveries` shows it.
        #[arg(required_unless_present = "all_failed")]
        id: Option<i64>,
        #[arg(long, conflicts_with = "id")]
        all_failed: bool,
        /// With --all-failed: only deliveries to this webhook.
        #[arg(long, requires = "all_failed")]
        endpoint: Option<String>,
    },
}

/// `--state` of `events deliveries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DeliveryStateArg {
    Pending,
    Delivered,
    Failed,
}

impl From<DeliveryStateArg> for compactor_producer::store::DeliveryState {
    fn from(state: DeliveryStateArg) -> Self {
        use compactor_producer::store::DeliveryState;
        match state {
            DeliveryStateArg::Pending => DeliveryState::Pending,
            DeliveryStateArg::Delivered => DeliveryState::Delivered,
            DeliveryStateArg::Failed => DeliveryState::Failed,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings: ClientSettings = match settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            let out = output::Output { json: cli.json };
            return out.fail(output::USAGE, failure::codes::INVALID_CONFIG, e);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let out = output::Output { json: cli.json };
            return out.fail(
                output::UNAVAILABLE,
                "internal",
                format!("cannot start the async runtime: {e}"),
            );
        }
    };
    let out = output::Output { json: cli.json };
    runtime.block_on(commands::run(cli.command, &settings, out))
}
