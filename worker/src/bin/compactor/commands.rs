//! What each command does.

use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use compactor_producer::client::{
    ClientError, ClientSettings, Compactor, IdempotencyKey, IncomingMessage, Readiness, WaitMode,
};
use compactor_producer::events::EventOutcome;
use compactor_producer::queue::{Queue, QueueError, Trigger};
use compactor_producer::store::{SchemaStatus, Store, StoreError};
use compactor_shared::context::BuiltContext;
use compactor_shared::{EntityKey, Part};
use serde::Serialize;

use crate::output::{Output, NO, UNAVAILABLE, USAGE};
use crate::{Command, DlqCommand, QueueCommand, Target};

pub(crate) async fn run(command: Command, settings: &ClientSettings, out: Output) -> ExitCode {
    match command {
        Command::Migrate { check } => migrate(settings, check, out).await,
        Command::Append {
            target,
            file,
            finalize,
            idempotency_key,
        } => {
            append(
                settings,
                &target,
                file.as_deref(),
                finalize,
                idempotency_key.as_deref(),
                out,
            )
            .await
        }
        Command::Enqueue { target } => enqueue(settings, &target, out).await,
        Command::CompactNow {
            target,
            instructions,
        } => compact_now(settings, &target, instructions, out).await,
        Command::Status { target } => status(settings, &target, out).await,
        Command::Wait {
            target,
            timeout_ms,
            mode,
        } => wait(settings, &target, timeout_ms, mode.into(), out).await,
        Command::Context { target } => context(settings, &target, out).await,
        Command::Queue {
            command: QueueCommand::Stats,
        } => queue_stats(settings, out).await,
        Command::Dlq { command } => dlq(settings, command, out).await,
        Command::Runs { target, limit } => runs(settings, &target, limit, out).await,
        Command::Reconcile => reconcile(settings, out).await,
        Command::Demo {
            turns,
            timeout_secs,
        } => crate::demo::run(settings, turns, Duration::from_secs(timeout_secs), out).await,
    }
}

/// A failure, with the exit code it maps to.
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    pub(crate) fn with_code(code: u8, message: impl std::fmt::Display) -> Failure {
        Failure {
            code,
            message: message.to_string(),
        }
    }

    pub(crate) fn usage(message: impl std::fmt::Display) -> Failure {
        Failure::with_code(USAGE, message)
    }

    /// Reports the failure and returns its exit code.
    pub(crate) fn exit(self, out: Output) -> ExitCode {
        out.fail(self.code, self.message)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        let code = match e {
            ClientError::UnknownWorkstream(_) => NO,
            ClientError::InvalidMessage { .. }
            | ClientError::ClientIdConflict { .. }
            | ClientError::InvalidInstructions(_)
            | ClientError::Config(_)
            | ClientError::Queue(QueueError::Url { .. } | QueueError::Config(_)) => USAGE,
            _ => UNAVAILABLE,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure {
            code: UNAVAILABLE,
            message: e.to_string(),
        }
    }
}

impl From<QueueError> for Failure {
    fn from(e: QueueError) -> Failure {
        let code = match e {
            // A URL or a queue setting that can never work: bad usage.
            QueueError::Url { .. } | QueueError::Config(_) => USAGE,
            _ => UNAVAILABLE,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

/// Runs a command body, turning its failure into an exit code.
async fn report<F>(out: Output, body: F) -> ExitCode
where
    F: std::future::Future<Output = Result<ExitCode, Failure>>,
{
    match body.await {
        Ok(code) => code,
        Err(f) => f.exit(out),
    }
}

pub(crate) fn key_of(target: &Target) -> Result<EntityKey, Failure> {
    EntityKey::parse(&target.domain, &target.entity).map_err(Failure::usage)
}

pub(crate) async fn client(settings: &ClientSettings) -> Result<Compactor, Failure> {
    Ok(Compactor::connect(settings).await?)
}

async fn queue(settings: &ClientSettings) -> Result<Queue, Failure> {
    Ok(Queue::connect_with(&settings.redis, settings.queue.clone()).await?)
}

async fn migrate(settings: &ClientSettings, check: bool, out: Output) -> ExitCode {
    #[derive(Serialize)]
    struct Report {
        status: &'static str,
        applied: Vec<String>,
        pending: Vec<String>,
    }
    report(out, async {
        let store = Store::connect_with(&settings.database).await?;
        match store.schema_status().await? {
            SchemaStatus::Current => {
                out.print(
                    &Report {
                        status: "current",
                        applied: vec![],
                        pending: vec![],
                    },
                    || format!("schema is current ({})", settings.database.url),
                );
                Ok(ExitCode::SUCCESS)
            }
            SchemaStatus::Ahead { unknown } => Err(Failure {
                code: UNAVAILABLE,
                message: format!(
                    "the database has migrations this build does not know ({}): upgrade compactor",
                    unknown.join(", ")
                ),
            }),
            SchemaStatus::Behind { pending } if check => {
                out.print(
                    &Report {
                        status: "behind",
                        applied: vec![],
                        pending: pending.clone(),
                    },
                    || format!("pending migrations: {}", pending.join(", ")),
                );
                Ok(ExitCode::from(NO))
            }
            SchemaStatus::Behind { .. } => {
                let applied = store.migrate().await?;
                out.print(
                    &Report {
                        status: "current",
                        applied: applied.clone(),
                        pending: vec![],
                    },
                    || {
                        let mut text: String =
                            applied.iter().map(|n| format!("applied {n}\n")).collect();
                        text.push_str(&format!("schema is current ({})", settings.database.url));
                        text
                    },
                );
                Ok(ExitCode::SUCCESS)
            }
        }
    })
    .await
}

/// Reads JSON Lines messages; blank lines are skipped; an invalid line is
/// an error naming its line number.
fn read_messages(file: Option<&Path>) -> Result<Vec<IncomingMessage>, Failure> {
    let reader: Box<dyn BufRead> = match file {
        None => Box::new(std::io::stdin().lock()),
        Some(p) if p == Path::new("-") => Box::new(std::io::stdin().lock()),
        Some(p) => Box::new(std::io::BufReader::new(
            std::fs::File::open(p)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", p.display())))?,
        )),
    };
    let mut messages = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| Failure::usage(format!("line {}: {e}", n + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let message: IncomingMessage = serde_json::from_str(&line)
            .map_err(|e| Failure::usage(format!("line {}: invalid message: {e}", n + 1)))?;
        messages.push(message);
    }
    if messages.is_empty() {
        return Err(Failure::usage("no messages to append"));
    }
    Ok(messages)
}

async fn append(
    settings: &ClientSettings,
    target: &Target,
    file: Option<&Path>,
    finalize: bool,
    idempotency_key: Option<&str>,
    out: Output,
) -> ExitCode {
    #[derive(Serialize)]
    struct Report {
        appended: usize,
        /// Of `appended`, stored by an earlier run (same client ids).
        already_stored: usize,
        first_id: Option<i64>,
        last_id: Option<i64>,
        uncompacted_tokens: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        turn: Option<compactor_producer::client::TurnOutcome>,
    }
    report(out, async {
        let key = key_of(target)?;
        let idempotency_key = idempotency_key
            .map(IdempotencyKey::parse)
            .transpose()
            .map_err(Failure::usage)?;
        let messages = read_messages(file)?;
        let compactor = client(settings).await?;
        let appended = match &idempotency_key {
            Some(k) => compactor.append_messages_once(&key, k, messages).await?,
            None => compactor.append_messages(&key, messages).await?,
        };
        let turn = if finalize {
            Some(compactor.finalize_turn(&key, None).await?)
        } else {
            None
        };
        let report = Report {
            appended: appended.ids.len(),
            already_stored: appended.already_stored,
            first_id: appended.ids.first().map(|i| i.0),
            last_id: appended.ids.last().map(|i| i.0),
            uncompacted_tokens: appended.uncompacted_tokens,
            turn,
        };
        out.print(&report, || {
            let mut text = format!(
                "appended {} messages to {key} ({} un-compacted tokens)",
                report.appended, report.uncompacted_tokens
            );
            if report.already_stored > 0 {
                text.push_str(&format!(
                    "\n{} of them were stored already and not stored again",
                    report.already_stored
                ));
            }
            if let Some(turn) = &report.turn {
                text.push_str(&format!("\nturn: {}", describe_turn(turn)));
            }
            text
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

fn describe_turn(turn: &compactor_producer::client::TurnOutcome) -> String {
    use compactor_producer::client::TurnOutcome;
    match turn {
        TurnOutcome::NotDue {
            current_tokens,
            threshold_tokens,
        } => format!(
            "not due ({current_tokens} tokens, threshold {})",
            threshold_tokens.map_or("none".to_owned(), |t| t.to_string())
        ),
        TurnOutcome::Requested {
            current_tokens,
            enqueue,
            ..
        } => format!(
            "compaction requested ({current_tokens} tokens): {}",
            enqueue.label()
        ),
        TurnOutcome::BreakerOpen {
            consecutive_failures,
            ..
        } => format!("breaker open after {consecutive_failures} failed compactions: not requested"),
        TurnOutcome::Unavailable {
            current_tokens,
            reason,
            ..
        } => format!(
            "compaction due ({current_tokens} tokens) but not requested, Redis unavailable: {reason}"
        ),
    }
}

async fn enqueue(settings: &ClientSettings, target: &Target, out: Output) -> ExitCode {
    report(out, async {
        let key = key_of(target)?;
        let queue = queue(settings).await?;
        let outcome = queue.request_compaction(&key, Trigger::Auto).await?;
        out.print(&outcome, || format!("{key}: {}", outcome.label()));
        Ok(ExitCode::SUCCESS)
    })
    .await
}

async fn compact_now(
    settings: &ClientSettings,
    target: &Target,
    instructions: Option<String>,
    out: Output,
) -> ExitCode {
    report(out, async {
        let key = key_of(target)?;
        let compactor = client(settings).await?;
        let outcome = compactor.compact_now(&key, instructions).await?;
        out.print(&outcome, || {
            format!("{key}: manual compaction {}", outcome.label())
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

async fn status(settings: &ClientSettings, target: &Target, out: Output) -> ExitCode {
    report(out, async {
        let key = key_of(target)?;
        let compactor = client(settings).await?;
        let s = compactor.status(&key).await?;
        out.print(&s, || {
            let mut t = format!("workstream  {key}\n");
            t.push_str(&match &s.lease {
                Some(l) => format!(
                    "compacting  yes (lease {} until {} ms)\n",
                    l.owner, l.deadline_ms
                ),
                None => "compacting  no\n".to_owned(),
            });
            t.push_str(&format!(
                "compactions {} (last {})\n",
                s.compactions,
                s.last_compacted_at
                    .map_or("never".to_owned(), |at| at.to_rfc3339())
            ));
            t.push_str(&format!(
                "tokens      {} summary + {} un-compacted\n",
                s.summary_tokens, s.uncompacted_tokens
            ));
            t.push_str(&format!(
                "breaker     {} ({} failures in a row)\n",
                if s.breaker_open { "open" } else { "closed" },
                s.consecutive_failures
            ));
            t.push_str(&format!(
                "queue job   {}\n",
                s.job
                    .as_ref()
                    .map_or("none".to_owned(), |j| format!("{j:?}"))
            ));
            t
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

async fn wait(
    settings: &ClientSettings,
    target: &Target,
    timeout_ms: u64,
    mode: WaitMode,
    out: Output,
) -> ExitCode {
    report(out, async {
        let key = key_of(target)?;
        let compactor = client(settings).await?;
        let readiness = compactor
            .wait(&key, mode, Duration::from_millis(timeout_ms))
            .await?;
        out.print(&readiness, || describe_wait(&key, &readiness));
        Ok(if readiness.is_settled() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(NO)
        })
    })
    .await
}

/// A wait's answer for people.
fn describe_wait(key: &EntityKey, readiness: &Readiness) -> String {
    let waited = readiness.waited().as_millis();
    let phase = |phase: &compactor_producer::client::WaitPhase| match phase {
        compactor_producer::client::WaitPhase::Queued => "queued",
        compactor_producer::client::WaitPhase::Running => "running",
        compactor_producer::client::WaitPhase::BackingOff => "backing off after a failed attempt",
    };
    match readiness {
        Readiness::Ready { event: None, .. } => format!("{key}: ready after {waited} ms"),
        Readiness::Ready { event: Some(e), .. } => format!(
            "{key}: ready after {waited} ms (the last run {}{})",
            match e.outcome {
                EventOutcome::Compacted => "compacted",
                EventOutcome::Skipped => "found nothing to do",
                EventOutcome::Failed => "failed",
                EventOutcome::Conflict => "lost to another commit",
            },
            e.error
                .as_deref()
                .map_or(String::new(), |r| format!(", {r}"))
        ),
        Readiness::Compacted { event, .. } => format!(
            "{key}: compacted after {waited} ms: {} → {} tokens, {} messages folded{}",
            event.tokens_before,
            event.tokens_after,
            event.messages_compacted,
            if event.degraded {
                " (offline summary)"
            } else {
                ""
            }
        ),
        Readiness::TimedOut { phase: p, .. } => {
            format!("{key}: still {} after {waited} ms", phase(p))
        }
        Readiness::NoLiveWorker { phase: p, .. } => format!(
            "{key}: a compaction is {} but no worker is live to run it",
            phase(p)
        ),
    }
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

async fn context(settings: &ClientSettings, target: &Target, out: Output) -> ExitCode {
    report(out, async {
        let key = key_of(target)?;
        let compactor = client(settings).await?;
        let context = compactor.build_context(&key).await?;
        out.print(&context, || {
            let mut text = String::new();
            if context.truncated {
                text.push_str(&format!(
                    "truncated: {} older un-compacted messages (~{} tokens) not loaded \
                     (over [database] context_max_messages / context_max_tokens)\n",
                    context.omitted_messages, context.omitted_tokens
                ));
            }
            text.push_str(&render_context(&context));
            text
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

async fn queue_stats(settings: &ClientSettings, out: Output) -> ExitCode {
    report(out, async {
        let queue = queue(settings).await?;
        let counts = queue.counts().await?;
        out.print(&counts, || {
            format!(
                "queue {}\nwaiting {}\nrunning {}\ndone    {}\ndead    {}",
                settings.queue.name.as_str(),
                counts.waiting,
                counts.running,
                counts.done,
                counts.dead
            )
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

async fn dlq(settings: &ClientSettings, command: DlqCommand, out: Output) -> ExitCode {
    report(out, async {
        let queue = queue(settings).await?;
        match command {
            DlqCommand::List { limit } => {
                let letters = queue.dead_letters(limit).await?;
                out.print(&letters, || {
                    if letters.is_empty() {
                        return "no dead letters".to_owned();
                    }
                    letters
                        .iter()
                        .map(|d| {
                            format!(
                                "{}  attempts {} stalls {}  {}\n",
                                d.entry, d.attempts, d.stalls, d.reason
                            )
                        })
                        .collect()
                });
                Ok(ExitCode::SUCCESS)
            }
            DlqCommand::Retry { entry } => match queue.retry_dead(&entry).await? {
                Some(outcome) => {
                    out.print(&outcome, || {
                        format!("{entry}: requested again ({})", outcome.label())
                    });
                    Ok(ExitCode::SUCCESS)
                }
                None => Err(Failure {
                    code: NO,
                    message: format!("no dead letter {entry:?}"),
                }),
            },
            DlqCommand::Purge { entry, all } => {
                if entry.is_none() && !all {
                    return Err(Failure::usage("name an entry, or pass --all"));
                }
                let removed = queue.purge_dead(entry.as_deref()).await?;
                out.print(&serde_json::json!({ "purged": removed }), || {
                    format!("purged {removed} dead letters")
                });
                Ok(ExitCode::SUCCESS)
            }
        }
    })
    .await
}

async fn runs(settings: &ClientSettings, target: &Target, limit: u64, out: Output) -> ExitCode {
    report(out, async {
        let key = key_of(target)?;
        let store = Store::connect_with(&settings.database).await?;
        let runs = store.runs(&key, limit).await?;
        out.print(&runs, || {
            if runs.is_empty() {
                return format!("{key}: no compaction runs");
            }
            runs.iter()
                .map(|r| {
                    let degraded = match (r.degraded, r.degraded_reason) {
                        (false, _) => String::new(),
                        (true, None) => " (degraded)".to_owned(),
                        (true, Some(reason)) => format!(" (degraded: {reason})"),
                    };
                    let llm = match &r.llm_model {
                        None => String::new(),
                        Some(model) => format!(
                            "  llm {model}: {} calls ({} failed), {} in / {} out tokens",
                            r.llm_calls, r.llm_failed_calls, r.llm_tokens_in, r.llm_tokens_out
                        ),
                    };
                    format!(
                        "{}  job {} attempt {}  {:?}{}  {} → {} tokens  {} messages  {} chunks{}{}\n",
                        r.started_at.to_rfc3339(),
                        r.job_id,
                        r.attempt,
                        r.outcome,
                        degraded,
                        r.tokens_before,
                        r.tokens_after,
                        r.messages_compacted,
                        r.chunks,
                        llm,
                        r.error
                            .as_deref()
                            .map_or(String::new(), |e| format!("  error: {e}"))
                    )
                })
                .collect()
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

async fn reconcile(settings: &ClientSettings, out: Output) -> ExitCode {
    report(out, async {
        let compactor = client(settings).await?;
        let r = compactor_producer::reconcile::reconcile(
            compactor.store(),
            compactor.queue(),
            compactor.engine(),
        )
        .await
        .map_err(|e| Failure::with_code(UNAVAILABLE, e))?;
        out.print(&r, || {
            format!(
                "{} over their trigger: {} requested again, {} in hand, {} held by their breaker, {} dead-lettered",
                r.over_trigger, r.requested, r.in_hand, r.breaker_open, r.dead_lettered
            )
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}
