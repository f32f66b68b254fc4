//! `/ui/queue`: pause and resume the queue, or one domain — what
//! `POST /v1/queue/pause|resume` and `compactor queue pause|resume` do.
//! Paused jobs stay queued and running ones finish (see the queue's
//! `pause` module). Pausing stops work, so it asks first: the pause
//! buttons open a confirmation page (GET), whose button sends the POST;
//! with JavaScript, a confirm dialog stands in for that page. Resuming
//! only lets work go on, and is one click.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use compactor_producer::queue::{PauseScope, PauseState};
use serde::Deserialize;

use super::error::ConsoleError;
use super::html::{age, count, esc, page, Nav};
use super::session::{CsrfForm, Visitor};
use super::PageQuery as QueryParams;
use crate::http::AppState;

#[derive(Debug, Deserialize)]
pub(super) struct ControlQuery {
    /// What the last action did (a fixed set: nothing of the request is
    /// echoed).
    notice: Option<String>,
}

/// `GET /ui/queue`: what is paused, with the buttons to change it.
pub(super) async fn control(
    State(state): State<AppState>,
    visitor: Visitor,
    QueryParams(query): QueryParams<ControlQuery>,
) -> Result<Response, ConsoleError> {
    let queue = state.compactor().queue();
    let (paused, counts) = futures::try_join!(queue.pause_state(), queue.counts())?;
    let mut body = String::with_capacity(4 * 1024);
    let notice = match query.notice.as_deref() {
        Some("paused") => Some(("good", "Paused: its jobs stay queued, running ones finish.")),
        Some("resumed") => Some(("good", "Resumed: idle workers were woken.")),
        Some("invalid") => Some((
            "bad",
            "Not a domain: use a-z, 0-9, '_' and '-', starting with a letter.",
        )),
        _ => None,
    };
    if let Some((class, text)) = notice {
        let _ = write!(
            body,
            "<p class=\"notice {class}\" role=\"status\">{text}</p>"
        );
    }
    state_section(&mut body, &paused, counts.waiting, &visitor.csrf);
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Pause / resume", Nav::Control),
        &body,
    ))
}

fn state_section(body: &mut String, paused: &PauseState, waiting: u64, csrf: &str) {
    let csrf = esc(csrf);
    let waiting = match (waiting, paused.oldest_waiting_ms) {
        (0, _) | (_, None) => "Nothing waits.".to_owned(),
        (n, Some(ms)) => format!("{} waiting, the oldest for {}.", count(n), age(ms)),
    };
    match paused.queue_paused_for_ms {
        Some(ms) if paused.queue_paused => {
            let _ = write!(
                body,
                "<section id=\"queue-state\"><p class=\"notice bad\">The whole queue is <strong>paused</strong> \
                 (for {}): no job starts. {}</p>\
                 <form method=\"post\" action=\"/ui/queue/resume\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                 <button type=\"submit\" id=\"resume-queue\">Resume the queue</button></form></section>",
                age(ms),
                waiting,
            );
        }
        _ => {
            let _ = write!(
                body,
                "<section id=\"queue-state\"><p>The queue is <strong>running</strong>. {}</p>\
                 <form method=\"get\" action=\"/ui/queue/pause\" data-post=\"/ui/queue/pause\" \
                 data-confirm=\"Pause the whole queue? No job starts until it is resumed; running jobs finish.\">\
                 <button type=\"submit\" class=\"danger\" id=\"pause-queue\">Pause the queue…</button></form></section>",
                waiting,
            );
        }
    }
    body.push_str("<h2>Domains</h2>");
    if paused.paused_domains.is_empty() {
        body.push_str("<p class=\"muted\">No domain is paused.</p>");
    } else {
        body.push_str(
            "<div class=\"table-wrap\"><table id=\"paused-domains\"><thead><tr><th>Domain</th>\
             <th>Paused for</th><th class=\"num\">Set aside</th><th>Actions</th></tr></thead><tbody>",
        );
        for d in &paused.paused_domains {
            let domain = esc(d.domain.as_str());
            let _ = write!(
                body,
                "<tr><td>{domain}</td><td>{}</td><td class=\"num\">{}</td><td>\
                 <form class=\"inline\" method=\"post\" action=\"/ui/queue/resume\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                 <input type=\"hidden\" name=\"domain\" value=\"{domain}\">\
                 <button type=\"submit\" class=\"resume-domain\">Resume</button></form></td></tr>",
                age(d.paused_for_ms),
                count(d.parked),
            );
        }
        body.push_str("</tbody></table></div>");
    }
    body.push_str(
        "<form method=\"get\" action=\"/ui/queue/pause\" data-post=\"/ui/queue/pause\" \
         data-confirm=\"Pause this domain? Its jobs wait until it is resumed; running ones finish.\">\
         <label for=\"pause-domain\">Pause one domain</label> \
         <input id=\"pause-domain\" name=\"domain\" required pattern=\"[a-z][a-z0-9_-]*\" placeholder=\"chat\"> \
         <button type=\"submit\" class=\"danger\">Pause…</button></form>",
    );
}

#[derive(Debug, Deserialize)]
pub(super) struct ScopeQuery {
    /// A domain; none (or empty): the whole queue.
    domain: Option<String>,
}

/// The scope a form names ('' or none: the whole queue); `None` for a
/// domain that does not parse.
fn scope_of(domain: Option<&str>) -> Option<PauseScope> {
    PauseScope::parse(domain.filter(|d| !d.is_empty())).ok()
}

/// `GET /ui/queue/pause?domain=…`: the confirmation page of a pause.
pub(super) async fn confirm_pause(
    visitor: Visitor,
    QueryParams(query): QueryParams<ScopeQuery>,
) -> Result<Response, ConsoleError> {
    let Some(scope) = scope_of(query.domain.as_deref()) else {
        return Ok(Redirect::to("/ui/queue?notice=invalid").into_response());
    };
    let (what, domain) = match &scope {
        PauseScope::Queue => ("the whole queue".to_owned(), String::new()),
        PauseScope::Domain(d) => (
            format!("domain {}", esc(d.as_str())),
            esc(d.as_str()).to_string(),
        ),
    };
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>Pause {what}? No job of it starts until it is resumed; running jobs finish, \
         and requests keep queueing (deduplicated as always).</p>\
         <form method=\"post\" action=\"/ui/queue/pause\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"hidden\" name=\"domain\" value=\"{domain}\">\
         <button type=\"submit\" class=\"danger\" id=\"confirm\">Pause</button> \
         <a href=\"/ui/queue\">Cancel</a></form>",
        csrf = esc(&visitor.csrf),
    );
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Pause?", Nav::Control),
        &body,
    ))
}

#[derive(Debug, Deserialize)]
pub(super) struct ScopeForm {
    #[serde(default)]
    domain: Option<String>,
}

/// `POST /ui/queue/pause`.
pub(super) async fn pause(
    State(state): State<AppState>,
    CsrfForm(form): CsrfForm<ScopeForm>,
) -> Result<Response, ConsoleError> {
    change(&state, form, true).await
}

/// `POST /ui/queue/resume`.
pub(super) async fn resume(
    State(state): State<AppState>,
    CsrfForm(form): CsrfForm<ScopeForm>,
) -> Result<Response, ConsoleError> {
    change(&state, form, false).await
}

async fn change(state: &AppState, form: ScopeForm, pause: bool) -> Result<Response, ConsoleError> {
    let Some(scope) = scope_of(form.domain.as_deref()) else {
        return Ok(Redirect::to("/ui/queue?notice=invalid").into_response());
    };
    let queue = state.compactor().queue();
    let notice = if pause {
        queue.pause(&scope).await?;
        "paused"
    } else {
        queue.resume(&scope).await?;
        "resumed"
    };
    Ok(Redirect::to(&format!("/ui/queue?notice={notice}")).into_response())
}
