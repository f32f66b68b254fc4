//! `/ui/dead-letters`: the dead-letter set, newest first, with a retry
//! and a purge per entry. Retrying requests the entity again (with the
//! trigger it had) and writes its `compaction.requested` event, as
//! `compactor dlq retry` does. Purging is destructive, so it asks first:
//! the purge button opens a confirmation page (GET), whose button sends
//! the POST; with JavaScript, a confirm dialog stands in for that page.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use compactor_producer::client::retry_dead_recorded;
use compactor_producer::queue::DeadLetter;
use compactor_shared::EntityKey;
use serde::Deserialize;

use super::error::ConsoleError;
use super::html::{count, esc, page, time_ms, url_part, Nav};
use super::session::{CsrfForm, Visitor};
use super::PageQuery as QueryParams;
use crate::http::AppState;

/// Dead letters listed when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;
/// Most dead letters one page lists.
const MAX_LIMIT: usize = 1_000;

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    limit: Option<usize>,
    /// What the last action did (a fixed set: nothing of the request is
    /// echoed).
    notice: Option<String>,
}

pub(super) async fn list(
    State(state): State<AppState>,
    visitor: Visitor,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Response, ConsoleError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let queue = state.compactor().queue();
    let (letters, counts) = futures::try_join!(queue.dead_letters(limit), queue.counts())?;
    let mut body = String::with_capacity(8 * 1024);
    let notice = match query.notice.as_deref() {
        Some("retried") => Some((
            "good",
            "Requested again: the entity's compaction is queued.",
        )),
        Some("purged") => Some(("good", "Purged.")),
        Some("gone") => Some((
            "bad",
            "That dead letter is no longer kept (retried, purged or expired).",
        )),
        _ => None,
    };
    if let Some((class, text)) = notice {
        let _ = write!(
            body,
            "<p class=\"notice {class}\" role=\"status\">{text}</p>"
        );
    }
    let _ = write!(
        body,
        "<p class=\"muted\">{} dead letters kept; the newest {} shown. In bulk, by reason, domain or age (with a dry run): <code>compactor dlq retry|purge --reason …</code> or <code>POST /v1/queue/dead-letters/retry|purge</code>.</p>",
        count(counts.dead),
        letters.len()
    );
    if letters.is_empty() {
        body.push_str("<p>No dead letters.</p>");
    } else {
        body.push_str(
            "<div class=\"table-wrap\"><table id=\"dead-letters\"><thead><tr><th>Died</th><th>Workstream</th>\
             <th class=\"num\">Job</th><th class=\"num\">Attempts</th><th>Reason</th><th>Actions</th></tr></thead><tbody>",
        );
        for letter in &letters {
            row(&mut body, letter, &visitor.csrf);
        }
        body.push_str("</tbody></table></div>");
    }
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Dead letters", Nav::DeadLetters),
        &body,
    ))
}

/// The workstream a member names, as a link to its page (plain text for
/// a member that names none, such as a hand-written one).
fn workstream_cell(member: &str) -> String {
    match member.parse::<EntityKey>() {
        Ok(key) => format!(
            "<a href=\"/ui/workstreams/{}/{}\">{}/{}</a>",
            url_part(key.domain()),
            url_part(key.entity_id()),
            esc(key.domain()),
            esc(key.entity_id())
        ),
        Err(_) => format!("<span class=\"mono\">{}</span>", esc(member)),
    }
}

fn row(body: &mut String, letter: &DeadLetter, csrf: &str) {
    let entry = esc(&letter.entry);
    let _ = write!(
        body,
        "<tr><td>{died}</td><td>{ws}</td><td class=\"num\">{job}</td><td class=\"num\">{attempts}{stalls}</td>\
         <td>{reason}</td><td>\
         <form class=\"inline\" method=\"post\" action=\"/ui/dead-letters/retry\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"entry\" value=\"{entry}\">\
         <button type=\"submit\" class=\"retry\">Retry</button></form> \
         <form class=\"inline\" method=\"get\" action=\"/ui/dead-letters/purge\" data-post=\"/ui/dead-letters/purge\" \
         data-confirm=\"Purge this dead letter? It cannot be retried afterwards.\">\
         <input type=\"hidden\" name=\"entry\" value=\"{entry}\">\
         <button type=\"submit\" class=\"danger purge\">Purge…</button></form></td></tr>",
        died = time_ms(letter.failed_at_ms),
        ws = workstream_cell(&letter.member),
        job = letter.job_id,
        attempts = letter.attempts,
        stalls = if letter.stalls > 0 {
            format!(" <span class=\"muted\">({} stalled)</span>", letter.stalls)
        } else {
            String::new()
        },
        reason = esc(&letter.reason),
        csrf = esc(csrf),
    );
}

#[derive(Debug, Deserialize)]
pub(super) struct EntryForm {
    entry: String,
}

/// `POST /ui/dead-letters/retry`.
pub(super) async fn retry(
    State(state): State<AppState>,
    CsrfForm(form): CsrfForm<EntryForm>,
) -> Result<Response, ConsoleError> {
    let compactor = state.compactor();
    let retried = retry_dead_recorded(compactor.store(), compactor.queue(), &form.entry).await?;
    if retried.is_none() {
        return Ok(Redirect::to("/ui/dead-letters?notice=gone").into_response());
    }
    Ok(Redirect::to("/ui/dead-letters?notice=retried").into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct ConfirmQuery {
    entry: String,
}

/// `GET /ui/dead-letters/purge?entry=…`: the confirmation page of a
/// purge (what the purge button opens without JavaScript).
pub(super) async fn confirm_purge(
    State(state): State<AppState>,
    visitor: Visitor,
    QueryParams(query): QueryParams<ConfirmQuery>,
) -> Result<Response, ConsoleError> {
    let Some(letter) = state.compactor().queue().dead_letter(&query.entry).await? else {
        return Ok(Redirect::to("/ui/dead-letters?notice=gone").into_response());
    };
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>Purge the dead letter of {ws} (job {job}, died {died})? It is deleted and cannot be retried afterwards.</p>\
         <p class=\"muted\">Reason: {reason}</p>\
         <form method=\"post\" action=\"/ui/dead-letters/purge\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"entry\" value=\"{entry}\">\
         <button type=\"submit\" class=\"danger\" id=\"confirm\">Purge</button> \
         <a href=\"/ui/dead-letters\">Cancel</a></form>",
        ws = workstream_cell(&letter.member),
        job = letter.job_id,
        died = time_ms(letter.failed_at_ms),
        reason = esc(&letter.reason),
        csrf = esc(&visitor.csrf),
        entry = esc(&letter.entry),
    );
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Purge a dead letter?", Nav::DeadLetters),
        &body,
    ))
}

/// `POST /ui/dead-letters/purge`.
pub(super) async fn purge(
    State(state): State<AppState>,
    CsrfForm(form): CsrfForm<EntryForm>,
) -> Result<Response, ConsoleError> {
    let removed = state
        .compactor()
        .queue()
        .purge_dead(Some(&form.entry))
        .await?;
    let notice = if removed > 0 { "purged" } else { "gone" };
    Ok(Redirect::to(&format!("/ui/dead-letters?notice={notice}")).into_response())
}
