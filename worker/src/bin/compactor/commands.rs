//! What each command does.

use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use compactor_producer::client::{
    request_recorded, retry_dead_recorded, ClientSettings, IdempotencyKey, IncomingMessage,
    Readiness, TurnOutcome, WaitMode,
};
use compactor_producer::events::EventOutcome;
use compactor_producer::queue::{BulkAction, EnqueueOutcome, Queue, Trigger};
use compactor_producer::store::{SchemaStatus, Store};
use compactor_shared::EntityKey;
use serde::Serialize;

use crate::connect::{client, queue};
use crate::dlq;
use crate::failure::Failure;
use crate::human;
use crate::output::{Output, NO};
use crate::{Command, DlqCommand, EventsCommand, QueueCommand, Target};

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
        Command::Queue { command } => match command {
            QueueCommand::Stats => crate::queue_control::stats(settings, out).await,
            QueueCommand::Pause { domain } => {
                crate::queue_control::control(settings, false, domain.as_deref(), out).await
            }
            QueueCommand::Resume { domain } => {
                crate::queue_control::control(settings, true, domain.as_deref(), out).await
            }
            QueueCommand::Jobs {
                state,
                limit,
                cursor,
            } => {
                crate::queue_jobs::jobs(settings, state.into(), limit, cursor.as_deref(), out).await
            }
            QueueCommand::Job { id } => crate::queue_jobs::job(settings, id, out).await,
            QueueCommand::Cancel { id, requeue } => {
                let then = if requeue {
                    compactor_producer::queue::CancelThen::Requeue
                } else {
                    compactor_producer::queue::CancelThen::Dead
                };
                crate::queue_jobs::cancel(settings, id, then, out).await
            }
            QueueCommand::Workers => crate::queue_jobs::workers(settings, out).await,
        },
        Command::Dlq { command } => dlq(settings, command, out).await,
        Command::Events { command } => events(settings, command, out).await,
        Command::Runs { target, limit } => runs(settings, &target, limit, out).await,
        Command::Workstreams { args } => crate::workstreams::list(settings, args, out).await,
        Command::Recall {
            target,
            words,
            limit,
        } => crate::recall::recall(settings, &target, &words, limit, out).await,
        Command::Reconcile => reconcile(settings, out).await,
        Command::Demo {
            turns,
            timeout_secs,
        } => crate::demo::run(settings, turns, Duration::from_secs(timeout_secs), out).await,
    }
}

/// What a compaction request did, as the admin HTTP API and the
/// `compactor_enqueue_total` metric name it: `added`, `coalesced` or
/// `followup`.
#[derive(Serialize)]
struct Enqueued {
    outcome: &'static str,
    job_id: u64,
}

impl From<&EnqueueOutcome> for Enqueued {
    fn from(outcome: &EnqueueOutcome) -> Enqueued {
        let job_id = match outcome {
            EnqueueOutcome::Added { job_id }
            | EnqueueOutcome::Coalesced { job_id }
            | EnqueueOutcome::FollowUpRecorded { job_id } => *job_id,
        };
        Enqueued {
            outcome: outcome.label(),
            job_id,
        }
    }
}

/// A turn's outcome as JSON, its `enqueue` in the vocabulary of
/// [`Enqueued`] (as HTTP's `turn`).
fn turn_json(turn: &TurnOutcome) -> serde_json::Value {
    let mut json = serde_json::to_value(turn).unwrap_or_default();
    if let TurnOutcome::Requested { enqueue, .. } = turn {
        json["enqueue"] = serde_json::json!(Enqueued::from(enqueue));
    }
    json
}

/// Runs a command body, turning its failure into an exit code.
pub(crate) async fn report<F>(out: Output, body: F) -> ExitCode
where
    F: std::future::Future<Output = Result<ExitCode, Failure>>,
{
    match body.await {
        Ok(code) => code,
        Err(f) => f.exit(out),
    }
}

pub(crate) fn key_of(target: &Target) -> Result<EntityKey, Failure> {
    EntityKey::parse(&target.domain, &target.entity).map_err(Failure::key)
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
            SchemaStatus::Ahead { unknown } => Err(Failure::new(
                crate::output::UNAVAILABLE,
                "schema_mismatch",
                format!(
                    "the database has migrations this build does not know ({}): upgrade compactor",
                    unknown.join(", ")
                ),
            )),
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
        Some(p) => Box::new(std::io::BufReader::new(std::fs::File::open(p).map_err(
            |e| Failure::argument(format!("cannot read {}: {e}", p.display())),
        )?)),
    };
    let mut messages = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| Failure::argument(format!("line {}: {e}", n + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let message: IncomingMessage = serde_json::from_str(&line).map_err(|e| {
            Failure::usage(
                "invalid_body",
                format!("line {}: invalid message: {e}", n + 1),
            )
        })?;
        messages.push(message);
    }
    if messages.is_empty() {
        return Err(Failure::usage("invalid_body", "no messages to append"));
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
        turn: Option<serde_json::Value>,
    }
    report(out, async {
        let key = key_of(target)?;
        let idempotency_key = idempotency_key
            .map(IdempotencyKey::parse)
            .transpose()
            .map_err(Failure::argument)?;
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
            turn: turn.as_ref().map(turn_json),
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
            if let Some(turn) = &turn {
                text.push_str(&format!("\nturn: {}", describe_turn(turn)));
            }
            text
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

fn describe_turn(turn: &TurnOutcome) -> String {
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
            trigger,
            enqueue,
            ..
        } => format!(
            "{trigger} compaction requested ({current_tokens} tokens): {}",
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
        let store = Store::connect_with(&settings.database).await?;
        let queue = queue(settings).await?;
        // As the client's requests do: the event follows Redis's change,
        // and comes before the job's `compaction.started`.
        let outcome = request_recorded(&store, &queue, &key, &Trigger::Auto).await?;
        out.print(&Enqueued::from(&outcome), || {
            format!("{key}: {}", outcome.label())
        });
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
        out.print(&Enqueued::from(&outcome), || {
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
        let now = chrono::Utc::now();
        out.print(&s, || {
            let compacting = match &s.lease {
                Some(l) => format!(
                    "yes, by {}; its lease ends {}",
                    l.owner,
                    human::time_ms(l.deadline_ms, now)
                ),
                None => "no".to_owned(),
            };
            let compactions = match (s.compactions, s.last_compacted_at) {
                (0, _) => "none yet".to_owned(),
                (n, Some(at)) => format!("{n}, the last {}", human::time(at, now)),
                (n, None) => n.to_string(),
            };
            let rows = [
                ("workstream", key.to_string()),
                ("compacting", compacting),
                ("compactions", compactions),
                (
                    "tokens",
                    format!(
                        "{} in the summary, {} not compacted",
                        s.summary_tokens, s.uncompacted_tokens
                    ),
                ),
                (
                    "breaker",
                    format!(
                        "{} ({} failed compactions in a row)",
                        if s.breaker_open { "open" } else { "closed" },
                        s.consecutive_failures
                    ),
                ),
                (
                    "queue job",
                    s.job.as_ref().map_or("none".to_owned(), human::job),
                ),
            ];
            let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            rows.iter()
                .map(|(k, v)| format!("{k:<width$}  {v}\n"))
                .collect()
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
        compactor_producer::client::WaitPhase::Paused => "paused (compactor queue resume)",
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
            text.push_str(&human::render_context(&context));
            text
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}

async fn dlq(settings: &ClientSettings, command: DlqCommand, out: Output) -> ExitCode {
    report(out, async {
        let queue = queue(settings).await?;
        match command {
            DlqCommand::List { limit, filter } => {
                let letters = dlq::list(&queue, limit, &filter).await?;
                out.print(&letters, || {
                    if letters.is_empty() {
                        return "no dead letters".to_owned();
                    }
                    let now = chrono::Utc::now();
                    let rows: Vec<Vec<String>> = letters
                        .iter()
                        .map(|d| {
                            vec![
                                human::time_ms(
                                    i64::try_from(d.failed_at_ms).unwrap_or(i64::MAX),
                                    now,
                                ),
                                d.entry.clone(),
                                d.attempts.to_string(),
                                d.stalls.to_string(),
                                d.reason.clone(),
                            ]
                        })
                        .collect();
                    human::table(&["FAILED", "ENTRY", "ATTEMPTS", "STALLS", "REASON"], &rows)
                });
                Ok(ExitCode::SUCCESS)
            }
            DlqCommand::Retry { entry, bulk } if bulk.is_bulk() || entry.is_none() => {
                dlq::bulk(settings, &queue, BulkAction::Retry, entry, &bulk, out).await
            }
            DlqCommand::Retry { entry, .. } => {
                let entry = entry.unwrap_or_default();
                match retry_dead(settings, &queue, &entry).await? {
                    Some(outcome) => {
                        out.print(&Enqueued::from(&outcome), || {
                            format!("{entry}: requested again ({})", outcome.label())
                        });
                        Ok(ExitCode::SUCCESS)
                    }
                    None => Err(Failure::no(
                        "not_found",
                        format!("no dead letter {entry:?}"),
                    )),
                }
            }
            DlqCommand::Purge { entry, bulk } if bulk.is_bulk() => {
                dlq::bulk(settings, &queue, BulkAction::Purge, entry, &bulk, out).await
            }
            DlqCommand::Purge { entry: None, .. } => Err(Failure::argument(
                "name an entry or a filter (--reason, --domain, --older-than), or pass --all",
            )),
            DlqCommand::Purge {
                entry: Some(entry), ..
            } => {
                let removed = queue.purge_dead(Some(&entry)).await?;
                out.print(&serde_json::json!({ "purged": removed }), || {
                    format!("purged {removed} dead letters")
                });
                Ok(ExitCode::SUCCESS)
            }
        }
    })
    .await
}

/// Requests a dead letter's entity again and writes its
/// `compaction.requested` event, as any request does. `None` when there is
/// no such dead letter.
async fn retry_dead(
    settings: &ClientSettings,
    queue: &Queue,
    entry: &str,
) -> Result<Option<EnqueueOutcome>, Failure> {
    let store = Store::connect_with(&settings.database).await?;
    let retried = retry_dead_recorded(&store, queue, entry).await?;
    Ok(retried.map(|(_, _, outcome)| outcome))
}

async fn events(settings: &ClientSettings, command: EventsCommand, out: Output) -> ExitCode {
    use compactor_producer::store::{DeliveryFilter, RetryOutcome};
    report(out, async {
        let store = Store::connect_with(&settings.database).await?;
        match command {
            EventsCommand::Deliveries {
                state,
                endpoint,
                after,
                limit,
            } => {
                if limit == 0 {
                    return Err(Failure::argument("--limit: must be at least 1"));
                }
                let filter = DeliveryFilter {
                    state: state.map(Into::into),
                    endpoint,
                    after,
                    limit,
                };
                let deliveries = store.deliveries(&filter).await?;
                out.print(&deliveries, || {
                    if deliveries.is_empty() {
                        return "no deliveries".to_owned();
                    }
                    let now = chrono::Utc::now();
                    let rows: Vec<Vec<String>> = deliveries
                        .iter()
                        .map(|d| {
                            vec![
                                d.id.to_string(),
                                d.endpoint.clone(),
                                d.state.as_str().to_owned(),
                                d.attempts.to_string(),
                                d.kind.clone(),
                                format!("{}/{}", d.domain, d.entity_id),
                                human::time(d.created_at, now),
                                d.last_error.clone().unwrap_or_default(),
                            ]
                        })
                        .collect();
                    human::table(
                        &[
                            "ID",
                            "ENDPOINT",
                            "STATE",
                            "ATTEMPTS",
                            "EVENT",
                            "WORKSTREAM",
                            "CREATED",
                            "LAST ERROR",
                        ],
                        &rows,
                    )
                });
                Ok(ExitCode::SUCCESS)
            }
            EventsCommand::Retry {
                id: Some(id),
                all_failed: false,
                ..
            } => match store.retry_delivery(id).await? {
                RetryOutcome::Requeued => {
                    out.print(
                        &serde_json::json!({ "id": id, "outcome": "requeued" }),
                        || format!("delivery {id}: pending again, due now"),
                    );
                    Ok(ExitCode::SUCCESS)
                }
                RetryOutcome::AlreadyDelivered => {
                    out.print(
                        &serde_json::json!({ "id": id, "outcome": "already_delivered" }),
                        || format!("delivery {id}: delivered already"),
                    );
                    Ok(ExitCode::SUCCESS)
                }
                RetryOutcome::NotFound => {
                    Err(Failure::no("not_found", format!("no delivery {id}")))
                }
            },
            EventsCommand::Retry {
                all_failed: true,
                endpoint,
                ..
            } => {
                let requeued = store.retry_failed_deliveries(endpoint.as_deref()).await?;
                out.print(&serde_json::json!({ "requeued": requeued }), || {
                    format!("{requeued} failed deliveries pending again")
                });
                Ok(ExitCode::SUCCESS)
            }
            EventsCommand::Retry { .. } => Err(Failure::argument(
                "name a delivery id, or pass --all-failed",
            )),
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
            let now = chrono::Utc::now();
            let mut text = String::new();
            for r in &runs {
                let outcome = match (r.run.degraded, r.run.degraded_reason) {
                    (false, _) => human::words(r.run.outcome.as_str()),
                    (true, None) => format!("{}, degraded", human::words(r.run.outcome.as_str())),
                    (true, Some(reason)) => format!(
                        "{}, degraded: {}",
                        human::words(r.run.outcome.as_str()),
                        human::words(reason.as_str())
                    ),
                };
                let mut rows = vec![
                    vec!["started".to_owned(), human::time(r.run.started_at, now)],
                    vec![
                        "took".to_owned(),
                        format!(
                            "{} ms",
                            r.run
                                .finished_at
                                .signed_duration_since(r.run.started_at)
                                .num_milliseconds()
                                .max(0)
                        ),
                    ],
                    vec![
                        "job".to_owned(),
                        format!(
                            "{}, attempt {}, {}",
                            r.run.job_id,
                            r.run.attempt,
                            human::words(&r.run.trigger)
                        ),
                    ],
                    vec!["outcome".to_owned(), outcome],
                    vec![
                        "tokens".to_owned(),
                        format!("{} → {}", r.run.tokens_before, r.run.tokens_after),
                    ],
                    vec![
                        "messages".to_owned(),
                        format!(
                            "{} compacted, {} chunks, {} rollups",
                            r.run.messages_compacted, r.run.chunks, r.run.rollups
                        ),
                    ],
                    vec![
                        "evidence".to_owned(),
                        format!(
                            "{} lines kept, {} dropped",
                            r.run.evidence_kept, r.run.evidence_dropped
                        ),
                    ],
                ];
                if let Some(model) = &r.run.llm_model {
                    rows.push(vec![
                        "llm".to_owned(),
                        format!(
                            "{model}: {} calls ({} failed), {} tokens in, {} out",
                            r.run.llm_calls,
                            r.run.llm_failed_calls,
                            r.run.llm_tokens_in,
                            r.run.llm_tokens_out
                        ),
                    ]);
                }
                if let Some(hook) = r.run.hook.outcome {
                    let took = r
                        .run
                        .hook
                        .duration_ms
                        .map_or(String::new(), |ms| format!(" ({ms} ms)"));
                    rows.push(vec![
                        "hook".to_owned(),
                        format!("{}{took}", human::words(hook.as_str())),
                    ]);
                }
                if let Some(error) = &r.run.error {
                    rows.push(vec!["error".to_owned(), error.clone()]);
                }
                if !text.is_empty() {
                    text.push('\n');
                }
                let width = rows.iter().map(|r| r[0].len()).max().unwrap_or(0);
                for row in rows {
                    text.push_str(&format!("{:<width$}  {}\n", row[0], row[1]));
                }
            }
            text
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
        .await?;
        out.print(&r, || {
            format!(
                "{} over their trigger: {} requested again, {} in hand, {} held by their breaker, {} dead-lettered; {} branch summaries requested",
                r.over_trigger, r.requested, r.in_hand, r.breaker_open, r.dead_lettered, r.branches_requested
            )
        });
        Ok(ExitCode::SUCCESS)
    })
    .await
}
