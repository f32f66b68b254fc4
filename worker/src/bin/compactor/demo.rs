//! `compactor demo`: a compaction to look at, within a minute of cloning.
//! Seeds a realistic coding conversation (tool calls, exact values worth
//! keeping) into a fresh workstream, requests a manual compaction, waits for
//! a running worker to do it, then shows tokens before and after, the
//! summary, and what the next model call would be sent.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use compactor_producer::client::{ClientSettings, IncomingMessage};
use compactor_shared::{EntityKey, Part, Role};
use serde::Serialize;

use crate::connect::client;
use crate::failure::{codes, Failure};
use crate::human::render_context;
use crate::output::Output;

/// The conversation: a debugging session on a payments service. Each turn
/// is 4 messages (question, answer, tool call, tool result) and mentions
/// the values a summary must not lose.
fn conversation(turns: usize) -> Vec<IncomingMessage> {
    const TOPICS: [(&str, &str, &str); 6] = [
        (
            "services/payments/src/ledger.rs",
            "cargo test -p payments ledger::rounding",
            "E0308",
        ),
        (
            "services/payments/migrations/0042_add_currency.sql",
            "psql -f migrations/0042_add_currency.sql",
            "SQLSTATE 23505",
        ),
        (
            "deploy/helm/payments/values.yaml",
            "helm upgrade payments ./deploy/helm/payments --set replicas=3",
            "CrashLoopBackOff",
        ),
        (
            "services/payments/src/webhooks.rs",
            "curl -X POST https://api.example.com/v2/webhooks/retry",
            "HTTP 429",
        ),
        (
            "services/payments/src/fx.rs",
            "cargo bench -p payments fx_conversion",
            "p99 480ms",
        ),
        (
            "services/payments/Cargo.toml",
            "cargo update -p rust_decimal --precise 1.36.0",
            "RUSTSEC-2024-0399",
        ),
    ];
    let mut out = Vec::with_capacity(turns * 4);
    for t in 0..turns {
        let (path, command, code) = TOPICS[t % TOPICS.len()];
        out.push(IncomingMessage::text(
            Role::User,
            format!(
                "Step {t}: can you check {path}? We saw {code} in staging after the last change, \
                 and we must keep amounts in minor units (no floats) for the PCI audit."
            ),
        ));
        out.push(IncomingMessage::text(
            Role::Assistant,
            format!(
                "I looked at {path}. The {code} comes from the change in step {}; I decided to keep \
                 the rounding half-even and will verify with `{command}`.",
                t.saturating_sub(1)
            ),
        ));
        let call_id = format!("demo-call-{t}");
        out.push(IncomingMessage::new(
            Role::Assistant,
            vec![Part::tool_call(
                call_id.clone(),
                "bash",
                serde_json::json!({ "cmd": command }),
            )],
        ));
        out.push(IncomingMessage::new(
            Role::Tool,
            vec![Part::tool_result(
                call_id,
                "bash",
                format!("$ {command}\n... {} lines of output ...\nresult: {code} reproduced at step {t}", 40 + t % 17),
            )],
        ));
    }
    out
}

pub(crate) async fn run(
    settings: &ClientSettings,
    turns: usize,
    timeout: Duration,
    out: Output,
) -> ExitCode {
    #[derive(Serialize)]
    struct Report {
        domain: String,
        entity_id: String,
        messages: usize,
        tokens_before: u64,
        tokens_after: u64,
        messages_compacted: u64,
        degraded: bool,
        summary: Option<String>,
        context: compactor_producer::client::TurnContext,
    }
    let result: Result<ExitCode, Failure> = async {
        let compactor = client(settings).await?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let key = EntityKey::parse("demo", &format!("session-{stamp}")).map_err(Failure::key)?;
        let messages = conversation(turns.max(2));
        let count = messages.len();
        if !out.json {
            eprintln!("seeding {count} messages into {key} …");
        }
        compactor.append_messages(&key, messages).await?;
        compactor
            .compact_now(&key, Some("Keep every file path, command and error code.".into()))
            .await?;
        if !out.json {
            eprintln!(
                "compaction requested on queue {:?}; waiting up to {}s for a worker …",
                settings.queue.name.as_str(),
                timeout.as_secs()
            );
        }
        let started = Instant::now();
        loop {
            if compactor.status(&key).await?.compactions > 0 {
                break;
            }
            if started.elapsed() > timeout {
                return Err(Failure::no(codes::NO_WORKER, format!(
                    "no worker compacted {key} within {}s. Start one against the same database and \
                     Redis (e.g. `cargo run --release -p compactor-worker`) and run the demo again.",
                    timeout.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let run = compactor
            .store()
            .runs(&key, 1)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                Failure::new(
                    crate::output::UNAVAILABLE,
                    "internal",
                    "the compaction left no run record",
                )
            })?;
        let context = compactor.build_context(&key).await?;
        let report = Report {
            domain: key.domain().to_owned(),
            entity_id: key.entity_id().to_owned(),
            messages: count,
            tokens_before: run.run.tokens_before,
            tokens_after: run.run.tokens_after,
            messages_compacted: run.run.messages_compacted,
            degraded: run.run.degraded,
            summary: run.run.summary.clone(),
            context,
        };
        // The summary is shown once, where the model reads it: at the
        // head of the context (printed apart as well, every line of it
        // stood twice in what a newcomer reads first).
        out.print(&report, || {
            format!(
                "compacted {} of {} messages: {} → {} tokens{} in {:.1}s\n\n\
                 == next turn's context (the summary first) ==\n{}",
                report.messages_compacted,
                report.messages,
                report.tokens_before,
                report.tokens_after,
                if report.degraded { " (degraded)" } else { "" },
                started.elapsed().as_secs_f64(),
                render_context(&report.context)
            )
        });
        Ok(ExitCode::SUCCESS)
    }
    .await;
    match result {
        Ok(code) => code,
        Err(f) => f.exit(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactor_shared::config::EngineConfig;
    use compactor_shared::context::{self, ContextInput};
    use compactor_shared::pipeline::{self, Extractive, InMemory, Outcome, Request, Workstream};
    use compactor_shared::{CharEstimator, Message, MessageId, TokenEstimator};
    use std::collections::HashSet;

    /// Word 3-shingles of a line, as the quality benchmark compares lines.
    fn shingles(line: &str) -> HashSet<String> {
        let words: Vec<String> = line
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        if words.len() < 3 {
            return HashSet::from([words.join(" ")]);
        }
        words.windows(3).map(|w| w.join(" ")).collect()
    }

    fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
        let inter = a.intersection(b).count() as f64;
        inter / (a.len() as f64 + b.len() as f64 - inter)
    }

    /// What the demo prints for the context, computed as the worker and
    /// `build_context` compute it: the demo's conversation, compacted once
    /// by the default engine with the demo's instructions.
    fn demo_context() -> String {
        let engine = EngineConfig::default();
        let estimator = CharEstimator::new(engine.chars_per_token);
        let messages: Vec<Message> = conversation(150)
            .into_iter()
            .enumerate()
            .map(|(i, m)| Message::new(i as i64 + 1, m.role, m.parts))
            .collect();
        let workstream = Workstream {
            uncompacted_tokens: messages.iter().map(|m| estimator.message_tokens(m)).sum(),
            ..Workstream::default()
        };
        let request = Request {
            instructions: Some("Keep every file path, command and error code.".into()),
            context: Vec::new(),
        };
        let mut pages = InMemory::new(&messages, 200);
        let mut summarizer = Extractive::new(&engine, &estimator);
        let outcome = pipeline::now_or_never(pipeline::compact(
            &workstream,
            &request,
            &engine,
            &estimator,
            1_000,
            &mut pages,
            &mut summarizer,
        ));
        let Some(Ok(Outcome::Compacted(done))) = outcome else {
            panic!("the demo's conversation is compacted");
        };
        let kept: Vec<Message> = messages
            .iter()
            .filter(|m| m.id > done.watermark || done.keep.contains(&m.id))
            .cloned()
            .collect();
        let built = context::build(
            &ContextInput {
                summary: Some(&done.summary),
                state: &done.state,
                memory_block_summary: None,
                memory_entries: &[],
                messages: &kept,
                just_auto_compacted: false,
                context_window: engine.trigger.context_window(),
                state_text: None,
            },
            &engine.context,
            &estimator,
        );
        assert!(built.messages.iter().any(|m| m.source.is_none()));
        assert!(done.watermark > MessageId(100));
        render_context(&built)
    }

    #[test]
    fn the_demo_prints_no_near_duplicate_lines() {
        let text = demo_context();
        let lines: Vec<(&str, HashSet<String>)> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.split_whitespace().count() >= 4)
            .map(|l| (l, shingles(l)))
            .collect();
        let mut pairs = Vec::new();
        for (i, (a, sa)) in lines.iter().enumerate() {
            for (b, sb) in &lines[i + 1..] {
                if jaccard(sa, sb) >= 0.8 {
                    pairs.push(format!("{a}\n  ~ {b}"));
                }
            }
        }
        if std::env::var_os("DEMO_PRINT").is_some() {
            eprintln!("{text}");
        }
        assert!(
            pairs.is_empty(),
            "{} near-duplicate pairs:\n{}\n\n{text}",
            pairs.len(),
            pairs.join("\n")
        );
    }

    #[test]
    fn the_demo_does_not_present_its_instructions_as_facts() {
        let text = demo_context();
        assert!(!text.contains("Keep every file path"), "{text}");
    }
}
