//! `compactor queue stats|pause|resume`: the queue at a glance (jobs by
//! state, what is paused, the oldest waiting job's age) and pausing or
//! resuming it, whole or one domain, as `GET /v1/queue` and
//! `POST /v1/queue/pause|resume` do.

use std::process::ExitCode;

use compactor_producer::client::ClientSettings;
use compactor_producer::queue::{PauseScope, PauseState, QueueCounts};
use serde::Serialize;

use crate::commands::report;
use crate::connect::queue;
use crate::failure::Failure;
use crate::output::Output;

/// What `queue stats` prints with `--json`: the counts and the pause
/// state side by side.
#[derive(Serialize)]
struct Stats {
    #[serde(flatten)]
    counts: QueueCounts,
    #[serde(flatten)]
    pause: PauseState,
}

pub(crate) async fn stats(settings: &ClientSettings, out: Output) -> ExitCode {
    report(out, async {
        let queue = queue(settings).await?;
        let counts = queue.counts().await?;
        let pause = queue.pause_state().await?;
        let name = settings.queue.name.as_str();
        out.print(&Stats { counts, pause: pause.clone() }, || {
            format!(
                "queue {name}\nwaiting {} (urgent {}, normal {}, parked {})\nrunning {}\ndone    {}\ndead    {}\n{}",
                counts.waiting,
                counts.waiting_urgent,
                counts.waiting_normal,
                counts.waiting_parked,
                counts.running,
                counts.done,
                counts.dead,
                render(&pause)
            )
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// Pauses (`resume` false) or resumes the queue, or `domain`'s jobs.
pub(crate) async fn control(
    settings: &ClientSettings,
    resume: bool,
    domain: Option<&str>,
    out: Output,
) -> ExitCode {
    report(out, async {
        let scope =
            PauseScope::parse(domain).map_err(|e| Failure::argument(format!("--domain: {e}")))?;
        let queue = queue(settings).await?;
        let state = if resume {
            queue.resume(&scope).await?
        } else {
            queue.pause(&scope).await?
        };
        out.print(&state, || {
            let done = if resume { "resumed" } else { "paused" };
            format!("{scope} {done}\n{}", render(&state))
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// The pause state and the oldest waiting job's age, for people.
fn render(state: &PauseState) -> String {
    let mut text = match state.queue_paused_for_ms {
        Some(ms) => format!("queue paused for {}\n", age(ms)),
        None => "queue running\n".to_owned(),
    };
    for d in &state.paused_domains {
        text.push_str(&format!(
            "domain {} paused for {}, {} jobs parked\n",
            d.domain,
            age(d.paused_for_ms),
            d.parked
        ));
    }
    text.push_str(&match state.oldest_waiting_ms {
        Some(ms) => format!("oldest waiting {}", age(ms)),
        None => "oldest waiting -".to_owned(),
    });
    text
}

/// `ms` for people: `400ms`, `1m 35s`, `2h 3m`.
fn age(ms: u64) -> String {
    let s = ms / 1_000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3_599 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3_600, s % 3_600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactor_producer::queue::PausedDomain;
    use compactor_shared::Domain;

    #[test]
    fn the_state_reads_plainly() {
        let state = PauseState {
            queue_paused: true,
            queue_paused_for_ms: Some(95_000),
            paused_domains: vec![PausedDomain {
                domain: Domain::parse("chat").unwrap(),
                paused_for_ms: 400,
                parked: 3,
            }],
            oldest_waiting_ms: Some(61_500),
            oldest_runnable_ms: Some(1_000),
        };
        assert_eq!(
            render(&state),
            "queue paused for 1m 35s\ndomain chat paused for 400ms, 3 jobs parked\noldest waiting 1m 1s"
        );
        let idle = PauseState {
            queue_paused: false,
            queue_paused_for_ms: None,
            paused_domains: vec![],
            oldest_waiting_ms: None,
            oldest_runnable_ms: None,
        };
        assert_eq!(render(&idle), "queue running\noldest waiting -");
        assert_eq!(age(7_300_000), "2h 1m");
        assert_eq!(age(5_000), "5s");
    }
}
