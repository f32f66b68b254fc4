//! Text for people: times as a UTC date and how long ago (not epoch
//! milliseconds), stored names as words (`no progress`, not `NoProgress`),
//! and aligned tables. `--json` output never goes through here: scripts
//! get the stored names and the raw numbers.

use chrono::{DateTime, Utc};
use compactor_producer::queue::JobState;
use compactor_shared::context::BuiltContext;
use compactor_shared::Part;

/// `2026-11-25 17:35:01 UTC (5 min ago)`, or `(in 42 s)` for a future time.
pub(crate) fn time(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    format!(
        "{} ({})",
        at.format("%Y-%m-%d %H:%M:%S UTC"),
        relative(at, now)
    )
}

/// [`time`] of Unix milliseconds; `unknown` for a value no date can have.
pub(crate) fn time_ms(at_ms: i64, now: DateTime<Utc>) -> String {
    DateTime::from_timestamp_millis(at_ms).map_or_else(|| "unknown".to_owned(), |at| time(at, now))
}

/// `5 min ago`, `in 42 s`, `just now`.
pub(crate) fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let delta = now.signed_duration_since(at);
    let secs = delta.num_seconds();
    if secs == 0 {
        return "just now".to_owned();
    }
    let span = span(secs.unsigned_abs());
    if secs > 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

/// A length of time in its largest whole unit: `42 s`, `5 min`, `3 h`,
/// `2 days`.
fn span(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs} s"),
        60..3_600 => format!("{} min", secs / 60),
        3_600..86_400 => format!("{} h", secs / 3_600),
        _ => match secs / 86_400 {
            1 => "1 day".to_owned(),
            days => format!("{days} days"),
        },
    }
}

/// A duration in ms in its largest whole unit (`42 s`, `5 min`).
pub(crate) fn span_ms(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms} ms");
    }
    span(ms / 1_000)
}

/// A stored snake_case name as words: `no_progress` → `no progress`.
pub(crate) fn words(name: &str) -> String {
    name.replace('_', " ")
}

/// The queue's view of a job, in words.
pub(crate) fn job(state: &JobState) -> String {
    match state {
        JobState::Waiting { job_id } => format!("waiting (job {job_id})"),
        JobState::Running {
            job_id,
            attempt,
            followup_pending,
        } => format!(
            "running (job {job_id}, attempt {attempt}{})",
            if *followup_pending {
                "; a followup is recorded to run after it"
            } else {
                ""
            }
        ),
        JobState::Done { job_id } => format!("done (job {job_id})"),
        JobState::Dead { job_id } => format!("dead-lettered (job {job_id})"),
    }
}

/// Rows under a header, each column as wide as its widest cell (counted in
/// characters); the last column is not padded, so a long reason or error
/// does not widen the others.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut text = String::new();
        for (i, cell) in cells.enumerate().take(columns) {
            if i + 1 == columns {
                text.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count());
                text.push_str(cell);
                text.push_str(&" ".repeat(pad + 2));
            }
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut text = line(&mut header.iter().copied());
    for row in rows {
        text.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    text
}

/// A built context for people: one block per message.
pub(crate) fn render_context(context: &BuiltContext) -> String {
    let mut t = format!(
        "{} messages, ~{} tokens{}\n",
        context.messages.len(),
        context.tokens,
        if context.over_budget {
            " (over the window even after shrinking the summary)"
        } else {
            ""
        }
    );
    for m in &context.messages {
        let source = m
            .source
            .map_or("synthesized".to_owned(), |id| format!("#{id}"));
        t.push_str(&format!("\n--- {} ({source})\n", m.role.as_str()));
        for part in &m.parts {
            match part {
                Part::Text { text } => t.push_str(text),
                Part::ToolCall {
                    tool_name, input, ..
                } => t.push_str(&format!("[tool call {tool_name}] {input}")),
                Part::ToolResult {
                    tool_name, output, ..
                } => t.push_str(&format!("[tool result {tool_name}] {output}")),
                Part::Reasoning { .. } => t.push_str("[reasoning]"),
                Part::File { uri, .. } => t.push_str(&format!("[file {uri}]")),
            }
            t.push('\n');
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    #[test]
    fn times_read_as_a_date_and_how_long_ago() {
        let now = at("2026-11-25T17:40:00Z");
        assert_eq!(
            time(at("2026-11-25T17:35:01Z"), now),
            "2026-11-25 17:35:01 UTC (4 min ago)"
        );
        assert_eq!(relative(at("2026-11-25T17:40:42Z"), now), "in 42 s");
        assert_eq!(relative(now, now), "just now");
        assert_eq!(relative(at("2026-11-25T14:40:00Z"), now), "3 h ago");
        assert_eq!(relative(at("2026-11-24T17:00:00Z"), now), "1 day ago");
        assert_eq!(relative(at("2026-11-20T17:40:00Z"), now), "5 days ago");
        assert_eq!(
            time_ms(1_795_714_800_000, now),
            "2026-11-26 17:40:00 UTC (in 1 day)"
        );
        assert_eq!(time_ms(i64::MAX, now), "unknown");
    }

    #[test]
    fn stored_names_and_job_states_read_as_words() {
        assert_eq!(words("no_progress"), "no progress");
        assert_eq!(words("committed"), "committed");
        assert_eq!(
            job(&JobState::Running {
                job_id: 7,
                attempt: 2,
                followup_pending: true
            }),
            "running (job 7, attempt 2; a followup is recorded to run after it)"
        );
        assert_eq!(job(&JobState::Dead { job_id: 3 }), "dead-lettered (job 3)");
    }

    #[test]
    fn tables_align_every_column_but_the_last() {
        let text = table(
            &["A", "LONGER", "LAST"],
            &[
                vec!["xyz".into(), "1".into(), "a long reason".into()],
                vec!["→".into(), "22".into(), "b".into()],
            ],
        );
        assert_eq!(
            text,
            "A    LONGER  LAST\nxyz  1       a long reason\n→    22      b\n"
        );
    }
}
