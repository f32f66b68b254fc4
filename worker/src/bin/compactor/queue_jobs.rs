//! `compactor queue jobs|job|cancel|workers`: the jobs of one state a page
//! at a time, one job by the id its logs show, cancelling a job, and the
//! workers serving the queue (as `/v1/queue/…` of the admin API answer).

use std::process::ExitCode;

use chrono::Utc;
use compactor_producer::client::ClientSettings;
use compactor_producer::queue::{CancelThen, JobCursor, JobSummary, JobView, WorkerStatus};
use serde::Serialize;

use crate::commands::report;
use crate::connect::{client, queue};
use crate::failure::Failure;
use crate::human;
use crate::output::Output;

/// `compactor queue jobs`.
pub(crate) async fn jobs(
    settings: &ClientSettings,
    state: JobView,
    limit: usize,
    cursor: Option<&str>,
    out: Output,
) -> ExitCode {
    report(out, async {
        let cursor = cursor.map(JobCursor::parse).transpose()?;
        let queue = queue(settings).await?;
        let page = queue.list_jobs(state, limit, cursor.as_ref()).await?;
        out.print(&page, || {
            if page.jobs.is_empty() {
                return format!("no {state} jobs");
            }
            let rows: Vec<Vec<String>> = page.jobs.iter().map(row).collect();
            let mut text = human::table(
                &[
                    "JOB",
                    "WORKSTREAM",
                    "KIND",
                    "TRIGGER",
                    "LANE",
                    "ATTEMPTS",
                    "AGE",
                    "WORKER",
                    "LAST ERROR",
                ],
                &rows,
            );
            if let Some(next) = &page.next_cursor {
                text.push_str(&format!("\nnext page: --cursor '{next}'"));
            }
            text
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// A job as a row of the table.
fn row(job: &JobSummary) -> Vec<String> {
    let dash = || "-".to_owned();
    vec![
        job.job_id.to_string(),
        workstream(job),
        job.kind.clone().unwrap_or_else(dash),
        job.trigger.as_deref().map_or_else(dash, human::words),
        job.lane.clone(),
        job.attempts.to_string(),
        job.age_ms.map_or_else(dash, human::span_ms),
        job.worker.clone().unwrap_or_else(dash),
        job.last_error.clone().unwrap_or_else(dash),
    ]
}

fn workstream(job: &JobSummary) -> String {
    match (&job.domain, &job.entity_id) {
        (Some(d), Some(e)) => format!("{d}/{e}"),
        _ => job.member.clone(),
    }
}

/// `compactor queue job`.
pub(crate) async fn job(settings: &ClientSettings, job_id: u64, out: Output) -> ExitCode {
    report(out, async {
        let queue = queue(settings).await?;
        let Some(job) = queue.job(job_id).await? else {
            return Err(Failure::no("unknown_job", format!("no job {job_id}")));
        };
        out.print(&job, || describe(&job));
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// One job, a line per field that it has.
fn describe(job: &JobSummary) -> String {
    let now = Utc::now();
    let at = |ms: u64| human::time_ms(i64::try_from(ms).unwrap_or(i64::MAX), now);
    let mut lines = vec![
        format!("job        {}", job.job_id),
        format!("state      {}", job.state),
        format!("workstream {}", workstream(job)),
        format!("kind       {}", job.kind.as_deref().unwrap_or("unknown")),
        format!(
            "trigger    {}",
            job.trigger
                .as_deref()
                .map_or("unknown".to_owned(), human::words)
        ),
        format!("lane       {}", job.lane),
        format!("attempts   {} (stalls {})", job.attempts, job.stalls),
    ];
    let mut push = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            lines.push(format!("{name:<10} {v}"));
        }
    };
    push("added", job.enqueued_at_ms.map(at));
    push("due", job.due_at_ms.map(at));
    push("started", job.started_at_ms.map(at));
    push("finished", job.finished_at_ms.map(at));
    push("worker", job.worker.clone());
    push(
        "lease",
        job.lease_deadline_ms.map(|ms| format!("until {}", at(ms))),
    );
    push("last error", job.last_error.clone());
    if job.followup_pending {
        lines.push("follow-up  requested while it runs".to_owned());
    }
    lines.join("\n")
}

/// What `compactor queue cancel` prints with `--json`.
#[derive(Serialize)]
struct CancelReport {
    job_id: u64,
    was: JobView,
    then: CancelThen,
    entity_lease_revoked: bool,
    followup_job_id: Option<u64>,
}

/// `compactor queue cancel`: needs the database too, to revoke the entity
/// lease a running compaction holds.
pub(crate) async fn cancel(
    settings: &ClientSettings,
    job_id: u64,
    then: CancelThen,
    out: Output,
) -> ExitCode {
    report(out, async {
        let client = client(settings).await?;
        let done = client.cancel_job(job_id, then).await?;
        let report = CancelReport {
            job_id,
            was: done.cancelled.was,
            then,
            entity_lease_revoked: done.entity_lease_revoked,
            followup_job_id: done.cancelled.followup_job_id,
        };
        out.print(&report, || {
            let what = match then {
                CancelThen::Dead => {
                    "dead-lettered (reason cancelled; `compactor dlq retry` runs it again)"
                }
                CancelThen::Requeue => "requeued at its place in line",
            };
            let mut text =
                format!("job {job_id} ({} ) cancelled: {what}", report.was).replace(" )", ")");
            if report.entity_lease_revoked {
                text.push_str("\nits entity lease was revoked: the running attempt cannot commit");
            }
            if let Some(id) = report.followup_job_id {
                text.push_str(&format!(
                    "\nthe follow-up requested while it ran is job {id}"
                ));
            }
            text
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// `compactor queue workers`.
pub(crate) async fn workers(settings: &ClientSettings, out: Output) -> ExitCode {
    report(out, async {
        let queue = queue(settings).await?;
        let workers = queue.workers_overview().await?;
        out.print(&workers, || {
            if workers.is_empty() {
                return "no workers".to_owned();
            }
            let rows: Vec<Vec<String>> = workers.iter().map(worker_row).collect();
            human::table(
                &[
                    "WORKER",
                    "NAME",
                    "HOST",
                    "PID",
                    "VERSION",
                    "CONCURRENCY",
                    "RUNNING",
                    "HEARTBEAT",
                    "STATUS",
                ],
                &rows,
            )
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

fn worker_row(w: &WorkerStatus) -> Vec<String> {
    let or_dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    vec![
        w.id.clone(),
        or_dash(&w.name),
        or_dash(&w.host),
        if w.pid == 0 {
            "-".to_owned()
        } else {
            w.pid.to_string()
        },
        or_dash(&w.version),
        w.concurrency.to_string(),
        w.running_jobs.to_string(),
        w.heartbeat_age_ms.map_or_else(
            || "-".to_owned(),
            |ms| format!("{} ago", human::span_ms(ms)),
        ),
        if w.gone { "gone" } else { "live" }.to_owned(),
    ]
}
