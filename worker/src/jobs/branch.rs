//! The `summarize_branch` job: summarizing a branch the head left (pi's
//! branch summarization), run by the compaction handler for payloads of
//! that kind.
//!
//! The job reads the abandoned messages (branch point exclusive to the
//! abandoned leaf), takes the newest of them within `[engine.branch]
//! budget_tokens`, summarizes them with the configured summarizer (the
//! extractive one when the LLM fails and `fallback_to_extractive` allows
//! it), collects the files the whole branch read and modified together
//! with those of the summaries it carries on (cumulative file operations),
//! and attaches the summary at the branch point with a `branch.summarized`
//! event in the same transaction.
//!
//! It takes no entity lease: it reads messages that never change (an
//! abandoned branch is neither pruned nor re-written; a compaction may
//! only mark it compacted, which keeps its text) and writes a row of its
//! own, so it neither waits for a compaction nor fences one. It is
//! idempotent: a summary is stored once per abandoned leaf, and a repeated
//! job finds it and does nothing. A cancel is fenced by the queue: the
//! attempt reads the mark of its revoked lease right before it attaches.

use compactor_producer::store::{AbandonedBranch, EventKind, NewBranchSummary, NewEvent};
use compactor_shared::branch::{newest_within, FileOps};
use compactor_shared::prompt::CompactionInput;
use compactor_shared::{transcript, MessageId, WorkstreamState};
use serde_json::json;
use tracing::{info, info_span, warn, Instrument};

use super::compact::CompactHandler;
use super::summarizer::{LlmUsage, Summarizer};
use crate::runtime::{Job, JobError};

/// What the summarizer is asked to do with the branch (an LLM reads it;
/// the extractive summarizer ignores it).
const BRANCH_INSTRUCTIONS: &str = "These messages are a branch of the conversation that the user \
     left to continue from an earlier point. Summarize what was tried on this branch, what was \
     found and decided, and where it stood when it was left, so the conversation can refer back \
     to it.";

/// Messages read per round trip when collecting the file operations.
const PAGE: usize = 500;

impl CompactHandler {
    /// Runs one `summarize_branch` attempt for the branch of `job.key`
    /// from `branch_point` (exclusive) to `leaf`.
    pub(super) async fn summarize_branch(
        &self,
        job: &Job,
        leaf: MessageId,
        branch_point: MessageId,
    ) -> Result<(), JobError> {
        let span = info_span!(
            "summarize_branch",
            domain = job.key.domain(),
            job_id = job.job_id,
            attempt = job.attempt,
            leaf = leaf.0,
            branch_point = branch_point.0,
        );
        self.branch_attempt(job, AbandonedBranch { leaf, branch_point })
            .instrument(span)
            .await
    }

    async fn branch_attempt(&self, job: &Job, branch: AbandonedBranch) -> Result<(), JobError> {
        let store_error = |e: compactor_producer::store::StoreError| {
            if e.is_transient() {
                // The database is down: not this job's failure.
                JobError::unavailable(e.to_string())
            } else {
                JobError::permanent(e.to_string())
            }
        };
        let Some(ws) = self.store.workstream(&job.key).await.map_err(store_error)? else {
            return Err(JobError::permanent("the workstream does not exist"));
        };
        let input = self
            .store
            .branch_input(ws.id, branch)
            .await
            .map_err(store_error)?;
        if input.done {
            info!(
                reason = "summarized_already",
                "skipped: the branch has a summary"
            );
            return Ok(());
        }
        // A branch's summary is all that is kept of it: no evidence reads
        // its messages, so the offline summarizer quotes their lines
        // whatever `[engine.extractive] quote_lines` says for compactions.
        let mut engine = self.settings.engine.clone();
        engine.extractive.quote_lines = Some(true);
        let engine = &engine;
        let estimates: Vec<u64> = input.segment.iter().map(|&(_, t)| t).collect();
        let taken = newest_within(&estimates, engine.branch.budget_tokens);
        let ids: Vec<MessageId> = input.segment.iter().map(|&(id, _)| id).collect();
        let first_taken = ids.len() - taken;

        // File operations of the whole branch, page by page; the messages
        // within budget are kept for the summary.
        let mut file_ops = FileOps::default();
        let mut selected = Vec::with_capacity(taken);
        for (page_no, page) in ids.chunks(PAGE).enumerate() {
            let messages = self
                .store
                .messages_by_ids(ws.id, page)
                .await
                .map_err(store_error)?;
            file_ops.record(&messages);
            let offset = page_no * PAGE;
            selected.extend(
                messages
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| offset + i >= first_taken)
                    .map(|(_, m)| m),
            );
        }
        for earlier in &input.carried {
            file_ops.merge(&earlier.file_ops);
        }

        let text = transcript::extract(&selected, &engine.transcript).text;
        let state = WorkstreamState::default();
        let prompt_input = CompactionInput {
            previous_summary: None,
            state: &state,
            new_messages: &text,
            instructions: Some(BRANCH_INSTRUCTIONS),
            split_turn: false,
            format: engine.summary.format,
        };
        let mut usage = LlmUsage::default();
        let estimator = self.estimator.as_ref();
        let (output, degraded) = match self
            .summarizer
            .summarize(&prompt_input, engine, estimator, job.deadline, &mut usage)
            .await
        {
            Ok(output) => (output, false),
            Err(error)
                if self.settings.fallback_to_extractive
                    && (job.is_last_attempt()
                        || error.is_context_length()
                        || self.summarizer.is_unhealthy()) =>
            {
                warn!(error = %error, "the summarizer failed; summarizing the branch offline");
                let output = Summarizer::Extractive
                    .summarize(&prompt_input, engine, estimator, job.deadline, &mut usage)
                    .await
                    .map_err(|e| JobError::permanent(e.to_string()))?;
                (output, true)
            }
            Err(error) => return Err(JobError::retryable(error.to_string())),
        };
        let summary = output.summary.render();
        let tokens = estimator.count(&summary);
        let event = NewEvent::new(
            EventKind::BranchSummarized,
            &job.key,
            json!({
                "leaf": branch.leaf.0,
                "branch_point": branch.branch_point.0,
                "messages": taken,
                "branch_messages": ids.len(),
                "tokens": tokens,
                "degraded": degraded,
                "file_ops": &file_ops,
                "carried_summaries": input.carried.len(),
                "job_id": job.job_id,
                "attempt": job.attempt,
            }),
        );
        // An operator may have cancelled the job while it summarized. It
        // holds no entity lease (see the module docs), so the queue's mark
        // of its revoked lease is its fence, read last, right before the
        // write: a cancel after this point finds the summary attached, as a
        // compaction's cancel after its commit finds it committed. (A Redis
        // outage here is the heartbeat's business: the attempt goes on.)
        if self
            .queue
            .lease_revoked(&job.lease_token)
            .await
            .unwrap_or(false)
        {
            info!(
                reason = "cancelled",
                "skipped: the job was cancelled; the branch stays unsummarized until it is retried"
            );
            return Ok(());
        }
        let attached = self
            .store
            .attach_branch_summary(
                &NewBranchSummary {
                    workstream_id: ws.id,
                    branch,
                    summary: &summary,
                    file_ops: &file_ops,
                    tokens,
                    messages: taken as u64,
                },
                &event,
            )
            .await
            .map_err(store_error)?;
        if attached {
            self.outbox_wake.notify_one();
            info!(
                messages = taken,
                branch_messages = ids.len(),
                tokens,
                degraded,
                read_files = file_ops.read.len(),
                modified_files = file_ops.modified.len(),
                "branch summarized"
            );
        } else {
            info!(
                reason = "summarized_already",
                "skipped: the branch has a summary"
            );
        }
        Ok(())
    }
}
