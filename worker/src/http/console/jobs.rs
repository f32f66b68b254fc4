//! `/ui/jobs`: the queue's jobs by state, a page at a time, and one job by
//! the id its logs show, with a cancel — what `GET /v1/queue/jobs…` and
//! `compactor queue jobs|job|cancel` do. Cancelling stops work, so it asks
//! first: the cancel buttons open a confirmation page (GET), whose button
//! sends the POST; with JavaScript, a confirm dialog stands in for it.

use std::fmt::Write as _;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use compactor_producer::client::ClientError;
use compactor_producer::queue::{CancelThen, JobCursor, JobSummary, JobView, QueueError};
use serde::Deserialize;

use super::error::ConsoleError;
use super::html::{age, count, esc, page, time_ms, url_part, Nav};
use super::session::{CsrfForm, Visitor};
use super::PageQuery as QueryParams;
use crate::http::AppState;

/// Jobs per page.
const PAGE: usize = 50;

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    state: Option<JobView>,
    cursor: Option<String>,
}

/// `GET /ui/jobs?state=…&cursor=…`.
pub(super) async fn list(
    State(state): State<AppState>,
    visitor: Visitor,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Response, ConsoleError> {
    let view = query.state.unwrap_or(JobView::Waiting);
    let cursor = query
        .cursor
        .as_deref()
        .map(JobCursor::parse)
        .transpose()
        .map_err(|_| ConsoleError::BadRequest("not a cursor of this page".to_owned()))?;
    let queue = state.compactor().queue();
    let (jobs, counts) =
        futures::try_join!(queue.list_jobs(view, PAGE, cursor.as_ref()), queue.counts())?;
    let mut body = String::with_capacity(8 * 1024);
    body.push_str("<nav class=\"tabs\" aria-label=\"Job states\">");
    for v in JobView::ALL {
        let n = match v {
            JobView::Waiting | JobView::Delayed => None,
            JobView::Running => Some(counts.running),
            JobView::Done => Some(counts.done),
            JobView::Dead => Some(counts.dead),
        };
        let current = if v == view {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(
            body,
            "<a href=\"/ui/jobs?state={s}\"{current}>{s}{n}</a> ",
            s = v.as_str(),
            n = n.map_or_else(String::new, |n| format!(" ({})", count(n))),
        );
    }
    let _ = write!(
        body,
        "</nav><p class=\"muted\">{} waiting in all (due now and delayed).</p>",
        count(counts.waiting)
    );
    if jobs.jobs.is_empty() {
        let _ = write!(body, "<p>No {} jobs.</p>", view.as_str());
    } else {
        body.push_str(
            "<div class=\"table-wrap\"><table id=\"jobs\"><thead><tr><th class=\"num\">Job</th><th>Workstream</th>\
             <th>Kind</th><th>Trigger</th><th class=\"num\">Attempts</th><th>Age</th><th>Worker</th>\
             <th>Last error</th></tr></thead><tbody>",
        );
        for job in &jobs.jobs {
            let _ = write!(
                body,
                "<tr><td class=\"num\"><a href=\"/ui/jobs/{id}\">{id}</a></td><td>{ws}</td><td>{kind}</td>\
                 <td>{trigger}</td><td class=\"num\">{attempts}</td><td>{age}</td><td class=\"mono\">{worker}</td>\
                 <td>{error}</td></tr>",
                id = job.job_id,
                ws = workstream_cell(job),
                kind = esc(job.kind.as_deref().unwrap_or("?")),
                trigger = esc(job.trigger.as_deref().unwrap_or("?")),
                attempts = job.attempts,
                age = job.age_ms.map_or_else(String::new, age),
                worker = esc(job.worker.as_deref().unwrap_or("")),
                error = esc(job.last_error.as_deref().unwrap_or("")),
            );
        }
        body.push_str("</tbody></table></div>");
    }
    if let Some(next) = &jobs.next_cursor {
        let _ = write!(
            body,
            "<p><a href=\"/ui/jobs?state={}&amp;cursor={}\" id=\"next-page\">Next page</a></p>",
            view.as_str(),
            url_part(next)
        );
    }
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Jobs", Nav::Jobs),
        &body,
    ))
}

/// The workstream of a job, as a link to its page (its member as text
/// when the payload could not be read).
fn workstream_cell(job: &JobSummary) -> String {
    match (&job.domain, &job.entity_id) {
        (Some(d), Some(e)) => format!(
            "<a href=\"/ui/workstreams/{}/{}\">{}/{}</a>",
            url_part(d),
            url_part(e),
            esc(d),
            esc(e)
        ),
        _ => format!("<span class=\"mono\">{}</span>", esc(&job.member)),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct JobQuery {
    /// What the last action did (a fixed set: nothing of the request is
    /// echoed).
    notice: Option<String>,
}

/// `GET /ui/jobs/{id}`: one job, with its cancel buttons while it waits
/// or runs.
pub(super) async fn job(
    State(state): State<AppState>,
    visitor: Visitor,
    Path(id): Path<u64>,
    QueryParams(query): QueryParams<JobQuery>,
) -> Result<Response, ConsoleError> {
    let Some(job) = state.compactor().queue().job(id).await? else {
        return Err(ConsoleError::NotFound(format!(
            "job {id} (an unknown id, or one trimmed with the done and dead sets)"
        )));
    };
    let mut body = String::with_capacity(4 * 1024);
    let notice = match query.notice.as_deref() {
        Some("cancelled") => Some(("good", "Cancelled.")),
        Some("finished") => Some(("bad", "It had finished already: nothing to cancel.")),
        _ => None,
    };
    if let Some((class, text)) = notice {
        let _ = write!(
            body,
            "<p class=\"notice {class}\" role=\"status\">{text}</p>"
        );
    }
    let opt_time = |ms: Option<u64>| ms.map_or_else(String::new, time_ms);
    let rows = [
        ("State", esc(job.state.as_str()).to_string()),
        ("Workstream", workstream_cell(&job)),
        ("Kind", esc(job.kind.as_deref().unwrap_or("?")).to_string()),
        (
            "Trigger",
            esc(job.trigger.as_deref().unwrap_or("?")).to_string(),
        ),
        ("Lane", esc(&job.lane).to_string()),
        (
            "Attempts",
            format!("{} ({} stalled)", job.attempts, job.stalls),
        ),
        ("Added", opt_time(job.enqueued_at_ms)),
        ("Due", opt_time(job.due_at_ms)),
        ("Started", opt_time(job.started_at_ms)),
        ("Finished", opt_time(job.finished_at_ms)),
        (
            "Worker",
            esc(job.worker.as_deref().unwrap_or("")).to_string(),
        ),
        ("Lease runs out", opt_time(job.lease_deadline_ms)),
        (
            "Last error",
            esc(job.last_error.as_deref().unwrap_or("")).to_string(),
        ),
    ];
    body.push_str("<div class=\"card\"><table id=\"job\"><tbody>");
    // Only what this job has (a waiting job has no worker, a running one
    // no finish time).
    for (label, value) in rows.iter().filter(|(_, v)| !v.is_empty()) {
        let _ = write!(body, "<tr><th>{label}</th><td>{value}</td></tr>");
    }
    body.push_str("</tbody></table></div>");
    if matches!(
        job.state,
        JobView::Waiting | JobView::Delayed | JobView::Running
    ) {
        for (then, label, question) in [
            (
                "dead",
                "Cancel…",
                "Cancel this job? It ends as a dead letter (reason cancelled), which can be retried.",
            ),
            (
                "requeue",
                "Cancel and requeue…",
                "Cancel this attempt and put the job back in line?",
            ),
        ] {
            let _ = write!(
                body,
                "<form class=\"inline\" method=\"get\" action=\"/ui/jobs/{id}/cancel\" \
                 data-post=\"/ui/jobs/{id}/cancel\" data-confirm=\"{question}\">\
                 <input type=\"hidden\" name=\"then\" value=\"{then}\">\
                 <button type=\"submit\" class=\"danger cancel-{then}\">{label}</button></form> ",
                id = job.job_id,
            );
        }
    }
    Ok(page(
        StatusCode::OK,
        &visitor.frame(&format!("Job {}", job.job_id), Nav::Jobs),
        &body,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Then {
    Dead,
    Requeue,
}

impl Then {
    fn cancel_then(&self) -> CancelThen {
        match self {
            Then::Dead => CancelThen::Dead,
            Then::Requeue => CancelThen::Requeue,
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct CancelQuery {
    then: Then,
}

/// `GET /ui/jobs/{id}/cancel?then=…`: the confirmation page of a cancel.
pub(super) async fn confirm_cancel(
    visitor: Visitor,
    Path(id): Path<u64>,
    QueryParams(query): QueryParams<CancelQuery>,
) -> Result<Response, ConsoleError> {
    let (then, what) = match query.then {
        Then::Dead => (
            "dead",
            "It ends as a dead letter with reason cancelled (retry it from the dead letters).",
        ),
        Then::Requeue => ("requeue", "It goes back in line and runs again."),
    };
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>Cancel job {id}? {what} A running attempt is stopped and cannot commit.</p>\
         <form method=\"post\" action=\"/ui/jobs/{id}/cancel\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"hidden\" name=\"then\" value=\"{then}\">\
         <button type=\"submit\" class=\"danger\" id=\"confirm\">Cancel the job</button> \
         <a href=\"/ui/jobs/{id}\">Back</a></form>",
        csrf = esc(&visitor.csrf),
    );
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Cancel a job?", Nav::Jobs),
        &body,
    ))
}

/// `POST /ui/jobs/{id}/cancel`.
pub(super) async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<u64>,
    CsrfForm(form): CsrfForm<CancelQuery>,
) -> Result<Response, ConsoleError> {
    let notice = match state
        .compactor()
        .cancel_job(id, form.then.cancel_then())
        .await
    {
        Ok(_) => "cancelled",
        Err(ClientError::Queue(QueueError::JobFinished { .. })) => "finished",
        Err(ClientError::Queue(QueueError::JobNotFound { .. })) => {
            return Err(ConsoleError::NotFound(format!("job {id}")))
        }
        Err(ClientError::Queue(e)) => return Err(e.into()),
        Err(ClientError::Store(e)) => return Err(e.into()),
        Err(other) => return Err(ConsoleError::BadRequest(other.to_string())),
    };
    Ok(Redirect::to(&format!("/ui/jobs/{id}?notice={notice}")).into_response())
}
