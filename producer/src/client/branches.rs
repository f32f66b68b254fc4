//! Branches through the client: appending after a parent, moving the head,
//! and the branch summaries a context shows (see the store's `branches`
//! module for the model).
//!
//! When the head leaves a branch (a move, or an append whose parent forks
//! off the head's branch), the branch is summarized by a job of its own,
//! `summarize_branch`, requested here on the compaction queue under a
//! member of its own per abandoned leaf (one job however often it is
//! requested). The request is made after the database change committed;
//! when Redis does not take it the change stands (it is what the user
//! did), a warning is logged, and the reconciliation sweep requests the job
//! of the branch left without a summary (`reconcile`).

use compactor_shared::branch::{self, Attached};
use compactor_shared::context::BuiltContext;
use compactor_shared::{EntityKey, MessageId};
use serde::Serialize;
use tracing::warn;

use super::{AppendOutcome, ClientError, Compactor, IdempotencyKey, IncomingMessage};
use crate::queue::EnqueueOutcome;
use crate::store::{AbandonedBranch, BranchSummaryRow};

/// A branch the head left: `branch_point` (exclusive) to `leaf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BranchLeft {
    /// The old head.
    pub leaf: MessageId,
    /// The common ancestor of the old head and the new one: where the
    /// branch's summary is attached.
    pub branch_point: MessageId,
}

impl From<AbandonedBranch> for BranchLeft {
    fn from(b: AbandonedBranch) -> BranchLeft {
        BranchLeft {
            leaf: b.leaf,
            branch_point: b.branch_point,
        }
    }
}

/// What [`Compactor::move_head`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeadOutcome {
    /// The new head.
    pub head: MessageId,
    /// Estimated tokens of the un-compacted messages of the new path.
    pub uncompacted_tokens: u64,
    /// The branch left behind (`null`: the new head continues the old).
    pub abandoned: Option<BranchLeft>,
    /// The `summarize_branch` request for it (`null`: none was needed, or
    /// Redis did not take it).
    pub branch_job: Option<EnqueueOutcome>,
}

impl Compactor {
    /// [`Compactor::append_messages`] after `parent` (`None`: the head):
    /// the first message continues `parent`, and the head moves to the
    /// last one. A parent off the head's branch forks: the branch left is
    /// summarized by a `summarize_branch` job. A parent that is not the
    /// workstream's is refused (`StoreError::InvalidParent`), one folded
    /// by a compaction too (`StoreError::BehindCompaction`).
    pub async fn append_messages_after(
        &self,
        key: &EntityKey,
        parent: Option<MessageId>,
        messages: Vec<IncomingMessage>,
    ) -> Result<AppendOutcome, ClientError> {
        self.append_messages_at(key, parent, messages).await
    }

    /// [`Compactor::append_messages_once`] after `parent`.
    pub async fn append_messages_once_after(
        &self,
        key: &EntityKey,
        idempotency_key: &IdempotencyKey,
        parent: Option<MessageId>,
        messages: Vec<IncomingMessage>,
    ) -> Result<AppendOutcome, ClientError> {
        let messages = messages
            .into_iter()
            .enumerate()
            .map(|(i, mut m)| {
                if m.client_id.is_none() {
                    m.client_id = Some(idempotency_key.client_id(i));
                }
                m
            })
            .collect();
        self.append_messages_at(key, parent, messages).await
    }

    /// Moves the head of the workstream to `message_id` (a message of it,
    /// not folded by a compaction). Leaving a branch requests its summary.
    pub async fn move_head(
        &self,
        key: &EntityKey,
        message_id: MessageId,
    ) -> Result<HeadOutcome, ClientError> {
        let ws = self.workstream(key).await?;
        let moved = self.inner.store.move_head(ws.id, message_id).await?;
        let branch_job = self.request_branch_summary(key, moved.abandoned).await;
        Ok(HeadOutcome {
            head: moved.head,
            uncompacted_tokens: moved.uncompacted_tokens,
            abandoned: moved.abandoned.map(BranchLeft::from),
            branch_job,
        })
    }

    /// The workstream's branch summaries (every one, by branch point).
    pub async fn branch_summaries(
        &self,
        key: &EntityKey,
    ) -> Result<Vec<BranchSummaryRow>, ClientError> {
        let ws = self.workstream(key).await?;
        Ok(self.inner.store.branch_summaries(ws.id).await?)
    }

    /// Requests the `summarize_branch` job of a branch left; best effort
    /// (see the module docs).
    pub(super) async fn request_branch_summary(
        &self,
        key: &EntityKey,
        abandoned: Option<AbandonedBranch>,
    ) -> Option<EnqueueOutcome> {
        let branch = abandoned?;
        match self
            .inner
            .queue
            .request_branch_summary(key, branch.leaf, branch.branch_point)
            .await
        {
            Ok(outcome) => Some(outcome),
            Err(error) => {
                warn!(
                    domain = key.domain(),
                    leaf = branch.leaf.0,
                    error = %error,
                    "the branch summary could not be requested; the reconciliation sweep will request it"
                );
                None
            }
        }
    }

    /// The branch summaries of the current path as a context shows them.
    pub(super) fn attached(&self, summaries: &[BranchSummaryRow]) -> Vec<Attached> {
        summaries
            .iter()
            .map(|s| Attached {
                branch_point: s.branch_point,
                text: branch::render(&s.summary, &s.file_ops),
            })
            .collect()
    }

    /// `context` with the branch summaries of the current path attached
    /// after their branch points (none for a linear workstream: the
    /// context is unchanged).
    pub(super) fn with_branch_summaries(
        &self,
        attached: &[Attached],
        mut context: BuiltContext,
    ) -> BuiltContext {
        if !attached.is_empty() {
            branch::attach(&mut context, attached, &self.inner.estimator);
        }
        context
    }
}
