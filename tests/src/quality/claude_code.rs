//! Sessions made of real Claude Code transcripts: two sessions a developer
//! kept as test fixtures in a public repository (marot/spotter, MIT),
//! derived by `tests/data/claude-code/make.py` (see its README): one the
//! engine may be tuned on (`tune.json`), one held out (`held-out.json`).
//!
//! Messages: user text as user messages, an assistant API message's text
//! and tool calls as one assistant message, each tool result as a tool
//! message. Facts: written into the fixture by the script's rules, fixed
//! before any scoring (values the user typed; tool-output values the
//! assistant later repeated in its own text); here each is located by
//! measurement as for generated sessions (first message holding it as a
//! whole token, the most salient place as its source), and one that is in
//! no message as a whole token, or equal but for case to an earlier one,
//! is dropped. Nothing is superseded.

use compactor_producer::client::IncomingMessage;
use compactor_shared::{Part, Role};
use serde::Deserialize;

use super::sessions::{check, locate, Class, Fact, Kind, Session, SessionSpec};

/// Which Claude Code fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Tune,
    HeldOut,
}

impl Split {
    /// The fixture, relative to the crate (`tests/`).
    pub fn path(self) -> &'static str {
        match self {
            Split::Tune => "data/claude-code/tune.json",
            Split::HeldOut => "data/claude-code/held-out.json",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Split::Tune => {
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/data/claude-code/tune.json"
                ))
            }
            Split::HeldOut => include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/data/claude-code/held-out.json"
            )),
        }
    }

    /// The fixture, parsed (panics on a broken fixture).
    pub fn fixture(self) -> Fixture {
        serde_json::from_str(self.text())
            .unwrap_or_else(|e| panic!("tests/{}: not a fixture: {e}", self.path()))
    }
}

/// A derived Claude Code fixture.
#[derive(Debug, Clone, Deserialize)]
pub struct Fixture {
    pub source: String,
    pub path: String,
    pub commit: String,
    pub licence: String,
    pub split: String,
    pub facts: Vec<FixtureFact>,
    pub messages: Vec<FixtureMessage>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FixtureFact {
    pub value: String,
    /// `path`, `url`, `identifier`, `quantity`.
    pub kind: String,
    /// `user` (typed by the user) or `repeated` (tool output the assistant
    /// repeated).
    pub rule: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FixtureMessage {
    /// `user`, `assistant` or `tool`.
    pub role: String,
    pub parts: Vec<FixturePart>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum FixturePart {
    Text {
        text: String,
    },
    Call {
        call: String,
        tool: String,
        input: serde_json::Value,
    },
    Result {
        result: String,
        tool: String,
        output: String,
        is_error: bool,
    },
}

impl Fixture {
    /// One line: where it comes from.
    pub fn provenance(&self) -> String {
        format!(
            "{} of {} at commit {}, {}",
            self.path,
            self.source,
            &self.commit[..self.commit.len().min(12)],
            self.licence
        )
    }

    fn message(m: &FixtureMessage) -> IncomingMessage {
        let role = match m.role.as_str() {
            "user" => Role::User,
            "tool" => Role::Tool,
            _ => Role::Assistant,
        };
        let parts = m
            .parts
            .iter()
            .map(|p| match p {
                FixturePart::Text { text } => Part::text(text),
                FixturePart::Call { call, tool, input } => {
                    Part::tool_call(call.clone(), tool, input.clone())
                }
                FixturePart::Result {
                    result,
                    tool,
                    output,
                    is_error,
                } => Part::ToolResult {
                    call_id: result.clone(),
                    tool_name: tool.clone(),
                    output: output.clone(),
                    is_error: *is_error,
                    pruned: false,
                },
            })
            .collect();
        IncomingMessage {
            role,
            parts,
            pinned: false,
            client_id: None,
        }
    }
}

fn kind(name: &str) -> Kind {
    match name {
        "path" => Kind::Path,
        "url" => Kind::Url,
        "quantity" => Kind::Quantity,
        _ => Kind::Identifier,
    }
}

/// The session of `split`: its first `spec.messages` messages, cut before a
/// user message (so no tool call loses its result), at least one turn.
pub fn session(spec: SessionSpec, split: Split) -> Session {
    let fixture = split.fixture();
    let mut messages: Vec<IncomingMessage> =
        fixture.messages.iter().map(Fixture::message).collect();
    if messages.len() > spec.messages {
        let mut cut = spec.messages;
        while cut > 1 && messages[cut].role != Role::User {
            cut -= 1;
        }
        messages.truncate(cut.max(1));
    }
    let mut facts: Vec<Fact> = Vec::new();
    for f in &fixture.facts {
        if facts.iter().any(|g| g.value.eq_ignore_ascii_case(&f.value)) {
            continue;
        }
        let Some((message, source)) = locate(&messages, &f.value, false) else {
            continue;
        };
        facts.push(Fact {
            value: f.value.clone(),
            kind: kind(&f.kind),
            class: Class::Value,
            source,
            message,
            superseded: None,
        });
    }
    let session = Session {
        spec,
        messages,
        facts,
    };
    if let Err(e) = check(&session) {
        panic!("Claude Code fixture {}: {e}", split.path());
    }
    session
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quality::sessions::Shape;

    #[test]
    fn both_fixtures_make_checked_sessions() {
        for shape in [Shape::ClaudeCodeTune, Shape::ClaudeCodeHeldOut] {
            let s = Session::generate(SessionSpec::new(shape, 1));
            check(&s).unwrap();
            println!("{}", s.describe());
            assert!(s.messages.len() >= 200, "{shape:?}");
            assert!(s.facts.len() >= 20, "{shape:?}: {} facts", s.facts.len());
            let n = s.messages.len();
            let sc =
                crate::quality::score(&s, n, &crate::quality::ContextView::verbatim(&s.messages));
            assert_eq!(sc.values.kept, sc.values.total);
            // Every tool result follows its call.
            let mut calls = std::collections::HashSet::new();
            for m in &s.messages {
                for p in &m.parts {
                    match p {
                        Part::ToolCall { call_id, .. } => {
                            calls.insert(call_id.clone());
                        }
                        Part::ToolResult { call_id, .. } => {
                            assert!(
                                calls.contains(call_id),
                                "{shape:?}: {call_id} before its call"
                            )
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}
