//! Salvaging the summary sections and the state delta from real-world LLM
//! output.
//!
//! Models do not answer in the exact format asked for: headings come as
//! `## Key Facts` or `**KEY FACTS**`, the JSON sits in a fence with prose
//! around it, has trailing commas or comments, a field is a string instead
//! of a list. The parser takes what is valid, reports each deviation as a
//! typed [`ParseProblem`] (so the worker can count and log it), and fails
//! only when nothing usable is there. It never panics, and it is linear in
//! the size of the answer.
//!
//! The answer is read in one [`SummaryFormat`]: the headings of the other
//! format are not headings there, so an answer in the wrong format has no
//! section and is rejected by [`check`] like any answer that is no summary.

use serde_json::Value;

use crate::state::{Field, StateDelta, StateItem};
use crate::summary::{Section, SummarizerOutput, Summary, SummaryFormat};

mod checks;

pub use checks::{check, check_memory_block, check_summary, echo, Rejection};

/// Nothing usable in the answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the summarizer returned an empty answer")]
    Empty,
    #[error("no summary section and no state delta found in the answer (starts with {excerpt:?})")]
    NoSummary { excerpt: String },
}

/// A deviation from the requested format that was worked around.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseProblem {
    #[error("section {0} is missing")]
    MissingSection(&'static str),
    #[error("no STATE DELTA JSON found")]
    MissingDelta,
    #[error("the STATE DELTA is not valid JSON: {error}")]
    InvalidDeltaJson { error: String },
    #[error("the STATE DELTA is a JSON {found}, not an object")]
    DeltaNotAnObject { found: &'static str },
    #[error("delta field {field} is a {found}, not a list")]
    FieldWrongType {
        field: &'static str,
        found: &'static str,
    },
    #[error("delta field {field}[{index}] is a {found}, not an object or string")]
    ItemWrongType {
        field: &'static str,
        index: usize,
        found: &'static str,
    },
    #[error("delta field {field}[{index}] has neither text nor id")]
    ItemWithoutText { field: &'static str, index: usize },
    #[error("unknown delta key {key:?}")]
    UnknownDeltaKey { key: String },
    #[error("text outside any section: {excerpt:?}")]
    TextOutsideSections { excerpt: String },
}

impl ParseProblem {
    /// Every value of [`ParseProblem::label`].
    pub const LABELS: [&'static str; 9] = [
        "missing_section",
        "missing_delta",
        "invalid_delta_json",
        "delta_not_an_object",
        "field_wrong_type",
        "item_wrong_type",
        "item_without_text",
        "unknown_delta_key",
        "text_outside_sections",
    ];

    /// A bounded name of the kind of problem, for metrics and logs: unlike
    /// the `Display`, it never quotes the answer.
    pub fn label(&self) -> &'static str {
        match self {
            ParseProblem::MissingSection(_) => "missing_section",
            ParseProblem::MissingDelta => "missing_delta",
            ParseProblem::InvalidDeltaJson { .. } => "invalid_delta_json",
            ParseProblem::DeltaNotAnObject { .. } => "delta_not_an_object",
            ParseProblem::FieldWrongType { .. } => "field_wrong_type",
            ParseProblem::ItemWrongType { .. } => "item_wrong_type",
            ParseProblem::ItemWithoutText { .. } => "item_without_text",
            ParseProblem::UnknownDeltaKey { .. } => "unknown_delta_key",
            ParseProblem::TextOutsideSections { .. } => "text_outside_sections",
        }
    }
}

/// What was salvaged, and what had to be worked around.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub output: SummarizerOutput,
    pub problems: Vec<ParseProblem>,
}

/// Parses a compaction answer in the `sections` format: three sections
/// and a state delta.
pub fn parse_output(text: &str) -> Result<Parsed, ParseError> {
    parse(text, true, SummaryFormat::Sections)
}

/// Parses a rollup answer in the `sections` format (a missing delta is
/// expected there).
pub fn parse_rollup(text: &str) -> Result<Parsed, ParseError> {
    parse(text, false, SummaryFormat::Sections)
}

/// Parses a compaction answer in `format`: its sections and a state delta.
pub fn parse_output_as(text: &str, format: SummaryFormat) -> Result<Parsed, ParseError> {
    parse(text, true, format)
}

/// Parses a rollup answer in `format`.
pub fn parse_rollup_as(text: &str, format: SummaryFormat) -> Result<Parsed, ParseError> {
    parse(text, false, format)
}

/// Parses a memory-block answer: plain text, a code fence around it removed.
pub fn parse_memory_block(text: &str) -> Result<String, ParseError> {
    let mut t = text.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.split_once('\n').map_or("", |(_, body)| body);
        t = rest.trim_end().strip_suffix("```").unwrap_or(rest).trim();
    }
    if t.is_empty() {
        Err(ParseError::Empty)
    } else {
        Ok(t.to_owned())
    }
}

fn excerpt(text: &str) -> String {
    let mut s: String = text.trim().chars().take(80).collect();
    if text.trim().chars().count() > 80 {
        s.push('…');
    }
    s
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heading {
    Section(Section),
    Delta,
}

/// Recognizes a heading line of `format`; returns it and any text after a
/// colon.
fn heading(line: &str, format: SummaryFormat) -> Option<(Heading, &str)> {
    let trimmed = line.trim();
    let (head, rest) = match trimmed.split_once(':') {
        Some((h, r)) => (h, r.trim()),
        None => (trimmed, ""),
    };
    if head.is_empty() || head.len() > 60 {
        return None;
    }
    let cleaned: String = head
        .trim_start_matches(|c: char| c == '#' || c == '*' || c == '_' || c.is_whitespace())
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start_matches(['.', ')'])
        .trim()
        .trim_end_matches(|c: char| {
            c == '*' || c == '_' || c == '-' || c == '#' || c.is_whitespace()
        })
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect::<String>()
        .to_uppercase();
    let words: Vec<&str> = cleaned.split_whitespace().collect();
    let joined = words.join(" ");
    let h = match joined.as_str() {
        "STATE DELTA" | "WORKSTREAMSTATEDELTA" | "WORKSTREAM STATE DELTA" => Heading::Delta,
        title => match section_titled(title) {
            Some(s) if s.format() == format => Heading::Section(s),
            _ => return None,
        },
    };
    // "KEY FACTS - …" style: text after a dash counts as inline content.
    let rest = rest.trim_start_matches(['*', '_']).trim();
    Some((h, rest))
}

/// The section a cleaned, upper-cased heading names, in either format. The
/// hand-off titles are also recognised in the short forms models write
/// (`Next Steps`, `Pending Work`, `Errors & Fixes`).
fn section_titled(title: &str) -> Option<Section> {
    Some(match title {
        "KEY FACTS" => Section::KeyFacts,
        "CONVERSATION FLOW" => Section::ConversationFlow,
        "OPEN THREADS" => Section::OpenThreads,
        "PRIMARY REQUEST AND INTENT" | "PRIMARY REQUEST" | "PRIMARY REQUEST INTENT" => {
            Section::PrimaryRequest
        }
        "USER MESSAGES" | "ALL USER MESSAGES" => Section::UserMessages,
        "WORK COMPLETED" | "COMPLETED WORK" => Section::WorkCompleted,
        "ERRORS AND FIXES" | "ERRORS FIXES" | "ERRORS AND FIXES APPLIED" => Section::ErrorsAndFixes,
        "KEY TECHNICAL DETAILS" | "TECHNICAL DETAILS" => Section::TechnicalDetails,
        "DECISIONS MADE" | "KEY DECISIONS" => Section::DecisionsMade,
        // `/` is dropped by the cleaning: "Pending/Incomplete Work".
        "PENDINGINCOMPLETE WORK"
        | "PENDING INCOMPLETE WORK"
        | "PENDING WORK"
        | "INCOMPLETE WORK"
        | "PENDING TASKS" => Section::PendingWork,
        "CURRENT STATE" => Section::CurrentState,
        "RECOMMENDED NEXT STEP" | "RECOMMENDED NEXT STEPS" | "NEXT STEP" | "NEXT STEPS" => {
            Section::NextStep
        }
        _ => return None,
    })
}

/// Recognizes a heading line of either format (the memory-block check,
/// which treats any summary heading as no content).
fn any_heading(line: &str) -> Option<(Heading, &str)> {
    SummaryFormat::ALL
        .into_iter()
        .find_map(|format| heading(line, format))
}

/// A bullet's text, when `line` starts a bullet.
fn bullet(line: &str) -> Option<&str> {
    let t = line.trim_start();
    for marker in ["- ", "* ", "• ", "– "] {
        if let Some(rest) = t.strip_prefix(marker) {
            return Some(rest.trim());
        }
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && digits < 4 {
        let rest = &t[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some(r.trim());
        }
    }
    None
}

fn is_placeholder(text: &str) -> bool {
    let t = text
        .trim()
        .trim_matches(|c: char| c == '(' || c == ')' || c == '.' || c == '*')
        .to_ascii_lowercase();
    t.is_empty() || t == "none" || t == "n/a" || t == "na" || t == "-" || t == "nothing"
}

fn strip_wrappers(text: &str) -> &str {
    let mut t = text;
    if let (Some(start), Some(end)) = (t.find("<analysis>"), t.find("</analysis>")) {
        if start < end {
            t = &t[end + "</analysis>".len()..];
        }
    }
    if let Some(start) = t.find("<summary>") {
        let body = &t[start + "<summary>".len()..];
        t = body.find("</summary>").map_or(body, |end| &body[..end]);
    }
    t
}

fn parse(text: &str, expect_delta: bool, format: SummaryFormat) -> Result<Parsed, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let body = strip_wrappers(text);
    let mut summary = Summary::empty(format);
    let mut problems = Vec::new();
    let mut seen = [false; Section::ALL.len()];
    let mut current: Option<Heading> = None;
    let mut delta_text: Option<String> = None;
    let mut fences: Vec<String> = Vec::new();
    let mut outside = String::new();
    let mut lines = body.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("```") {
            let mut fenced = String::new();
            for inner in lines.by_ref() {
                if inner.trim_start().starts_with("```") {
                    break;
                }
                fenced.push_str(inner);
                fenced.push('\n');
            }
            if current == Some(Heading::Delta) && delta_text.is_none() {
                delta_text = Some(fenced);
            } else {
                fences.push(fenced);
            }
            continue;
        }
        if let Some((h, rest)) = heading(line, format) {
            current = Some(h);
            if let Heading::Section(s) = h {
                seen[s as usize] = true;
                if !rest.is_empty() && !is_placeholder(rest) {
                    summary
                        .section_mut(s)
                        .push(bullet(rest).unwrap_or(rest).to_owned());
                }
            } else if !rest.is_empty() {
                delta_text.get_or_insert_with(String::new).push_str(rest);
            }
            continue;
        }
        match current {
            Some(Heading::Section(s)) => {
                let list = summary.section_mut(s);
                if let Some(b) = bullet(line) {
                    if !is_placeholder(b) {
                        list.push(b.to_owned());
                    }
                } else if line.trim().is_empty() {
                    continue;
                } else if line.starts_with(char::is_whitespace) && !list.is_empty() {
                    if let Some(last) = list.last_mut() {
                        last.push(' ');
                        last.push_str(line.trim());
                    }
                } else if !is_placeholder(line) {
                    list.push(line.trim().to_owned());
                }
            }
            Some(Heading::Delta) => {
                let d = delta_text.get_or_insert_with(String::new);
                d.push_str(line);
                d.push('\n');
            }
            None => {
                if !line.trim().is_empty() && outside.len() < 200 {
                    outside.push_str(line.trim());
                    outside.push(' ');
                }
            }
        }
    }

    // The delta: after its heading, else in a fence, else any JSON object.
    let candidate = delta_text
        .as_deref()
        .and_then(|d| first_object(d).or(Some(d.trim())))
        .filter(|d| !d.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            fences
                .iter()
                .find_map(|f| first_object(f).map(str::to_owned))
        })
        .or_else(|| first_object(body).map(str::to_owned));
    let mut delta = StateDelta::default();
    let mut delta_found = false;
    match candidate {
        Some(json) => match serde_json::from_str::<Value>(&repair_json(&json)) {
            Ok(value) => {
                delta_found = true;
                delta = delta_from(value, &mut problems);
            }
            Err(e) => problems.push(ParseProblem::InvalidDeltaJson {
                error: excerpt(&e.to_string()),
            }),
        },
        None if expect_delta => problems.push(ParseProblem::MissingDelta),
        None => {}
    }

    let any_section = seen.iter().any(|s| *s);
    if !any_section && !delta_found {
        return Err(ParseError::NoSummary {
            excerpt: excerpt(text),
        });
    }
    if !outside.trim().is_empty() && any_section {
        problems.push(ParseProblem::TextOutsideSections {
            excerpt: excerpt(&outside),
        });
    }
    for &s in format.sections() {
        if !seen[s as usize] {
            problems.push(ParseProblem::MissingSection(s.heading()));
        }
    }
    Ok(Parsed {
        output: SummarizerOutput { summary, delta },
        problems,
    })
}

/// The first balanced `{…}` in `text` (braces in strings ignored). At most
/// a few start positions are tried, so garbage input stays linear.
fn first_object(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut from = 0;
    for _ in 0..8 {
        let start = from + text.get(from..)?.find('{')?;
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        for (i, &b) in bytes.iter().enumerate().skip(start) {
            if in_string {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return text.get(start..=i);
                    }
                }
                _ => {}
            }
        }
        from = start + 1;
    }
    None
}

/// Fixes the usual breakage: smart quotes, `//` comments and trailing
/// commas outside strings.
fn repair_json(json: &str) -> String {
    let json = json.replace(['\u{201c}', '\u{201d}'], "\"");
    let mut out = String::with_capacity(json.len());
    let mut chars = json.chars().peekable();
    let mut in_string = false;
    let mut escaped = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '/' if chars.peek() == Some(&'/') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ',' => {
                // Drop the comma when only white space separates it from a
                // closing bracket.
                let rest: String = chars.clone().take_while(|n| n.is_whitespace()).collect();
                let next = chars.clone().nth(rest.chars().count());
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn field_for(key: &str) -> Option<Field> {
    let snake: String = key
        .chars()
        .flat_map(|c| {
            if c.is_ascii_uppercase() {
                vec!['_', c.to_ascii_lowercase()]
            } else {
                vec![c]
            }
        })
        .collect();
    let snake = snake.trim_start_matches('_').replace(['-', ' '], "_");
    Field::ALL.into_iter().find(|f| f.name() == snake)
}

fn delta_from(value: Value, problems: &mut Vec<ParseProblem>) -> StateDelta {
    let mut delta = StateDelta::default();
    let Value::Object(map) = value else {
        problems.push(ParseProblem::DeltaNotAnObject {
            found: kind_of(&value),
        });
        return delta;
    };
    for (key, value) in map {
        let Some(field) = field_for(&key) else {
            problems.push(ParseProblem::UnknownDeltaKey { key: excerpt(&key) });
            continue;
        };
        let name = field.name();
        let items: Vec<Value> = match value {
            Value::Array(items) => items,
            Value::Null => Vec::new(),
            v @ (Value::String(_) | Value::Object(_)) => vec![v],
            other => {
                problems.push(ParseProblem::FieldWrongType {
                    field: name,
                    found: kind_of(&other),
                });
                continue;
            }
        };
        let list = delta.field_mut(field);
        for (index, item) in items.into_iter().enumerate() {
            match item_from(item) {
                Ok(Some(item)) => list.push(item),
                Ok(None) => problems.push(ParseProblem::ItemWithoutText { field: name, index }),
                Err(found) => problems.push(ParseProblem::ItemWrongType {
                    field: name,
                    index,
                    found,
                }),
            }
        }
    }
    delta
}

fn scalar_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// An item's text, unless it says nothing: a placeholder such as `(none)`
/// or `n/a`, or punctuation only (what a model writes when it fills the
/// template without content). Such items would otherwise become decisions
/// or tasks that read as junk.
fn item_text(value: Option<&Value>) -> Option<String> {
    scalar_text(value).filter(|t| checks::says_something(t))
}

fn item_from(value: Value) -> Result<Option<StateItem>, &'static str> {
    match value {
        Value::String(s) if !checks::says_something(&s) => Ok(None),
        Value::String(s) => Ok(Some(StateItem::new(s.trim()))),
        Value::Object(map) => {
            let text = ["text", "title", "description", "content", "value"]
                .iter()
                .find_map(|k| item_text(map.get(*k)));
            let id = scalar_text(map.get("id"));
            let status = scalar_text(map.get("status"));
            if text.is_none() && id.is_none() {
                return Ok(None);
            }
            Ok(Some(StateItem {
                id,
                text: text.unwrap_or_default(),
                status,
            }))
        }
        other => Err(kind_of(&other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CLEAN: &str = "KEY FACTS:\n- Uses Postgres 16\n- Config in `config/app.toml`\n\nCONVERSATION FLOW:\n- #1 user asked for a fix\n- #4 assistant fixed it\n\nOPEN THREADS:\n- deploy?\n\nSTATE DELTA:\n```json\n{\"key_decisions\": [{\"text\": \"round half-even\"}], \"tasks\": [{\"id\": \"T1\", \"text\": \"deploy\", \"status\": \"open\"}]}\n```\n";

    #[test]
    fn a_clean_answer_parses_without_problems() {
        let p = parse_output(CLEAN).unwrap();
        assert_eq!(p.problems, vec![]);
        assert_eq!(
            p.output.summary.key_facts,
            ["Uses Postgres 16", "Config in `config/app.toml`"]
        );
        assert_eq!(p.output.summary.conversation_flow.len(), 2);
        assert_eq!(p.output.summary.open_threads, ["deploy?"]);
        assert_eq!(p.output.delta.key_decisions[0].text, "round half-even");
        assert_eq!(
            p.output.delta.tasks[0],
            StateItem::new("deploy").with_id("T1").with_status("open")
        );
    }

    #[test]
    fn markdown_headings_numbered_bullets_prose_and_trailing_commas() {
        let text = "Sure! Here is the summary.\n\n## Key Facts\n1. First fact\n2) Second fact\n   continued here\n\n**CONVERSATION FLOW**\n* did a thing\n\n### 3. Open threads:\n• none yet? no: a real one\n\nState delta\n```\n{\n  \"risks\": [\"cache stale\",],\n  // a comment\n  \"tasks\": [{\"title\": \"ship\", \"id\": 7,},],\n}\n```\nHope this helps!";
        let p = parse_output(text).unwrap();
        assert_eq!(
            p.output.summary.key_facts,
            ["First fact", "Second fact continued here"]
        );
        assert_eq!(p.output.summary.conversation_flow, ["did a thing"]);
        assert_eq!(p.output.summary.open_threads, ["none yet? no: a real one"]);
        assert_eq!(p.output.delta.risks, [StateItem::new("cache stale")]);
        assert_eq!(p.output.delta.tasks, [StateItem::new("ship").with_id("7")]);
        assert_eq!(
            p.problems,
            vec![ParseProblem::TextOutsideSections {
                excerpt: "Sure! Here is the summary.".into()
            }]
        );
    }

    #[test]
    fn a_missing_section_is_reported_not_fatal() {
        let text = "KEY FACTS:\n- a\nCONVERSATION FLOW:\n- b\nSTATE DELTA:\n{}";
        let p = parse_output(text).unwrap();
        assert_eq!(
            p.problems,
            vec![ParseProblem::MissingSection("OPEN THREADS")]
        );
    }

    #[test]
    fn wrong_types_are_salvaged_or_reported() {
        let text = "KEY FACTS:\n- a\nCONVERSATION FLOW:\n- b\nOPEN THREADS:\n- c\nSTATE DELTA:\n{\"tasks\": \"write docs\", \"risks\": 3, \"open_questions\": [1, {\"status\": \"x\"}, \"why?\"], \"mood\": \"good\", \"artifacts\": null}";
        let p = parse_output(text).unwrap();
        assert_eq!(p.output.delta.tasks, [StateItem::new("write docs")]);
        assert_eq!(p.output.delta.open_questions, [StateItem::new("why?")]);
        assert!(p.problems.contains(&ParseProblem::FieldWrongType {
            field: "risks",
            found: "number"
        }));
        assert!(p.problems.contains(&ParseProblem::ItemWrongType {
            field: "open_questions",
            index: 0,
            found: "number"
        }));
        assert!(p.problems.contains(&ParseProblem::ItemWithoutText {
            field: "open_questions",
            index: 1
        }));
        assert!(p
            .problems
            .contains(&ParseProblem::UnknownDeltaKey { key: "mood".into() }));
    }

    #[test]
    fn camel_case_keys_and_inline_heading_content() {
        let text = "KEY FACTS: one fact\nCONVERSATION FLOW: - step\nOPEN THREADS: (none)\nWorkstreamStateDelta: {\"keyDecisions\": [\"a\"], \"activeConstraints\": [\"b\"], \"openQuestions\": [], \"agentContributions\": [{\"text\": \"planner did X\"}]}";
        let p = parse_output(text).unwrap();
        assert_eq!(p.output.summary.key_facts, ["one fact"]);
        assert_eq!(p.output.summary.conversation_flow, ["step"]);
        assert!(p.output.summary.open_threads.is_empty());
        assert_eq!(p.output.delta.key_decisions, [StateItem::new("a")]);
        assert_eq!(p.output.delta.active_constraints, [StateItem::new("b")]);
        assert_eq!(
            p.output.delta.agent_contributions,
            [StateItem::new("planner did X")]
        );
        assert_eq!(p.problems, vec![]);
    }

    #[test]
    fn only_json_is_usable_but_reports_the_missing_sections() {
        let p = parse_output("```json\n{\"risks\": [\"r\"]}\n```").unwrap();
        assert_eq!(p.output.delta.risks, [StateItem::new("r")]);
        assert_eq!(p.problems.len(), 3);
    }

    #[test]
    fn delta_items_that_say_nothing_are_dropped() {
        let text = "KEY FACTS:\n- a\nSTATE DELTA:\n{\"key_decisions\": [\"(none)\", \"n/a\", \"...\", \"use v2\"], \"risks\": [{\"text\": \"none\", \"id\": \"R1\", \"status\": \"resolved\"}]}";
        let p = parse_output(text).unwrap();
        assert_eq!(p.output.delta.key_decisions, [StateItem::new("use v2")]);
        // An update by id keeps its id, without the placeholder text.
        assert_eq!(
            p.output.delta.risks,
            [StateItem {
                id: Some("R1".into()),
                text: String::new(),
                status: Some("resolved".into()),
            }]
        );
        assert_eq!(
            p.problems
                .iter()
                .filter(|p| matches!(p, ParseProblem::ItemWithoutText { .. }))
                .count(),
            3
        );
    }

    #[test]
    fn every_problem_has_a_bounded_label_without_content() {
        let problems = [
            ParseProblem::MissingSection("KEY FACTS"),
            ParseProblem::MissingDelta,
            ParseProblem::InvalidDeltaJson {
                error: "secret".into(),
            },
            ParseProblem::DeltaNotAnObject { found: "array" },
            ParseProblem::FieldWrongType {
                field: "tasks",
                found: "number",
            },
            ParseProblem::ItemWrongType {
                field: "tasks",
                index: 0,
                found: "number",
            },
            ParseProblem::ItemWithoutText {
                field: "tasks",
                index: 0,
            },
            ParseProblem::UnknownDeltaKey {
                key: "secret".into(),
            },
            ParseProblem::TextOutsideSections {
                excerpt: "secret".into(),
            },
        ];
        let labels: std::collections::HashSet<&str> =
            problems.iter().map(ParseProblem::label).collect();
        assert_eq!(labels.len(), ParseProblem::LABELS.len());
        assert!(labels.iter().all(|l| ParseProblem::LABELS.contains(l)));
        assert!(labels.iter().all(|l| !l.contains("secret")));
    }

    #[test]
    fn invalid_json_and_missing_delta_are_problems() {
        let p = parse_output("KEY FACTS:\n- a\nCONVERSATION FLOW:\n- b\nOPEN THREADS:\n- c\nSTATE DELTA:\n{\"tasks\": [oops]}").unwrap();
        assert!(matches!(
            p.problems[..],
            [ParseProblem::InvalidDeltaJson { .. }]
        ));
        let p =
            parse_output("KEY FACTS:\n- a\nCONVERSATION FLOW:\n- b\nOPEN THREADS:\n- c\n").unwrap();
        assert_eq!(p.problems, vec![ParseProblem::MissingDelta]);
        let r =
            parse_rollup("KEY FACTS:\n- a\nCONVERSATION FLOW:\n- b\nOPEN THREADS:\n- c\n").unwrap();
        assert_eq!(r.problems, vec![]);
    }

    #[test]
    fn analysis_scratchpad_and_summary_wrapper_are_stripped() {
        let text = "<analysis>KEY FACTS:\n- scratch</analysis>\n<summary>\nKEY FACTS:\n- real\nCONVERSATION FLOW:\n- x\nOPEN THREADS:\n- y\n</summary>\nSTATE DELTA: {}";
        let p = parse_output(text).unwrap();
        assert_eq!(p.output.summary.key_facts, ["real"]);
    }

    const HANDOFF: &str = "## 1. Primary Request and Intent\n- migrate billing to Postgres 16\n## 2. User Messages\n- #1 user: migrate billing\n## 3. Work Completed\n- #2 assistant: wrote `migrations/0001.sql`\n## 4. Errors and Fixes\n- (none)\n## 5. Key Technical Details\n- config in `billing/app.toml`\n## 6. Decisions Made\n- round half-even\n## 7. Pending/Incomplete Work\n- run the load test\n## 8. Current State\n- writing the rollback\n## 9. Recommended Next Step\n- finish the rollback\n\nSTATE DELTA:\n```json\n{\"tasks\": [{\"text\": \"load test\", \"status\": \"open\"}]}\n```\n";

    #[test]
    fn a_clean_handoff9_answer_parses_without_problems() {
        let p = parse_output_as(HANDOFF, SummaryFormat::Handoff9).unwrap();
        assert_eq!(p.problems, vec![]);
        let s = &p.output.summary;
        assert_eq!(s.format, SummaryFormat::Handoff9);
        assert_eq!(s.primary_request, ["migrate billing to Postgres 16"]);
        assert_eq!(
            s.work_completed,
            ["#2 assistant: wrote `migrations/0001.sql`"]
        );
        assert!(s.errors_and_fixes.is_empty());
        assert_eq!(s.next_step, ["finish the rollback"]);
        assert_eq!(p.output.delta.tasks[0].text, "load test");
        assert!(s.key_facts.is_empty() && s.open_threads.is_empty());
    }

    #[test]
    fn handoff9_headings_as_models_write_them() {
        let text = "Here is the hand-off.\n**1. Primary Request and Intent:** migrate billing\n### 2) User messages\n1. #1 user: go\n## 4. Errors & Fixes\n- E0502 fixed by a clone\nPending / Incomplete Work:\n- load test\n## 8. CURRENT STATE\n- rollback\nNext steps: ship it\n";
        let p = parse_output_as(text, SummaryFormat::Handoff9).unwrap();
        let s = &p.output.summary;
        assert_eq!(s.primary_request, ["migrate billing"]);
        assert_eq!(s.user_messages, ["#1 user: go"]);
        assert_eq!(s.errors_and_fixes, ["E0502 fixed by a clone"]);
        assert_eq!(s.pending_work, ["load test"]);
        assert_eq!(s.current_state, ["rollback"]);
        assert_eq!(s.next_step, ["ship it"]);
        let missing: Vec<&ParseProblem> = p
            .problems
            .iter()
            .filter(|p| matches!(p, ParseProblem::MissingSection(_)))
            .collect();
        assert_eq!(
            missing,
            [
                &ParseProblem::MissingSection("Work Completed"),
                &ParseProblem::MissingSection("Key Technical Details"),
                &ParseProblem::MissingSection("Decisions Made"),
            ]
        );
        assert!(p.problems.contains(&ParseProblem::MissingDelta));
        assert!(p.problems.contains(&ParseProblem::TextOutsideSections {
            excerpt: "Here is the hand-off.".into()
        }));
    }

    #[test]
    fn the_other_formats_headings_are_not_headings() {
        // A sections answer read as handoff9: no section of it.
        let p = parse_output_as(CLEAN, SummaryFormat::Handoff9).unwrap();
        assert!(p.output.summary.is_empty());
        assert_eq!(
            p.problems
                .iter()
                .filter(|p| matches!(p, ParseProblem::MissingSection(_)))
                .count(),
            9
        );
        // A handoff9 answer read as sections: nothing but the delta.
        let p = parse_output(HANDOFF).unwrap();
        assert!(p.output.summary.is_empty());
        assert_eq!(p.problems.len(), 3, "{:?}", p.problems);
        assert_eq!(
            parse_rollup_as(HANDOFF, SummaryFormat::Handoff9)
                .unwrap()
                .problems,
            vec![]
        );
        assert!(matches!(
            parse_output_as("## 3. Work Completed", SummaryFormat::Sections),
            Err(ParseError::NoSummary { .. })
        ));
    }

    #[test]
    fn nothing_usable_is_an_error() {
        assert_eq!(parse_output("  \n "), Err(ParseError::Empty));
        assert!(matches!(
            parse_output("I cannot help with that."),
            Err(ParseError::NoSummary { .. })
        ));
    }

    #[test]
    fn memory_block_answers() {
        assert_eq!(
            parse_memory_block("```\n- a\n- b\n```").unwrap(),
            "- a\n- b"
        );
        assert_eq!(parse_memory_block("- a"), Ok("- a".to_owned()));
        assert_eq!(parse_memory_block("``` \n```"), Err(ParseError::Empty));
    }

    #[test]
    fn large_garbage_is_handled() {
        let garbage = "{".repeat(2_000_000) + &"\"".repeat(1_000_000);
        assert!(parse_output(&garbage).is_err() || parse_output(&garbage).is_ok());
    }

    /// Text that says something: placeholders (`none`, `na`, …) are
    /// dropped by design, so they cannot round-trip.
    fn content(pattern: &'static str) -> impl Strategy<Value = String> {
        pattern.prop_filter("not a placeholder", |t| !is_placeholder(t))
    }

    fn item() -> impl Strategy<Value = StateItem> {
        (
            proptest::option::of("[A-Za-z0-9]{1,6}"),
            content("[a-z][a-z0-9 ,'.-]{0,40}[a-z0-9]"),
            proptest::option::of("(open|done|resolved|in_progress)"),
        )
            .prop_map(|(id, text, status)| StateItem { id, text, status })
    }

    fn bullet_text() -> impl Strategy<Value = String> {
        content("[a-z][a-z0-9 ,'.()/`-]{0,60}[a-z0-9]")
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(s in "(?s)[ -~\u{e9}\u{201c}\u{201d}\n\t{}\\[\\]\"`#*:,]{0,400}") {
            let _ = parse_output(&s);
            let _ = parse_rollup(&s);
            let _ = parse_memory_block(&s);
        }

        #[test]
        fn never_panics_on_heading_soup(parts in proptest::collection::vec(
            prop_oneof![
                Just("KEY FACTS:\n"), Just("## Open Threads\n"), Just("STATE DELTA:\n"), Just("```json\n"),
                Just("```\n"), Just("{"), Just("}"), Just("\""), Just(",]"), Just("- x\n"), Just("  y\n"), Just("//c\n"),
            ],
            0..60,
        )) {
            let text: String = parts.concat();
            let _ = parse_output(&text);
        }

        #[test]
        fn rendered_output_round_trips(
            facts in proptest::collection::vec(bullet_text(), 0..5),
            flow in proptest::collection::vec(bullet_text(), 0..5),
            threads in proptest::collection::vec(bullet_text(), 0..5),
            decisions in proptest::collection::vec(item(), 0..4),
            tasks in proptest::collection::vec(item(), 0..4),
            risks in proptest::collection::vec(item(), 0..3),
        ) {
            let summary = Summary { key_facts: facts, conversation_flow: flow, open_threads: threads, ..Default::default() };
            let delta = StateDelta { key_decisions: decisions, tasks, risks, ..Default::default() };
            let text = format!(
                "{}\nSTATE DELTA:\n```json\n{}\n```\n",
                summary.render(),
                serde_json::to_string_pretty(&delta).unwrap()
            );
            let parsed = parse_output(&text).unwrap();
            prop_assert_eq!(parsed.problems, vec![]);
            prop_assert_eq!(parsed.output, SummarizerOutput { summary, delta });
        }
    }
}
