//! Who writes the summary: the offline extractive summarizer (the
//! zero-configuration default, and the stand-in when the LLM fails) or an
//! LLM. Both take the same inputs and give the same structured output, so
//! the compaction job does not care which.
//!
//! An LLM's answer is used only once it passes the checks of
//! [`compactor_shared::parse::check`]: it has sections of the configured
//! summary format (`[engine.summary] format`; an answer in the other format
//! has none), they say something, it does not empty a summary that had
//! content, and it was not cut off by the output limit. An answer cut off is asked for once
//! more with twice the output budget (up to `llm.retry_max_output_tokens`);
//! any other rejected answer is a retryable failure
//! ([`SummarizeError::InvalidOutput`]), so the job's retries and then the
//! extractive fallback take over. Every rejection and every worked-around
//! format problem is logged at WARN (kinds and counts only, never the
//! answer's text) and counted.

use std::time::Duration;

use compactor_producer::store::DegradedReason;
use compactor_shared::config::EngineConfig;
use compactor_shared::parse::{self, ParseProblem, Rejection};
use compactor_shared::prompt::{self, CompactionInput, Prompt};
use compactor_shared::summary::SummarizerOutput;
use compactor_shared::{extractive, Summary, TokenEstimator};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::events::{AnswerProblem, AnswerRejected, InternalEvent};
use crate::llm::{Calls, LlmClient, LlmError, LlmRequest};

/// Why a summarization step failed, with what the LLM calls of the
/// compaction had cost up to then (`calls`): a failed or degraded run's
/// row still records them.
#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    /// The request failed (or was not sent: the provider is unhealthy).
    #[error("{source}")]
    Llm { source: LlmError, calls: Calls },
    /// The model answered, but the answer was rejected by the checks.
    #[error("the summarizer's answer was rejected (invalid_output: {}): {rejection}", rejection.label())]
    InvalidOutput { rejection: Rejection, calls: Calls },
}

impl SummarizeError {
    /// The prompt was too long for the model: a smaller chunk may fit.
    pub fn is_context_length(&self) -> bool {
        matches!(self, SummarizeError::Llm { source, .. } if source.is_context_length())
    }

    /// When the model asked to come back (`Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SummarizeError::Llm { source, .. } => source.retry_after(),
            SummarizeError::InvalidOutput { .. } => None,
        }
    }

    /// The LLM requests of the compaction up to this failure, this one
    /// included.
    pub fn calls(&self) -> &Calls {
        match self {
            SummarizeError::Llm { calls, .. } | SummarizeError::InvalidOutput { calls, .. } => {
                calls
            }
        }
    }

    /// Why a run that falls back after this failure is degraded.
    pub fn degraded_reason(&self) -> DegradedReason {
        match self {
            SummarizeError::InvalidOutput { .. } => DegradedReason::InvalidOutput,
            SummarizeError::Llm { source, .. } => reason_of(source),
        }
    }
}

fn reason_of(error: &LlmError) -> DegradedReason {
    match error {
        LlmError::Unhealthy { .. } => DegradedReason::LlmUnhealthy,
        LlmError::ContextLength { .. } => DegradedReason::ContextLength,
        LlmError::Empty => DegradedReason::InvalidOutput,
        LlmError::Auth { .. } | LlmError::BadRequest { .. } | LlmError::Config(_) => {
            DegradedReason::LlmRefused
        }
        LlmError::DeadlineExceeded { last, .. } => match reason_of(last) {
            // Out of time is unavailability, whatever the last try said.
            DegradedReason::InvalidOutput => DegradedReason::LlmUnavailable,
            other => other,
        },
        LlmError::Timeout { .. }
        | LlmError::Connect { .. }
        | LlmError::RateLimited { .. }
        | LlmError::Server { .. }
        | LlmError::Malformed { .. } => DegradedReason::LlmUnavailable,
    }
}

/// Why the extractive summarizer wrote a run's summary instead of the LLM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub reason: DegradedReason,
    /// The LLM failure that led to it (none when the LLM was not asked).
    pub error: Option<String>,
}

/// The LLM's part of a compaction's run row: every request its steps sent
/// (failed and rejected ones included) and, when the extractive
/// summarizer stood in, why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlmUsage {
    pub calls: Calls,
    pub fallback: Option<Fallback>,
}

/// The summarizer a compaction uses.
#[derive(Debug, Clone)]
pub enum Summarizer {
    /// No network: sentences and exact values picked from the transcript.
    Extractive,
    Llm(LlmClient),
    /// The pre-compaction hook's summary, already parsed and checked
    /// (`super::hooked`): every chunk's answer; rollups and memory folds
    /// are done offline. Nothing is called.
    Replaced(Box<SummarizerOutput>),
}

/// A failure inside one LLM step, before the calls are attached.
enum StepError {
    Llm(LlmError),
    Rejected(Rejection),
}

impl From<LlmError> for StepError {
    fn from(e: LlmError) -> Self {
        StepError::Llm(e)
    }
}

impl StepError {
    fn with_calls(self, usage: &LlmUsage) -> SummarizeError {
        let calls = usage.calls.clone();
        match self {
            StepError::Llm(source) => SummarizeError::Llm { source, calls },
            StepError::Rejected(rejection) => SummarizeError::InvalidOutput { rejection, calls },
        }
    }
}

/// Which kind of answer a step asks for (in logs).
#[derive(Debug, Clone, Copy)]
enum Step {
    Compaction,
    Rollup,
    MemoryBlock,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Compaction => "compaction",
            Step::Rollup => "rollup",
            Step::MemoryBlock => "memory_block",
        }
    }
}

impl Summarizer {
    /// Model name for the audit trail (`None` for the extractive one).
    pub fn model(&self) -> Option<String> {
        match self {
            Summarizer::Extractive | Summarizer::Replaced(_) => None,
            Summarizer::Llm(client) => Some(client.model().to_owned()),
        }
    }

    /// The provider's name as in metric labels (`extractive` for the
    /// offline summarizer).
    pub fn provider(&self) -> &'static str {
        match self {
            Summarizer::Extractive => "extractive",
            Summarizer::Replaced(_) => "hook",
            Summarizer::Llm(client) => client.provider(),
        }
    }

    /// Whether the LLM is marked unhealthy (never for the extractive
    /// summarizer): calls fail at once until a probe is answered, so a
    /// compaction should summarize offline straight away.
    pub fn is_unhealthy(&self) -> bool {
        match self {
            Summarizer::Extractive | Summarizer::Replaced(_) => false,
            Summarizer::Llm(client) => !client.is_healthy(),
        }
    }

    /// Folds one transcript chunk into the summary so far.
    pub async fn summarize(
        &self,
        input: &CompactionInput<'_>,
        engine: &EngineConfig,
        estimator: &dyn TokenEstimator,
        deadline: Instant,
        usage: &mut LlmUsage,
    ) -> Result<SummarizerOutput, SummarizeError> {
        let mut judgements = extractive::Judgements::default();
        self.summarize_judged(input, engine, estimator, deadline, usage, &mut judgements)
            .await
    }

    /// [`Summarizer::summarize`] for one chunk of a compaction of many:
    /// the extractive summarizer keeps what it judged in `judgements` for
    /// the next (see [`extractive::Judgements`]); the others ignore it.
    pub async fn summarize_judged(
        &self,
        input: &CompactionInput<'_>,
        engine: &EngineConfig,
        estimator: &dyn TokenEstimator,
        deadline: Instant,
        usage: &mut LlmUsage,
        judgements: &mut extractive::Judgements,
    ) -> Result<SummarizerOutput, SummarizeError> {
        let budget = output_budget(engine);
        match self {
            Summarizer::Extractive => Ok(extractive::summarize_with(
                input,
                &engine.extractive_config(),
                budget,
                estimator,
                judgements,
            )),
            Summarizer::Replaced(output) => Ok(output.as_ref().clone()),
            Summarizer::Llm(client) => {
                let prompt = prompt::compaction_prompt(input, budget);
                let step = Step::Compaction;
                let checked = async {
                    let text = answer(client, step, &prompt, deadline, usage).await?;
                    parse::echo(&text).map_err(|r| reject(client, step, usage, r, &[]))?;
                    let parsed = parse::parse_output_as(&text, input.format)
                        .map_err(|e| reject(client, step, usage, e.into(), &[]))?;
                    report_problems(client, step, &parsed.problems);
                    parse::check(&parsed, input.previous_summary)
                        .map_err(|r| reject(client, step, usage, r, &parsed.problems))?;
                    Ok(parsed.output)
                };
                let result: Result<SummarizerOutput, StepError> = checked.await;
                result.map_err(|e| e.with_calls(usage))
            }
        }
    }

    /// Rewrites a summary that grew past the rollup limit into at most
    /// `target_tokens`. The rewrite must keep content.
    pub async fn rollup(
        &self,
        summary: &Summary,
        target_tokens: u64,
        estimator: &dyn TokenEstimator,
        deadline: Instant,
        usage: &mut LlmUsage,
    ) -> Result<Summary, SummarizeError> {
        match self {
            Summarizer::Extractive | Summarizer::Replaced(_) => {
                Ok(extractive::rollup(summary, target_tokens, estimator))
            }
            Summarizer::Llm(client) => {
                let prompt = prompt::rollup_prompt(summary, target_tokens);
                let step = Step::Rollup;
                let checked = async {
                    let text = answer(client, step, &prompt, deadline, usage).await?;
                    parse::echo(&text).map_err(|r| reject(client, step, usage, r, &[]))?;
                    let parsed = parse::parse_rollup_as(&text, summary.format)
                        .map_err(|e| reject(client, step, usage, e.into(), &[]))?;
                    report_problems(client, step, &parsed.problems);
                    parse::check(&parsed, Some(summary))
                        .map_err(|r| reject(client, step, usage, r, &parsed.problems))?;
                    Ok(parsed.output.summary)
                };
                let result: Result<Summary, StepError> = checked.await;
                result.map_err(|e| e.with_calls(usage))
            }
        }
    }

    /// Folds memory entries into the memory-block summary (at most
    /// `max_chars`). The fold must keep content.
    pub async fn fold_memory(
        &self,
        previous: Option<&str>,
        entries: &[String],
        max_chars: usize,
        deadline: Instant,
        usage: &mut LlmUsage,
    ) -> Result<String, SummarizeError> {
        match self {
            Summarizer::Extractive | Summarizer::Replaced(_) => {
                Ok(extractive::fold_memory_block(previous, entries, max_chars))
            }
            Summarizer::Llm(client) => {
                // Roughly 3 chars per token, as the default estimate.
                let max_tokens = u64::try_from(max_chars / 3).unwrap_or(u64::MAX).max(64);
                let prompt = prompt::memory_block_prompt(previous, entries, max_tokens);
                let step = Step::MemoryBlock;
                let checked = async {
                    let text = answer(client, step, &prompt, deadline, usage).await?;
                    let folded = parse::parse_memory_block(&text)
                        .map_err(|e| reject(client, step, usage, e.into(), &[]))?;
                    parse::check_memory_block(&folded, previous)
                        .map_err(|r| reject(client, step, usage, r, &[]))?;
                    Ok(cut_chars(&folded, max_chars))
                };
                let result: Result<String, StepError> = checked.await;
                result.map_err(|e| e.with_calls(usage))
            }
        }
    }
}

/// Output-token budget of one summarization: the one the engine checks
/// ([`EngineConfig::summary_budget`]), set or derived.
pub fn output_budget(engine: &EngineConfig) -> u64 {
    engine.summary_budget()
}

/// The model's answer to `prompt`, not cut off by the output limit: an
/// answer that stopped at the limit is asked for once more with twice the
/// budget (the prompt still asks for the original size; the room is for a
/// model that overshoots). Still cut off, or no larger budget allowed: the
/// answer is rejected as [`Rejection::Truncated`].
async fn answer(
    client: &LlmClient,
    step: Step,
    prompt: &Prompt,
    deadline: Instant,
    usage: &mut LlmUsage,
) -> Result<String, StepError> {
    let mut request = LlmRequest::from(prompt);
    let response = client
        .complete_counted(&request, deadline, &mut usage.calls)
        .await?;
    if !response.truncated {
        return Ok(response.text);
    }
    let cut_at = request.max_output_tokens;
    let larger = cut_at
        .saturating_mul(2)
        .min(client.config().retry_max_output_tokens);
    let truncated = Rejection::Truncated {
        max_output_tokens: cut_at,
    };
    if larger <= cut_at {
        return Err(reject(client, step, usage, truncated, &[]));
    }
    // Counted like any rejected answer; then asked again.
    record_rejection(client, step, usage, &truncated, &[]);
    warn!(
        provider = client.provider(),
        step = step.name(),
        max_output_tokens = larger,
        "asking again with a larger output budget"
    );
    request.max_output_tokens = larger;
    match client
        .complete_counted(&request, deadline, &mut usage.calls)
        .await
    {
        Ok(response) if !response.truncated => Ok(response.text),
        Ok(_) => Err(reject(
            client,
            step,
            usage,
            Rejection::Truncated {
                max_output_tokens: larger,
            },
            &[],
        )),
        // A transient failure is the job's to retry.
        Err(error) if error.is_retryable() => Err(error.into()),
        // The larger request itself was refused (over the model's output
        // or context limit): the cut-off answer stays rejected.
        Err(error) => {
            debug!(%error, "the request with a larger output budget was refused");
            Err(StepError::Rejected(Rejection::Truncated {
                max_output_tokens: cut_at,
            }))
        }
    }
}

/// Records a rejected answer: counted as a failed call (its answer is not
/// used) and in the metrics, logged at WARN with the reason and the kinds
/// of format problems (never the answer's text).
fn reject(
    client: &LlmClient,
    step: Step,
    usage: &mut LlmUsage,
    rejection: Rejection,
    problems: &[ParseProblem],
) -> StepError {
    record_rejection(client, step, usage, &rejection, problems);
    StepError::Rejected(rejection)
}

fn record_rejection(
    client: &LlmClient,
    step: Step,
    usage: &mut LlmUsage,
    rejection: &Rejection,
    problems: &[ParseProblem],
) {
    usage.calls.failed = usage.calls.failed.saturating_add(1);
    AnswerRejected {
        provider: client.provider(),
        reason: rejection.label(),
    }
    .emit();
    warn!(
        provider = client.provider(),
        model = client.model(),
        step = step.name(),
        reason = rejection.label(),
        problems = ?labels(problems),
        "the LLM's answer was rejected: {rejection}"
    );
}

/// Logs (WARN, kinds only; details at DEBUG) and counts the format problems
/// the parser worked around in an answer that is used.
fn report_problems(client: &LlmClient, step: Step, problems: &[ParseProblem]) {
    if problems.is_empty() {
        return;
    }
    for problem in problems {
        AnswerProblem {
            provider: client.provider(),
            problem: problem.label(),
        }
        .emit();
    }
    warn!(
        provider = client.provider(),
        step = step.name(),
        problems = ?labels(problems),
        "the LLM's answer deviated from the format; what was usable was salvaged"
    );
    debug!(?problems, "format problems in detail");
}

fn labels(problems: &[ParseProblem]) -> Vec<&'static str> {
    problems.iter().map(ParseProblem::label).collect()
}

/// The first `max` chars of `text`.
fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text.get(..at).unwrap_or(text).to_owned(),
        None => text.to_owned(),
    }
}
