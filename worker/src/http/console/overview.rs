//! `GET /ui`: the overview. Job counts by state, completions per minute
//! over the last hour (a rate and a sparkline, from the done set's
//! completion times), and the live workers. Every read is O(log n) or
//! bounded by the number of workers, so the page stays fast with a large
//! done set (BENCHMARKS.md: `/ui` overview).

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::error::ConsoleError;
use super::html::{age, count, esc, page, sparkline, time_ms, Nav};
use super::session::Visitor;
use crate::http::AppState;

/// Minutes the sparkline covers.
pub(super) const SPARK_MINUTES: usize = 60;
/// Minutes the headline rate is averaged over.
const RATE_MINUTES: usize = 5;

pub(super) async fn overview(
    State(state): State<AppState>,
    visitor: Visitor,
) -> Result<Response, ConsoleError> {
    let queue = state.compactor().queue();
    let (counts, throughput, workers) = futures::try_join!(
        queue.counts(),
        queue.throughput(SPARK_MINUTES),
        queue.live_workers(),
    )?;
    let mut body = String::with_capacity(8 * 1024);
    body.push_str("<section class=\"cards\" aria-label=\"jobs by state\">");
    for (n, label, id) in [
        (counts.waiting, "waiting", "count-waiting"),
        (counts.running, "running", "count-running"),
        (counts.done, "done (retained)", "count-done"),
        (counts.dead, "dead letters", "count-dead"),
        (workers.len() as u64, "live workers", "count-workers"),
    ] {
        let _ = write!(
            body,
            "<div class=\"card\" id=\"{id}\"><div class=\"n\">{}</div><div class=\"l\">{label}</div></div>",
            count(n)
        );
    }
    body.push_str("</section>");
    let _ = write!(
        body,
        "<p class=\"muted\">Waiting: {} urgent (manual, reactive), {} normal (automatic).</p>",
        count(counts.waiting_urgent),
        count(counts.waiting_normal)
    );

    let recent = throughput.last(RATE_MINUTES);
    let hour = throughput.last(SPARK_MINUTES);
    let now_ms = throughput.now_ms;
    let spark = sparkline(&throughput.per_minute, |i, v| {
        let minutes_ago = SPARK_MINUTES - 1 - i;
        format!("{v} completed, {minutes_ago} min ago")
    });
    let _ = write!(
        body,
        "<h2>Throughput</h2><div class=\"card\"><div class=\"cards\">\
         <div id=\"rate-card\"><div class=\"n\">{rate:.1}</div><div class=\"l\">completions / min (last {RATE_MINUTES} min)</div></div>\
         <div id=\"hour-card\"><div class=\"n\">{hour}</div><div class=\"l\">completions in the last hour</div></div></div>\
         {spark}<div class=\"l muted\">one bar per minute, the last {SPARK_MINUTES} minutes; counts what the done set retains</div></div>",
        rate = recent as f64 / RATE_MINUTES as f64,
        hour = count(hour),
    );

    body.push_str("<h2>Live workers</h2>");
    if workers.is_empty() {
        body.push_str(
            "<p class=\"notice bad\">No live worker: queued jobs wait until one starts.</p>",
        );
    } else {
        body.push_str(
            "<div class=\"table-wrap\"><table><thead><tr><th>Name</th><th>Host</th>\
             <th class=\"num\">Concurrency</th><th>Version</th><th>Last heartbeat</th></tr></thead><tbody>",
        );
        for w in &workers {
            let r = &w.registration;
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{} ago</td></tr>",
                esc(&r.name),
                esc(&r.host),
                r.concurrency,
                esc(&r.version),
                age(now_ms.saturating_sub(w.heartbeat_at_ms)),
            );
        }
        body.push_str(
            "</tbody></table></div><p><a href=\"/ui/workers\">All about the workers</a></p>",
        );
    }
    let _ = write!(
        body,
        "<p class=\"muted\">Read at {} (Redis server time).</p>",
        time_ms(now_ms)
    );
    Ok(page(
        StatusCode::OK,
        &visitor.frame("Overview", Nav::Overview),
        &body,
    ))
}
