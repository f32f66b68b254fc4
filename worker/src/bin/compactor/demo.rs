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
        out.print(&report, || {
            format!(
                "compacted {} of {} messages: {} → {} tokens{} in {:.1}s\n\n\
                 == summary ==\n{}\n\n== next turn's context ==\n{}",
                report.messages_compacted,
                report.messages,
                report.tokens_before,
                report.tokens_after,
                if report.degraded { " (degraded)" } else { "" },
                started.elapsed().as_secs_f64(),
                report.summary.as_deref().unwrap_or("(none)"),
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
