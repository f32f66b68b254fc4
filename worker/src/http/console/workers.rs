//! `GET /ui/workers`: the live workers of the queue's registry, with
//! what each says about itself (the jobs each one holds are on the jobs
//! page, `running`).

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::error::ConsoleError;
use super::html::{age, esc, page, time_ms, Nav};
use super::session::Visitor;
use crate::http::AppState;

pub(super) async fn workers(
    State(state): State<AppState>,
    visitor: Visitor,
) -> Result<Response, ConsoleError> {
    let queue = state.compactor().queue();
    let (mut workers, throughput) = futures::try_join!(queue.live_workers(), queue.throughput(1))?;
    workers.sort_by(|a, b| a.registration.id.cmp(&b.registration.id));
    let now_ms = throughput.now_ms;
    let mut body = String::with_capacity(4 * 1024);
    if workers.is_empty() {
        body.push_str("<p class=\"notice bad\">No live worker is registered on this queue.</p>");
    } else {
        let _ = write!(
            body,
            "<p class=\"muted\">{} live. A worker that stops renewing its registration drops off this list when it runs out.</p>",
            workers.len()
        );
        body.push_str(
            "<div class=\"table-wrap\"><table id=\"workers\"><thead><tr><th>Id</th><th>Name</th><th>Host</th>\
             <th class=\"num\">Pid</th><th>Version</th><th class=\"num\">Concurrency</th><th>Started</th>\
             <th>Last heartbeat</th><th>Runs out in</th></tr></thead><tbody>",
        );
        for w in &workers {
            let r = &w.registration;
            let _ = write!(
                body,
                "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td>\
                 <td class=\"num\">{}</td><td>{}</td><td>{} ago</td><td>{}</td></tr>",
                esc(&r.id),
                esc(&r.name),
                esc(&r.host),
                r.pid,
                esc(&r.version),
                r.concurrency,
                time_ms(r.started_at_ms),
                age(now_ms.saturating_sub(w.heartbeat_at_ms)),
                age(w.expires_at_ms.saturating_sub(now_ms)),
            );
        }
        body.push_str("</tbody></table></div>");
    }
    body.push_str(
        "<p class=\"hint\">The jobs each one runs, with their lease deadlines: <a href=\"/ui/jobs?state=running\">running jobs</a>.</p>",
    );
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Workers", Nav::Workers),
        &body,
    ))
}
