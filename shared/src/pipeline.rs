//! One compaction, start to end, as one pure function: [`compact`].
//!
//! ```text
//! pass 1: page through the un-compacted messages, keep only their shapes → plan the cut
//! pass 2: page through them again; for each page's compacted span:
//!           record the user's decisions and constraints (with supersession)
//!           and gather the evidence's candidate lines (every part, tool output included)
//!           render the transcript, cut it into chunks, fold each chunk into
//!           the summary through the summarizer (a chunk the model finds too
//!           long is halved); the kept tail is set aside
//! rollup while the summary is over its limit (at most MAX_ROLLUPS passes, then cut)
//! memory-block fold when due
//! prune old tool output of the kept tail
//! tokens after, and whether the workstream is below its trigger again
//! ```
//!
//! Why one function: the worker, the tests and the quality benchmark must
//! measure the same thing. Before, the steps and their order lived in the
//! worker's job and a test kept its own copy (which pruned before the
//! boundary and recorded exact values after chunking). Here the order and the
//! rules (rollup bound, chunk halving, the no-progress rule) exist once.
//!
//! The function does no I/O. It is driven by a [`PageSource`] (where the
//! messages come from) and a [`Summarize`] (who writes the summary); the
//! worker implements them over its store and its LLM client, holds the lease
//! and does the fenced commit with what [`compact`] returns. Memory stays
//! bounded whatever the history length: two pages of messages (the span
//! being folded and the next one, whose extraction runs ahead on a thread
//! of its own, see `ahead`), one chunk of transcript and the shapes (ids,
//! token counts, tool ids) are all that is held at once.

use std::collections::{HashSet, VecDeque};
use std::future::Future;

use crate::boundary::{self, MessageShape};
use crate::chunk::{self, ChunkStream};
use crate::config::EngineConfig;
use crate::context::{self, ContextInput};
use crate::message::{Message, MessageId, Part};
use crate::prompt::CompactionInput;
use crate::state::WorkstreamState;
use crate::summary::{SummarizerOutput, Summary};
use crate::tokens::{CharEstimator, TokenEstimator};
use crate::transcript::{Block, Transcript};
use crate::trigger::Measure;
use crate::{evidence, extractive, prune, stated};

mod ahead;
use ahead::Pending;

/// At most this many rollup passes; a summary still too big after them is
/// cut deterministically.
pub const MAX_ROLLUPS: u32 = 3;

/// Spans whose extraction runs ahead of the summarizer's fold (see
/// `ahead`). With one, a core sat idle whenever a span's extraction ended
/// before the fold of the span before it (and the fold waited whenever it
/// did not): a compaction of 200,000 messages left ~19 % of two cores
/// idle in pass 2. With two, the next extraction is already under way
/// when one ends early. Each costs a span of memory (a page at most).
const EXTRACTED_AHEAD: usize = 2;

/// Where the un-compacted messages come from, one page at a time, in id
/// order. The pipeline reads them twice (shapes, then content), so a source
/// must be able to start over.
pub trait PageSource {
    type Error;

    /// The next page of un-compacted messages after `after` (from the
    /// first when `None`); empty when there are no more.
    fn page(
        &mut self,
        after: Option<MessageId>,
    ) -> impl Future<Output = Result<Vec<Message>, Self::Error>> + Send;
}

/// A summarizer failure the pipeline can act on.
pub trait SummarizeFailure {
    /// The prompt was too long for the model: a smaller chunk may fit.
    fn is_context_length(&self) -> bool;
}

/// Who writes the summary: an LLM behind the worker's client, or the offline
/// [`Extractive`] summarizer.
pub trait Summarize {
    type Error: SummarizeFailure;

    /// Folds one transcript chunk into the summary so far.
    fn summarize(
        &mut self,
        input: &CompactionInput<'_>,
    ) -> impl Future<Output = Result<SummarizerOutput, Self::Error>> + Send;

    /// Rewrites a summary that grew past the rollup limit into at most
    /// `target_tokens`.
    fn rollup(
        &mut self,
        summary: &Summary,
        target_tokens: u64,
    ) -> impl Future<Output = Result<Summary, Self::Error>> + Send;

    /// The statement rules' answers for the user's sentences of the span
    /// whose transcript is folded next, worked out when its statements were
    /// recorded. A summarizer that asks the same rules of the same
    /// sentences may take them instead; by default they are dropped.
    fn know_statements(&mut self, classified: stated::Classified) {
        drop(classified);
    }

    /// Folds memory entries into the memory-block summary (at most
    /// `max_chars`).
    fn fold_memory(
        &mut self,
        previous: Option<&str>,
        entries: &[String],
        max_chars: usize,
    ) -> impl Future<Output = Result<String, Self::Error>> + Send;
}

/// A memory-block entry not folded yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryEntry {
    pub id: i64,
    pub content: String,
}

/// What is stored about the workstream when the compaction starts.
#[derive(Debug, Clone, Default)]
pub struct Workstream {
    pub summary: Option<Summary>,
    pub state: WorkstreamState,
    pub memory_block_summary: Option<String>,
    /// Unfolded memory entries, oldest first.
    pub memory_entries: Vec<MemoryEntry>,
    /// Tokens of the preamble the last compaction left.
    pub summary_tokens: u64,
    /// Tokens of the un-compacted messages (by their stored estimates).
    pub uncompacted_tokens: u64,
}

/// What was asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Operator instructions of a manual request.
    pub instructions: Option<String>,
    /// Lines the summary must consider (a pre-compaction hook's): put in
    /// front of the first chunk's transcript as a `CONTEXT` block
    /// ([`context_block`]), so an LLM and the extractive summarizer both
    /// read them.
    pub context: Vec<String>,
}

/// The header of the transcript block that carries [`Request::context`].
pub const CONTEXT_HEADER: &str = "[#0 CONTEXT]";

/// `lines` as a transcript block for the summarizer's input (empty when
/// there are none).
pub fn context_block(lines: &[String]) -> String {
    let mut block = String::new();
    for line in lines.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        if block.is_empty() {
            block.push_str(CONTEXT_HEADER);
            block.push_str(
                "\nContext supplied for this compaction; the summary must consider it:\n",
            );
        }
        block.push_str("- ");
        block.push_str(&line.replace('\n', " "));
        block.push('\n');
    }
    block
}

/// A kept-tail message whose old tool output was hidden.
#[derive(Debug, Clone, PartialEq)]
pub struct PrunedMessage {
    pub id: MessageId,
    pub parts: Vec<Part>,
    pub token_estimate: u64,
}

/// The memory-block fold a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFold {
    pub summary: String,
    /// Ids of the folded entries.
    pub folded: Vec<i64>,
}

/// Figures of a compaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_compacted: u64,
    pub chunks: u32,
    pub rollups: u32,
    /// The workstream ends below its trigger. A commit without progress
    /// counts towards the circuit breaker.
    pub progress: bool,
    /// Candidate evidence lines kept in the context, and left out.
    pub evidence_kept: u64,
    pub evidence_dropped: u64,
}

/// Everything a commit writes.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// The newest compacted message: the new watermark.
    pub watermark: MessageId,
    /// Messages before the watermark that stay un-compacted (pinned ones
    /// and their tool partners).
    pub keep: Vec<MessageId>,
    /// Tokens of the compacted messages.
    pub compacted_tokens: u64,
    pub summary: Summary,
    /// Tokens of the preamble this compaction leaves.
    pub summary_tokens: u64,
    pub state: WorkstreamState,
    pub memory_fold: Option<MemoryFold>,
    pub pruned: Vec<PrunedMessage>,
    pub report: Report,
}

/// What a compaction came to.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Nothing may be cut (too few messages, or a few huge ones pinned by
    /// tool pairs). When the workstream is due, that is a fruitless
    /// compaction.
    NothingToCut,
    Compacted(Box<Compacted>),
}

/// Why a compaction failed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError<P, S> {
    #[error("reading messages: {0}")]
    Page(P),
    #[error("summarizer: {0}")]
    Summarize(S),
    #[error("a chunk is too long for the model even at {chars} chars: {source}")]
    ChunkTooLong { chars: usize, source: S },
}

/// Whether a workstream of these sizes is over its trigger.
pub fn due(engine: &EngineConfig, summary_tokens: u64, uncompacted_tokens: u64) -> bool {
    engine
        .trigger
        .evaluate(&Measure::estimated(
            summary_tokens.saturating_add(uncompacted_tokens),
        ))
        .due
}

/// Compacts a workstream: see the module documentation for the steps.
/// `min_chunk_chars` is the smallest a chunk is halved to when the model
/// finds it too long; below it the context-length error is final.
pub async fn compact<P, S>(
    workstream: &Workstream,
    request: &Request,
    engine: &EngineConfig,
    estimator: &dyn TokenEstimator,
    min_chunk_chars: usize,
    pages: &mut P,
    summarizer: &mut S,
) -> Result<Outcome, PipelineError<P::Error, S::Error>>
where
    P: PageSource,
    S: Summarize,
{
    // Pass 1: shapes only.
    let mut shapes: Vec<MessageShape> = Vec::new();
    let mut after = None;
    loop {
        let page = pages.page(after).await.map_err(PipelineError::Page)?;
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        shapes.extend(page.iter().map(|m| MessageShape::of(m, estimator)));
    }
    let Some(plan) = boundary::plan_shapes(&shapes, &engine.boundary) else {
        return Ok(Outcome::NothingToCut);
    };
    let Some(last_seen) = shapes.last().map(|s| s.id) else {
        return Ok(Outcome::NothingToCut);
    };
    let tail_from = shapes[plan.tail_start].id;
    let keep: Vec<MessageId> = plan.kept_pinned.iter().map(|&i| shapes[i].id).collect();
    let compacted_tokens: u64 = plan.compact.iter().map(|&i| shapes[i].tokens).sum();
    let messages_compacted = plan.compact.len() as u64;
    // The span's last message: a page's span that reaches it is the last.
    let span_end = plan.compact.last().map(|&i| shapes[i].id);
    drop(shapes);
    let kept: HashSet<MessageId> = keep.iter().copied().collect();

    // Pass 2: the compacted span through the summarizer, chunk by chunk. A
    // summary stored in the other format (the operator switched) is
    // converted first, so every step works in the configured one.
    let format = engine.summary.format;
    let mut run = Folding {
        summarizer,
        engine,
        summary: workstream.summary.clone().map(|s| s.into_format(format)),
        state: workstream.state.clone(),
        instructions: request.instructions.as_deref(),
        context: Some(context_block(&request.context)).filter(|b| !b.is_empty()),
        chunks: 0,
        min_chunk_chars,
        evidence: evidence::Gathering::default(),
    };
    let mut chunker = ChunkStream::new(
        engine.chunk.max_chars,
        CharEstimator::new(engine.chars_per_token),
    );
    let mut tail: Vec<Message> = Vec::new();
    let mut after = None;
    // The spans of the pages before, extracted ahead while the summarizer
    // folds the ones before them (see `ahead`), oldest first.
    let mut pending: VecDeque<Pending> = VecDeque::with_capacity(EXTRACTED_AHEAD + 1);
    loop {
        let page = pages.page(after).await.map_err(PipelineError::Page)?;
        after = page.last().map(|m| m.id);
        let mut span = Vec::with_capacity(page.len());
        let mut reached_end = page.is_empty();
        for message in page {
            if message.id > last_seen {
                // Appended while we work: after the tail, not ours.
                reached_end = true;
                break;
            }
            if message.id >= tail_from {
                tail.push(message);
            } else if !kept.contains(&message.id) {
                span.push(message);
            }
        }
        if !span.is_empty() {
            let last = reached_end || span.last().map(|m| m.id) >= span_end;
            let line_chars = engine.evidence.max_line_chars;
            let next = if last {
                Pending::now(&span, &engine.transcript, line_chars)
            } else {
                Pending::start(span, &engine.transcript, line_chars)
            };
            pending.push_back(next);
            if pending.len() > EXTRACTED_AHEAD {
                if let Some(before) = pending.pop_front() {
                    run.take(before, &mut chunker).await?;
                }
            }
        }
        if reached_end {
            break;
        }
    }
    while let Some(before) = pending.pop_front() {
        run.take(before, &mut chunker).await?;
    }
    let rest = chunker.finish();
    let last = rest.len().saturating_sub(1);
    for (i, chunk) in rest.into_iter().enumerate() {
        run.fold(chunk.text, i == last && plan.split_turn.is_some())
            .await?;
    }
    let Folding {
        chunks,
        mut state,
        summary,
        evidence: mut gathered,
        ..
    } = run;
    let mut summary = summary.unwrap_or_else(|| Summary::empty(format));

    // Rollup while too big.
    let mut rollups = 0;
    let budget = engine.summary_budget();
    while summary.needs_rollup(engine.summary.rollup_max_tokens, estimator) {
        if rollups == MAX_ROLLUPS {
            summary.fit_to(engine.summary.rollup_max_tokens, estimator);
            break;
        }
        summary = summarizer
            .rollup(&summary, budget)
            .await
            .map_err(PipelineError::Summarize)?;
        rollups += 1;
    }

    // Memory-block fold when due.
    let entries = &workstream.memory_entries;
    let mut memory_fold = None;
    let mut memory_summary = workstream.memory_block_summary.clone();
    if let Some(range) = engine.memory_block.fold_due(entries.len()) {
        let folded = &entries[range];
        let texts: Vec<String> = folded.iter().map(|e| e.content.clone()).collect();
        let new = summarizer
            .fold_memory(
                workstream.memory_block_summary.as_deref(),
                &texts,
                engine.memory_block.max_summary_chars,
            )
            .await
            .map_err(PipelineError::Summarize)?;
        memory_summary = Some(new.clone());
        memory_fold = Some(MemoryFold {
            summary: new,
            folded: folded.iter().map(|e| e.id).collect(),
        });
    }
    let unfolded_left: Vec<String> = entries
        .iter()
        .filter(|e| {
            memory_fold
                .as_ref()
                .is_none_or(|fold| !fold.folded.contains(&e.id))
        })
        .map(|e| e.content.clone())
        .collect();

    // Tool output of the kept tail that is old enough is hidden. The
    // messages are not compacted, so the evidence reads them when they are.
    let (pruned, pruned_freed) = prune_tail(&mut tail, engine, estimator);

    // Evidence fills what the rest leaves under its share of the trigger.
    let tail_tokens = workstream
        .uncompacted_tokens
        .saturating_sub(compacted_tokens)
        .saturating_sub(pruned_freed);
    crate::repeats::drop_repeats(&mut summary, &mut state);
    let previous = std::mem::take(&mut state.evidence);
    let memory = memory_summary.as_deref();
    // Evidence is chosen against the rest of the preamble, not the
    // summary: the summary is rewritten at every compaction (rolled up,
    // its bullets replaced), so a line left out because the summary said
    // it would be gone once the summary no longer does. The summary's
    // bullets that the evidence says are dropped instead, below.
    let (shown, _) = context::preamble_texts(&left_behind(
        &summary,
        &state,
        memory,
        &unfolded_left,
        engine,
    ));
    // Nor against the user's statements' text: the list is capped and
    // folded on its own terms, and a line the evidence let go because a
    // statement said it would be gone once the statement leaves the list.
    // A line a statement says whole is kept at no cost and shown once, as
    // the statement (`Gathering::beside`, `Evidence::render_beside`).
    gathered.beside(&state.stated);
    let stated = std::mem::take(&mut state.stated);
    let (_, rest) = context::preamble_texts(&left_behind(
        &summary,
        &state,
        memory,
        &unfolded_left,
        engine,
    ));
    state.stated = stated;
    let kept_tokens = estimator.count(&previous.render());
    let (budget, ceiling) = evidence_budget(
        engine,
        estimator.count(&shown),
        tail_tokens,
        kept_tokens,
        estimator,
    );
    let mut chosen = gathered.choose(&previous, &tail, &rest, budget, &engine.evidence, estimator);
    state.evidence = std::mem::take(&mut chosen.evidence);
    crate::repeats::drop_evidence_repeats(
        &mut summary,
        state.evidence.lines.iter().map(|l| l.text.as_str()),
    );
    // What a later value of its slot replaced is marked wherever it is
    // still stated: in the user's statements, the evidence and the
    // summary (and the exact values, as the context renders them).
    state.stated.supersede_replaced(&state.evidence);
    state
        .evidence
        .mark_statements(&state.stated, engine.evidence.scope_messages);
    let outdated = state.stated.outdated();
    state.evidence.mark_outdated(&outdated);
    state.evidence.mark_summary(&mut summary);
    // The markers take tokens the choice did not count: give back the
    // lines taken last while the context is over the evidence's share.
    if let Some(target) = ceiling.filter(|_| !state.evidence.lines.is_empty()) {
        let left = context::preamble_tokens(
            &left_behind(&summary, &state, memory, &unfolded_left, engine),
            estimator,
        ) + tail_tokens;
        if left > target {
            chosen.evidence = std::mem::take(&mut state.evidence);
            chosen.trim(left - target, estimator);
            state.evidence = std::mem::take(&mut chosen.evidence);
        }
    }

    let summary_tokens = context::preamble_tokens(
        &left_behind(&summary, &state, memory, &unfolded_left, engine),
        estimator,
    );
    let tokens_before = workstream
        .summary_tokens
        .saturating_add(workstream.uncompacted_tokens);
    let tokens_after = summary_tokens.saturating_add(
        workstream
            .uncompacted_tokens
            .saturating_sub(compacted_tokens)
            .saturating_sub(pruned_freed),
    );
    let progress = !due(engine, tokens_after, 0);
    Ok(Outcome::Compacted(Box::new(Compacted {
        watermark: plan.watermark,
        keep,
        compacted_tokens,
        summary,
        summary_tokens,
        state,
        memory_fold,
        pruned,
        report: Report {
            tokens_before,
            tokens_after,
            messages_compacted,
            chunks,
            rollups,
            progress,
            evidence_kept: chosen.kept,
            evidence_dropped: chosen.dropped,
        },
    })))
}

/// The preamble a compaction leaves, as a context's input.
fn left_behind<'a>(
    summary: &'a Summary,
    state: &'a WorkstreamState,
    memory_block_summary: Option<&'a str>,
    memory_entries: &'a [String],
    engine: &EngineConfig,
) -> ContextInput<'a> {
    ContextInput {
        summary: Some(summary),
        state,
        memory_block_summary,
        memory_entries,
        messages: &[],
        just_auto_compacted: false,
        context_window: engine.trigger.context_window(),
        state_text: None,
    }
}

/// Tokens the evidence may take: what a context of `shown` preamble
/// tokens and `tail_tokens` of kept messages leaves under its ceiling
/// ([`evidence_ceiling`]; `evidence.max_tokens` when the trigger has no
/// threshold), less its heading. `kept` is what the evidence took before.
/// Also returns the ceiling itself, which the context is trimmed back to
/// once the markers are added (`None` without one).
pub fn evidence_budget(
    engine: &EngineConfig,
    shown: u64,
    tail_tokens: u64,
    kept: u64,
    estimator: &dyn TokenEstimator,
) -> (u64, Option<u64>) {
    if engine.evidence_share() <= 0.0 {
        return (0, None);
    }
    let heading = estimator.count(crate::evidence::EVIDENCE_HEADING) + 1;
    let Some(ceiling) = evidence_ceiling(engine, shown + tail_tokens + heading, kept) else {
        return (engine.evidence.max_tokens, None);
    };
    let budget = ceiling
        .saturating_sub(shown)
        .saturating_sub(tail_tokens)
        .saturating_sub(heading);
    (budget, Some(ceiling))
}

/// Share of the trigger threshold under which evidence keeps what it held
/// before, even past [`EngineConfig::evidence_share`]: a kept tail that grew
/// (a few large tool outputs) must not push out every line kept so far,
/// which no later compaction could read again.
pub const EVIDENCE_HOLD_SHARE: f64 = 0.85;

/// The tokens a context may take after a compaction, evidence included:
/// [`EngineConfig::evidence_share`] of the trigger, or, when the rest
/// (`rest` tokens) leaves the evidence less than it held before (`kept`)
/// or than a summary's room ([`EngineConfig::summary_budget`]), as much of
/// the larger as fits under [`EVIDENCE_HOLD_SHARE`] of it. The offline
/// summary quotes no line while the evidence is on, so however large the
/// kept tail, what a compaction keeps of its span is never nothing. `None`
/// when evidence is off or the trigger has no threshold.
fn evidence_ceiling(engine: &EngineConfig, rest: u64, kept: u64) -> Option<u64> {
    let share = engine.evidence_share();
    let threshold = engine.trigger.threshold().filter(|_| share > 0.0)?;
    let target = (threshold as f64 * share) as u64;
    let hold = (threshold as f64 * EVIDENCE_HOLD_SHARE.max(share)) as u64;
    let least = kept.max(engine.summary_budget());
    Some(target.max(rest.saturating_add(least).min(hold)))
}

/// Hides old tool output of the kept tail; returns the changed messages
/// and the tokens freed.
fn prune_tail(
    tail: &mut [Message],
    engine: &EngineConfig,
    estimator: &dyn TokenEstimator,
) -> (Vec<PrunedMessage>, u64) {
    let Some(plan) = prune::plan(tail, &engine.prune, estimator) else {
        return (Vec::new(), 0);
    };
    let before: Vec<u64> = tail.iter().map(|m| estimator.message_tokens(m)).collect();
    prune::apply(tail, &plan);
    let mut touched: Vec<usize> = plan.parts.iter().map(|&(m, _)| m).collect();
    touched.sort_unstable();
    touched.dedup();
    let mut freed = 0;
    let pruned = touched
        .into_iter()
        .map(|i| {
            let message = &tail[i];
            let token_estimate = estimator.message_tokens(message);
            freed += before[i].saturating_sub(token_estimate);
            PrunedMessage {
                id: message.id,
                parts: message.parts.clone(),
                token_estimate,
            }
        })
        .collect();
    (pruned, freed)
}

/// The summary being built, chunk by chunk.
struct Folding<'a, S> {
    summarizer: &'a mut S,
    engine: &'a EngineConfig,
    summary: Option<Summary>,
    state: WorkstreamState,
    instructions: Option<&'a str>,
    /// The request's context block, until the first chunk takes it.
    context: Option<String>,
    chunks: u32,
    min_chunk_chars: usize,
    /// The spans' candidate evidence lines.
    evidence: evidence::Gathering,
}

impl<S: Summarize> Folding<'_, S> {
    /// Takes one page's span: records the user's statements and gathers
    /// its candidate evidence lines from the messages themselves, before
    /// any summarizer sees them (whatever it writes, they survive), then
    /// folds the chunks its transcript completes.
    async fn take<P>(
        &mut self,
        span: Pending,
        chunker: &mut ChunkStream,
    ) -> Result<(), PipelineError<P, S::Error>> {
        let extracted = span.finish();
        // (Statements and evidence lines count their messages' places
        // alike, from the workstream's first compacted message.)
        let offset = self.state.evidence.seen + self.evidence.messages();
        let statements = extracted.statements.into_iter().map(|s| {
            let seq = s.seq.unwrap_or(0).saturating_add(offset);
            s.at(seq)
        });
        self.state.stated.record(
            statements,
            &self.engine.stated_caps,
            self.engine.evidence.scope_messages,
        );
        self.summarizer.know_statements(extracted.classified);
        self.evidence.add(extracted.evidence, offset);
        for chunk in chunker.push(extracted.transcript) {
            self.fold(chunk.text, false).await?;
        }
        Ok(())
    }

    /// Folds one chunk of transcript into the summary and state. A chunk
    /// the model finds too long is halved (and the halves folded in order)
    /// until it fits or reaches the minimum size.
    async fn fold<P>(
        &mut self,
        text: String,
        split_turn: bool,
    ) -> Result<(), PipelineError<P, S::Error>> {
        let text = match self.context.take() {
            Some(block) => block + &text,
            None => text,
        };
        let mut queue: VecDeque<(String, bool)> = VecDeque::from([(text, split_turn)]);
        while let Some((text, split)) = queue.pop_front() {
            let input = CompactionInput {
                previous_summary: self.summary.as_ref(),
                state: &self.state,
                new_messages: &text,
                instructions: self.instructions,
                split_turn: split,
                format: self.engine.summary.format,
            };
            match self.summarizer.summarize(&input).await {
                Ok(output) => {
                    self.chunks += 1;
                    self.summary = Some(output.summary);
                    self.state.merge(&output.delta, &self.engine.state_caps);
                }
                Err(e) if e.is_context_length() => {
                    let measure = CharEstimator::new(self.engine.chars_per_token);
                    let chars = measure.width(&text);
                    let half = chars / 2;
                    if half < self.min_chunk_chars {
                        return Err(PipelineError::ChunkTooLong { chars, source: e });
                    }
                    let pieces = halves(&text, half, measure);
                    let last = pieces.len().saturating_sub(1);
                    for (i, piece) in pieces.into_iter().enumerate().rev() {
                        queue.push_front((piece, split && i == last));
                    }
                }
                Err(e) => return Err(PipelineError::Summarize(e)),
            }
        }
        Ok(())
    }
}

/// Cuts `text` into pieces of at most `max_chars` wide, at line breaks
/// where possible (the chunker's rules, one block).
fn halves(text: &str, max_chars: usize, measure: CharEstimator) -> Vec<String> {
    let single = Transcript {
        text: text.to_owned(),
        blocks: vec![Block {
            message_id: MessageId(0),
            range: 0..text.len(),
        }],
    };
    chunk::chunk(&single, max_chars, measure)
        .iter()
        .map(|c| c.text.to_owned())
        .collect()
}

/// The offline summarizer as a [`Summarize`]: it never fails. One value
/// per compaction: it keeps what it judged between chunks
/// ([`extractive::Judgements`]).
pub struct Extractive<'a> {
    engine: &'a EngineConfig,
    estimator: &'a dyn TokenEstimator,
    judgements: extractive::Judgements,
}

impl<'a> Extractive<'a> {
    pub fn new(engine: &'a EngineConfig, estimator: &'a dyn TokenEstimator) -> Extractive<'a> {
        Extractive {
            engine,
            estimator,
            judgements: extractive::Judgements::default(),
        }
    }
}

/// The extractive summarizer cannot fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Never {}

impl SummarizeFailure for Never {
    fn is_context_length(&self) -> bool {
        match *self {}
    }
}

impl Summarize for Extractive<'_> {
    type Error = Never;

    fn summarize(
        &mut self,
        input: &CompactionInput<'_>,
    ) -> impl Future<Output = Result<SummarizerOutput, Never>> + Send {
        let output = extractive::summarize_with(
            input,
            &self.engine.extractive_config(),
            self.engine.summary_budget(),
            self.estimator,
            &mut self.judgements,
        );
        std::future::ready(Ok(output))
    }

    fn know_statements(&mut self, classified: stated::Classified) {
        self.judgements.know(classified);
    }

    fn rollup(
        &mut self,
        summary: &Summary,
        target_tokens: u64,
    ) -> impl Future<Output = Result<Summary, Never>> + Send {
        std::future::ready(Ok(extractive::rollup(
            summary,
            target_tokens,
            self.estimator,
        )))
    }

    fn fold_memory(
        &mut self,
        previous: Option<&str>,
        entries: &[String],
        max_chars: usize,
    ) -> impl Future<Output = Result<String, Never>> + Send {
        std::future::ready(Ok(extractive::fold_memory_block(
            previous, entries, max_chars,
        )))
    }
}

/// Messages held in memory as a [`PageSource`] (tests, benchmarks, and
/// callers that already have the whole history).
#[derive(Debug, Clone)]
pub struct InMemory<'a> {
    messages: &'a [Message],
    page_size: usize,
}

impl<'a> InMemory<'a> {
    /// `messages` in id order; pages of `page_size` (at least 1).
    pub fn new(messages: &'a [Message], page_size: usize) -> InMemory<'a> {
        InMemory {
            messages,
            page_size: page_size.max(1),
        }
    }
}

impl PageSource for InMemory<'_> {
    type Error = Never;

    fn page(
        &mut self,
        after: Option<MessageId>,
    ) -> impl Future<Output = Result<Vec<Message>, Never>> + Send {
        let start = after.map_or(0, |a| self.messages.partition_point(|m| m.id <= a));
        let end = (start + self.page_size).min(self.messages.len());
        std::future::ready(Ok(self.messages[start..end].to_vec()))
    }
}

/// Runs a future whose every await is ready at once (an in-memory page
/// source and the extractive summarizer): no runtime needed. Returns `None`
/// if the future is still pending after it was polled (it waits on real
/// I/O, which needs a runtime).
pub fn now_or_never<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}

#[cfg(test)]
mod tests;
