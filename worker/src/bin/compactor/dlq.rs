//! `compactor dlq` by filter: dead letters listed, retried or purged by
//! reason, domain and age (`--reason exhausted --domain chat --older-than
//! 1h`), every one with `--all`, and `--dry-run` to count (and see a
//! sample of) what would be touched first. The same queue operations as
//! the `/v1/queue/dead-letters` routes; a retried letter writes its
//! `compaction.requested` event as a single retry does.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use compactor_producer::client::{record_requested, ClientSettings};
use compactor_producer::queue::{
    reason_kind, BulkAction, BulkReport, DeadFilter, DeadLetter, DeadReason, Queue,
};
use compactor_producer::store::Store;
use humantime_serde::re::humantime;
use serde::Serialize;

use crate::failure::Failure;
use crate::human;
use crate::output::Output;

/// The filter flags: an entry argument is not required with any of them.
pub(crate) const FILTERS: [&str; 4] = ["reason", "domain", "older_than", "all"];

/// Which dead letters: the flags narrow together.
#[derive(Debug, Clone, Args)]
pub(crate) struct FilterArgs {
    /// Letters of this kind of reason: exhausted, permanent, stalled,
    /// unusable, cancelled (or the first word of a reason).
    #[arg(long)]
    reason: Option<String>,
    /// Letters of this domain.
    #[arg(long)]
    domain: Option<String>,
    /// Letters dead for at least this long (`90s`, `1h`, `2days`).
    #[arg(long, value_parser = humantime::parse_duration)]
    older_than: Option<Duration>,
}

impl FilterArgs {
    fn is_empty(&self) -> bool {
        self.reason.is_none() && self.domain.is_none() && self.older_than.is_none()
    }

    fn filter(&self, entry: Option<String>) -> Result<DeadFilter, Failure> {
        let arg = |e: compactor_producer::queue::DeadFilterError| Failure::argument(e);
        Ok(DeadFilter {
            reason: self
                .reason
                .as_deref()
                .map(DeadReason::parse)
                .transpose()
                .map_err(arg)?,
            domain: self
                .domain
                .as_deref()
                .map(DeadFilter::parse_domain)
                .transpose()
                .map_err(arg)?,
            older_than: self.older_than,
            entry: entry
                .as_deref()
                .map(DeadFilter::parse_entry)
                .transpose()
                .map_err(arg)?,
        })
    }
}

/// The flags of a bulk retry or purge.
#[derive(Debug, Clone, Args)]
pub(crate) struct BulkArgs {
    #[command(flatten)]
    filter: FilterArgs,
    /// Every dead letter (needed when no filter is given).
    #[arg(long)]
    all: bool,
    /// Only count, and show a sample of, the letters that would be touched.
    #[arg(long)]
    dry_run: bool,
}

impl BulkArgs {
    /// Whether this is a bulk operation, not the single-entry form.
    pub(crate) fn is_bulk(&self) -> bool {
        !self.filter.is_empty() || self.all || self.dry_run
    }
}

/// Up to `limit` of the newest letters `filter` matches.
pub(crate) async fn list(
    queue: &Queue,
    limit: usize,
    filter: &FilterArgs,
) -> Result<Vec<DeadLetter>, Failure> {
    if filter.is_empty() {
        return Ok(queue.dead_letters(limit).await?);
    }
    let filter = filter.filter(None)?;
    let mut letters = Vec::new();
    let mut cursor = None;
    while letters.len() < limit {
        let page = queue
            .dead_letters_page(&filter, cursor, limit - letters.len())
            .await?;
        letters.extend(page.letters);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(letters)
}

/// What a bulk retry or purge prints with `--json`.
#[derive(Debug, Serialize)]
struct Report<'a> {
    matched: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    retried: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    purged: Option<u64>,
    dry_run: bool,
    sample: &'a [DeadLetter],
}

/// Retries or purges the letters `args` (and `entry`) choose.
pub(crate) async fn bulk(
    settings: &ClientSettings,
    queue: &Queue,
    action: BulkAction,
    entry: Option<String>,
    args: &BulkArgs,
    out: Output,
) -> Result<ExitCode, Failure> {
    let filter = args.filter.filter(entry)?;
    if filter.is_empty() && !args.all {
        return Err(Failure::argument(
            "name an entry or a filter (--reason, --domain, --older-than), or pass --all",
        ));
    }
    // Connected first: a retry must be able to write its events.
    let store = match action {
        BulkAction::Retry if !args.dry_run => Some(Store::connect_with(&settings.database).await?),
        _ => None,
    };
    // A batch at a time, each batch's events written before the next.
    let mut walk = queue
        .dead_letters_walk(&filter, action, args.dry_run)
        .await?;
    let mut report = BulkReport::default();
    let mut more = true;
    while more {
        more = queue.dead_letters_step(&mut walk, &mut report).await?;
        for r in report.retried.drain(..) {
            if let (Some(store), Some(trigger)) = (&store, &r.trigger) {
                record_requested(store, &r.key, trigger, &r.outcome).await;
            }
        }
    }
    let retry = action == BulkAction::Retry;
    out.print(
        &Report {
            matched: report.matched,
            retried: retry.then_some(report.applied),
            skipped: retry.then_some(report.skipped),
            purged: (!retry).then_some(report.applied),
            dry_run: args.dry_run,
            sample: &report.sample,
        },
        || text(action, args.dry_run, &report),
    );
    Ok(ExitCode::SUCCESS)
}

/// The report for people: what was done, and the sample as a table.
fn text(action: BulkAction, dry_run: bool, report: &BulkReport) -> String {
    let verb = match action {
        BulkAction::Retry => "retried",
        BulkAction::Purge => "purged",
    };
    let mut text = if dry_run {
        format!(
            "dry run: {} dead letters match (none {verb})",
            report.matched
        )
    } else {
        format!(
            "{verb} {} of {} matching dead letters",
            report.applied, report.matched
        )
    };
    if action == BulkAction::Retry && report.skipped > 0 {
        text.push_str(&format!(
            "; {} could not be requested again and stay",
            report.skipped
        ));
    }
    if !report.sample.is_empty() {
        let now = chrono::Utc::now();
        let rows: Vec<Vec<String>> = report
            .sample
            .iter()
            .map(|d| {
                vec![
                    human::time_ms(i64::try_from(d.failed_at_ms).unwrap_or(i64::MAX), now),
                    d.entry.clone(),
                    reason_kind(&d.reason).to_owned(),
                    d.reason.clone(),
                ]
            })
            .collect();
        text.push_str("\n\n");
        text.push_str(&human::table(&["FAILED", "ENTRY", "KIND", "REASON"], &rows));
    }
    text
}
