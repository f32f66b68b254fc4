//! The span a compaction is about to fold, planned as the pipeline plans
//! it (`compactor_shared::boundary::plan_shapes` over the same pages), and
//! the bounded text of its messages for the hook's request.
//!
//! This is one extra read of the un-compacted messages, made only when a
//! hook is configured; the pipeline then plans again over the same pages.
//! Both plans agree because the store only appends after the last message
//! seen, and appended messages are never in a span.

use std::collections::HashSet;

use compactor_shared::boundary::{self, MessageShape};
use compactor_shared::config::EngineConfig;
use compactor_shared::message::Part;
use compactor_shared::pipeline::PageSource;
use compactor_shared::{Message, TokenEstimator};

use super::wire::{Span, SpanMessage};

/// The span and what of its text fits the bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub span: Span,
    pub messages: Vec<SpanMessage>,
    pub truncated: bool,
}

/// Plans the span over `pages`; `None` when nothing may be cut. At most
/// `max_chars` of message text are kept (each message at most a tenth of
/// it), oldest first.
pub async fn plan<P: PageSource>(
    pages: &mut P,
    engine: &EngineConfig,
    estimator: &dyn TokenEstimator,
    max_chars: usize,
) -> Result<Option<Planned>, P::Error> {
    let per_message = (max_chars / 10).max(1);
    let mut shapes: Vec<MessageShape> = Vec::new();
    let mut texts: Vec<SpanMessage> = Vec::new();
    let mut used = 0usize;
    let mut truncated = false;
    let mut after = None;
    loop {
        let page = pages.page(after).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        for message in &page {
            shapes.push(MessageShape::of(message, estimator));
            if used < max_chars {
                let room = per_message.min(max_chars - used);
                let (text, cut) = text_of(message, room);
                used += text.chars().count();
                truncated |= cut;
                texts.push(SpanMessage {
                    id: message.id.0,
                    role: message.role,
                    text,
                });
            }
        }
    }
    let Some(plan) = boundary::plan_shapes(&shapes, &engine.boundary) else {
        return Ok(None);
    };
    let compacted: Vec<&MessageShape> = plan.compact.iter().map(|&i| &shapes[i]).collect();
    let (Some(first), Some(last)) = (compacted.first(), compacted.last()) else {
        return Ok(None);
    };
    let ids: HashSet<i64> = compacted.iter().map(|s| s.id.0).collect();
    texts.retain(|m| ids.contains(&m.id));
    truncated |= texts.len() < compacted.len();
    Ok(Some(Planned {
        span: Span {
            first_message_id: first.id.0,
            last_message_id: last.id.0,
            message_count: compacted.len() as u64,
            tokens: compacted.iter().map(|s| s.tokens).sum(),
        },
        messages: texts,
        truncated,
    }))
}

/// The message's text parts joined by new lines, at most `max` chars;
/// whether it was cut.
fn text_of(message: &Message, max: usize) -> (String, bool) {
    let mut text = String::new();
    for part in &message.parts {
        if let Part::Text { text: t } = part {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(t);
        }
    }
    match text.char_indices().nth(max) {
        Some((at, _)) => {
            text.truncate(at);
            (text, true)
        }
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use compactor_shared::message::Role;
    use compactor_shared::pipeline::{now_or_never, InMemory};
    use compactor_shared::CharEstimator;

    use super::*;

    fn history(n: i64) -> Vec<Message> {
        (1..=n)
            .map(|i| {
                let role = if i % 2 == 1 {
                    Role::User
                } else {
                    Role::Assistant
                };
                Message::text(i, role, format!("message number {i} ").repeat(20))
            })
            .collect()
    }

    #[test]
    fn the_span_is_the_prefix_before_the_tail_with_bounded_text() {
        let messages = history(40);
        let engine = EngineConfig::default();
        let estimator = CharEstimator::new(3);
        let mut pages = InMemory::new(&messages, 7);
        let planned = now_or_never(plan(&mut pages, &engine, &estimator, 2_000))
            .unwrap()
            .unwrap()
            .unwrap();
        let tail = engine.boundary.tail_messages as i64;
        assert_eq!(planned.span.first_message_id, 1);
        assert!(planned.span.last_message_id <= 40 - tail);
        assert_eq!(
            planned.span.message_count,
            planned.span.last_message_id as u64
        );
        let chars: usize = planned
            .messages
            .iter()
            .map(|m| m.text.chars().count())
            .sum();
        assert!(chars <= 2_000, "{chars}");
        assert!(planned
            .messages
            .iter()
            .all(|m| m.text.chars().count() <= 200));
        assert!(planned.truncated);
        assert_eq!(planned.messages[0].id, 1);
    }

    #[test]
    fn no_text_is_sent_at_a_zero_bound() {
        let messages = history(40);
        let mut pages = InMemory::new(&messages, 100);
        let planned = now_or_never(plan(
            &mut pages,
            &EngineConfig::default(),
            &CharEstimator::new(3),
            0,
        ))
        .unwrap()
        .unwrap()
        .unwrap();
        assert!(planned.messages.is_empty());
        assert!(planned.truncated);
    }
}
