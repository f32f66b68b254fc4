//! Driving the product with a session, as an application does, through
//! public surfaces only: the producer client ([`Compactor`]: append, a
//! manual compaction request, status, `build_context`), the store's audit
//! trail (`runs`), and a worker started as the binary starts it
//! ([`spawn_worker`]), which runs the real compaction job and the fenced
//! commit. The summarizer is the extractive one or a fake LLM behind real
//! loopback HTTP.
//!
//! One round: append the next slice of the session, request a compaction
//! (manual: it always compacts, whatever the size), wait until it is
//! committed, build the context and score it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use compactor_producer::client::{Compactor, IncomingMessage};
use compactor_producer::queue::JobState;
use compactor_shared::config::EngineConfig;
use compactor_shared::trigger::{Measure, TriggerPolicy};
use compactor_shared::{CharEstimator, EntityKey, Message, MessageId, TokenEstimator};
use serde::Serialize;

use super::fake_llms::{LlmStats, Mode, SummaryLlm};
use super::score::{score, ContextView, Score};
use super::sessions::Session;
use crate::db::{Backend, TestDb};
use crate::{settings, spawn_worker, TestRedis};

/// How to run a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// Compactions, one per slice of the session.
    pub rounds: usize,
    pub backend: Backend,
    /// The model's context window; `None` derives it from the session so
    /// that one slice brings the workstream to about its trigger.
    pub context_window: Option<u64>,
    /// Longest wait for one compaction to commit.
    pub round_timeout: Duration,
    /// A directory to write every round's context to, as scored
    /// (`<shape>-<mode>-round<k>.txt`), to see what was kept and how.
    pub dump: Option<PathBuf>,
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            rounds: 10,
            backend: Backend::Sqlite,
            context_window: None,
            round_timeout: Duration::from_secs(120),
            dump: None,
        }
    }
}

/// One round's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Round {
    pub round: usize,
    /// Estimated tokens of the workstream just before the request.
    pub tokens_before: u64,
    /// Whether those were over the trigger (an automatic request would have
    /// been made).
    pub due: bool,
    /// The compaction committed within the round's timeout.
    pub committed: bool,
    /// The latest run's outcome (`committed`, `no_progress`, …).
    pub outcome: Option<String>,
    pub degraded: bool,
    pub score: Score,
}

/// A session run in one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRun {
    pub mode: Mode,
    pub context_window: u64,
    pub trigger_tokens: u64,
    pub rounds: Vec<Round>,
    pub llm: Option<LlmStats>,
    pub seconds: f64,
    /// Baselines on the same messages after the last round.
    pub baselines: Option<Baselines>,
}

impl SessionRun {
    pub fn last(&self) -> Option<&Round> {
        self.rounds.last()
    }
}

/// What two naive contexts keep of the same messages after the last round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baselines {
    /// The newest messages whose estimated tokens sum to at most the last
    /// context's, verbatim.
    pub window: Score,
    /// Every appended message, verbatim (its tokens: the whole history's).
    pub full: Score,
}

/// The baselines of the first `appended` messages of `session`, the window
/// at most `tokens` tokens, estimated with `chars_per_token` (the engine's).
pub fn baselines(
    session: &Session,
    appended: usize,
    tokens: u64,
    chars_per_token: u32,
) -> Baselines {
    let estimator = CharEstimator::new(chars_per_token);
    let history = &session.messages[..appended];
    let sizes: Vec<u64> = history
        .iter()
        .map(|m| estimator.message_tokens(&as_message(m)))
        .collect();
    let mut start = history.len();
    let mut used = 0u64;
    while start > 0 && used + sizes[start - 1] <= tokens {
        start -= 1;
        used += sizes[start];
    }
    let window = ContextView {
        tokens: used,
        ..ContextView::verbatim(&history[start..])
    };
    let full = ContextView {
        tokens: sizes.iter().sum(),
        ..ContextView::verbatim(history)
    };
    Baselines {
        window: score(session, appended, &window),
        full: score(session, appended, &full),
    }
}

/// The engine configuration of a run: the defaults, with a trigger for a
/// model of `window` tokens (threshold policy, ratio 0.7, an output reserve
/// and margin that fit such a model) and chunks that fit in its window.
pub fn engine_for(window: u64) -> EngineConfig {
    let mut engine = EngineConfig {
        trigger: TriggerPolicy::Threshold {
            context_window: window,
            ratio: 0.7,
            output_reserve: window / 8,
            safety_margin: window / 32,
        },
        ..EngineConfig::default()
    };
    let fits = usize::try_from(window).unwrap_or(usize::MAX) * engine.chars_per_token as usize / 2;
    engine.chunk.max_chars = engine.chunk.max_chars.min(fits.max(1_000));
    engine
}

/// The window at which one of `rounds` slices of `session` is about the
/// trigger (0.7 of the window), rounded up to 1,000 tokens, at least 8,000.
pub fn derived_window(session: &Session, rounds: usize) -> u64 {
    let estimator = CharEstimator::new(EngineConfig::default().chars_per_token);
    let total: u64 = session
        .messages
        .iter()
        .map(|m| estimator.message_tokens(&as_message(m)))
        .sum();
    let slice = total / rounds.max(1) as u64;
    ((slice as f64 / 0.7 / 1_000.0).ceil() as u64 * 1_000).max(8_000)
}

fn as_message(m: &IncomingMessage) -> Message {
    Message {
        id: MessageId(0),
        role: m.role,
        parts: m.parts.clone(),
        pinned: m.pinned,
    }
}

/// Runs `session` in `mode`: `spec.rounds` compactions, each scored.
pub async fn run(session: &Session, mode: Mode, spec: &RunSpec) -> SessionRun {
    let started = Instant::now();
    let window = spec
        .context_window
        .unwrap_or_else(|| derived_window(session, spec.rounds));
    let db = TestDb::new(spec.backend).await;
    let redis = TestRedis::new();
    let llm = match mode.style() {
        Some(style) => Some(SummaryLlm::start(style).await),
        None => None,
    };
    let url = llm.as_ref().map(SummaryLlm::url);
    let mut settings = settings(&db.url, &redis, url.as_deref());
    settings.engine = engine_for(window);
    if let Err(e) = settings.engine.validate() {
        panic!("the benchmark's engine configuration (window {window}) is invalid: {e}");
    }
    let trigger = &settings.engine.trigger;
    let trigger_tokens = trigger.threshold().unwrap_or(window);
    let trigger = *trigger;
    let chars_per_token = settings.engine.chars_per_token;
    let client = Compactor::from_parts(
        db.store.clone(),
        redis.queue().await,
        settings.engine.clone(),
    )
    .await;
    let worker = spawn_worker(settings);
    let key = EntityKey::parse(
        "quality",
        &format!("{}-{}", session.spec.shape.name(), mode.name()),
    )
    .expect("a valid key");

    let mut rounds = Vec::new();
    for (i, slice) in session.slices(spec.rounds).into_iter().enumerate() {
        let round = i + 1;
        let appended = slice.end;
        client
            .append_messages(&key, session.messages[slice].to_vec())
            .await
            .expect("append the slice");
        let status = client.status(&key).await.expect("status");
        let tokens_before = status.summary_tokens + status.uncompacted_tokens;
        let due = trigger.evaluate(&Measure::estimated(tokens_before)).due;
        client
            .compact_now(&key, None)
            .await
            .expect("request a compaction");
        let committed = wait_for_commit(&client, &key, round, spec.round_timeout).await;
        client
            .wait_until_ready(&key, Duration::from_secs(10))
            .await
            .expect("wait until ready");
        let context = client.build_context(&key).await.expect("build the context");
        let view = ContextView::of(&context);
        if let Some(dir) = &spec.dump {
            let file = dir.join(format!(
                "{}-{}-round{round:02}.txt",
                session.spec.shape.name(),
                mode.name()
            ));
            let text = format!(
                "{}\n\n==== verbatim tail ====\n\n{}\n",
                view.preamble,
                view.tail.join("\n---\n")
            );
            std::fs::write(&file, text).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
        }
        let run = client
            .store()
            .runs(&key, 1)
            .await
            .expect("the audit trail")
            .into_iter()
            .next();
        rounds.push(Round {
            round,
            tokens_before,
            due,
            committed,
            outcome: run.as_ref().map(|r| r.run.outcome.as_str().to_owned()),
            degraded: run.as_ref().is_some_and(|r| r.run.degraded),
            score: score(session, appended, &view),
        });
    }
    worker.stop().await;
    let baselines = rounds.last().map(|r: &Round| {
        baselines(
            session,
            r.score.appended,
            r.score.context_tokens,
            chars_per_token,
        )
    });
    SessionRun {
        mode,
        context_window: window,
        trigger_tokens,
        rounds,
        llm: llm.as_ref().map(SummaryLlm::stats),
        seconds: started.elapsed().as_secs_f64(),
        baselines,
    }
}

/// Waits until the workstream has `round` compactions; false when its job
/// was dead-lettered or `limit` passed first.
async fn wait_for_commit(
    client: &Compactor,
    key: &EntityKey,
    round: usize,
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let status = client.status(key).await.expect("status");
        if status.compactions >= round as i64 {
            return true;
        }
        if matches!(status.job, Some(JobState::Dead { .. })) || Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
