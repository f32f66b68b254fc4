//! Soft compaction: hiding old tool output from the model without deleting
//! it (OpenCode's pruning).
//!
//! Tool output (logs, diffs, file dumps) is what bloats a context between
//! hard compactions. Pruning walks back from the newest message, leaves the
//! last `skip_user_turns` turns alone, protects the newest `protect_tokens`
//! of tool output, and marks older results as pruned — but only when that
//! frees at least `minimum_tokens`, so it does not churn for small gains. A
//! pruned part keeps its output in storage (for audit, the UI and the
//! summarizer); only what is *sent to a model* shows [`PRUNED_PLACEHOLDER`].
//! The walk stops at a result that is already pruned (everything older was
//! handled by an earlier pass) and the caller passes only the messages after
//! the latest compaction, so it also stops at the previous pivot.
//!
//! [`PRUNED_PLACEHOLDER`]: crate::message::PRUNED_PLACEHOLDER

use serde::{Deserialize, Serialize};

use crate::message::{Message, Part};
use crate::tokens::TokenEstimator;

/// Pruning settings (OpenCode's numbers by default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PruneConfig {
    pub enabled: bool,
    /// Newest tool output, in tokens, that is never pruned.
    pub protect_tokens: u64,
    /// Prune only when at least this many tokens would be freed.
    pub minimum_tokens: u64,
    /// The most recent user turns whose tool output is never pruned.
    pub skip_user_turns: usize,
    /// Tools whose output is never pruned (it acts as instructions).
    pub protected_tools: Vec<String>,
}

impl Default for PruneConfig {
    fn default() -> Self {
        PruneConfig {
            enabled: true,
            protect_tokens: 40_000,
            minimum_tokens: 20_000,
            skip_user_turns: 2,
            protected_tools: vec!["skill".into()],
        }
    }
}

/// Tool results to mark as pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunePlan {
    /// `(message index, part index)` of each result, newest first.
    pub parts: Vec<(usize, usize)>,
    /// Tokens the model will no longer be sent.
    pub tokens_freed: u64,
}

/// Decides what to prune among `messages` (those after the latest
/// compaction, in order). `None` when pruning is disabled or would free
/// less than `minimum_tokens`.
pub fn plan(
    messages: &[Message],
    config: &PruneConfig,
    estimator: &dyn TokenEstimator,
) -> Option<PrunePlan> {
    if !config.enabled {
        return None;
    }
    let mut turns = 0usize;
    let mut seen_output = 0u64;
    let mut plan = PrunePlan {
        parts: Vec::new(),
        tokens_freed: 0,
    };
    'walk: for (mi, message) in messages.iter().enumerate().rev() {
        if message.starts_turn() {
            turns += 1;
        }
        // Messages of the newest `skip_user_turns` turns (the turn-starting
        // user message included) are the working set.
        if turns < config.skip_user_turns
            || (turns == config.skip_user_turns && message.starts_turn())
        {
            continue;
        }
        for (pi, part) in message.parts.iter().enumerate().rev() {
            let Part::ToolResult {
                tool_name,
                output,
                pruned,
                ..
            } = part
            else {
                continue;
            };
            if *pruned {
                break 'walk;
            }
            if config.protected_tools.iter().any(|t| t == tool_name) {
                continue;
            }
            let tokens = estimator.count(output);
            seen_output = seen_output.saturating_add(tokens);
            if seen_output > config.protect_tokens {
                plan.parts.push((mi, pi));
                plan.tokens_freed = plan.tokens_freed.saturating_add(tokens);
            }
        }
    }
    (plan.tokens_freed >= config.minimum_tokens && !plan.parts.is_empty()).then_some(plan)
}

/// Marks the planned results as pruned. Their output is kept.
pub fn apply(messages: &mut [Message], plan: &PrunePlan) {
    for &(mi, pi) in &plan.parts {
        if let Some(Part::ToolResult { pruned, .. }) =
            messages.get_mut(mi).and_then(|m| m.parts.get_mut(pi))
        {
            *pruned = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;
    use crate::tokens::CharEstimator;

    /// A turn: user text, then a call and a result of `tokens` tokens.
    fn turn(id: &mut i64, tool: &str, tokens: usize) -> Vec<Message> {
        *id += 3;
        let call_id = format!("c{id}");
        vec![
            Message::text(*id - 2, Role::User, "go on"),
            Message::new(
                *id - 1,
                Role::Assistant,
                vec![Part::ToolCall {
                    call_id: call_id.clone(),
                    tool_name: tool.into(),
                    input: serde_json::Value::Null,
                }],
            ),
            Message::new(
                *id,
                Role::Tool,
                vec![Part::ToolResult {
                    call_id,
                    tool_name: tool.into(),
                    output: "o".repeat(tokens * 3),
                    is_error: false,
                    pruned: false,
                }],
            ),
        ]
    }

    fn conversation(turns: &[(&str, usize)]) -> Vec<Message> {
        let mut id = 0;
        turns
            .iter()
            .flat_map(|(tool, t)| turn(&mut id, tool, *t))
            .collect()
    }

    fn pruned_ids(messages: &[Message]) -> Vec<i64> {
        messages
            .iter()
            .filter(|m| {
                m.parts
                    .iter()
                    .any(|p| matches!(p, Part::ToolResult { pruned: true, .. }))
            })
            .map(|m| m.id.0)
            .collect()
    }

    #[test]
    fn protects_the_newest_40k_and_prunes_older_output() {
        // 6 turns of 15k tokens each; the last 2 turns are skipped
        let mut msgs = conversation(&[("bash", 15_000); 6]);
        let e = CharEstimator::default();
        let plan = plan(&msgs, &PruneConfig::default(), &e).unwrap();
        // counted newest-first over turns 4,3,2,1: 15k, 30k, 45k (>40k → prune), 60k
        assert_eq!(plan.tokens_freed, 30_000);
        apply(&mut msgs, &plan);
        assert_eq!(pruned_ids(&msgs), vec![3, 6]);
        let kept = msgs
            .iter()
            .flat_map(|m| &m.parts)
            .filter(|p| matches!(p, Part::ToolResult { output, .. } if output.len() == 45_000))
            .count();
        assert_eq!(kept, 6, "pruning marks; the output stays stored");
    }

    #[test]
    fn does_not_prune_for_less_than_the_minimum() {
        let msgs = conversation(&[("bash", 10_000); 7]);
        // skipped: last 2 turns; counted: 5 × 10k = 50k, only 10k over 40k
        assert_eq!(
            plan(&msgs, &PruneConfig::default(), &CharEstimator::default()),
            None
        );
    }

    #[test]
    fn never_prunes_protected_tools_or_the_last_two_turns() {
        let mut turns = vec![("skill", 50_000); 3];
        turns.extend([("bash", 100_000); 2]);
        let msgs = conversation(&turns);
        assert_eq!(
            plan(&msgs, &PruneConfig::default(), &CharEstimator::default()),
            None
        );
    }

    #[test]
    fn stops_at_an_already_pruned_result_and_is_idempotent() {
        let mut msgs = conversation(&[("bash", 15_000); 6]);
        let e = CharEstimator::default();
        let config = PruneConfig::default();
        let first = plan(&msgs, &config, &e).unwrap();
        apply(&mut msgs, &first);
        assert_eq!(plan(&msgs, &config, &e), None, "nothing new to prune");
        // more turns arrive: only output newer than the pruned mark is looked at
        let mut id = msgs.last().unwrap().id.0;
        for _ in 0..4 {
            msgs.extend(turn(&mut id, "bash", 15_000));
        }
        let second = plan(&msgs, &config, &e).unwrap();
        // 10 turns; 9 and 10 skipped; 8 and 7 protected (30k); 6 (45k) and
        // older are over 40k: turns 6, 5, 4, 3; turn 2 is already pruned: stop.
        assert_eq!(second.tokens_freed, 60_000);
        apply(&mut msgs, &second);
        assert_eq!(pruned_ids(&msgs), vec![3, 6, 9, 12, 15, 18]);
    }

    #[test]
    fn disabled_prunes_nothing() {
        let msgs = conversation(&[("bash", 50_000); 6]);
        let config = PruneConfig {
            enabled: false,
            ..Default::default()
        };
        assert_eq!(plan(&msgs, &config, &CharEstimator::default()), None);
    }
}
