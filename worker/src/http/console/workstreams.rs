//! The workstream pages:
//! - `GET /ui/workstreams?domain=…&entity=…`: search by domain (exact) and
//!   entity id (prefix), newest first;
//! - `GET /ui/workstreams/{domain}/{entity}`: its state, its current
//!   summary, and its compaction timeline — each run with its time,
//!   tokens before → after and freed, trigger (proactive, reactive,
//!   manual, follow-up), outcome and degraded reason, and the summary it
//!   wrote with collapsible sections; paged by `before`;
//! - `GET /ui/workstreams/{domain}/{entity}/runs/{id}/diff`: a run's
//!   summary against the one before it.

use std::fmt::Write as _;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use compactor_producer::queue::JobState;
use compactor_producer::store::{RunOutcome, RunRow, WorkstreamRow, WorkstreamSearch};
use compactor_shared::EntityKey;
use serde::Deserialize;

use super::diff::{diff_lines, Line};
use super::error::ConsoleError;
use super::html::{count, esc, page, time, url_part, Nav};
use super::session::Visitor;
use super::summary_view;
use super::PageQuery;
use crate::http::AppState;

/// Workstreams one search shows.
const SEARCH_LIMIT: u64 = 50;
/// Runs per timeline page.
const TIMELINE_PAGE: u64 = 20;

#[derive(Debug, Default, Deserialize)]
pub(super) struct SearchQuery {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    entity: String,
}

/// The link to a workstream's page.
fn href(key: &EntityKey) -> String {
    format!(
        "/ui/workstreams/{}/{}",
        url_part(key.domain()),
        url_part(key.entity_id())
    )
}

pub(super) async fn search(
    State(state): State<AppState>,
    visitor: Visitor,
    PageQuery(query): PageQuery<SearchQuery>,
) -> Result<Response, ConsoleError> {
    let domain = query.domain.trim();
    let entity = query.entity.trim();
    let found = state
        .compactor()
        .store()
        .search_workstreams(
            &WorkstreamSearch {
                domain: Some(domain),
                entity_prefix: Some(entity),
            },
            SEARCH_LIMIT,
        )
        .await?;
    let mut body = String::with_capacity(8 * 1024);
    let _ = write!(
        body,
        "<form class=\"search\" method=\"get\" action=\"/ui/workstreams\" role=\"search\">\
         <div><label for=\"domain\">Domain</label><input id=\"domain\" name=\"domain\" value=\"{}\" placeholder=\"chat\"></div>\
         <div><label for=\"entity\">Entity id starts with</label><input id=\"entity\" name=\"entity\" value=\"{}\"></div>\
         <button type=\"submit\">Search</button></form>\
         <p class=\"hint\">By state (breaker open, over the trigger, degraded last time): <code>compactor workstreams --state …</code> or <code>GET /v1/workstreams?state=…</code>.</p>",
        esc(domain),
        esc(entity)
    );
    if found.is_empty() {
        body.push_str("<p>No workstream matches.</p>");
    } else {
        let _ = write!(
            body,
            "<p class=\"muted\">{} shown, newest first (at most {SEARCH_LIMIT}).</p>",
            found.len()
        );
        // Served by the drop-in proxy: its newest message was named by it.
        let newest: Vec<_> = found
            .iter()
            .filter_map(|ws| ws.head_message_id.or(ws.last_message_id))
            .collect();
        let proxied = state
            .compactor()
            .store()
            .messages_named_with(&newest, crate::proxy::ID_PREFIX)
            .await?;
        body.push_str(
            "<div class=\"table-wrap\"><table id=\"workstreams\"><thead><tr><th>Workstream</th>\
             <th class=\"num\">Context tokens</th><th class=\"num\">Compactions</th><th>Last compacted</th>\
             <th>Via</th><th>State</th></tr></thead><tbody>",
        );
        let now_ms = chrono::Utc::now().timestamp_millis();
        for ws in &found {
            let via = if ws
                .head_message_id
                .or(ws.last_message_id)
                .is_some_and(|id| proxied.contains(&id))
            {
                "proxy"
            } else {
                "API"
            };
            let _ = write!(
                body,
                "<tr><td><a href=\"{}\">{}/{}</a></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"via\">{via}</td><td>{}</td></tr>",
                href(&ws.key),
                esc(ws.key.domain()),
                esc(ws.key.entity_id()),
                count(ws.summary_tokens + ws.uncompacted_tokens),
                ws.compactions,
                ws.last_compacted_at.map_or_else(|| "never".to_owned(), time),
                state_badges(ws, now_ms),
            );
        }
        body.push_str("</tbody></table></div>");
    }
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Workstreams", Nav::Workstreams),
        &body,
    ))
}

/// Badges for a workstream's state: compacting now, breaker open.
fn state_badges(ws: &WorkstreamRow, now_ms: i64) -> String {
    let mut badges = String::new();
    if ws.lease_live(now_ms).is_some() {
        badges.push_str("<span class=\"badge warn\">compacting</span> ");
    }
    if ws.breaker_open() {
        badges.push_str("<span class=\"badge bad\">breaker open</span> ");
    }
    if badges.is_empty() {
        badges.push_str("<span class=\"badge good\">ok</span>");
    }
    badges
}

/// `{domain}/{entity}` of a workstream page, checked by
/// [`EntityKey::parse`].
fn parse_key(domain: &str, entity: &str) -> Result<EntityKey, ConsoleError> {
    EntityKey::parse(domain, entity).map_err(|e| ConsoleError::BadRequest(e.to_string()))
}

/// The workstream of `key`, or a 404.
async fn load(state: &AppState, key: &EntityKey) -> Result<WorkstreamRow, ConsoleError> {
    state
        .compactor()
        .store()
        .workstream(key)
        .await?
        .ok_or_else(|| {
            ConsoleError::NotFound(format!("workstream {}/{}", key.domain(), key.entity_id()))
        })
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct TimelineQuery {
    before: Option<i64>,
}

pub(super) async fn workstream(
    State(state): State<AppState>,
    visitor: Visitor,
    Path((domain, entity)): Path<(String, String)>,
    PageQuery(query): PageQuery<TimelineQuery>,
) -> Result<Response, ConsoleError> {
    let key = parse_key(&domain, &entity)?;
    let ws = load(&state, &key).await?;
    let store = state.compactor().store();
    let (runs, job) = futures::try_join!(
        async {
            store
                .runs_page(&key, query.before, TIMELINE_PAGE)
                .await
                .map_err(ConsoleError::from)
        },
        async {
            state
                .compactor()
                .queue()
                .job_state(&key)
                .await
                .map_err(ConsoleError::from)
        },
    )?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut body = String::with_capacity(16 * 1024);
    let _ = write!(
        body,
        "<dl class=\"facts card\">\
         <dt>State</dt><dd>{badges}</dd>\
         <dt>Queue</dt><dd id=\"job\">{job}</dd>\
         <dt>Summary tokens</dt><dd>{summary_tokens}</dd>\
         <dt>Un-compacted tokens</dt><dd>{uncompacted}</dd>\
         <dt>Compactions</dt><dd>{compactions}</dd>\
         <dt>Last compacted</dt><dd>{last}</dd>\
         <dt>Failures in a row</dt><dd>{failures}</dd>\
         <dt>Created</dt><dd>{created}</dd></dl>",
        badges = state_badges(&ws, now_ms),
        job = job_text(job.as_ref()),
        summary_tokens = count(ws.summary_tokens),
        uncompacted = count(ws.uncompacted_tokens),
        compactions = ws.compactions,
        last = ws
            .last_compacted_at
            .map_or_else(|| "never".to_owned(), time),
        failures = ws.consecutive_failures,
        created = time(ws.created_at),
    );
    body.push_str("<h2>Current summary</h2>");
    match &ws.summary {
        Some(summary) if !summary.is_empty() => {
            body.push_str(&summary_view::render(&summary_view::sections_of(summary)));
        }
        _ => body.push_str("<p class=\"muted\">Not compacted yet.</p>"),
    }
    body.push_str("<h2>Compaction timeline</h2>");
    if runs.is_empty() {
        body.push_str("<p class=\"muted\">No compaction has run.</p>");
    } else {
        body.push_str("<ol class=\"timeline\" id=\"timeline\">");
        for run in &runs {
            timeline_entry(&mut body, &key, run);
        }
        body.push_str("</ol>");
        if runs.len() as u64 == TIMELINE_PAGE {
            if let Some(last) = runs.last() {
                let _ = write!(
                    body,
                    "<p class=\"pager\"><a href=\"{}?before={}\">Older runs</a></p>",
                    href(&key),
                    last.id
                );
            }
        }
    }
    let title = format!("{}/{}", key.domain(), key.entity_id());
    Ok(page(
        StatusCode::OK,
        &visitor.frame(&title, Nav::Workstreams),
        &body,
    ))
}

/// The queue's job of the workstream, in words.
fn job_text(job: Option<&JobState>) -> String {
    match job {
        None => "no job".to_owned(),
        Some(JobState::Waiting { job_id }) => format!("job {job_id} waiting"),
        Some(JobState::Running {
            job_id,
            attempt,
            followup_pending,
        }) => format!(
            "job {job_id} running (attempt {attempt}){}",
            if *followup_pending {
                ", a follow-up pending"
            } else {
                ""
            }
        ),
        Some(JobState::Done { job_id }) => format!("job {job_id} done"),
        Some(JobState::Dead { job_id }) => format!("job {job_id} dead-lettered"),
    }
}

/// How the timeline names a run's trigger: an automatic run is proactive
/// (before the model's window overflows), a reactive one after.
fn trigger_label(trigger: &str) -> &str {
    match trigger {
        "auto" => "proactive",
        "follow_up" => "follow-up",
        other => other,
    }
}

fn outcome_badge(outcome: RunOutcome) -> String {
    let class = match outcome {
        RunOutcome::Committed => "good",
        RunOutcome::NoProgress | RunOutcome::Skipped => "warn",
        RunOutcome::Failed | RunOutcome::Conflict => "bad",
    };
    format!(
        "<span class=\"badge {class} outcome\">{}</span>",
        outcome.as_str().replace('_', " ")
    )
}

fn timeline_entry(body: &mut String, key: &EntityKey, row: &RunRow) {
    let run = &row.run;
    let freed = run.tokens_before.saturating_sub(run.tokens_after);
    let _ = write!(
        body,
        "<li class=\"run {outcome_class}\" id=\"run-{id}\"><div class=\"run-head\">\
         <strong>{at}</strong> <span class=\"badge trigger\">{trigger}</span> {outcome}\
         <span class=\"tokens\">{before} → {after} tokens, <strong>{freed} freed</strong></span>\
         <span class=\"muted\">job {job} · attempt {attempt} · {messages} messages · {calls} LLM calls</span></div>",
        outcome_class = run.outcome.as_str(),
        id = row.id,
        at = time(run.finished_at),
        trigger = esc(trigger_label(&run.trigger)),
        outcome = outcome_badge(run.outcome),
        before = count(run.tokens_before),
        after = count(run.tokens_after),
        freed = count(freed),
        job = run.job_id,
        attempt = run.attempt,
        messages = count(run.messages_compacted),
        calls = run.llm_calls,
    );
    if run.degraded {
        let _ = write!(
            body,
            "<p><span class=\"badge warn\">degraded</span> {}</p>",
            esc(run
                .degraded_reason
                .map_or("reason not recorded", |r| r.as_str()))
        );
    }
    if let Some(hook) = run.hook.outcome {
        let _ = write!(
            body,
            "<p class=\"muted\">Pre-compaction hook: {}</p>",
            esc(hook.as_str())
        );
    }
    if let Some(error) = &run.error {
        let _ = write!(body, "<p class=\"muted\">Error: {}</p>", esc(error));
    }
    if let Some(summary) = &run.summary {
        let _ = write!(
            body,
            "<div class=\"run-summary\">{}</div><p><a class=\"diff-link\" href=\"{}/runs/{}/diff\">Diff against the previous summary</a></p>",
            summary_view::render(&summary_view::split_rendered(summary)),
            href(key),
            row.id
        );
    }
    body.push_str("</li>");
}

pub(super) async fn run_diff(
    State(state): State<AppState>,
    visitor: Visitor,
    Path((domain, entity, run_id)): Path<(String, String, String)>,
) -> Result<Response, ConsoleError> {
    let key = parse_key(&domain, &entity)?;
    let run_id: i64 = run_id
        .parse()
        .map_err(|_| ConsoleError::BadRequest(format!("run id {run_id:?} is not a number")))?;
    let ws = load(&state, &key).await?;
    let store = state.compactor().store();
    let not_found = || ConsoleError::NotFound(format!("run {run_id} of this workstream"));
    let run = store.run_of(ws.id, run_id).await?.ok_or_else(not_found)?;
    let after = run.run.summary.as_deref().ok_or_else(|| {
        ConsoleError::NotFound(format!("a summary of run {run_id} (it wrote none)"))
    })?;
    let previous = store.previous_summary_run(ws.id, run_id).await?;
    let before = previous
        .as_ref()
        .and_then(|p| p.run.summary.as_deref())
        .unwrap_or("");
    let lines = diff_lines(before, after);
    let added = lines.iter().filter(|l| matches!(l, Line::Added(_))).count();
    let removed = lines
        .iter()
        .filter(|l| matches!(l, Line::Removed(_)))
        .count();
    let mut body = String::with_capacity(after.len() * 2 + 1024);
    let _ = write!(
        body,
        "<p><a href=\"{ws}#run-{run_id}\">Back to the timeline</a></p><p>Run {run_id} ({at}) against {prev}: \
         <span class=\"badge good\" id=\"added\">+{added}</span> <span class=\"badge bad\" id=\"removed\">−{removed}</span> lines.</p>\
         <pre class=\"diff\" id=\"diff\">",
        ws = href(&key),
        at = time(run.run.finished_at),
        prev = match &previous {
            Some(p) => format!("run {} ({})", p.id, time(p.run.finished_at)),
            None => "nothing (the first summary)".to_owned(),
        },
    );
    for line in &lines {
        let (class, sign, text) = match line {
            Line::Same(t) => ("same", ' ', t),
            Line::Added(t) => ("add", '+', t),
            Line::Removed(t) => ("del", '-', t),
        };
        let _ = write!(body, "<span class=\"{class}\">{sign} {}</span>", esc(text));
    }
    body.push_str("</pre>");
    let title = format!("Run {run_id} of {}/{}", key.domain(), key.entity_id());
    Ok(page(
        StatusCode::OK,
        &visitor.frame(&title, Nav::Workstreams),
        &body,
    ))
}
