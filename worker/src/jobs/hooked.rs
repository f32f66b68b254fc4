//! The compaction job's side of the pre-compaction hook ([`crate::hook`]):
//! plan the span, ask the hook, and turn its answer into what the attempt
//! does — summarize as usual, summarize with extra instructions and
//! context, use a replacement summary, or skip. Every failure (the hook's,
//! or a replacement the format's parser refuses) falls back to compacting
//! as if there were no hook; what happened goes on the run row.

use compactor_producer::store::{HookOutcome, RunHook, StoreError, WorkstreamRow};
use compactor_shared::config::EngineConfig;
use compactor_shared::parse;
use compactor_shared::pipeline::PageSource;
use compactor_shared::summary::SummarizerOutput;
use compactor_shared::TokenEstimator;

use crate::events::{HookCalled, InternalEvent};
use crate::hook::wire::Workstream;
use crate::hook::{span, Hook, HookAnswer, HookRequest};
use crate::runtime::Job;

/// What the attempt does after asking the hook.
#[derive(Debug, Default)]
pub(super) enum Plan {
    /// Summarize as usual (no hook, an empty answer, or a failure).
    #[default]
    Proceed,
    /// Summarize with these added to the request.
    Steer {
        instructions: Option<String>,
        context: Vec<String>,
    },
    /// The hook's summary, parsed and checked: no summarizer call.
    Replace(Box<SummarizerOutput>),
    /// No compaction this time.
    Skip,
}

/// The plan and what goes on the run row.
#[derive(Debug, Default)]
pub(super) struct Asked {
    pub(super) plan: Plan,
    pub(super) record: RunHook,
}

impl Asked {
    /// The instructions the summarizer gets: the request's own (a manual
    /// one's) and then the hook's.
    pub(super) fn instructions(&self, own: Option<String>) -> Option<String> {
        let extra = match &self.plan {
            Plan::Steer { instructions, .. } => instructions.as_deref(),
            _ => None,
        };
        match (own, extra) {
            (Some(own), Some(extra)) => Some(format!("{own}\n\n{extra}")),
            (own, extra) => own.or_else(|| extra.map(str::to_owned)),
        }
    }

    /// The hook's context lines (none unless it sent some).
    pub(super) fn context(&self) -> Vec<String> {
        match &self.plan {
            Plan::Steer { context, .. } => context.clone(),
            _ => Vec::new(),
        }
    }
}

/// Asks `hook` about the span `pages` hold for `ws`; nothing is asked when
/// nothing may be cut (the pipeline will say so). Only reading the pages
/// can fail: the hook fails open.
pub(super) async fn ask<P: PageSource<Error = StoreError>>(
    hook: &Hook,
    job: &Job,
    ws: &WorkstreamRow,
    engine: &EngineConfig,
    estimator: &dyn TokenEstimator,
    pages: &mut P,
) -> Result<Asked, StoreError> {
    let Some(planned) = span::plan(pages, engine, estimator, hook.max_message_chars()).await?
    else {
        return Ok(Asked::default());
    };
    let format = engine.summary.format;
    let previous = ws.summary.clone().map(|s| s.into_format(format));
    let request = HookRequest {
        workstream: Workstream {
            domain: job.key.domain().to_owned(),
            entity_id: job.key.entity_id().to_owned(),
        },
        job_id: job.job_id,
        attempt: job.attempt,
        trigger: job.trigger.label().to_owned(),
        instructions: match &job.trigger {
            compactor_producer::queue::Trigger::Manual { instructions } => instructions.clone(),
            _ => None,
        },
        span: planned.span,
        summary_format: format,
        previous_summary: previous.as_ref().map(|s| s.render()),
        messages: planned.messages,
        messages_truncated: planned.truncated,
    };
    let called = hook.call(&request).await;
    let (outcome, plan, error) = match called.answer {
        Err(failure) => (failure.outcome(), Plan::Proceed, Some(failure.to_string())),
        Ok(HookAnswer::Proceed) => (HookOutcome::Proceed, Plan::Proceed, None),
        Ok(HookAnswer::Skip) => (HookOutcome::Skipped, Plan::Skip, None),
        Ok(HookAnswer::Adjust {
            instructions,
            context,
        }) => (
            if instructions.is_some() {
                HookOutcome::Instructions
            } else {
                HookOutcome::Context
            },
            Plan::Steer {
                instructions,
                context,
            },
            None,
        ),
        Ok(HookAnswer::Replace(text)) => match replacement(&text, format, previous.as_ref()) {
            Ok(output) => (HookOutcome::Replaced, Plan::Replace(Box::new(output)), None),
            Err(why) => (HookOutcome::InvalidReplacement, Plan::Proceed, Some(why)),
        },
    };
    HookCalled {
        outcome,
        elapsed: called.duration,
        error: error.as_deref(),
    }
    .emit();
    Ok(Asked {
        plan,
        record: RunHook {
            outcome: Some(outcome),
            duration_ms: Some(crate::telemetry::millis(called.duration)),
        },
    })
}

/// The hook's summary, through the checks an LLM's rewrite gets: the
/// configured format's parser (a state delta is optional) and the content
/// checks against the previous summary.
fn replacement(
    text: &str,
    format: compactor_shared::summary::SummaryFormat,
    previous: Option<&compactor_shared::Summary>,
) -> Result<SummarizerOutput, String> {
    let parsed = parse::parse_rollup_as(text, format)
        .map_err(|e| format!("the replacement summary does not parse: {e}"))?;
    parse::check(&parsed, previous)
        .map_err(|r| format!("the replacement summary was refused: {r}"))?;
    Ok(parsed.output)
}
