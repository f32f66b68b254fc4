//! `compactor-worker`: runs compaction jobs from the Redis queue until
//! SIGTERM or SIGINT. Configuration: `config/default.toml` (compiled in),
//! then `--config FILE`, then `COMPACTOR__SECTION__KEY`, `REDIS_URL` and
//! `DATABASE_URL`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use compactor_worker::settings::Settings;
use compactor_worker::{signals, startup, telemetry};
use tokio_util::sync::CancellationToken;

/// Runs compaction jobs from the Redis queue.
#[derive(Debug, Parser)]
#[command(name = "compactor-worker", version, about, long_about = None)]
struct Args {
    /// A TOML file overriding config/default.toml (any subset of its keys).
    #[arg(long, env = "COMPACTOR_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let settings = match Settings::load(args.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("compactor-worker: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init(&settings.log);
    for key in settings.engine.deprecated_keys() {
        tracing::warn!(
            key,
            "deprecated setting ignored: it no longer does anything; remove it from the configuration"
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("compactor-worker: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            signals::terminate().await;
            trigger.cancel();
        });
        startup::run(settings, shutdown).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let message = with_causes(&e);
            let code = e.exit_code();
            tracing::error!(error = %message, exit_code = code, "compactor-worker stopped");
            eprintln!("compactor-worker: {message}");
            ExitCode::from(code)
        }
    }
}

/// The error and every cause its message does not already include, so the
/// last line says why the start failed (`… : connection refused`).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}
