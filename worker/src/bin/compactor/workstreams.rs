//! `compactor workstreams`: workstreams listed for operators by state
//! (breaker open, over the trigger, degraded last time), domain and entity
//! id prefix, one page in key order — what `GET /v1/workstreams` answers.

use std::process::ExitCode;

use chrono::Utc;
use clap::{Args, ValueEnum};
use compactor_producer::client::ClientSettings;
use compactor_producer::store::{Store, WorkstreamQuery, WorkstreamStateFilter};
use compactor_shared::EntityKey;
use compactor_worker::http::workstream_list::WorkstreamsPage;

use crate::commands::report;
use crate::failure::Failure;
use crate::human;
use crate::output::Output;

/// The flags of `compactor workstreams`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ListArgs {
    /// Only workstreams in this state.
    #[arg(long, value_enum)]
    state: Option<StateArg>,
    /// Only workstreams of this domain.
    #[arg(long)]
    domain: Option<String>,
    /// Only entity ids starting with this.
    #[arg(long)]
    q: Option<String>,
    /// Most workstreams shown (1-500).
    #[arg(long, default_value_t = 50)]
    limit: u64,
    /// The page after this workstream (`<domain>/<entity>`, the
    /// `next_cursor` of the previous page).
    #[arg(long)]
    after: Option<String>,
}

/// `--state`, in the HTTP API's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
enum StateArg {
    BreakerOpen,
    OverTrigger,
    Degraded,
}

impl From<StateArg> for WorkstreamStateFilter {
    fn from(s: StateArg) -> WorkstreamStateFilter {
        match s {
            StateArg::BreakerOpen => WorkstreamStateFilter::BreakerOpen,
            StateArg::OverTrigger => WorkstreamStateFilter::OverTrigger,
            StateArg::Degraded => WorkstreamStateFilter::Degraded,
        }
    }
}

pub(crate) async fn list(settings: &ClientSettings, args: ListArgs, out: Output) -> ExitCode {
    report(out, async {
        if !(1..=500).contains(&args.limit) {
            return Err(Failure::argument("--limit: use 1-500"));
        }
        let key =
            |domain: &str, entity: &str| EntityKey::parse(domain, entity).map_err(Failure::key);
        let query = WorkstreamQuery {
            state: args.state.map(Into::into),
            domain: args
                .domain
                .as_deref()
                .map(|d| key(d, "x").map(|k| k.domain().to_owned()))
                .transpose()?,
            entity_prefix: args
                .q
                .as_deref()
                .map(|q| key("x", q).map(|k| k.entity_id().to_owned()))
                .transpose()?,
            after: args
                .after
                .as_deref()
                .map(|raw| {
                    let (d, e) = raw
                        .split_once('/')
                        .ok_or_else(|| Failure::argument("--after: use <domain>/<entity>"))?;
                    key(d, e)
                })
                .transpose()?,
            limit: args.limit,
            trigger_tokens: settings.engine.trigger.threshold(),
        };
        let store = Store::connect_with(&settings.database).await?;
        let page = store.list_workstreams(&query).await?;
        let page = WorkstreamsPage::from(page);
        out.print(&page, || text(&page));
        Ok(ExitCode::SUCCESS)
    })
    .await
}

fn text(page: &WorkstreamsPage) -> String {
    if page.workstreams.is_empty() {
        return "no workstreams".to_owned();
    }
    let now = Utc::now();
    let rows: Vec<Vec<String>> = page
        .workstreams
        .iter()
        .map(|w| {
            let (ran, outcome) = w.last_run.as_ref().map_or_else(
                || ("never".to_owned(), String::new()),
                |r| {
                    let outcome = match &r.degraded_reason {
                        Some(reason) => format!("{} (degraded: {reason})", r.outcome),
                        None if r.degraded => format!("{} (degraded)", r.outcome),
                        None => r.outcome.clone(),
                    };
                    (human::relative(r.finished_at, now), outcome)
                },
            );
            vec![
                format!("{}/{}", w.domain, w.entity_id),
                w.uncompacted_messages.to_string(),
                w.uncompacted_tokens.to_string(),
                w.breaker.clone(),
                ran,
                outcome,
            ]
        })
        .collect();
    let mut text = human::table(
        &[
            "WORKSTREAM",
            "MESSAGES",
            "TOKENS",
            "BREAKER",
            "LAST RUN",
            "OUTCOME",
        ],
        &rows,
    );
    if let Some(next) = &page.next_cursor {
        text.push_str(&format!("\nmore: --after {next}"));
    }
    text
}
