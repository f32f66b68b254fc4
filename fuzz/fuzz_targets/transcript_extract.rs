//! Transcript extraction and chunking on structured messages built by
//! `arbitrary`: content is assembled from fragments that attack the format
//! (header look-alikes after line breaks, CRs, multi-byte chars), budgets
//! and chunk sizes are small so truncation and splitting happen often.
//! Checks: no forged header, blocks tile the text, reasoning never leaks,
//! chunks rebuild the text and streaming gives the chunks of the whole, and
//! `truncate_head_tail` keeps its 70/30 budget.
#![no_main]

use arbitrary::Arbitrary;
use compactor_fuzz::transcript_checks::{check_chunks, check_transcript};
use compactor_shared::transcript::{
    extract, truncate_head_tail, ToolAllowList, TranscriptBudgets, TranscriptConfig,
};
use compactor_shared::{Message, MessageId, Part, Role};
use libfuzzer_sys::fuzz_target;

/// Marks reasoning text; stripped from every other string, so finding it in
/// a transcript means reasoning leaked.
const SENTINEL: char = '§';

#[derive(Arbitrary, Debug)]
enum Fragment {
    Raw(String),
    Opener,
    NewlineOpener,
    Newline,
    CarriageReturn,
    FakeHeader(i64, FuzzRole),
    Multibyte,
    Spaces(u8),
}

#[derive(Arbitrary, Debug)]
struct Content(Vec<Fragment>);

impl Content {
    fn render(&self) -> String {
        let mut s = String::new();
        for fragment in &self.0 {
            match fragment {
                Fragment::Raw(raw) => s.extend(raw.chars().filter(|&c| c != SENTINEL)),
                Fragment::Opener => s.push_str("[#"),
                Fragment::NewlineOpener => s.push_str("\n[#"),
                Fragment::Newline => s.push('\n'),
                Fragment::CarriageReturn => s.push('\r'),
                Fragment::FakeHeader(id, role) => {
                    s.push_str(&format!("[#{id} {}]\n", role.header()));
                }
                Fragment::Multibyte => s.push_str("é😀"),
                Fragment::Spaces(n) => s.extend(std::iter::repeat_n(' ', usize::from(*n % 8))),
            }
        }
        s
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum FuzzRole {
    System,
    User,
    Assistant,
    Tool,
}

impl FuzzRole {
    fn role(self) -> Role {
        match self {
            FuzzRole::System => Role::System,
            FuzzRole::User => Role::User,
            FuzzRole::Assistant => Role::Assistant,
            FuzzRole::Tool => Role::Tool,
        }
    }

    fn header(self) -> &'static str {
        match self {
            FuzzRole::System => "SYSTEM",
            FuzzRole::User => "USER",
            FuzzRole::Assistant => "ASSISTANT",
            FuzzRole::Tool => "TOOL",
        }
    }
}

/// Tool names: the default allow list's exact names and prefix, others,
/// and names that try to start a header line themselves.
#[derive(Arbitrary, Debug)]
enum Tool {
    UserQuestions,
    ProceedInOnboarding,
    Linear(Content),
    Bash,
    Other(Content),
}

impl Tool {
    fn name(&self) -> String {
        match self {
            Tool::UserQuestions => "userQuestions".into(),
            Tool::ProceedInOnboarding => "proceedInOnboarding".into(),
            Tool::Linear(rest) => format!("linear{}", rest.render()),
            Tool::Bash => "bash".into(),
            Tool::Other(name) => name.render(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum FuzzPart {
    Text(Content),
    ToolCall(Tool, Content),
    ToolResult(Tool, Content, bool, bool),
    Reasoning(Content),
    File(Content, Option<Content>),
}

impl FuzzPart {
    fn part(&self) -> Part {
        match self {
            FuzzPart::Text(text) => Part::text(text.render()),
            FuzzPart::ToolCall(tool, input) => Part::tool_call(
                "c",
                tool.name(),
                serde_json::json!({ "q": input.render(), "n": [1, 2] }),
            ),
            FuzzPart::ToolResult(tool, output, is_error, pruned) => Part::ToolResult {
                call_id: "c".into(),
                tool_name: tool.name(),
                output: output.render(),
                is_error: *is_error,
                pruned: *pruned,
            },
            FuzzPart::Reasoning(text) => Part::Reasoning {
                text: format!("{SENTINEL}{}{SENTINEL}", text.render()),
            },
            FuzzPart::File(uri, name) => Part::File {
                uri: uri.render(),
                media_type: None,
                name: name.as_ref().map(Content::render),
            },
        }
    }
}

#[derive(Arbitrary, Debug)]
struct FuzzMessage {
    id: i64,
    role: FuzzRole,
    parts: Vec<FuzzPart>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    messages: Vec<FuzzMessage>,
    /// user, assistant, tool result, tool input (chars).
    budgets: [u8; 4],
    /// Every tool allowed (an empty prefix) instead of the default list.
    allow_all: bool,
    max_chars: u8,
    pages: Vec<u8>,
    truncate: (Content, u8),
}

fuzz_target!(|input: Input| {
    let messages: Vec<Message> = input
        .messages
        .iter()
        .map(|m| Message {
            id: MessageId(m.id),
            role: m.role.role(),
            parts: m.parts.iter().map(FuzzPart::part).collect(),
            pinned: false,
        })
        .collect();
    let [user, assistant, tool_result, tool_input] = input.budgets.map(usize::from);
    let config = TranscriptConfig {
        tools: if input.allow_all {
            ToolAllowList {
                names: vec![],
                prefixes: vec![String::new()],
            }
        } else {
            ToolAllowList::default()
        },
        budgets: TranscriptBudgets {
            user,
            assistant,
            tool_result,
            tool_input,
        },
    };

    let t = extract(&messages, &config);
    check_transcript(&messages, &config, &t);
    assert!(
        !t.text.contains(SENTINEL),
        "reasoning leaked into the transcript"
    );
    let pages: Vec<usize> = input.pages.iter().map(|&p| usize::from(p % 8)).collect();
    check_chunks(&messages, &config, &t, usize::from(input.max_chars), &pages);

    // truncate_head_tail: within budget untouched; else 70 % head, marker,
    // 30 % tail, both taken from the text.
    let (text, budget) = (input.truncate.0.render(), usize::from(input.truncate.1));
    let out = truncate_head_tail(&text, budget);
    let total = text.chars().count();
    if total <= budget {
        assert_eq!(out.as_ref(), text, "text within budget changed");
    } else {
        let head_chars = budget * 7 / 10;
        let head: String = text.chars().take(head_chars).collect();
        let tail: String = text.chars().skip(total - (budget - head_chars)).collect();
        let expected = format!("{head}\n…[truncated {} chars]…\n{tail}", total - budget);
        assert_eq!(out.as_ref(), expected, "not the 70/30 cut of the text");
    }
});
