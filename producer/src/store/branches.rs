//! Message branches: the tree of a workstream's messages, its head, and
//! the summaries of the branches the head left.
//!
//! # The tree
//!
//! `messages.parent_id` names the message a message continues; NULL means
//! the workstream's previous message (the next lower id). Every message
//! stored before branches existed, and every append to a linear
//! workstream, has NULL: a linear workstream is one branch, and nothing
//! about it changes. `workstreams.head_message_id` is the leaf of the
//! current branch; NULL means linear (the newest message is the head).
//! The first append with a parent other than the head, or the first move
//! of the head, sets it; from then on the first message of each append
//! names its parent explicitly (the rest of the append continue it by id:
//! appends hold the row lock, so no other message of the workstream comes
//! between).
//!
//! # Branches and compaction
//!
//! A compaction folds messages of the current path only, up to its
//! watermark `W`, and marks every message up to `W` compacted (off-path
//! ones included) but the pinned ones it keeps. So the un-compacted
//! messages of the path are the kept ones before `W` and the head's
//! ancestors after it, and the head must always descend from `W`: a head
//! move (or an append's parent) that does not is refused
//! ([`StoreError::BehindCompaction`]), and one that abandons a branch while
//! a compaction holds the entity lease is refused too
//! ([`StoreError::CompactionRunning`], retry later): the compaction read the
//! path that was current when it started, and its commit must not fold a
//! branch the head has left. `uncompacted_tokens` counts the current path
//! only: a head move recounts it.
//!
//! Reading the tree loads the ids, parents and estimates of the
//! un-compacted messages (plus `W`): bounded by what compaction leaves,
//! and only for workstreams that have branched.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use compactor_shared::branch::FileOps;
use compactor_shared::{Message, MessageId};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use super::convert::{decode, encode, now, to_i64, to_u64};
use super::entities::{branch_summary, message, workstream};
use super::outbox::{insert_event, written};
use super::{HistoryWindow, NewEvent, Store, StoreError};

/// Ids per `IN (…)` list, under every backend's bound-parameter limit.
const ID_BATCH: usize = 500;

/// A branch the head left: from `branch_point` (exclusive, the common
/// ancestor with the new head) to `leaf` (the old head).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbandonedBranch {
    pub leaf: MessageId,
    pub branch_point: MessageId,
}

/// What [`Store::move_head`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadMoved {
    pub workstream_id: i64,
    pub head: MessageId,
    /// The branch left behind, if the new head does not descend from the
    /// old one: a `summarize_branch` job is due for it.
    pub abandoned: Option<AbandonedBranch>,
    /// `uncompacted_tokens` of the new current path.
    pub uncompacted_tokens: u64,
}

/// A stored branch summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchSummaryRow {
    pub id: i64,
    pub branch_point: MessageId,
    pub leaf: MessageId,
    pub summary: String,
    pub file_ops: FileOps,
    pub tokens: u64,
    /// Messages of the branch the summary read (the newest within budget).
    pub messages: u64,
    pub created_at: DateTime<Utc>,
}

/// A branch summary to store ([`Store::attach_branch_summary`]).
#[derive(Debug, Clone)]
pub struct NewBranchSummary<'a> {
    pub workstream_id: i64,
    pub branch: AbandonedBranch,
    pub summary: &'a str,
    pub file_ops: &'a FileOps,
    pub tokens: u64,
    pub messages: u64,
}

/// What a `summarize_branch` job reads ([`Store::branch_input`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchInput {
    /// The abandoned messages, `(id, estimate)`, oldest first (branch
    /// point excluded, leaf included).
    pub segment: Vec<(MessageId, u64)>,
    /// Summaries the user saw on the abandoned path that the new summary
    /// carries on (their file operations are cumulative): attached at the
    /// branch point or on the segment, of branches off it.
    pub carried: Vec<BranchSummaryRow>,
    /// The branch is summarized already (a repeated job).
    pub done: bool,
}

/// The head, watermark and lease of a workstream, read under its row lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tip {
    pub head: Option<i64>,
    pub last: Option<i64>,
    pub watermark: Option<i64>,
    /// `is_compacting`: a compaction took the lease…
    pub compacting: bool,
    /// …until then, unless renewed (ms since the epoch).
    pub lease_deadline_ms: Option<i64>,
}

impl Tip {
    /// The head, linear or not.
    fn current(&self) -> Option<i64> {
        self.head.or(self.last)
    }

    /// Whether a compaction holds the lease now: taken, and renewed in
    /// time. A lease its holder stopped renewing (the worker died, or lost
    /// the database for longer than the lease) is left over, not a
    /// compaction running.
    fn compaction_running(&self, now_ms: i64) -> bool {
        self.compacting && self.lease_deadline_ms.is_some_and(|d| d >= now_ms)
    }
}

/// Whether a change that abandons a branch can go ahead: refused while a
/// compaction runs (it is folding the current path); a leftover lease is
/// released first, under the row lock, so its holder — should it be alive
/// after all — fails its commit's fence instead of folding the branch the
/// change leaves.
async fn clear_to_abandon<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    tip: &Tip,
    op: &'static str,
) -> Result<(), StoreError> {
    let now_ms = super::convert::now_ms();
    if tip.compaction_running(now_ms) {
        return Err(StoreError::CompactionRunning { op });
    }
    if tip.compacting {
        super::lease::release(workstream::Entity::update_many())
            .filter(workstream::Column::Id.eq(workstream_id))
            .exec(db)
            .await
            .map_err(StoreError::db(op))?;
    }
    Ok(())
}

async fn tip<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    op: &'static str,
) -> Result<Tip, StoreError> {
    /// Head, newest message, watermark, compacting, lease deadline.
    type Row = (Option<i64>, Option<i64>, Option<i64>, bool, Option<i64>);
    let row: Option<Row> = workstream::Entity::find_by_id(workstream_id)
        .select_only()
        .column(workstream::Column::HeadMessageId)
        .column(workstream::Column::LastMessageId)
        .column(workstream::Column::LastCompactedMessageId)
        .column(workstream::Column::IsCompacting)
        .column(workstream::Column::LeaseDeadlineMs)
        .into_tuple()
        .one(db)
        .await
        .map_err(StoreError::db(op))?;
    let (head, last, watermark, compacting, lease_deadline_ms) =
        row.ok_or(StoreError::UnknownWorkstream { op, workstream_id })?;
    Ok(Tip {
        head,
        last,
        watermark,
        compacting,
        lease_deadline_ms,
    })
}

/// One message of the tree: its explicit parent and estimate.
#[derive(Debug, Clone, Copy)]
struct Node {
    parent: Option<i64>,
    tokens: i64,
    compacted: bool,
}

/// Messages by id with their parents: a parent NULL is the next lower id
/// of the map, which is exact as long as the map holds every message of
/// the id range the walk crosses.
#[derive(Debug, Default)]
struct Tree {
    nodes: BTreeMap<i64, Node>,
}

impl Tree {
    fn parent(&self, id: i64) -> Option<i64> {
        let node = self.nodes.get(&id)?;
        node.parent
            .or_else(|| self.nodes.range(..id).next_back().map(|(&p, _)| p))
    }

    /// `id` and its ancestors in the map, newest first, while `above(id)`.
    fn walk(&self, from: i64, above: impl Fn(i64) -> bool) -> Vec<i64> {
        let mut out = Vec::new();
        let mut at = Some(from);
        while let Some(id) = at {
            if !above(id) || !self.nodes.contains_key(&id) {
                break;
            }
            out.push(id);
            at = self.parent(id);
        }
        out
    }

    /// The first id at or below the watermark that `from`'s ancestry
    /// reaches (`None`: it ends at a root first).
    fn reaches(&self, from: i64, watermark: i64) -> Option<i64> {
        let mut at = Some(from);
        while let Some(id) = at {
            if id <= watermark {
                return Some(id);
            }
            at = self.parent(id);
        }
        None
    }
}

/// The un-compacted messages of the workstream, and the watermark message.
async fn load_tree<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    watermark: Option<i64>,
    op: &'static str,
) -> Result<Tree, StoreError> {
    let mut condition = sea_orm::Condition::any().add(super::compacted::uncompacted_of(
        db.get_database_backend(),
        workstream_id,
    ));
    if let Some(w) = watermark {
        condition = condition.add(message::Column::Id.eq(w));
    }
    load_where(db, workstream_id, condition, op).await
}

/// Every message of the workstream with an id in `[from, to]` (a
/// contiguous range: implicit parents are exact within it).
async fn load_range<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    from: i64,
    to: i64,
    op: &'static str,
) -> Result<Tree, StoreError> {
    let range = sea_orm::Condition::all().add(message::Column::Id.between(from, to));
    load_where(db, workstream_id, range, op).await
}

/// The tree of the workstream's messages that match `condition`: ids,
/// parents, estimates and whether each is compacted (no content).
async fn load_where<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    condition: sea_orm::Condition,
    op: &'static str,
) -> Result<Tree, StoreError> {
    let rows: Vec<(i64, Option<i64>, i64, bool)> = message::Entity::find()
        .select_only()
        .column(message::Column::Id)
        .column(message::Column::ParentId)
        .column(message::Column::TokenEstimate)
        .expr_as(
            super::compacted::compacted_of(db.get_database_backend(), workstream_id),
            "compacted",
        )
        .filter(message::Column::WorkstreamId.eq(workstream_id))
        .filter(condition)
        .into_tuple()
        .all(db)
        .await
        .map_err(StoreError::db(op))?;
    Ok(Tree {
        nodes: rows
            .into_iter()
            .map(|(id, parent, tokens, compacted)| {
                (
                    id,
                    Node {
                        parent,
                        tokens,
                        compacted,
                    },
                )
            })
            .collect(),
    })
}

/// The un-compacted messages of the path root → `head`, `(id, estimate)`
/// oldest first: the pinned ones kept before the watermark, and the
/// head's ancestors after it.
fn path_of(tree: &Tree, head: Option<i64>, watermark: Option<i64>) -> Vec<(i64, i64)> {
    let w = watermark.unwrap_or(i64::MIN);
    let mut ids: Vec<i64> = tree
        .nodes
        .iter()
        .filter(|&(&id, node)| id <= w && !node.compacted)
        .map(|(&id, _)| id)
        .collect();
    if let Some(head) = head {
        let mut above = tree.walk(head, |id| id > w);
        above.reverse();
        ids.extend(above);
    }
    ids.into_iter()
        .filter_map(|id| tree.nodes.get(&id).map(|n| (id, n.tokens)))
        .collect()
}

/// Whether `id` may be a head: it is the watermark or descends from it.
fn descends_from_watermark(tree: &Tree, id: i64, watermark: Option<i64>) -> bool {
    match watermark {
        None => true,
        Some(w) => tree.reaches(id, w) == Some(w),
    }
}

/// The branch left when the head moves from `old` to `new`: `None` when
/// `new` descends from `old` (or is it).
fn abandoned_by(
    tree: &Tree,
    old: i64,
    new: i64,
    watermark: Option<i64>,
) -> Option<AbandonedBranch> {
    let w = watermark.unwrap_or(i64::MIN);
    let mut old_line: HashSet<i64> = tree.walk(old, |id| id > w).into_iter().collect();
    if old_line.is_empty() {
        // The old head is the watermark (or below): an ancestor of every
        // allowed head.
        return None;
    }
    if let Some(w) = watermark {
        old_line.insert(w);
    }
    let mut at = Some(new);
    let mut common = watermark;
    while let Some(id) = at {
        if old_line.contains(&id) {
            common = Some(id);
            break;
        }
        if id <= w {
            break;
        }
        at = tree.parent(id);
    }
    let common = common?;
    (common != old).then_some(AbandonedBranch {
        leaf: MessageId(old),
        branch_point: MessageId(common),
    })
}

/// What an append does to the tree ([`plan_append`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AppendPlan {
    /// `parent_id` of the first new message.
    pub first_parent: Option<i64>,
    /// The workstream is (or becomes) branched: the head moves to the
    /// newest new message.
    pub branched: bool,
    /// `uncompacted_tokens` must be recounted (the path changed beyond
    /// the appended messages).
    pub recount: bool,
    pub abandoned: Option<AbandonedBranch>,
}

/// Decides, under the row lock, where an append with `parent` goes. No
/// parent: after the head. A parent: it must be a message of the
/// workstream ([`StoreError::InvalidParent`]) at or after the watermark
/// ([`StoreError::BehindCompaction`]); a parent that is not the head
/// forks, abandoning the old head's branch unless the parent descends
/// from it.
///
/// `tip` is the workstream's, read by the statement that took the row
/// lock (the append's first): no statement of its own for an append
/// without a parent, the chat's common case.
pub(crate) async fn plan_append<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    tip: &Tip,
    parent: Option<MessageId>,
    op: &'static str,
) -> Result<AppendPlan, StoreError> {
    let tip = *tip;
    let Some(parent) = parent.map(|p| p.0) else {
        return Ok(AppendPlan {
            first_parent: tip.head,
            branched: tip.head.is_some(),
            ..AppendPlan::default()
        });
    };
    let exists = message::Entity::find_by_id(parent)
        .filter(message::Column::WorkstreamId.eq(workstream_id))
        .select_only()
        .column(message::Column::Id)
        .into_tuple::<i64>()
        .one(db)
        .await
        .map_err(StoreError::db(op))?
        .is_some();
    if !exists {
        return Err(StoreError::InvalidParent {
            op,
            workstream_id,
            message_id: MessageId(parent),
        });
    }
    if tip.head.is_none() && tip.last == Some(parent) {
        // Continuing a linear workstream: it stays linear.
        return Ok(AppendPlan::default());
    }
    let tree = load_tree(db, workstream_id, tip.watermark, op).await?;
    if !descends_from_watermark(&tree, parent, tip.watermark) {
        return Err(StoreError::BehindCompaction {
            op,
            message_id: MessageId(parent),
        });
    }
    let abandoned = tip
        .current()
        .and_then(|old| abandoned_by(&tree, old, parent, tip.watermark));
    if abandoned.is_some() {
        clear_to_abandon(db, workstream_id, &tip, op).await?;
    }
    Ok(AppendPlan {
        first_parent: Some(parent),
        branched: true,
        recount: tip.current() != Some(parent),
        abandoned,
    })
}

/// `uncompacted_tokens` of the path ending at `newest` (an append's
/// newest message, inserted already), for an append whose plan says
/// [`AppendPlan::recount`]: the path changed beyond the appended messages.
pub(crate) async fn path_tokens<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    watermark: Option<i64>,
    newest: i64,
    op: &'static str,
) -> Result<i64, StoreError> {
    let tree = load_tree(db, workstream_id, watermark, op).await?;
    Ok(path_of(&tree, Some(newest), watermark)
        .iter()
        .map(|&(_, t)| t.max(0))
        .sum())
}

/// The current path's un-compacted messages, `(id, estimate)` oldest
/// first; `None` for a linear workstream (read as before).
pub(crate) async fn current_path<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    op: &'static str,
) -> Result<Option<Vec<(i64, i64)>>, StoreError> {
    let tip = tip(db, workstream_id, op).await?;
    if tip.head.is_none() {
        return Ok(None);
    }
    let tree = load_tree(db, workstream_id, tip.watermark, op).await?;
    Ok(Some(path_of(&tree, tip.head, tip.watermark)))
}

impl Store {
    /// Moves the head of the workstream to `message_id`, in one
    /// transaction under the row lock, and recounts `uncompacted_tokens`
    /// for the new path. The message must be the workstream's
    /// ([`StoreError::UnknownMessage`]) and descend from the watermark
    /// ([`StoreError::BehindCompaction`]); a move that abandons a branch
    /// is refused while a compaction holds the lease
    /// ([`StoreError::CompactionRunning`]). The branch left behind, if
    /// any, is returned for its `summarize_branch` job.
    pub async fn move_head(
        &self,
        workstream_id: i64,
        message_id: MessageId,
    ) -> Result<HeadMoved, StoreError> {
        const OP: &str = "move_head";
        let txn = self.begin_write(OP).await?;
        workstream::Entity::update_many()
            .col_expr(workstream::Column::UpdatedAt, Expr::value(now()))
            .filter(workstream::Column::Id.eq(workstream_id))
            .exec(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        let tip = tip(&txn, workstream_id, OP).await?;
        let exists = super::messages::estimate_of(&txn, workstream_id, message_id, OP)
            .await?
            .is_some();
        if !exists {
            return Err(StoreError::UnknownMessage {
                op: OP,
                workstream_id,
                message_id,
            });
        }
        let tree = load_tree(&txn, workstream_id, tip.watermark, OP).await?;
        if !descends_from_watermark(&tree, message_id.0, tip.watermark) {
            return Err(StoreError::BehindCompaction { op: OP, message_id });
        }
        let abandoned = tip
            .current()
            .and_then(|old| abandoned_by(&tree, old, message_id.0, tip.watermark));
        if abandoned.is_some() {
            clear_to_abandon(&txn, workstream_id, &tip, OP).await?;
        }
        let tokens: i64 = path_of(&tree, Some(message_id.0), tip.watermark)
            .iter()
            .map(|&(_, t)| t.max(0))
            .sum();
        workstream::Entity::update_many()
            .col_expr(
                workstream::Column::HeadMessageId,
                Expr::value(Some(message_id.0)),
            )
            .col_expr(workstream::Column::UncompactedTokens, Expr::value(tokens))
            .col_expr(workstream::Column::JustAutoCompacted, Expr::value(false))
            .filter(workstream::Column::Id.eq(workstream_id))
            .exec(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        txn.commit().await.map_err(StoreError::db(OP))?;
        Ok(HeadMoved {
            workstream_id,
            head: message_id,
            abandoned,
            uncompacted_tokens: to_u64(tokens),
        })
    }

    /// The head of the workstream: `None` while it is linear (the newest
    /// message is the head).
    pub async fn head(&self, workstream_id: i64) -> Result<Option<MessageId>, StoreError> {
        Ok(tip(&self.db, workstream_id, "head")
            .await?
            .head
            .map(MessageId))
    }

    /// Messages by id (of the workstream), oldest first; ids that are not
    /// its are left out.
    pub async fn messages_by_ids(
        &self,
        workstream_id: i64,
        ids: &[MessageId],
    ) -> Result<Vec<Message>, StoreError> {
        const OP: &str = "messages_by_ids";
        let mut out = Vec::with_capacity(ids.len());
        for batch in ids.chunks(ID_BATCH) {
            let rows = message::Entity::find()
                .filter(message::Column::WorkstreamId.eq(workstream_id))
                .filter(message::Column::Id.is_in(batch.iter().map(|id| id.0)))
                .order_by_asc(message::Column::Id)
                .all(&self.db)
                .await
                .map_err(StoreError::db(OP))?;
            for row in rows {
                out.push(super::messages::to_message(row)?);
            }
        }
        out.sort_by_key(|m| m.id);
        Ok(out)
    }

    /// The branch summaries a context of the current path shows: attached
    /// at a message of the path, of a branch off it (not of the branch the
    /// head is on, which shows itself). Empty for a linear workstream.
    /// Ordered by branch point.
    pub async fn branch_summaries_on_path(
        &self,
        workstream_id: i64,
    ) -> Result<Vec<BranchSummaryRow>, StoreError> {
        const OP: &str = "branch_summaries_on_path";
        let tip = tip(&self.db, workstream_id, OP).await?;
        let Some(head) = tip.head else {
            return Ok(Vec::new());
        };
        let all = summaries(&self.db, workstream_id, OP).await?;
        let Some(oldest) = all.iter().map(|s| s.branch_point.0).min() else {
            return Ok(Vec::new());
        };
        let tree = load_tree(&self.db, workstream_id, tip.watermark, OP).await?;
        let w = tip.watermark.unwrap_or(i64::MIN);
        let mut on_path: HashSet<i64> = tree.walk(head, |id| id > w).into_iter().collect();
        if let Some(w) = tip.watermark.filter(|&w| w >= oldest) {
            // Below the watermark the tree holds only what compaction
            // kept: walk the full range the summaries need.
            let range = load_range(&self.db, workstream_id, oldest, w, OP).await?;
            on_path.extend(range.walk(w, |id| id >= oldest));
        }
        Ok(all
            .into_iter()
            .filter(|s| on_path.contains(&s.branch_point.0) && !on_path.contains(&s.leaf.0))
            .collect())
    }

    /// What a `summarize_branch` job reads: the abandoned messages (walked
    /// from `leaf` back to `branch_point`, compacted ones included: their
    /// text is kept) and the summaries it carries on. A `branch_point`
    /// that is not an ancestor of `leaf` is a [`StoreError::UnknownMessage`]
    /// (the payload names no branch of this workstream).
    pub async fn branch_input(
        &self,
        workstream_id: i64,
        branch: AbandonedBranch,
    ) -> Result<BranchInput, StoreError> {
        const OP: &str = "branch_input";
        let (leaf, point) = (branch.leaf.0, branch.branch_point.0);
        let not_a_branch = || StoreError::UnknownMessage {
            op: OP,
            workstream_id,
            message_id: branch.branch_point,
        };
        if point >= leaf {
            return Err(not_a_branch());
        }
        let range = load_range(&self.db, workstream_id, point, leaf, OP).await?;
        let mut walked = range.walk(leaf, |id| id > point);
        if range.parent(*walked.last().ok_or_else(not_a_branch)?) != Some(point)
            || !range.nodes.contains_key(&point)
        {
            return Err(not_a_branch());
        }
        walked.reverse();
        let segment: Vec<(MessageId, u64)> = walked
            .iter()
            .filter_map(|id| {
                range
                    .nodes
                    .get(id)
                    .map(|n| (MessageId(*id), to_u64(n.tokens)))
            })
            .collect();
        let on_segment: HashSet<i64> = walked.into_iter().collect();
        let all = summaries(&self.db, workstream_id, OP).await?;
        let done = all.iter().any(|s| s.leaf == branch.leaf);
        let carried = all
            .into_iter()
            .filter(|s| {
                (s.branch_point.0 == point || on_segment.contains(&s.branch_point.0))
                    && !on_segment.contains(&s.leaf.0)
                    && s.leaf != branch.leaf
            })
            .collect();
        Ok(BranchInput {
            segment,
            carried,
            done,
        })
    }

    /// Stores a branch summary at its branch point and writes `event` to
    /// the outbox in the same transaction. Once per abandoned leaf: a
    /// summary of a leaf that has one already writes nothing and returns
    /// `false`.
    pub async fn attach_branch_summary(
        &self,
        summary: &NewBranchSummary<'_>,
        event: &NewEvent,
    ) -> Result<bool, StoreError> {
        const OP: &str = "attach_branch_summary";
        let file_ops = encode(OP, "file operations", summary.file_ops)?;
        let txn = self.begin_write(OP).await?;
        let exists = branch_summary::Entity::find()
            .filter(branch_summary::Column::WorkstreamId.eq(summary.workstream_id))
            .filter(branch_summary::Column::LeafId.eq(summary.branch.leaf.0))
            .select_only()
            .column(branch_summary::Column::Id)
            .into_tuple::<i64>()
            .one(&txn)
            .await
            .map_err(StoreError::db(OP))?
            .is_some();
        if exists {
            txn.rollback().await.map_err(StoreError::db(OP))?;
            return Ok(false);
        }
        let row = branch_summary::ActiveModel {
            workstream_id: Set(summary.workstream_id),
            branch_point_id: Set(summary.branch.branch_point.0),
            leaf_id: Set(summary.branch.leaf.0),
            summary: Set(summary.summary.to_owned()),
            file_ops: Set(file_ops),
            tokens: Set(to_i64(summary.tokens)),
            messages: Set(to_i64(summary.messages)),
            created_at: Set(now()),
            ..Default::default()
        };
        let inserted = branch_summary::Entity::insert(row)
            .on_conflict_do_nothing_on([
                branch_summary::Column::WorkstreamId,
                branch_summary::Column::LeafId,
            ])
            .exec_without_returning(&txn)
            .await
            .map_err(StoreError::db(OP))?;
        if !matches!(inserted, sea_orm::TryInsertResult::Inserted(n) if n > 0) {
            txn.rollback().await.map_err(StoreError::db(OP))?;
            return Ok(false);
        }
        let id = insert_event(&txn, event, OP).await?;
        txn.commit().await.map_err(StoreError::db(OP))?;
        written(event.kind, &id);
        Ok(true)
    }

    /// The branches the head has left that have no summary: each leaf of
    /// the un-compacted tree other than the head, with its branch point
    /// (where its line meets the current path). Their `summarize_branch`
    /// jobs are requested after the change that left them commits, best
    /// effort; the reconciliation sweep requests the ones Redis did not
    /// take. Empty for a linear workstream.
    pub async fn unsummarized_branches(
        &self,
        workstream_id: i64,
    ) -> Result<Vec<AbandonedBranch>, StoreError> {
        const OP: &str = "unsummarized_branches";
        let tip = tip(&self.db, workstream_id, OP).await?;
        let Some(head) = tip.head else {
            return Ok(Vec::new());
        };
        let tree = load_tree(&self.db, workstream_id, tip.watermark, OP).await?;
        let w = tip.watermark.unwrap_or(i64::MIN);
        let parents: HashSet<i64> = tree
            .nodes
            .keys()
            .filter_map(|&id| tree.parent(id))
            .collect();
        let left: Vec<AbandonedBranch> = tree
            .nodes
            .keys()
            .filter(|&&id| id > w && id != head && !parents.contains(&id))
            .filter_map(|&leaf| abandoned_by(&tree, leaf, head, tip.watermark))
            .collect();
        if left.is_empty() {
            return Ok(left);
        }
        let summarized: HashSet<i64> = branch_summary::Entity::find()
            .filter(branch_summary::Column::WorkstreamId.eq(workstream_id))
            .select_only()
            .column(branch_summary::Column::LeafId)
            .into_tuple::<i64>()
            .all(&self.db)
            .await
            .map_err(StoreError::db(OP))?
            .into_iter()
            .collect();
        Ok(left
            .into_iter()
            .filter(|b| !summarized.contains(&b.leaf.0))
            .collect())
    }

    /// Every branch summary of the workstream, by branch point.
    pub async fn branch_summaries(
        &self,
        workstream_id: i64,
    ) -> Result<Vec<BranchSummaryRow>, StoreError> {
        summaries(&self.db, workstream_id, "branch_summaries").await
    }

    /// [`Store::uncompacted_page`] of a branched workstream: the next
    /// `limit` messages of the current path after `after`.
    pub(crate) async fn path_page(
        &self,
        path: &[(i64, i64)],
        workstream_id: i64,
        after: Option<MessageId>,
        limit: u64,
    ) -> Result<Vec<Message>, StoreError> {
        let after = after.map_or(i64::MIN, |a| a.0);
        let ids: Vec<MessageId> = path
            .iter()
            .filter(|&&(id, _)| id > after)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|&(id, _)| MessageId(id))
            .collect();
        self.messages_by_ids(workstream_id, &ids).await
    }
}

/// [`Store::uncompacted_window`] of a branched workstream, over its path:
/// the newest of the path within the bound, and what it leaves out.
pub(crate) fn path_window(
    path: &[(i64, i64)],
    max_messages: u64,
    max_tokens: u64,
) -> HistoryWindow {
    let bound = super::HistoryBound {
        max_messages,
        max_tokens,
    };
    let mut window = super::messages::newest_within(path.iter().rev().copied(), bound);
    let kept = usize::try_from(window.messages).unwrap_or(path.len());
    let left_out = &path[..path.len().saturating_sub(kept)];
    window.omitted_messages = left_out.len() as u64;
    window.omitted_tokens = left_out.iter().map(|&(_, t)| to_u64(t)).sum();
    window
}

/// How many of the path's messages after `after` a page bounded by
/// `limit` and `max_tokens` takes (at least one, if any).
pub(crate) fn path_take(
    path: &[(i64, i64)],
    after: Option<MessageId>,
    limit: u64,
    max_tokens: u64,
) -> u64 {
    let after = after.map_or(i64::MIN, |a| a.0);
    let mut total: u64 = 0;
    let mut take: u64 = 0;
    for &(_, tokens) in path.iter().filter(|&&(id, _)| id > after) {
        if take == limit {
            break;
        }
        let tokens = to_u64(tokens);
        if take > 0 && total.saturating_add(tokens) > max_tokens {
            break;
        }
        total = total.saturating_add(tokens);
        take += 1;
    }
    take
}

async fn summaries<C: ConnectionTrait>(
    db: &C,
    workstream_id: i64,
    op: &'static str,
) -> Result<Vec<BranchSummaryRow>, StoreError> {
    branch_summary::Entity::find()
        .filter(branch_summary::Column::WorkstreamId.eq(workstream_id))
        .order_by_asc(branch_summary::Column::BranchPointId)
        .order_by_asc(branch_summary::Column::Id)
        .all(db)
        .await
        .map_err(StoreError::db(op))?
        .into_iter()
        .map(|m| {
            Ok(BranchSummaryRow {
                id: m.id,
                branch_point: MessageId(m.branch_point_id),
                leaf: MessageId(m.leaf_id),
                file_ops: decode("branch_summaries", m.id, "file_ops", &m.file_ops)?,
                summary: m.summary,
                tokens: to_u64(m.tokens),
                messages: to_u64(m.messages),
                created_at: m.created_at,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree of `(id, explicit parent)`.
    fn tree(nodes: &[(i64, Option<i64>)]) -> Tree {
        Tree {
            nodes: nodes
                .iter()
                .map(|&(id, parent)| {
                    (
                        id,
                        Node {
                            parent,
                            tokens: 10,
                            compacted: false,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn a_null_parent_is_the_previous_message() {
        let t = tree(&[(1, None), (2, None), (3, Some(1)), (4, None)]);
        assert_eq!(t.parent(2), Some(1));
        assert_eq!(t.parent(3), Some(1));
        assert_eq!(t.parent(4), Some(3));
        assert_eq!(t.parent(1), None);
        let path: Vec<i64> = path_of(&t, Some(4), None).iter().map(|p| p.0).collect();
        assert_eq!(path, [1, 3, 4]);
    }

    #[test]
    fn moving_back_abandons_the_branch_to_the_common_ancestor() {
        // 1 - 2 - 3 (old head); 2 - 4.
        let t = tree(&[(1, None), (2, None), (3, None), (4, Some(2))]);
        assert_eq!(
            abandoned_by(&t, 3, 4, None),
            Some(AbandonedBranch {
                leaf: MessageId(3),
                branch_point: MessageId(2)
            })
        );
        assert_eq!(
            abandoned_by(&t, 3, 2, None),
            Some(AbandonedBranch {
                leaf: MessageId(3),
                branch_point: MessageId(2)
            })
        );
        // Forward (to a descendant) or staying abandons nothing.
        assert_eq!(abandoned_by(&t, 2, 3, None), None);
        assert_eq!(abandoned_by(&t, 3, 3, None), None);
    }

    #[test]
    fn heads_must_descend_from_the_watermark() {
        // 1 - 2 (watermark) - 4; 1 - 3.
        let t = tree(&[(2, None), (3, Some(1)), (4, Some(2))]);
        assert!(descends_from_watermark(&t, 4, Some(2)));
        assert!(descends_from_watermark(&t, 2, Some(2)));
        assert!(!descends_from_watermark(&t, 3, Some(2)));
    }

    #[test]
    fn windows_and_pages_of_a_path_are_bounded() {
        let path = [(1, 10), (3, 10), (7, 10)];
        let w = path_window(&path, 2, 1_000);
        assert_eq!(w.first, Some(MessageId(3)));
        assert_eq!(
            (w.messages, w.omitted_messages, w.omitted_tokens),
            (2, 1, 10)
        );
        let w = path_window(&path, 10, 15);
        assert_eq!(w.first, Some(MessageId(7)));
        assert_eq!(path_take(&path, Some(MessageId(1)), 10, 1_000), 2);
        assert_eq!(path_take(&path, None, 10, 15), 1);
        assert_eq!(path_take(&path, Some(MessageId(7)), 10, 15), 0);
    }
}
