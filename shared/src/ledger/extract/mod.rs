//! Deterministic extraction of exact values from messages.
//!
//! Every part of every message is read except reasoning: text, tool call
//! inputs, files, and the whole output of every tool, failed or not, pruned
//! or not (a pruned output is hidden from the model, but its text is still
//! there and may hold the one error code that matters). Each value records
//! who said it and how salient that makes it (see [`Salience`]).
//!
//! Work per message is bounded. Matching is linear in the text (the `regex`
//! crate guarantees it; patterns are compiled once, and skipped when a
//! cheap check shows they cannot match, see `scan::gated`), and what one
//! message may add is capped: at most
//! [`MAX_PER_MESSAGE`] values from what people wrote, and separately at most
//! [`MAX_BULK_PER_MESSAGE`] from bulk text (tool output, and any part longer
//! than [`LONG_TEXT`]: a pasted log), with at most [`MAX_BULK_PER_KIND`] of one
//! kind per bulk part. When bulk text has more, the failed and written
//! values win over the merely read, then the rarer kinds (error codes,
//! settings, ids) over the common ones (paths, timestamps).

mod code;
mod fields;
mod people;
mod scan;
mod settings;
mod telling;

use crate::text::is_one_of;
use std::collections::HashMap;

use self::scan::{Candidate, Reading, Scan, STATED, TOOL_INPUT, TOOL_OUTPUT, WRITTEN};
use super::{Artifact, ArtifactKind, Salience, Source};
use crate::message::{Message, MessageId, Part, Role};

/// Most values taken from what people wrote in one message (text, tool
/// inputs, files).
pub const MAX_PER_MESSAGE: usize = 64;
/// Most values taken from the bulk text of one message.
pub const MAX_BULK_PER_MESSAGE: usize = 32;
/// Most values of one kind taken from one bulk part (a log's timestamps).
pub const MAX_BULK_PER_KIND: usize = 8;
/// Values of one kind in one reading call's output that make it a
/// listing (see [`Salience::Listed`]).
pub(crate) const LISTING: usize = 3;
/// A reading call's output of at most this many non-blank lines…
pub(crate) const BRIEF_LINES: usize = 4;
/// …and at most this many bytes is an answer (see [`Salience::Answered`]).
pub(crate) const BRIEF_BYTES: usize = 600;
/// A text part longer than this (in bytes) is bulk: pasted, not written.
pub const LONG_TEXT: usize = 8_000;
/// JSON nesting followed in tool inputs.
const MAX_JSON_DEPTH: usize = 16;

/// Which kinds win when bulk text has more values than it may add: the
/// rare and telling ones first.
const BULK_ORDER: [ArtifactKind; 19] = [
    ArtifactKind::ErrorCode,
    ArtifactKind::Setting,
    ArtifactKind::Identifier,
    ArtifactKind::Reference,
    ArtifactKind::Count,
    ArtifactKind::Version,
    ArtifactKind::Host,
    ArtifactKind::Url,
    ArtifactKind::Email,
    ArtifactKind::Phone,
    ArtifactKind::Amount,
    ArtifactKind::ConfigName,
    ArtifactKind::Duration,
    ArtifactKind::Quantity,
    ArtifactKind::Path,
    ArtifactKind::Command,
    ArtifactKind::DateTime,
    ArtifactKind::Address,
    ArtifactKind::Person,
];

/// Extracts artifacts from `messages`: per message, in order of appearance
/// (a value said twice in one message is placed where it was said last),
/// each message's values counted once.
pub fn extract(messages: &[Message]) -> Vec<Artifact> {
    let mut out = Vec::new();
    let mut calls = Calls::default();
    for message in messages {
        out.extend(of_message(message, &mut calls));
    }
    out
}

/// Whether each tool call seen so far acts (changes something) or only
/// reads, by call id: a result is read in the light of its call (see
/// `telling`). A reused id pairs with its latest call, as results pair
/// with the nearest earlier call of their id.
#[derive(Default)]
struct Calls {
    acts: HashMap<String, bool>,
}

impl Calls {
    fn called(&mut self, call_id: &str, tool_name: &str, input: &serde_json::Value) {
        let acts = if code::is_shell_tool(tool_name) {
            !shell_command(input).is_some_and(telling::command_reads_only)
        } else {
            telling::tool_acts(tool_name)
        };
        self.acts.insert(call_id.to_owned(), acts);
    }

    /// Whether the call answered by a result with `call_id` acts; a result
    /// whose call was not seen (compacted earlier) is read as reading.
    fn acts(&self, call_id: &str) -> bool {
        self.acts.get(call_id).copied().unwrap_or(false)
    }
}

/// The command line of a shell tool's input (`{"command": …}`, or the
/// input itself when it is a string).
fn shell_command(input: &serde_json::Value) -> Option<&str> {
    match input {
        serde_json::Value::Object(map) => ["command", "cmd", "script"]
            .iter()
            .find_map(|k| map.get(*k).and_then(|v| v.as_str())),
        serde_json::Value::String(cmd) => Some(cmd),
        _ => None,
    }
}

/// Whether `text` contains anything the ledger would record.
///
/// The extractors run in [`scan`]'s order and stop at the first value
/// recorded: values are only ever added, so the full scan finds something
/// exactly when this prefix of it does. The summarizer asks this of every
/// candidate sentence, and most that carry a value have it early (a path,
/// a date), so the rest of the patterns are not run on them.
pub(crate) fn has_artifact(text: &str) -> bool {
    let mut s = Scan::new(text);
    run(&mut s, STATED, Stop::FirstFound);
    s.found_any()
}

/// Whether [`extract`] may find a path in `text`: the path extractor alone
/// finds one. Which tokens it looks at does not depend on what other
/// extractors claimed before it (their claims can only refuse a path), so
/// when it finds none alone, a full pass finds none either.
pub(crate) fn may_have_path(text: &str) -> bool {
    let mut s = Scan::new(text);
    code::paths(&mut s);
    s.found_any()
}

/// The paths [`extract`] finds in `text` said by a user, in its order (a
/// path said twice is placed where it was said last), without the
/// extractors that cannot change them.
///
/// A path is refused only by a claim of an extractor that runs before the
/// path extractor (see [`run`]), so the pass stops after it. Two
/// differences from the full pass, both on text no person types: bulk
/// text (over [`LONG_TEXT`]) takes the full pass, whose per-kind caps and
/// ranking decide which paths stay; and in a shorter text holding more
/// than [`MAX_PER_MESSAGE`] values this returns the paths past that cap
/// too.
pub(crate) fn paths(text: &str) -> Vec<String> {
    if text.len() > LONG_TEXT {
        return extract(&[Message::text(0, Role::User, text)])
            .into_iter()
            .filter(|a| a.kind == ArtifactKind::Path)
            .map(|a| a.value)
            .collect();
    }
    let mut s = Scan::new(text);
    run(&mut s, STATED, Stop::After(ArtifactKind::Path));
    let mut out: Vec<String> = Vec::new();
    for c in s.finish() {
        if c.kind == ArtifactKind::Path {
            out.retain(|v| *v != c.value);
            out.push(c.value);
        }
    }
    out
}

/// Every value in `text`, most specific kinds first (see `scan`); for
/// bulk text at most [`MAX_BULK_PER_KIND`] distinct values of a kind.
fn scan(text: &str, reading: Reading, bulk: bool) -> Vec<Candidate> {
    let mut s = if bulk {
        Scan::bounded(text, MAX_BULK_PER_KIND)
    } else {
        Scan::new(text)
    };
    run(&mut s, reading, Stop::Never);
    s.finish()
}

/// One extractor of a pass.
type Extractor = fn(&mut Scan<'_>);

/// When [`run`] ends before its last extractor.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// Runs them all.
    Never,
    /// Once one value is recorded.
    FirstFound,
    /// After the first extractor of this kind: the ones after it cannot
    /// refuse its values.
    After(ArtifactKind),
}

/// Runs the extractors over `s`, most specific kinds first (each claims
/// what it takes, see `scan`), until `stop`.
fn run(s: &mut Scan<'_>, reading: Reading, stop: Stop) {
    let steps: [(bool, ArtifactKind, Extractor); 20] = [
        (reading.commands, ArtifactKind::Command, code::commands),
        (true, ArtifactKind::Url, code::urls),
        (true, ArtifactKind::Email, people::emails),
        (true, ArtifactKind::Identifier, code::uuids),
        (true, ArtifactKind::Host, code::hosts),
        (reading.settings, ArtifactKind::Setting, settings::settings),
        (true, ArtifactKind::DateTime, people::dates_and_times),
        (true, ArtifactKind::Amount, people::amounts),
        (true, ArtifactKind::Phone, people::phones),
        (true, ArtifactKind::Path, code::paths),
        (true, ArtifactKind::Version, code::versions),
        (true, ArtifactKind::Reference, people::references),
        (true, ArtifactKind::Identifier, code::identifiers),
        (true, ArtifactKind::ErrorCode, code::error_codes),
        (true, ArtifactKind::Address, people::addresses),
        (true, ArtifactKind::Duration, code::durations),
        (true, ArtifactKind::Quantity, code::quantities),
        (true, ArtifactKind::Count, code::counts),
        (true, ArtifactKind::ConfigName, code::config_names),
        (reading.names, ArtifactKind::Person, names_of(reading)),
    ];
    for (on, kind, step) in steps {
        if on {
            step(s);
            if matches!(stop, Stop::FirstFound) && s.found_any() {
                return;
            }
        }
        if matches!(stop, Stop::After(k) if k == kind) {
            return;
        }
    }
}

/// The names extractor for `reading` (self-introductions or not).
fn names_of(reading: Reading) -> Extractor {
    if reading.self_names {
        |s| people::names(s, true)
    } else {
        |s| people::names(s, false)
    }
}

fn of_message(message: &Message, calls: &mut Calls) -> Vec<Artifact> {
    let mut found = Found::new(message.id);
    for part in &message.parts {
        match part {
            Part::Text { text } => found.text(message.role, text),
            Part::ToolCall {
                call_id,
                tool_name,
                input,
            } => {
                calls.called(call_id, tool_name, input);
                found.tool_input(tool_name, input);
            }
            Part::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => found.tool_output(output, *is_error || calls.acts(call_id)),
            Part::File { uri, .. } => found.file(message.role, uri),
            Part::Reasoning { .. } => {}
        }
        found.next_part();
    }
    found.finish()
}

/// How the values of one piece of text count.
#[derive(Debug, Clone, Copy)]
struct Said {
    source: Source,
    salience: Salience,
    /// Bulk text: capped separately, per kind, and ranked when over.
    bulk: bool,
}

/// Who speaks in a text or file part of a message with `role`.
fn speaker(role: Role) -> (Source, Salience, Reading) {
    match role {
        Role::User => (Source::User, Salience::Stated, STATED),
        Role::System => (Source::System, Salience::Stated, STATED),
        Role::Assistant => (Source::Assistant, Salience::Written, WRITTEN),
        Role::Tool => (Source::ToolOutput, Salience::Read, TOOL_OUTPUT),
    }
}

/// Identity of a value within a message.
type Identity = (ArtifactKind, Option<String>, String);

struct Item {
    /// When it was said last, counted in values found in this message.
    order: usize,
    artifact: Artifact,
    bulk: bool,
}

/// The values of one message, deduplicated and capped.
struct Found {
    id: MessageId,
    /// Values found so far (the order of the next one).
    seen: usize,
    items: Vec<Item>,
    index: HashMap<Identity, usize>,
    written: usize,
    bulk_of_kind: HashMap<ArtifactKind, usize>,
    /// Values of the current part that a JSON key named (see `fields`):
    /// the text scan does not take them again as another kind.
    named: std::collections::HashSet<String>,
}

impl Found {
    fn new(id: MessageId) -> Found {
        Found {
            id,
            seen: 0,
            items: Vec::new(),
            index: HashMap::new(),
            written: 0,
            bulk_of_kind: HashMap::new(),
            named: std::collections::HashSet::new(),
        }
    }

    fn next_part(&mut self) {
        self.bulk_of_kind.clear();
        self.named.clear();
    }

    /// Takes the fields of `json` that their keys name (see `fields`).
    fn named_fields(&mut self, json: &serde_json::Value, said: Said) {
        for c in fields::named(json) {
            self.named.insert(c.value.clone());
            self.add(c, said);
        }
    }

    fn add(&mut self, c: Candidate, said: Said) {
        self.seen += 1;
        let identity = (c.kind, c.key, c.value);
        if let Some(&i) = self.index.get(&identity) {
            let item = &mut self.items[i];
            item.order = self.seen;
            item.bulk &= said.bulk;
            if said.salience > item.artifact.salience {
                item.artifact.salience = said.salience;
                item.artifact.source = said.source;
            }
            return;
        }
        if said.bulk {
            let n = self.bulk_of_kind.entry(identity.0).or_insert(0);
            if *n >= MAX_BULK_PER_KIND {
                return;
            }
            *n += 1;
        } else {
            if self.written >= MAX_PER_MESSAGE {
                return;
            }
            self.written += 1;
        }
        let (kind, key, value) = identity.clone();
        let artifact = Artifact {
            key,
            ..Artifact::new(kind, value, self.id).said_by(said.source, said.salience)
        };
        self.index.insert(identity, self.items.len());
        self.items.push(Item {
            order: self.seen,
            artifact,
            bulk: said.bulk,
        });
    }

    fn add_all(&mut self, found: Vec<Candidate>, said: Said) {
        for c in found {
            if !self.named.contains(&c.value) {
                self.add(c, said);
            }
        }
    }

    fn text(&mut self, role: Role, text: &str) {
        let (source, salience, reading) = speaker(role);
        let long = text.len() > LONG_TEXT;
        let said = Said {
            source,
            salience,
            bulk: long || role == Role::Tool,
        };
        if salience < Salience::Stated {
            self.add_all(scan(text, reading, said.bulk), said);
            return;
        }
        // What a person pastes (fenced code, a long text) is not what they
        // state: it ranks as written.
        let pasted = Said {
            salience: Salience::Written,
            ..said
        };
        let fences = fenced(text);
        for c in scan(text, reading, said.bulk) {
            let in_fence = fences.iter().any(|r| r.contains(&c.at));
            self.add(c, if long || in_fence { pasted } else { said });
        }
    }

    fn file(&mut self, role: Role, uri: &str) {
        let (source, salience, _) = speaker(role);
        let said = Said {
            source,
            salience,
            bulk: role == Role::Tool,
        };
        let uri = uri.trim();
        let (kind, value) = if uri.starts_with("http://") || uri.starts_with("https://") {
            (ArtifactKind::Url, code::trim_url(uri))
        } else if let Some(path) = code::path_of(uri) {
            (ArtifactKind::Path, path)
        } else if !uri.is_empty() && !uri.contains(char::is_whitespace) {
            (ArtifactKind::Path, uri)
        } else {
            return;
        };
        let c = Candidate {
            at: 0,
            kind,
            key: None,
            value: value.to_owned(),
        };
        self.add(c, said);
    }

    fn tool_input(&mut self, tool_name: &str, input: &serde_json::Value) {
        let salience = if reads_only(tool_name) {
            Salience::Read
        } else {
            Salience::Written
        };
        let said = Said {
            source: Source::ToolInput,
            salience,
            bulk: false,
        };
        let shell = code::is_shell_tool(tool_name);
        let command = match input {
            serde_json::Value::Object(map) => ["command", "cmd"]
                .iter()
                .find_map(|k| map.get(*k).and_then(|v| v.as_str()))
                .and_then(first_line)
                .filter(|line| shell || line.contains(' ')),
            serde_json::Value::String(cmd) if shell => first_line(cmd),
            _ => None,
        };
        if let Some(line) = command {
            let c = Candidate {
                at: 0,
                kind: ArtifactKind::Command,
                key: None,
                value: line.to_owned(),
            };
            self.add(c, said);
        }
        self.named_fields(input, said);
        self.json_strings(input, 0, said, true);
    }

    /// Values in every string of a tool input. Under a key that starts
    /// with `old` (`old_string`, `oldText`: what an edit replaces), no
    /// setting is taken: that value is on its way out.
    fn json_strings(
        &mut self,
        value: &serde_json::Value,
        depth: usize,
        said: Said,
        settings: bool,
    ) {
        if depth > MAX_JSON_DEPTH {
            return;
        }
        match value {
            serde_json::Value::String(s) => {
                let reading = Reading {
                    settings,
                    ..TOOL_INPUT
                };
                let said = Said {
                    bulk: s.len() > LONG_TEXT,
                    ..said
                };
                self.add_all(scan(s, reading, said.bulk), said);
            }
            serde_json::Value::Array(items) => {
                for v in items {
                    self.json_strings(v, depth + 1, said, settings);
                }
            }
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let replaced = k.to_ascii_lowercase().starts_with("old");
                    self.json_strings(v, depth + 1, said, settings && !replaced);
                }
            }
            _ => {}
        }
    }

    /// The output of a tool. What a failed call or an acting one answered
    /// ranks as written, and so do the lines of any output that report a
    /// failure; the rest of a reading call's output ranks as read (see
    /// `telling`). The failure lines are scanned first, so the per-kind
    /// bound of bulk text keeps their values before the rest.
    fn tool_output(&mut self, output: &str, failed_or_acted: bool) {
        let written = Said {
            source: Source::ToolOutput,
            salience: Salience::Written,
            bulk: true,
        };
        let brief = output.len() <= BRIEF_BYTES
            && output.lines().filter(|l| !l.trim().is_empty()).count() <= BRIEF_LINES;
        let read = Said {
            salience: if brief {
                Salience::Answered
            } else {
                Salience::Read
            },
            ..written
        };
        let json = json_document(output);
        if failed_or_acted {
            if let Some(json) = &json {
                self.named_fields(json, written);
            }
            self.add_all(scan(output, TOOL_OUTPUT, true), written);
            return;
        }
        let signals = telling::signal_lines(output);
        if !signals.is_empty() {
            self.add_all(scan(&signals, TOOL_OUTPUT, true), written);
        }
        // What a reading call answered: a kind it holds many values of is
        // a listing, and its values rank below the ones it answered alone.
        let named = json.as_ref().map(fields::named).unwrap_or_default();
        self.named.extend(named.iter().map(|c| c.value.clone()));
        let mut found = named;
        found.extend(
            scan(output, TOOL_OUTPUT, true)
                .into_iter()
                .filter(|c| !self.named.contains(&c.value)),
        );
        let mut per_kind: HashMap<ArtifactKind, std::collections::HashSet<&str>> = HashMap::new();
        for c in &found {
            per_kind.entry(c.kind).or_default().insert(&c.value);
        }
        let listed: std::collections::HashSet<ArtifactKind> = per_kind
            .into_iter()
            .filter(|(_, values)| values.len() >= LISTING)
            .map(|(kind, _)| kind)
            .collect();
        for c in found {
            let said = if listed.contains(&c.kind) {
                Said {
                    salience: Salience::Listed,
                    ..read
                }
            } else {
                read
            };
            self.add(c, said);
        }
    }

    fn finish(mut self) -> Vec<Artifact> {
        let bulk = self.items.iter().filter(|i| i.bulk).count();
        if bulk > MAX_BULK_PER_MESSAGE {
            let mut ranked: Vec<usize> = (0..self.items.len())
                .filter(|&i| self.items[i].bulk)
                .collect();
            ranked.sort_by_key(|&i| {
                let item = &self.items[i];
                let kind_rank = BULK_ORDER
                    .iter()
                    .position(|k| *k == item.artifact.kind)
                    .unwrap_or(BULK_ORDER.len());
                (
                    std::cmp::Reverse(item.artifact.salience),
                    kind_rank,
                    item.order,
                )
            });
            let mut keep = vec![true; self.items.len()];
            for &i in &ranked[MAX_BULK_PER_MESSAGE..] {
                keep[i] = false;
            }
            let mut at = 0;
            self.items.retain(|_| {
                at += 1;
                keep[at - 1]
            });
        }
        self.items.sort_by_key(|i| i.order);
        self.items.into_iter().map(|i| i.artifact).collect()
    }
}

/// Largest tool output parsed as JSON to read its keys.
const MAX_JSON_OUTPUT: usize = 256 * 1024;

/// `output` parsed, when it is one JSON object or array.
fn json_document(output: &str) -> Option<serde_json::Value> {
    let trimmed = output.trim();
    let looks = trimmed.starts_with('{') || trimmed.starts_with('[');
    if !looks || trimmed.len() > MAX_JSON_OUTPUT {
        return None;
    }
    serde_json::from_str(trimmed).ok()
}

/// The first non-empty line of `text`, trimmed.
fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| !l.is_empty())
}

/// Byte ranges inside ``` fences (an unclosed fence runs to the end).
fn fenced(text: &str) -> Vec<std::ops::Range<usize>> {
    let marks: Vec<usize> = memchr::memmem::find_iter(text.as_bytes(), b"```").collect();
    marks
        .chunks(2)
        .map(|pair| pair[0]..pair.get(1).map_or(text.len(), |end| end + 3))
        .collect()
}

/// Whether a tool only reads (its inputs name what was looked at, not what
/// was changed): a word of its name reads, and none acts.
fn reads_only(tool_name: &str) -> bool {
    const READS: &[&str] = &[
        "read", "view", "cat", "glob", "grep", "search", "find", "list", "ls", "fetch", "get",
        "open", "show", "lookup", "query", "inspect", "describe", "head", "tail", "browse",
    ];
    const ACTS: &[&str] = &[
        "write", "edit", "create", "update", "delete", "remove", "apply", "patch", "replace",
        "insert", "move", "rename", "run", "exec", "execute", "bash", "shell", "sh", "terminal",
        "set", "put", "post", "send", "deploy", "commit", "push", "install", "make", "add", "str",
    ];
    let words = words_of(tool_name);
    words.iter().any(|w| is_one_of(w.as_str(), READS))
        && !words.iter().any(|w| is_one_of(w.as_str(), ACTS))
}

/// `mcp__github__getIssue` → `mcp github get issue`.
fn words_of(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}
#[cfg(test)]
mod tests;
