//! `compactor`: the operator CLI. Configuration as for the worker:
//! `config/default.toml` (compiled in), `--config FILE`,
//! `COMPACTOR__SECTION__KEY`, `DATABASE_URL`, `REDIS_URL`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use compactor_producer::client::ClientSettings;
use compactor_producer::settings;
use compactor_producer::store::{SchemaStatus, Store};

/// Operate compactor: database schema, queue, workstreams.
#[derive(Debug, Parser)]
#[command(name = "compactor", version, about, long_about = None)]
struct Cli {
    /// A TOML file overriding config/default.toml (any subset of its keys).
    #[arg(long, global = true, env = "COMPACTOR_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply pending database migrations (or, with --check, only report).
    Migrate {
        /// Exit 1 when migrations are pending instead of applying them.
        #[arg(long)]
        check: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings: ClientSettings = match settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("compactor: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("compactor: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Migrate { check } => migrate(&settings, check).await,
        }
    })
}

async fn migrate(settings: &ClientSettings, check: bool) -> ExitCode {
    let store = match Store::connect(settings.database.url.expose()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("compactor: {e}");
            return ExitCode::FAILURE;
        }
    };
    let status = match store.schema_status().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("compactor: {e}");
            return ExitCode::FAILURE;
        }
    };
    match status {
        SchemaStatus::Current => {
            println!("schema is current ({})", settings.database.url);
            ExitCode::SUCCESS
        }
        SchemaStatus::Ahead { unknown } => {
            eprintln!(
                "compactor: the database has migrations this build does not know ({}): upgrade compactor",
                unknown.join(", ")
            );
            ExitCode::FAILURE
        }
        SchemaStatus::Behind { pending } if check => {
            println!("pending migrations: {}", pending.join(", "));
            ExitCode::from(1)
        }
        SchemaStatus::Behind { .. } => match store.migrate().await {
            Ok(applied) => {
                for name in &applied {
                    println!("applied {name}");
                }
                println!("schema is current ({})", settings.database.url);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("compactor: migration failed: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
