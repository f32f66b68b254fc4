//! `compactor-queue-probe`: the worker runtime with a synthetic handler.
//!
//! Smoke-tests a deployment's queue (does a job enqueued here get picked up
//! and acknowledged?) and serves as the worker process of the
//! multi-process tests and the runtime benchmark. It never touches a
//! database or an LLM.
//!
//! ```text
//! compactor-queue-probe [--redis URL] [--cluster true|false] [--queue NAME] [--handler noop|sleep|crash]
//!     [--sleep-ms N] [--record FILE] [--concurrency N] [--lease-ttl-ms N]
//!     [--renew-ms N] [--check-ms N] [--grace-ms N] [--max-stalls N]
//!     [--retry-base-ms N] [--name NAME]
//! ```
//!
//! `--cluster true` treats `--redis` as the comma-separated seed nodes of a
//! Redis Cluster.
//!
//! `--record FILE` appends `start <member> <job_id> <attempt> <µs>` when an
//! attempt starts and `end <member> <job_id> <attempt> <µs>` when it ends
//! (wall clock, microseconds since the epoch), one `write` per line.
//! `crash` aborts the process when an attempt starts (after recording it).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use compactor_producer::queue::{QueueConfig, QueueName};
use compactor_producer::settings::RedisSettings;
use compactor_worker::connect::connect_with_retry;
use compactor_worker::runtime::{Job, JobError, JobHandler, Runtime, RuntimeConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Noop,
    Sleep,
    Crash,
}

struct Probe {
    mode: Mode,
    sleep: Duration,
    record: Option<std::sync::Mutex<std::fs::File>>,
}

impl Probe {
    fn record(&self, what: &str, job: &Job) {
        let Some(file) = &self.record else { return };
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let line = format!(
            "{what} {} {} {} {micros}\n",
            job.key.job_key(),
            job.job_id,
            job.attempt
        );
        if let Ok(mut f) = file.lock() {
            if let Err(error) = f.write_all(line.as_bytes()) {
                eprintln!("compactor-queue-probe: cannot record: {error}");
            }
        }
    }
}

impl JobHandler for Probe {
    async fn run(&self, job: Job) -> Result<(), JobError> {
        self.record("start", &job);
        match self.mode {
            Mode::Noop => {}
            Mode::Sleep => tokio::time::sleep(self.sleep).await,
            Mode::Crash => std::process::abort(),
        }
        self.record("end", &job);
        Ok(())
    }
}

fn millis(v: &str, flag: &str) -> Result<Duration, String> {
    v.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("{flag} takes a number of milliseconds, not {v:?}"))
}

fn number<T: std::str::FromStr>(v: &str, flag: &str) -> Result<T, String> {
    v.parse::<T>()
        .map_err(|_| format!("{flag} takes a number, not {v:?}"))
}

struct Args {
    redis: RedisSettings,
    queue: QueueConfig,
    runtime: RuntimeConfig,
    probe: Probe,
}

fn parse_args() -> Result<Args, String> {
    let mut redis = RedisSettings::single(
        std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned()),
    );
    let mut queue = QueueConfig::default();
    let mut runtime = RuntimeConfig {
        name: "queue-probe".to_owned(),
        ..RuntimeConfig::default()
    };
    let mut probe = Probe {
        mode: Mode::Noop,
        sleep: Duration::from_millis(100),
        record: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let v = value.as_str();
        match flag.as_str() {
            "--redis" => redis.url = compactor_producer::settings::ConnectionUrl::new(value),
            "--cluster" => {
                redis.cluster = v
                    .parse()
                    .map_err(|_| format!("{flag} takes true or false, not {v:?}"))?;
            }
            "--queue" => queue.name = QueueName::parse(v).map_err(|e| e.to_string())?,
            "--handler" => {
                probe.mode = match v {
                    "noop" => Mode::Noop,
                    "sleep" => Mode::Sleep,
                    "crash" => Mode::Crash,
                    other => {
                        return Err(format!("unknown handler {other:?}: noop, sleep or crash"))
                    }
                }
            }
            "--sleep-ms" => probe.sleep = millis(v, &flag)?,
            "--record" => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(v)
                    .map_err(|e| format!("cannot open {v}: {e}"))?;
                probe.record = Some(std::sync::Mutex::new(file));
            }
            "--concurrency" => runtime.concurrency = number(v, &flag)?,
            "--lease-ttl-ms" => queue.lease_ttl = millis(v, &flag)?,
            "--renew-ms" => runtime.renew_interval = millis(v, &flag)?,
            "--check-ms" => runtime.check_interval = millis(v, &flag)?,
            "--grace-ms" => runtime.shutdown_grace = millis(v, &flag)?,
            "--max-stalls" => queue.max_stalls = number(v, &flag)?,
            "--retry-base-ms" => runtime.retry.base_delay = millis(v, &flag)?,
            "--name" => runtime.name = value,
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(Args {
        redis,
        queue,
        runtime,
        probe,
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = match parse_args() {
        Ok(a) => a,
        Err(message) => {
            eprintln!("compactor-queue-probe: {message}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => {
            eprintln!("compactor-queue-probe: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        let queue = connect_with_retry(
            &args.redis,
            args.queue,
            compactor_worker::signals::terminate(),
        )
        .await
        .map_err(|e| e.to_string())?;
        Runtime::new(queue, args.runtime, args.probe)
            .map_err(|e| e.to_string())?
            .run(compactor_worker::signals::terminate())
            .await
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("compactor-queue-probe: {message}");
            ExitCode::FAILURE
        }
    }
}
