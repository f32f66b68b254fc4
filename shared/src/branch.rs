//! Message branches: what is kept of a branch the user left (pi's branch
//! summarization).
//!
//! When the head of a workstream moves away from a branch, the messages
//! from the branch point to the abandoned leaf are summarized once and the
//! summary is attached at the branch point. This module holds the pure
//! parts of that: the files the branch read and modified (tracked
//! cumulatively through the summaries of branches left earlier on the
//! abandoned path), which messages fit the summary's token budget (newest
//! first), and how a summary is shown in a context.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::context::{BuiltContext, ContextMessage};
use crate::message::{Message, MessageId, Part, Role};
use crate::tokens::TokenEstimator;

/// Files a branch read and modified, as pi tracks them: a file both read
/// and modified is listed as modified only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FileOps {
    /// Read (and not modified), sorted.
    #[serde(default)]
    pub read: BTreeSet<String>,
    /// Written, edited, created or deleted, sorted.
    #[serde(default)]
    pub modified: BTreeSet<String>,
}

/// What a tool call did to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    Read,
    Modified,
}

/// Longest path kept, in bytes: a "path" argument longer than this is not
/// a path worth listing.
const MAX_PATH_BYTES: usize = 512;

/// Tool names (lowercase substrings) that modify the file they name.
const MODIFYING: [&str; 9] = [
    "write", "edit", "patch", "create", "replace", "delete", "remove", "rename", "move",
];
/// Tool names (lowercase substrings) that read the file they name.
const READING: [&str; 7] = ["read", "view", "open", "cat", "grep", "search", "ls"];

/// The arguments tools commonly name their file with.
const PATH_ARGS: [&str; 6] = [
    "path",
    "file_path",
    "filePath",
    "file",
    "filename",
    "target",
];

/// What a call of `tool_name` does to the file it names, if anything.
/// Modifying words win (`read_and_edit` modifies).
pub fn classify_tool(tool_name: &str) -> Option<FileOp> {
    let name = tool_name.to_ascii_lowercase();
    if MODIFYING.iter().any(|w| name.contains(w)) {
        Some(FileOp::Modified)
    } else if READING.iter().any(|w| name.contains(w)) {
        Some(FileOp::Read)
    } else {
        None
    }
}

/// The file a tool call's input names, if it names one.
fn path_of(input: &serde_json::Value) -> Option<&str> {
    PATH_ARGS
        .iter()
        .filter_map(|arg| input.get(arg)?.as_str())
        .map(str::trim)
        .find(|p| !p.is_empty() && p.len() <= MAX_PATH_BYTES && !p.contains('\n'))
}

impl FileOps {
    /// Records the file operations of `messages`' tool calls.
    pub fn record(&mut self, messages: &[Message]) {
        for message in messages {
            for part in &message.parts {
                if let Part::ToolCall {
                    tool_name, input, ..
                } = part
                {
                    let (Some(op), Some(path)) = (classify_tool(tool_name), path_of(input)) else {
                        continue;
                    };
                    match op {
                        FileOp::Read => self.read.insert(path.to_owned()),
                        FileOp::Modified => self.modified.insert(path.to_owned()),
                    };
                }
            }
        }
        self.normalize();
    }

    /// Adds another branch's operations (an earlier summary's).
    pub fn merge(&mut self, other: &FileOps) {
        self.read.extend(other.read.iter().cloned());
        self.modified.extend(other.modified.iter().cloned());
        self.normalize();
    }

    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.modified.is_empty()
    }

    /// A modified file is not also listed as read.
    fn normalize(&mut self) {
        let modified = &self.modified;
        self.read.retain(|p| !modified.contains(p));
    }
}

/// How many of the newest messages fit `budget` tokens, given their
/// estimates oldest first: newest first, the newest always (a summary of
/// nothing helps nobody).
pub fn newest_within(estimates: &[u64], budget: u64) -> usize {
    let mut used: u64 = 0;
    let mut taken = 0;
    for &tokens in estimates.iter().rev() {
        if taken > 0 && used.saturating_add(tokens) > budget {
            break;
        }
        used = used.saturating_add(tokens);
        taken += 1;
    }
    taken
}

/// The text a branch summary is shown with in a context: marked as the
/// summary of a branch the conversation left, with its file operations.
pub fn render(summary: &str, file_ops: &FileOps) -> String {
    let mut text = format!("[branch summary: {}]", summary.trim());
    let list = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
    if !file_ops.read.is_empty() {
        text.push_str(&format!("\nRead files: {}", list(&file_ops.read)));
    }
    if !file_ops.modified.is_empty() {
        text.push_str(&format!("\nModified files: {}", list(&file_ops.modified)));
    }
    text
}

/// A branch summary as a context shows it: attached after its branch
/// point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    pub branch_point: MessageId,
    /// [`render`]ed.
    pub text: String,
}

/// The tokens [`attach`] adds to a context for `summaries`.
pub fn tokens(summaries: &[Attached], estimator: &dyn TokenEstimator) -> u64 {
    summaries
        .iter()
        .map(|s| estimator.part_tokens(&Part::text(s.text.clone())))
        .sum()
}

/// Puts each summary into `context` right after the message of its branch
/// point, as a user message of its own (no `source`: it is synthesized);
/// a summary whose branch point is not among the messages (compacted
/// since) goes before the first stored message, after the preamble. The
/// context's token count grows by the summaries' estimates.
pub fn attach(context: &mut BuiltContext, summaries: &[Attached], estimator: &dyn TokenEstimator) {
    for summary in summaries {
        let after_point = context
            .messages
            .iter()
            .rposition(|m| m.source == Some(summary.branch_point))
            .map(|i| i + 1);
        let at = after_point.unwrap_or_else(|| {
            context
                .messages
                .iter()
                .position(|m| m.source.is_some())
                .unwrap_or(context.messages.len())
        });
        let part = Part::text(summary.text.clone());
        context.tokens = context.tokens.saturating_add(estimator.part_tokens(&part));
        context.messages.insert(
            at,
            ContextMessage {
                role: Role::User,
                parts: vec![part],
                source: None,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CharEstimator;
    use serde_json::json;

    fn call(tool: &str, input: serde_json::Value) -> Message {
        Message {
            id: MessageId(1),
            role: Role::Assistant,
            parts: vec![Part::tool_call("c", tool, input)],
            pinned: false,
        }
    }

    #[test]
    fn tool_calls_are_read_or_modified_and_modified_wins() {
        let mut ops = FileOps::default();
        ops.record(&[
            call("read_file", json!({"path": "src/a.rs"})),
            call("Edit", json!({"file_path": "src/b.rs"})),
            call("read", json!({"path": "src/b.rs"})),
            call("bash", json!({"command": "ls"})),
            call("write", json!({"content": "no path"})),
        ]);
        assert_eq!(ops.read, BTreeSet::from(["src/a.rs".to_owned()]));
        assert_eq!(ops.modified, BTreeSet::from(["src/b.rs".to_owned()]));
    }

    #[test]
    fn merging_is_cumulative() {
        let mut earlier = FileOps::default();
        earlier.read.insert("x".into());
        earlier.modified.insert("y".into());
        let mut now = FileOps::default();
        now.modified.insert("x".into());
        now.merge(&earlier);
        assert!(now.read.is_empty());
        assert_eq!(now.modified.len(), 2);
    }

    #[test]
    fn the_budget_is_filled_newest_first() {
        assert_eq!(newest_within(&[10, 10, 10], 25), 2);
        assert_eq!(newest_within(&[10, 10, 100], 25), 1);
        assert_eq!(newest_within(&[], 25), 0);
        assert_eq!(newest_within(&[5, 5], 100), 2);
    }

    #[test]
    fn rendering_marks_the_summary_and_lists_files() {
        let mut ops = FileOps::default();
        ops.read.insert("a".into());
        ops.modified.insert("b".into());
        assert_eq!(
            render(" tried X ", &ops),
            "[branch summary: tried X]\nRead files: a\nModified files: b"
        );
        assert_eq!(render("s", &FileOps::default()), "[branch summary: s]");
    }

    #[test]
    fn summaries_go_after_their_branch_point_or_after_the_preamble() {
        let msg = |source: Option<i64>, text: &str| ContextMessage {
            role: Role::User,
            parts: vec![Part::text(text)],
            source: source.map(MessageId),
        };
        let mut context = BuiltContext {
            messages: vec![msg(None, "preamble"), msg(Some(5), "a"), msg(Some(6), "b")],
            tokens: 0,
            summary_bullets_dropped: 0,
            orphans_neutralized: 0,
            over_budget: false,
        };
        let estimator = CharEstimator::new(3);
        attach(
            &mut context,
            &[
                Attached {
                    branch_point: MessageId(5),
                    text: "at 5".into(),
                },
                Attached {
                    branch_point: MessageId(2),
                    text: "at 2".into(),
                },
            ],
            &estimator,
        );
        let texts: Vec<String> = context
            .messages
            .iter()
            .map(|m| match &m.parts[0] {
                Part::Text { text } => text.clone(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts, ["preamble", "at 2", "a", "at 5", "b"]);
        assert!(context.tokens > 0);
    }
}
