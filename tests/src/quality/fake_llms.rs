//! The summarizers the benchmark runs the product with, and the two fake
//! LLMs among them: OpenAI-compatible chat-completions servers on loopback
//! (wiremock) that answer from the prompt they receive, instantly.
//!
//! - [`Style::ValueFree`] writes fluent, well-formed answers (the three
//!   sections and a STATE DELTA) made from the transcript's user and
//!   assistant lines, but drops every exact value: no digits, paths, ids,
//!   URLs, code, capitalized names. It is a model that paraphrases.
//! - [`Style::MalformedEvery3rd`] answers every third compaction call
//!   malformed, in turn: unrelated JSON, a fenced `{"key_decisions": …}`
//!   with no section, a well-formed answer cut off mid-word with
//!   `finish_reason: "length"`, an empty answer. Its other answers are
//!   well-formed and *keep* values (user lines verbatim), so what this mode
//!   measures is what a bad answer costs, not what paraphrase costs.
//!
//! Both keep their summary within the `max_tokens` of the request
//! (3 characters per token), dropping the oldest conversation flow first,
//! as a model writing to a budget would.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Which summarizer a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// No LLM: the offline summarizer (the default configuration).
    Extractive,
    /// An LLM that writes fluent summaries without exact values.
    ValueFree,
    /// An LLM that answers malformed on every third compaction call.
    Malformed,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Extractive, Mode::ValueFree, Mode::Malformed];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Extractive => "extractive",
            Mode::ValueFree => "value_free_llm",
            Mode::Malformed => "malformed_llm",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Mode::Extractive => "extractive (default)",
            Mode::ValueFree => "LLM, fluent but value-free",
            Mode::Malformed => "LLM, malformed every 3rd call",
        }
    }

    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The fake LLM this mode needs, if any.
    pub fn style(self) -> Option<Style> {
        match self {
            Mode::Extractive => None,
            Mode::ValueFree => Some(Style::ValueFree),
            Mode::Malformed => Some(Style::MalformedEvery3rd),
        }
    }
}

/// How a fake LLM answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    ValueFree,
    MalformedEvery3rd,
}

/// The malformed answers, in the order they are given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    UnrelatedJson,
    FencedDecisionsOnly,
    CutOff,
    Empty,
}

impl Malformed {
    const CYCLE: [Malformed; 4] = [
        Malformed::UnrelatedJson,
        Malformed::FencedDecisionsOnly,
        Malformed::CutOff,
        Malformed::Empty,
    ];
}

/// What a fake LLM was asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LlmStats {
    pub calls: u32,
    pub compaction_calls: u32,
    pub malformed_answers: u32,
}

/// A fake LLM server.
pub struct SummaryLlm {
    server: MockServer,
    stats: Arc<Mutex<LlmStats>>,
}

struct Responder {
    style: Style,
    stats: Arc<Mutex<LlmStats>>,
}

impl SummaryLlm {
    pub async fn start(style: Style) -> SummaryLlm {
        let server = MockServer::start().await;
        let stats = Arc::new(Mutex::new(LlmStats::default()));
        Mock::given(method("POST"))
            .and(path("/chat/completions"))
            .respond_with(Responder {
                style,
                stats: stats.clone(),
            })
            .mount(&server)
            .await;
        SummaryLlm { server, stats }
    }

    /// Base URL to configure (`…/chat/completions` is appended).
    pub fn url(&self) -> String {
        self.server.uri()
    }

    pub fn stats(&self) -> LlmStats {
        *self.stats.lock().unwrap()
    }
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let user = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .next_back()
            .unwrap_or_default()
            .to_owned();
        let max_tokens = body["max_tokens"]
            .as_u64()
            .or_else(|| body["max_completion_tokens"].as_u64())
            .unwrap_or(1_000);
        let keep_values = self.style == Style::MalformedEvery3rd;
        let mut stats = self.stats.lock().unwrap();
        stats.calls += 1;
        let (text, finish) = if user.contains("<context-compaction-input>") {
            stats.compaction_calls += 1;
            let n = stats.compaction_calls;
            let answer = summarize(&user, max_tokens, keep_values);
            if self.style == Style::MalformedEvery3rd && n.is_multiple_of(3) {
                stats.malformed_answers += 1;
                let kind = Malformed::CYCLE[(n / 3 - 1) as usize % Malformed::CYCLE.len()];
                malformed(kind, &answer, &user)
            } else {
                (answer, "stop")
            }
        } else if user.contains("<summary>") {
            (rollup(&user, max_tokens, keep_values), "stop")
        } else if user.contains("<previous-memory-summary>") {
            (memory(&user, keep_values), "stop")
        } else {
            ("OK".to_owned(), "stop")
        };
        drop(stats);
        ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "cmpl-quality",
            "object": "chat.completion",
            "model": "fake-quality-model",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish
            }],
            "usage": {"prompt_tokens": user.len() / 4, "completion_tokens": text.len() / 4}
        }))
    }
}

fn malformed(kind: Malformed, answer: &str, prompt: &str) -> (String, &'static str) {
    match kind {
        Malformed::UnrelatedJson => {
            let words: Vec<String> = between(prompt, "<new-messages>\n", "</new-messages>")
                .split_whitespace()
                .filter(|w| w.len() > 3 && w.chars().all(|c| c.is_ascii_lowercase()))
                .take(5)
                .map(str::to_owned)
                .collect();
            (
                serde_json::json!({"status": "ok", "language": "en", "topics": words, "confidence": 0.82})
                    .to_string(),
                "stop",
            )
        }
        Malformed::FencedDecisionsOnly => (
            "```json\n{\"key_decisions\": [\"ok\", \"sure\", \"never mind, found it\", \"thanks\", \"continue\"]}\n```"
                .to_owned(),
            "stop",
        ),
        Malformed::CutOff => {
            // Stopped by the output limit: cut inside a word, about half
            // way through.
            let from = answer.len() * 55 / 100;
            let inside_word = |i: usize| {
                answer[..i].chars().next_back().is_some_and(char::is_alphanumeric)
                    && answer[i..].chars().next().is_some_and(char::is_alphanumeric)
            };
            let at = answer
                .char_indices()
                .map(|(i, _)| i)
                .find(|&i| i >= from && inside_word(i))
                .unwrap_or(answer.len() / 2);
            let at = (at..=answer.len()).find(|&i| answer.is_char_boundary(i)).unwrap_or(0);
            (answer[..at].to_owned(), "length")
        }
        Malformed::Empty => (String::new(), "stop"),
    }
}

/// The text between `open` and `close` (empty when absent).
fn between<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
    text.split_once(open)
        .and_then(|(_, rest)| rest.split_once(close))
        .map_or("", |(inside, _)| inside)
}

/// A summary's sections as bullets (without `- `).
#[derive(Debug, Default)]
struct Sections {
    key_facts: Vec<String>,
    flow: Vec<String>,
    open: Vec<String>,
}

fn parse_sections(text: &str) -> Sections {
    let mut s = Sections::default();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        let t = line.trim();
        match t.trim_end_matches(':').to_ascii_uppercase().as_str() {
            "KEY FACTS" => current = Some(0),
            "CONVERSATION FLOW" => current = Some(1),
            "OPEN THREADS" => current = Some(2),
            _ => {
                if let (Some(i), Some(bullet)) = (current, t.strip_prefix("- ")) {
                    if bullet != "(none)" {
                        [&mut s.key_facts, &mut s.flow, &mut s.open][i].push(bullet.to_owned());
                    }
                }
            }
        }
    }
    s
}

/// A transcript block: `[#id ROLE]` and its lines.
struct Block<'a> {
    id: &'a str,
    role: &'a str,
    body: String,
}

fn blocks(transcript: &str) -> Vec<Block<'_>> {
    let mut out: Vec<Block<'_>> = Vec::new();
    for line in transcript.lines() {
        let header = line
            .strip_prefix("[#")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|r| r.split_once(' '))
            .filter(|(id, role)| {
                id.chars().all(|c| c.is_ascii_digit() || c == '-')
                    && ["USER", "ASSISTANT", "SYSTEM", "TOOL"].contains(role)
            });
        match header {
            Some((id, role)) => out.push(Block {
                id,
                role,
                body: String::new(),
            }),
            None => {
                if let Some(b) = out.last_mut() {
                    if !b.body.is_empty() {
                        b.body.push(' ');
                    }
                    b.body.push_str(line.trim());
                }
            }
        }
    }
    out
}

/// Words that may start a sentence capitalized and are no value.
const COMMON: &[&str] = &[
    "a",
    "about",
    "actually",
    "after",
    "all",
    "also",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "before",
    "both",
    "but",
    "by",
    "can",
    "change",
    "checking",
    "could",
    "deliveries",
    "deploy",
    "did",
    "do",
    "does",
    "done",
    "expose",
    "finding",
    "for",
    "from",
    "fyi",
    "good",
    "got",
    "great",
    "hi",
    "how",
    "i",
    "i'll",
    "i'm",
    "if",
    "in",
    "is",
    "it",
    "it's",
    "keep",
    "let",
    "let's",
    "looks",
    "make",
    "my",
    "no",
    "noted",
    "now",
    "of",
    "oh",
    "ok",
    "okay",
    "on",
    "one",
    "or",
    "other",
    "our",
    "please",
    "reading",
    "remind",
    "rename",
    "run",
    "running",
    "set",
    "shall",
    "so",
    "some",
    "sorry",
    "staging",
    "sure",
    "that",
    "the",
    "then",
    "there",
    "these",
    "they",
    "this",
    "thanks",
    "to",
    "two",
    "understood",
    "we",
    "we'll",
    "we're",
    "what",
    "when",
    "where",
    "which",
    "why",
    "will",
    "with",
    "yes",
    "you",
    "your",
];

/// `text` without any exact value: only plain words are kept (lowercase,
/// or a common word starting a sentence); anything with a digit, a path or
/// URL character, an `@`, code or quotes, an acronym or a name is dropped.
pub fn strip_values(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for token in text.split_whitespace() {
        if token.contains([
            '`', '"', '/', '@', '=', '_', '\\', '<', '>', '{', '}', '[', ']', '#', '$', '€', '£',
            '+',
        ]) {
            continue;
        }
        let core = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        if core.is_empty() || !core.chars().all(|c| c.is_ascii_alphabetic() || c == '\'') {
            continue;
        }
        let lower = core.to_ascii_lowercase();
        let plain = core == lower || (core[1..] == lower[1..] && COMMON.contains(&lower.as_str()));
        if !plain {
            continue;
        }
        let mut word = core.to_owned();
        if let Some(p) = token
            .chars()
            .last()
            .filter(|c| matches!(c, ',' | '.' | '!' | '?'))
        {
            word.push(p);
        }
        out.push(word);
    }
    out.join(" ")
}

/// The first `max` chars of `text`, cut at a word.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max).collect();
    if let Some(at) = s.rfind(' ') {
        s.truncate(at);
    }
    s.push('…');
    s
}

fn has_any(text: &str, cues: &[&str]) -> bool {
    let lower = format!(" {} ", text.to_lowercase());
    cues.iter().any(|c| lower.contains(c))
}

const DECISION_CUES: &[&str] = &[
    "go with", "let's", " use ", "set ", "make ", "switch", "instead", "book ", "keep ", "rename",
    "bump",
];
const CONSTRAINT_CUES: &[&str] = &[
    "never", "don't", "do not", " only", "must", "always", "i'm ", "allergic", "has to",
];

/// A compaction answer: the previous summary merged with bullets drawn
/// from the new messages, within `max_tokens`.
fn summarize(prompt: &str, max_tokens: u64, keep_values: bool) -> String {
    let clean = |t: &str| {
        if keep_values {
            t.to_owned()
        } else {
            strip_values(t)
        }
    };
    let previous = parse_sections(between(
        prompt,
        "<previous-summary>\n",
        "</previous-summary>",
    ));
    let transcript = between(prompt, "<new-messages>\n", "</new-messages>");
    let mut key_facts: Vec<String> = previous.key_facts.iter().map(|b| clean(b)).collect();
    let mut flow: Vec<String> = previous.flow.iter().map(|b| clean(b)).collect();
    let mut open = Vec::new();
    let mut decisions = Vec::new();
    let mut constraints = Vec::new();
    for block in blocks(transcript) {
        let text = clean(&block.body);
        if text.split_whitespace().count() < 4 {
            continue;
        }
        match block.role {
            "USER" => {
                let said = cut(&text, 220);
                key_facts.push(format!("The user said: {said}"));
                flow.push(format!("#{} the user asked: {}", block.id, cut(&text, 100)));
                if has_any(&text, CONSTRAINT_CUES) {
                    constraints.push(said.clone());
                } else if has_any(&text, DECISION_CUES) {
                    decisions.push(said.clone());
                }
                open = vec![format!("Follow up on: {}", cut(&text, 140))];
            }
            "ASSISTANT" => flow.push(format!("#{} the assistant: {}", block.id, cut(&text, 120))),
            _ => flow.push(format!("#{} a tool returned: {}", block.id, cut(&text, 80))),
        }
    }
    if open.is_empty() {
        open = previous.open.iter().map(|b| clean(b)).collect();
    }
    decisions.truncate(4);
    constraints.truncate(4);
    let item = |t: &String| serde_json::json!({"text": t});
    let delta = serde_json::json!({
        "key_decisions": decisions.iter().map(item).collect::<Vec<_>>(),
        "active_constraints": constraints.iter().map(item).collect::<Vec<_>>(),
        "tasks": open.iter().take(1).map(|t| serde_json::json!({"id": "T1", "text": t, "status": "in_progress"})).collect::<Vec<_>>(),
        "open_questions": [],
        "risks": [],
        "artifacts": [],
        "agent_contributions": []
    });
    let delta = format!("\nSTATE DELTA:\n```json\n{delta}\n```\n");
    let budget = (max_tokens as usize * 3).saturating_sub(delta.len());
    let mut sections = Sections {
        key_facts,
        flow,
        open,
    };
    fit(&mut sections, budget);
    render(&sections) + &delta
}

/// Drops the oldest flow bullets, then the oldest facts, until the
/// rendering fits in `budget` chars.
fn fit(s: &mut Sections, budget: usize) {
    while render(s).len() > budget {
        if !s.flow.is_empty() {
            s.flow.remove(0);
        } else if s.key_facts.len() > 1 {
            s.key_facts.remove(0);
        } else {
            break;
        }
    }
}

fn render(s: &Sections) -> String {
    let mut out = String::new();
    for (heading, bullets) in [
        ("KEY FACTS", &s.key_facts),
        ("CONVERSATION FLOW", &s.flow),
        ("OPEN THREADS", &s.open),
    ] {
        out.push_str(heading);
        out.push_str(":\n");
        if bullets.is_empty() {
            out.push_str("- none\n");
        }
        for b in bullets {
            out.push_str("- ");
            out.push_str(b);
            out.push('\n');
        }
    }
    out
}

fn rollup(prompt: &str, max_tokens: u64, keep_values: bool) -> String {
    let mut s = parse_sections(between(prompt, "<summary>\n", "</summary>"));
    if !keep_values {
        for list in [&mut s.key_facts, &mut s.flow, &mut s.open] {
            for b in list.iter_mut() {
                *b = strip_values(b);
            }
        }
    }
    fit(&mut s, max_tokens as usize * 3);
    render(&s)
}

fn memory(prompt: &str, keep_values: bool) -> String {
    let mut out = String::new();
    for line in between(prompt, "<new-entries>\n", "</new-entries>").lines() {
        let entry = line.trim_start_matches("- ");
        let entry = if keep_values {
            entry.to_owned()
        } else {
            strip_values(entry)
        };
        out.push_str("- ");
        out.push_str(&entry);
        out.push('\n');
    }
    out
}
