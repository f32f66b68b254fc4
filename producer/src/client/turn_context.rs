//! The next turn's context: [`Compactor::build_context`], and the same
//! context as the JSON the admin API answers with
//! ([`Compactor::context_json`]).
//!
//! A linear workstream's history is kept between reads ([`super::kept_tails`]):
//! a turn reads from the database only the messages appended since the
//! turn before, and its JSON copies the kept messages as they were written
//! when they were read. What the last compaction left (the summary, the
//! state and the preamble's text of it) is kept too, and read again only
//! after a commit ([`super::kept_compacted`]).

use std::io::Write;
use std::sync::Arc;

use compactor_shared::branch;
use compactor_shared::context::{self, ContextInput, TailContext};
use compactor_shared::{EntityKey, MessageId};

use super::kept_compacted::Parts;
use super::kept_tails::{Kept, Stamp};
use super::{ClientError, Compactor, TurnContext};
use crate::events::{HistoryTruncated, InternalEvent};
use crate::store::{BranchSummaryRow, ContextHistory, HistoryWindow, WorkstreamRow};

/// A turn's un-compacted history.
enum History {
    /// Kept between reads: put back once the context is built.
    Kept(Box<Kept>),
    /// Read whole: branched, or nothing is kept.
    Read(ContextHistory),
}

/// What a turn's context is built from.
struct TurnReads {
    /// The row without its summary and state: those are `compacted`.
    ws: WorkstreamRow,
    compacted: Arc<Parts>,
    history: History,
    entries: Vec<String>,
    summaries: Vec<BranchSummaryRow>,
}

impl Compactor {
    /// What to send the model next: the summary, state, exact values and
    /// memory as the first message, then the un-compacted messages (tool
    /// halves whose partner is gone turned into text; the summary shrunk if
    /// the whole would overflow the window).
    ///
    /// The un-compacted messages loaded are bounded (`[database]
    /// context_max_messages` / `context_max_tokens`): past the bound only
    /// the newest are loaded, and the result says so
    /// ([`TurnContext::truncated`], with what was left out) — never a
    /// silent cut, and never of the newest messages.
    ///
    /// A linear workstream's history is kept between reads (`[database]
    /// context_cache_bytes`): only what was appended since is read.
    pub async fn build_context(&self, key: &EntityKey) -> Result<TurnContext, ClientError> {
        let reads = self.turn_reads(key).await?;
        Ok(self.turn_of(reads))
    }

    /// [`Compactor::build_context`] as JSON: the bytes `serde_json` writes
    /// for the [`TurnContext`], what `GET …/context` answers. A kept
    /// history's messages are copied as they were written when read.
    pub async fn context_json(&self, key: &EntityKey) -> Result<Vec<u8>, ClientError> {
        let reads = self.turn_reads(key).await?;
        match reads.history {
            History::Kept(kept) if reads.summaries.is_empty() => self
                .over_kept(
                    &reads.ws,
                    &reads.compacted,
                    &reads.entries,
                    0,
                    *kept,
                    kept_json,
                )
                .map_err(ClientError::Encode),
            _ => serde_json::to_vec(&self.turn_of(reads)).map_err(ClientError::Encode),
        }
    }

    /// `f` of the context over a kept history and its window (said in the
    /// log when it left messages out); the history is then put back.
    fn over_kept<R>(
        &self,
        ws: &WorkstreamRow,
        compacted: &Parts,
        entries: &[String],
        reserved: u64,
        kept: Kept,
        f: impl FnOnce(&TailContext<'_>, &HistoryWindow) -> R,
    ) -> R {
        let input = self.input(ws, compacted, entries, reserved);
        let window = kept.window();
        if window.truncated() {
            truncated(ws, &window);
        }
        let context = kept
            .tail
            .context(&input, &self.inner.engine.context, &self.inner.estimator);
        let result = f(&context, &window);
        self.inner.tails.put(ws.id, kept);
        result
    }

    /// The workstream, then its history, memory entries and branch
    /// summaries: three independent reads, each on a pooled connection of
    /// its own, so the turn waits for the slowest, not for their sum.
    async fn turn_reads(&self, key: &EntityKey) -> Result<TurnReads, ClientError> {
        let (ws, compacted) = self.lean_workstream(key).await?;
        let store = &self.inner.store;
        let (history, entries, summaries) = tokio::try_join!(
            self.history(&ws),
            async { Ok(store.unfolded_memory_entries(ws.id).await?) },
            async { Ok(store.branch_summaries_on_path(ws.id).await?) },
        )?;
        Ok(TurnReads {
            compacted,
            history,
            entries: entries.into_iter().map(|e| e.content).collect(),
            summaries,
            ws,
        })
    }

    /// The workstream of `key` without its summary and state, and those as
    /// its last commit left them: kept from an earlier read at the same id
    /// and version, else read with the row (and kept).
    async fn lean_workstream(
        &self,
        key: &EntityKey,
    ) -> Result<(WorkstreamRow, Arc<Parts>), ClientError> {
        let cache = &self.inner.compacted;
        let store = &self.inner.store;
        let kept = cache.get(key);
        let known = kept.as_ref().map(|p| (p.id, p.version));
        let unknown = || ClientError::UnknownWorkstream(key.clone());
        let (ws, read) = store
            .workstream_unless(key, known)
            .await?
            .ok_or_else(unknown)?;
        let parts = match (read, kept) {
            (Some(read), _) => {
                let parts = Arc::new(Parts::new(ws.id, ws.version, read));
                cache.put(key, parts.clone());
                parts
            }
            (None, Some(kept)) => kept,
            // Left out only when kept: not reached, but read, not failed.
            (None, None) => {
                let (ws, read) = store
                    .workstream_unless(key, None)
                    .await?
                    .ok_or_else(unknown)?;
                let parts = Arc::new(Parts::new(ws.id, ws.version, read.ok_or_else(unknown)?));
                return Ok((ws, parts));
            }
        };
        Ok((ws, parts))
    }

    /// What the context of `ws` is built from; `reserved`: tokens added
    /// after the build (branch summaries), which the overflow guard leaves
    /// room for.
    fn input<'a>(
        &self,
        ws: &'a WorkstreamRow,
        compacted: &'a Parts,
        entries: &'a [String],
        reserved: u64,
    ) -> ContextInput<'a> {
        let engine = &self.inner.engine;
        ContextInput {
            summary: compacted.summary.as_ref(),
            state: &compacted.state,
            memory_block_summary: ws.memory_block_summary.as_deref(),
            memory_entries: entries,
            messages: &[],
            just_auto_compacted: ws.just_auto_compacted,
            context_window: context::window_leaving(
                engine.trigger.context_window(),
                reserved,
                engine.context.overflow_guard_ratio,
            ),
            state_text: Some(compacted.state_text()),
        }
    }

    /// The context of `reads` (a kept history is put back).
    fn turn_of(&self, reads: TurnReads) -> TurnContext {
        let TurnReads {
            ws,
            compacted,
            history,
            entries,
            summaries,
        } = reads;
        // The branch summaries are attached after the build; the overflow
        // guard counts them.
        let attached = self.attached(&summaries);
        let reserved = branch::tokens(&attached, &self.inner.estimator);
        let (context, window) = match history {
            History::Kept(kept) => {
                self.over_kept(&ws, &compacted, &entries, reserved, *kept, |c, w| {
                    (c.to_built(), *w)
                })
            }
            History::Read(read) => {
                if read.window.truncated() {
                    truncated(&ws, &read.window);
                }
                let engine = &self.inner.engine;
                let input = self.input(&ws, &compacted, &entries, reserved);
                let estimator = &self.inner.estimator;
                let built = context::build_owned(&input, read.messages, &engine.context, estimator);
                (built, read.window)
            }
        };
        TurnContext {
            context: self.with_branch_summaries(&attached, context),
            truncated: window.truncated(),
            omitted_messages: window.omitted_messages,
            omitted_tokens: window.omitted_tokens,
        }
    }

    /// The workstream's un-compacted history: its kept history caught up
    /// when there is one at the workstream's stamp, else read whole (and
    /// kept when the workstream is linear).
    async fn history(&self, ws: &WorkstreamRow) -> Result<History, ClientError> {
        let store = &self.inner.store;
        let tails = &self.inner.tails;
        let keepable = tails.keeps() && ws.head_message_id.is_none();
        let stamp = Stamp {
            version: ws.version,
            compacted_to: ws.last_compacted_message_id,
        };
        if keepable {
            if let Some(mut kept) = tails.take(ws.id, stamp) {
                if self.catch_up(ws, &mut kept).await? {
                    return Ok(History::Kept(Box::new(kept)));
                }
            }
        }
        let read = store.context_history(ws).await?;
        if !keepable {
            return Ok(History::Read(read));
        }
        // Every message up to the newest the row names is committed (see
        // `kept_tails`); the read may have seen newer ones too.
        let upto = read
            .messages
            .last()
            .map(|m| m.id)
            .max(ws.last_message_id)
            .unwrap_or(MessageId(0));
        let bound = store.history_bound();
        match Kept::new(stamp, upto, read, bound, &self.inner.estimator) {
            Ok(kept) => Ok(History::Kept(Box::new(kept))),
            Err(read) => Ok(History::Read(read)),
        }
    }

    /// Adds to a kept history what was appended since it was read (one
    /// statement, only when the workstream's newest message is past it),
    /// moving its window on past the load bound. `false`: more than a
    /// window's worth was appended, or a message cannot be written: the
    /// history is to be read whole.
    async fn catch_up(&self, ws: &WorkstreamRow, kept: &mut Kept) -> Result<bool, ClientError> {
        if ws.last_message_id <= Some(kept.upto) {
            return Ok(true);
        }
        let bound = self.inner.store.history_bound();
        let appended = self
            .inner
            .store
            .appended_after(ws.id, kept.upto, bound.max_messages.saturating_add(1))
            .await?;
        if appended.messages.len() as u64 > bound.max_messages {
            return Ok(false);
        }
        for (message, estimate) in appended.messages.into_iter().zip(appended.estimates) {
            if !kept.push(message, estimate, bound, &self.inner.estimator) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Says that a context left older messages out (the log's warning).
fn truncated(ws: &WorkstreamRow, window: &HistoryWindow) {
    HistoryTruncated {
        key: &ws.key,
        window,
    }
    .emit();
}

/// The JSON of the [`TurnContext`] over a kept history: the messages, then
/// the rest of its fields as serde writes them (`BuiltContext`'s, then the
/// window's).
fn kept_json(
    context: &TailContext<'_>,
    window: &HistoryWindow,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::new();
    out.extend_from_slice(b"{\"messages\":");
    context.write_messages_json(&mut out)?;
    write!(
        out,
        ",\"tokens\":{},\"summary_bullets_dropped\":{},\"orphans_neutralized\":{},\
         \"over_budget\":{},\"truncated\":{},\"omitted_messages\":{},\"omitted_tokens\":{}}}",
        context.tokens,
        context.summary_bullets_dropped,
        context.orphans_neutralized,
        context.over_budget,
        window.truncated(),
        window.omitted_messages,
        window.omitted_tokens,
    )
    .map_err(serde_json::Error::io)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use compactor_shared::context::ContextConfig;
    use compactor_shared::context::PreparedTail;
    use compactor_shared::state::WorkstreamState;
    use compactor_shared::summary::Summary;
    use compactor_shared::{CharEstimator, Message, Part, Role};

    use super::*;

    #[test]
    fn a_kept_history_is_written_as_serde_writes_its_turn_context() {
        let estimator = CharEstimator::default();
        let summary = Summary {
            key_facts: vec!["uses Postgres 16".into()],
            ..Default::default()
        };
        let state = WorkstreamState::default();
        for window in [0, 40, 200_000] {
            let input = ContextInput {
                summary: Some(&summary),
                state: &state,
                memory_block_summary: None,
                memory_entries: &[],
                messages: &[],
                just_auto_compacted: true,
                context_window: window,
                state_text: None,
            };
            let mut tail = PreparedTail::default();
            let messages = [
                Message::new(
                    4,
                    Role::Tool,
                    vec![Part::tool_result("gone", "bash", "an orphan")],
                ),
                Message::text(5, Role::User, "quote \" and \u{1F600}"),
            ];
            for m in messages {
                tail.push(m, &estimator).unwrap();
            }
            let config = ContextConfig {
                continue_after_auto: true,
                ..ContextConfig::default()
            };
            let context = tail.context(&input, &config, &estimator);
            for omitted in [0, 3] {
                let cut = HistoryWindow {
                    first: Some(MessageId(4)),
                    messages: 2,
                    omitted_messages: omitted,
                    omitted_tokens: omitted * 17,
                };
                let turn = TurnContext {
                    context: context.to_built(),
                    truncated: cut.truncated(),
                    omitted_messages: cut.omitted_messages,
                    omitted_tokens: cut.omitted_tokens,
                };
                assert_eq!(
                    String::from_utf8(kept_json(&context, &cut).unwrap()).unwrap(),
                    serde_json::to_string(&turn).unwrap(),
                    "window {window}, {omitted} left out"
                );
            }
        }
    }
}
