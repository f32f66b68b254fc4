//! `compactor recall <domain> <entity> <words>…`: the messages of a
//! workstream that contain the words, newest first, verbatim, with the
//! compaction run that folded each. Reads the database only.

use std::process::ExitCode;

use compactor_producer::client::ClientSettings;
use compactor_producer::recall::{recall_in, Recall, RecallLimit, RecallQuery};
use compactor_producer::store::Store;
use compactor_shared::Part;

use crate::commands::{key_of, report};
use crate::failure::Failure;
use crate::human;
use crate::output::Output;
use crate::Target;

pub(crate) async fn recall(
    settings: &ClientSettings,
    target: &Target,
    words: &[String],
    limit: u64,
    out: Output,
) -> ExitCode {
    report(out, async {
        let key = key_of(target)?;
        let query =
            RecallQuery::parse(&words.join(" ")).map_err(|e| Failure::usage("invalid_query", e))?;
        let limit = RecallLimit::new(limit).map_err(|e| Failure::usage("invalid_query", e))?;
        let store = Store::connect_with(&settings.database).await?;
        let found = recall_in(&store, &key, &query, limit)
            .await
            .map_err(Failure::from)?;
        out.print(&found, || text(&key.to_string(), &found));
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// One block per message: `#id role, when it was stored, which run folded
/// it`, then its parts.
fn text(key: &str, found: &Recall) -> String {
    if found.messages.is_empty() {
        return format!("{key}: no message contains {}\n", found.terms.join(" "));
    }
    let now = chrono::Utc::now();
    let mut t = format!(
        "{key}: {} messages contain {}, newest first\n",
        found.messages.len(),
        found.terms.join(" ")
    );
    for m in &found.messages {
        let folded = match (&m.folded_by, m.compacted) {
            (Some(f), _) => format!("folded by run {}, {}", f.run_id, human::time(f.at, now)),
            (None, true) => "compacted".to_owned(),
            (None, false) => "not compacted".to_owned(),
        };
        t.push_str(&format!(
            "\n--- #{} {}, {}; {folded}\n",
            m.id,
            m.role.as_str(),
            human::time(m.created_at, now)
        ));
        for part in &m.parts {
            t.push_str(&part_text(part));
            t.push('\n');
        }
    }
    t
}

fn part_text(part: &Part) -> String {
    match part {
        Part::Text { text } => text.clone(),
        Part::ToolCall {
            tool_name, input, ..
        } => format!("[tool call {tool_name}] {input}"),
        Part::ToolResult {
            tool_name, output, ..
        } => format!("[tool result {tool_name}] {output}"),
        Part::Reasoning { text } => format!("[reasoning] {text}"),
        Part::File { uri, .. } => format!("[file {uri}]"),
    }
}
