//! Who writes the summary: the offline extractive summarizer (the
//! zero-configuration default, and the stand-in when the LLM fails on a
//! job's last attempt) or an LLM. Both take the same inputs and give the
//! same structured output, so the compaction job does not care which.

use std::time::Duration;

use compactor_shared::config::EngineConfig;
use compactor_shared::parse::{self, ParseError};
use compactor_shared::prompt::{self, CompactionInput, Prompt};
use compactor_shared::summary::SummarizerOutput;
use compactor_shared::{extractive, Summary, TokenEstimator};
use tokio::time::Instant;
use tracing::debug;

use crate::llm::{LlmClient, LlmError, LlmRequest};

/// Why a summarization step failed.
#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The model answered, but nothing usable could be salvaged.
    #[error("the summarizer's answer could not be used: {0}")]
    Unusable(#[from] ParseError),
}

impl SummarizeError {
    /// The prompt was too long for the model: a smaller chunk may fit.
    pub fn is_context_length(&self) -> bool {
        matches!(self, SummarizeError::Llm(e) if e.is_context_length())
    }

    /// When the model asked to come back (`Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SummarizeError::Llm(e) => e.retry_after(),
            SummarizeError::Unusable(_) => None,
        }
    }
}

/// What the LLM calls of one compaction cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlmUsage {
    pub calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model: Option<String>,
}

/// The summarizer a compaction uses.
#[derive(Debug, Clone)]
pub enum Summarizer {
    /// No network: sentences and exact values picked from the transcript.
    Extractive,
    Llm(LlmClient),
}

impl Summarizer {
    /// Model name for the audit trail (`None` for the extractive one).
    pub fn model(&self) -> Option<String> {
        match self {
            Summarizer::Extractive => None,
            Summarizer::Llm(client) => Some(client.model().to_owned()),
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
        let budget = output_budget(engine);
        match self {
            Summarizer::Extractive => Ok(extractive::summarize(
                input,
                &engine.extractive,
                budget,
                estimator,
            )),
            Summarizer::Llm(client) => {
                let prompt = prompt::compaction_prompt(input, budget);
                let text = call(client, &prompt, deadline, usage).await?;
                let parsed = parse::parse_output(&text)?;
                if !parsed.problems.is_empty() {
                    debug!(problems = ?parsed.problems, "summary salvaged from a malformed answer");
                }
                Ok(parsed.output)
            }
        }
    }

    /// Rewrites a summary that grew past the rollup limit into at most
    /// `target_tokens`.
    pub async fn rollup(
        &self,
        summary: &Summary,
        target_tokens: u64,
        estimator: &dyn TokenEstimator,
        deadline: Instant,
        usage: &mut LlmUsage,
    ) -> Result<Summary, SummarizeError> {
        match self {
            Summarizer::Extractive => Ok(extractive::rollup(summary, target_tokens, estimator)),
            Summarizer::Llm(client) => {
                let prompt = prompt::rollup_prompt(summary, target_tokens);
                let text = call(client, &prompt, deadline, usage).await?;
                Ok(parse::parse_rollup(&text)?.output.summary)
            }
        }
    }

    /// Folds memory entries into the memory-block summary (at most
    /// `max_chars`).
    pub async fn fold_memory(
        &self,
        previous: Option<&str>,
        entries: &[String],
        max_chars: usize,
        deadline: Instant,
        usage: &mut LlmUsage,
    ) -> Result<String, SummarizeError> {
        match self {
            Summarizer::Extractive => {
                Ok(extractive::fold_memory_block(previous, entries, max_chars))
            }
            Summarizer::Llm(client) => {
                // Roughly 3 chars per token, as the default estimate.
                let max_tokens = u64::try_from(max_chars / 3).unwrap_or(u64::MAX).max(64);
                let prompt = prompt::memory_block_prompt(previous, entries, max_tokens);
                let text = call(client, &prompt, deadline, usage).await?;
                let folded = parse::parse_memory_block(&text)?;
                Ok(cut_chars(&folded, max_chars))
            }
        }
    }
}

/// Output-token budget of one summarization.
pub fn output_budget(engine: &EngineConfig) -> u64 {
    engine
        .summary
        .max_output_tokens
        .unwrap_or_else(|| prompt::summary_output_budget(engine.trigger.context_window()))
}

async fn call(
    client: &LlmClient,
    prompt: &Prompt,
    deadline: Instant,
    usage: &mut LlmUsage,
) -> Result<String, LlmError> {
    let request = LlmRequest {
        system: &prompt.system,
        user: &prompt.user,
        max_output_tokens: prompt.max_output_tokens,
    };
    let response = client.complete(&request, deadline).await?;
    usage.calls += 1;
    usage.input_tokens += response.usage.input_tokens;
    usage.output_tokens += response.usage.output_tokens;
    usage.model = Some(response.model.clone());
    if response.truncated {
        debug!("the summarizer stopped at its token limit; salvaging what it wrote");
    }
    Ok(response.text)
}

/// The first `max` chars of `text`.
fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text.get(..at).unwrap_or(text).to_owned(),
        None => text.to_owned(),
    }
}
