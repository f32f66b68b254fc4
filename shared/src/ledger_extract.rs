//! Deterministic artifact extraction for the ledger.
//!
//! Plain regular expressions (linear time, compiled once) plus a few shape
//! rules that keep prose out: `and/or`, `1/2`, dates and `e.g.` are not
//! paths; `UTF-8` is not a ticket; a hex word without a digit is not a hash.
//! Every extractor is deliberately conservative — a false artifact costs a
//! ledger slot, but the ledger is what makes real ones survive.

use std::sync::LazyLock;

use regex::Regex;

use crate::ledger::{Artifact, ArtifactKind};
use crate::message::{Message, MessageId, Part};

/// At most this many artifacts are taken from one message, so one pasted
/// log cannot flush the whole ledger.
const MAX_PER_MESSAGE: usize = 64;
/// JSON nesting followed in tool inputs.
const MAX_JSON_DEPTH: usize = 16;

fn regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

macro_rules! pattern {
    ($name:ident, $re:expr) => {
        static $name: LazyLock<Option<Regex>> = LazyLock::new(|| regex($re));
    };
}

pattern!(URL, r#"https?://[^\s<>"'`\])}]+"#);
pattern!(
    UUID,
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
);
pattern!(HEX, r"\b[0-9a-f]{7,40}\b");
pattern!(TICKET, r"\b[A-Z][A-Z0-9]{1,9}-[0-9]{1,7}\b");
pattern!(CVE, r"\bCVE-[0-9]{4}-[0-9]{4,7}\b");
pattern!(ISSUE_REF, r"(?:^|[\s(\[])(#[0-9]{1,7})\b");
pattern!(
    ERROR_CODE,
    r"\b(?:E0[0-9]{3}|TS[0-9]{4,5}|CS[0-9]{4}|ORA-[0-9]{5}|ENOENT|EACCES|EPERM|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EADDRINUSE|EEXIST|ENOTDIR|EISDIR|EMFILE|ENOSPC|EPIPE|EAGAIN|EHOSTUNREACH|ENETUNREACH|ENOMEM|EINVAL|EBUSY)\b"
);
pattern!(SQLSTATE, r"\bSQLSTATE\s*\[?([0-9A-Z]{5})\]?");
pattern!(
    HTTP_STATUS,
    r"(?i)\b(?:HTTP(?:/[0-9.]+)?|status(?: code)?)\s*:?\s*([1-5][0-9]{2})\b"
);
pattern!(
    HTTP_REASON,
    r"\b([45][0-9]{2}) (?:Service Unavailable|Internal Server Error|Bad Gateway|Gateway Timeout|Too Many Requests|Not Found|Unauthorized|Forbidden|Bad Request|Conflict|Payload Too Large)\b"
);
pattern!(
    QUANTITY,
    r"\b([0-9]+(?:[.,][0-9]+)*[kKM]?)( ?)(?:(%)|(ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|B|KB|MB|GB|TB|KiB|MiB|GiB|TiB|kB|tokens?|chars?|characters?|req/s|rps|qps|cores?|vCPUs?|px)\b)"
);
pattern!(
    FENCE,
    r"(?m)^```[ \t]*(bash|sh|shell|console|zsh)[ \t]*\n((?s:.*?))^```"
);
pattern!(DOLLAR_LINE, r"(?m)^[ \t]*\$ (.+)$");
pattern!(BACKTICK, r"`([^`\n]{2,300})`");

/// Words that look like ticket prefixes but are standards and encodings.
const NOT_TICKETS: &[&str] = &[
    "UTF", "ISO", "SHA", "MD", "AES", "RSA", "HTTP", "TLS", "SSL", "IPV", "GPT", "CVE", "ORA",
    "TCP", "UDP", "X", "PEP", "ES", "COVID", "CP", "WIN", "ECMA", "EAN", "F",
];

/// First words of commands worth recording from inline code spans.
const CLI_WORDS: &[&str] = &[
    "cargo",
    "git",
    "npm",
    "npx",
    "pnpm",
    "yarn",
    "docker",
    "kubectl",
    "make",
    "python",
    "python3",
    "pip",
    "psql",
    "redis-cli",
    "curl",
    "go",
    "rustc",
    "node",
    "bash",
    "sh",
    "ls",
    "cd",
    "grep",
    "rg",
    "sed",
    "terraform",
    "helm",
    "systemctl",
    "journalctl",
    "ssh",
    "scp",
];

/// File extensions that make a bare `name.ext` a path.
const EXTENSIONS: &[&str] = &[
    "rs",
    "ts",
    "tsx",
    "js",
    "jsx",
    "mjs",
    "py",
    "go",
    "toml",
    "json",
    "yaml",
    "yml",
    "md",
    "sql",
    "sh",
    "lua",
    "txt",
    "conf",
    "cfg",
    "ini",
    "lock",
    "html",
    "css",
    "java",
    "kt",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "rb",
    "php",
    "swift",
    "proto",
    "env",
    "xml",
    "csv",
    "log",
    "tf",
    "gradle",
    "vue",
    "svelte",
    "scss",
    "dockerfile",
    "pem",
    "crt",
    "key",
    "service",
];

/// Tools whose input *is* a shell command.
fn is_shell_tool(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(
        name.as_str(),
        "bash" | "shell" | "sh" | "terminal" | "run_command" | "run_terminal_cmd"
    ) || name.starts_with("exec")
}

pub(crate) fn extract(messages: &[Message]) -> Vec<Artifact> {
    let mut out = Vec::new();
    for message in messages {
        let mut found = Found::new(message.id);
        for part in &message.parts {
            match part {
                Part::Text { text } => found.text(text),
                Part::ToolCall {
                    tool_name, input, ..
                } => found.tool_input(tool_name, input),
                Part::File { uri, .. } => found.file(uri),
                Part::ToolResult {
                    output,
                    is_error: true,
                    ..
                } => {
                    if let Some(first) = output.lines().find(|l| !l.trim().is_empty()) {
                        found.text(first);
                    }
                }
                Part::ToolResult { .. } | Part::Reasoning { .. } => {}
            }
        }
        out.extend(found.finish());
    }
    out
}

/// Whether `text` contains anything the ledger would record.
pub(crate) fn has_artifact(text: &str) -> bool {
    let mut found = Found::new(MessageId(0));
    found.text(text);
    !found.items.is_empty()
}

/// Artifacts of one message, in order of appearance within each part.
struct Found {
    id: MessageId,
    items: Vec<Artifact>,
}

impl Found {
    fn new(id: MessageId) -> Found {
        Found {
            id,
            items: Vec::new(),
        }
    }

    fn push(&mut self, kind: ArtifactKind, value: &str) {
        let value = value.trim();
        if value.is_empty() || self.items.len() >= MAX_PER_MESSAGE {
            return;
        }
        self.items.push(Artifact {
            kind,
            value: value.to_owned(),
            last_seen: self.id,
        });
    }

    fn finish(self) -> Vec<Artifact> {
        self.items
    }

    fn file(&mut self, uri: &str) {
        if uri.starts_with("http://") || uri.starts_with("https://") {
            self.push(ArtifactKind::Url, trim_url(uri));
        } else if let Some(path) = path_of(uri.trim()) {
            self.push(ArtifactKind::Path, path);
        } else if !uri.trim().is_empty() && !uri.contains(char::is_whitespace) {
            self.push(ArtifactKind::Path, uri.trim());
        }
    }

    fn tool_input(&mut self, tool_name: &str, input: &serde_json::Value) {
        if let serde_json::Value::Object(map) = input {
            for key in ["command", "cmd"] {
                if let Some(serde_json::Value::String(cmd)) = map.get(key) {
                    if let Some(line) = cmd.lines().map(str::trim).find(|l| !l.is_empty()) {
                        self.push(ArtifactKind::Command, line);
                    }
                }
            }
        } else if let serde_json::Value::String(cmd) = input {
            if is_shell_tool(tool_name) {
                if let Some(line) = cmd.lines().map(str::trim).find(|l| !l.is_empty()) {
                    self.push(ArtifactKind::Command, line);
                }
            }
        }
        self.json_strings(input, 0);
    }

    fn json_strings(&mut self, value: &serde_json::Value, depth: usize) {
        if depth > MAX_JSON_DEPTH {
            return;
        }
        match value {
            serde_json::Value::String(s) => self.text_no_commands(s),
            serde_json::Value::Array(items) => {
                for v in items {
                    self.json_strings(v, depth + 1);
                }
            }
            serde_json::Value::Object(map) => {
                for v in map.values() {
                    self.json_strings(v, depth + 1);
                }
            }
            _ => {}
        }
    }

    /// Everything in free text, commands included.
    fn text(&mut self, text: &str) {
        let mut positioned: Vec<(usize, ArtifactKind, String)> = Vec::new();
        commands(text, &mut positioned);
        values(text, &mut positioned);
        positioned.sort_by_key(|(at, _, _)| *at);
        for (_, kind, value) in positioned {
            self.push(kind, &value);
        }
    }

    /// Free text inside a tool input: the command itself was taken already.
    fn text_no_commands(&mut self, text: &str) {
        let mut positioned = Vec::new();
        values(text, &mut positioned);
        positioned.sort_by_key(|(at, _, _)| *at);
        for (_, kind, value) in positioned {
            self.push(kind, &value);
        }
    }
}

type Positioned = Vec<(usize, ArtifactKind, String)>;

fn each<'t>(
    re: &'static LazyLock<Option<Regex>>,
    text: &'t str,
) -> impl Iterator<Item = regex::Captures<'t>> {
    re.as_ref()
        .into_iter()
        .flat_map(move |r| r.captures_iter(text))
}

fn commands(text: &str, out: &mut Positioned) {
    let mut fenced = Vec::new();
    for caps in each(&FENCE, text) {
        if let Some(body) = caps.get(2) {
            fenced.push(body.range());
            let mut offset = body.start();
            for line in body.as_str().split('\n') {
                let cmd = line.trim();
                let cmd = cmd.strip_prefix("$ ").unwrap_or(cmd);
                if !cmd.is_empty() && !cmd.starts_with('#') {
                    out.push((offset, ArtifactKind::Command, cmd.to_owned()));
                }
                offset += line.len() + 1;
            }
        }
    }
    for caps in each(&DOLLAR_LINE, text) {
        if let Some(m) = caps
            .get(1)
            .filter(|m| !fenced.iter().any(|r| r.contains(&m.start())))
        {
            out.push((
                m.start(),
                ArtifactKind::Command,
                m.as_str().trim().to_owned(),
            ));
        }
    }
    for caps in each(&BACKTICK, text) {
        if let Some(m) = caps.get(1) {
            let span = m.as_str().trim();
            let first = span.split_whitespace().next().unwrap_or("");
            if span.contains(' ') && CLI_WORDS.contains(&first) {
                out.push((m.start(), ArtifactKind::Command, span.to_owned()));
            }
        }
    }
}

fn values(text: &str, out: &mut Positioned) {
    let mut url_spans = Vec::new();
    for m in URL.as_ref().into_iter().flat_map(|r| r.find_iter(text)) {
        url_spans.push(m.range());
        out.push((
            m.start(),
            ArtifactKind::Url,
            trim_url(m.as_str()).to_owned(),
        ));
    }
    let in_url = |at: usize| url_spans.iter().any(|r| r.contains(&at));

    paths(text, &in_url, out);

    let mut uuid_spans = Vec::new();
    for m in UUID.as_ref().into_iter().flat_map(|r| r.find_iter(text)) {
        uuid_spans.push(m.range());
        if !in_url(m.start()) {
            out.push((m.start(), ArtifactKind::Identifier, m.as_str().to_owned()));
        }
    }
    for m in HEX.as_ref().into_iter().flat_map(|r| r.find_iter(text)) {
        let s = m.as_str();
        let bytes = text.as_bytes();
        let dash_before = m.start() > 0 && bytes.get(m.start() - 1) == Some(&b'-');
        let dash_after = bytes.get(m.end()) == Some(&b'-');
        if s.bytes().any(|b| b.is_ascii_digit())
            && s.bytes().any(|b| b.is_ascii_alphabetic())
            && !dash_before
            && !dash_after
            && !in_url(m.start())
            && !uuid_spans.iter().any(|r| r.contains(&m.start()))
        {
            out.push((m.start(), ArtifactKind::Identifier, s.to_owned()));
        }
    }
    for m in CVE.as_ref().into_iter().flat_map(|r| r.find_iter(text)) {
        out.push((m.start(), ArtifactKind::Identifier, m.as_str().to_owned()));
    }
    for m in TICKET.as_ref().into_iter().flat_map(|r| r.find_iter(text)) {
        let s = m.as_str();
        let prefix = s.split('-').next().unwrap_or("");
        if !NOT_TICKETS.contains(&prefix) && !in_url(m.start()) {
            out.push((m.start(), ArtifactKind::Identifier, s.to_owned()));
        }
    }
    for caps in each(&ISSUE_REF, text) {
        if let Some(m) = caps.get(1) {
            out.push((m.start(), ArtifactKind::Identifier, m.as_str().to_owned()));
        }
    }

    for m in ERROR_CODE
        .as_ref()
        .into_iter()
        .flat_map(|r| r.find_iter(text))
    {
        out.push((m.start(), ArtifactKind::ErrorCode, m.as_str().to_owned()));
    }
    for caps in each(&SQLSTATE, text) {
        if let (Some(all), Some(code)) = (caps.get(0), caps.get(1)) {
            out.push((
                all.start(),
                ArtifactKind::ErrorCode,
                format!("SQLSTATE {}", code.as_str()),
            ));
        }
    }
    for re in [&HTTP_STATUS, &HTTP_REASON] {
        for caps in each(re, text) {
            if let (Some(all), Some(code)) = (caps.get(0), caps.get(1)) {
                if !in_url(all.start()) {
                    out.push((
                        all.start(),
                        ArtifactKind::ErrorCode,
                        format!("HTTP {}", code.as_str()),
                    ));
                }
            }
        }
    }

    for caps in each(&QUANTITY, text) {
        if let (Some(all), Some(number)) = (caps.get(0), caps.get(1)) {
            if in_url(all.start()) {
                continue;
            }
            let unit = caps
                .get(3)
                .or_else(|| caps.get(4))
                .map_or("", |m| m.as_str());
            let space = caps.get(2).map_or("", |m| m.as_str());
            out.push((
                all.start(),
                ArtifactKind::Quantity,
                format!("{}{space}{unit}", number.as_str()),
            ));
        }
    }
}

fn paths(text: &str, in_url: &dyn Fn(usize) -> bool, out: &mut Positioned) {
    let base = text.as_ptr() as usize;
    for token in text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '`' | '"' | '\'' | '(' | ')' | '[' | ']' | '<' | '>' | '{' | '}' | ',' | ';' | '='
            )
    }) {
        if token.is_empty() || token.contains("://") {
            continue;
        }
        let at = token.as_ptr() as usize - base;
        if in_url(at) {
            continue;
        }
        if let Some(path) = path_of(token) {
            out.push((at, ArtifactKind::Path, path.to_owned()));
        }
    }
}

/// The path in `token`, if it is one (trailing punctuation and a
/// `:line[:col]` suffix removed).
fn path_of(token: &str) -> Option<&str> {
    let token = token.trim_end_matches(['.', ',', ':', ';', '!', '?']);
    let token = strip_line_suffix(token);
    if token.len() < 3 || token.len() > 300 {
        return None;
    }
    // Windows absolute path.
    let b = token.as_bytes();
    if b.len() > 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\' {
        return Some(token);
    }
    if !token.bytes().all(|c| {
        c.is_ascii_alphanumeric() || matches!(c, b'/' | b'.' | b'_' | b'-' | b'~' | b'@' | b'+')
    }) {
        return None;
    }
    let has_letter = token.bytes().any(|c| c.is_ascii_alphabetic());
    if !has_letter {
        return None;
    }
    let rooted = token.starts_with('/')
        || token.starts_with("./")
        || token.starts_with("../")
        || token.starts_with("~/");
    let last = token.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let extension = last
        .rsplit_once('.')
        .map(|(stem, ext)| (stem, ext.to_ascii_lowercase()))
        .filter(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext.as_str()));
    if token.contains('/') {
        let segments: Vec<&str> = token.split('/').filter(|s| !s.is_empty()).collect();
        if segments.is_empty() || segments.contains(&"...") {
            return None;
        }
        if rooted && token.len() > 2 {
            return Some(token);
        }
        if extension.is_some()
            || segments.len() >= 3
            || (token.ends_with('/') && segments.len() >= 2)
        {
            return Some(token);
        }
        return None;
    }
    // A bare file name needs a known extension and a real stem.
    match extension {
        Some((stem, _)) if stem.bytes().any(|c| c.is_ascii_alphabetic()) && stem.len() >= 2 => {
            Some(token)
        }
        _ => None,
    }
}

/// `src/main.rs:42:7` → `src/main.rs`.
fn strip_line_suffix(token: &str) -> &str {
    let mut t = token;
    for _ in 0..2 {
        if let Some((head, tail)) = t.rsplit_once(':') {
            if !tail.is_empty() && tail.bytes().all(|c| c.is_ascii_digit()) {
                t = head;
            }
        }
    }
    t
}

fn trim_url(url: &str) -> &str {
    url.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '}', '\'', '"'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{ArtifactLedger, LedgerCaps};
    use crate::message::Role;

    fn kinds(text: &str) -> Vec<(ArtifactKind, String)> {
        extract(&[Message::text(1, Role::User, text)])
            .into_iter()
            .map(|a| (a.kind, a.value))
            .collect()
    }

    fn values_of(text: &str, kind: ArtifactKind) -> Vec<String> {
        kinds(text)
            .into_iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, v)| v)
            .collect()
    }

    #[test]
    fn every_pattern_compiles() {
        for re in [
            &URL,
            &UUID,
            &HEX,
            &TICKET,
            &CVE,
            &ISSUE_REF,
            &ERROR_CODE,
            &SQLSTATE,
            &HTTP_STATUS,
            &HTTP_REASON,
            &QUANTITY,
            &FENCE,
            &DOLLAR_LINE,
            &BACKTICK,
        ] {
            assert!(re.is_some());
        }
    }

    #[test]
    fn paths_are_found_and_prose_is_not() {
        let text =
            "Edit src/main.rs, then ./run.sh and /etc/nginx/nginx.conf; also ~/.config/x.toml \
                    and packages/core/src/index.ts:42:7 and Cargo.toml. C:\\Users\\me\\a.txt too.";
        assert_eq!(
            values_of(text, ArtifactKind::Path),
            [
                "src/main.rs",
                "./run.sh",
                "/etc/nginx/nginx.conf",
                "~/.config/x.toml",
                "packages/core/src/index.ts",
                "Cargo.toml",
                "C:\\Users\\me\\a.txt"
            ]
        );
        for prose in [
            "and/or",
            "w/o",
            "1/2 cup",
            "2024/01/02",
            "e.g. this",
            "v1.2.3",
            "client/server",
            "i.e.",
            "3.14",
        ] {
            assert!(values_of(prose, ArtifactKind::Path).is_empty(), "{prose}");
        }
        assert_eq!(
            values_of("dirs: services/billing/src and src/db/", ArtifactKind::Path),
            ["services/billing/src", "src/db/"]
        );
    }

    #[test]
    fn urls_are_trimmed_and_not_also_paths() {
        let text = "See https://example.com/a/b.html). And (http://x.io/path?q=1).";
        assert_eq!(
            values_of(text, ArtifactKind::Url),
            ["https://example.com/a/b.html", "http://x.io/path?q=1"]
        );
        assert!(values_of(text, ArtifactKind::Path).is_empty());
    }

    #[test]
    fn commands_from_dollar_lines_fences_and_backticks() {
        let text = "Run:\n$ cargo test -p shared\n```bash\n# comment\n$ make build\nls -la\n```\nthen `git push origin main` but not `foo bar` or `cargo`.";
        assert_eq!(
            values_of(text, ArtifactKind::Command),
            [
                "cargo test -p shared",
                "make build",
                "ls -la",
                "git push origin main"
            ]
        );
    }

    #[test]
    fn commands_from_shell_tool_inputs_of_any_tool() {
        let m = Message::new(
            1,
            Role::Assistant,
            vec![
                Part::ToolCall {
                    call_id: "a".into(),
                    tool_name: "bash".into(),
                    input: serde_json::json!({"command": "cargo build --release\necho done"}),
                },
                Part::ToolCall {
                    call_id: "b".into(),
                    tool_name: "exec_sql".into(),
                    input: serde_json::json!("psql -c 'select 1'"),
                },
                Part::ToolCall {
                    call_id: "c".into(),
                    tool_name: "edit_file".into(),
                    input: serde_json::json!({"path": "src/lib.rs", "nested": [{"p": "docs/a.md"}]}),
                },
            ],
        );
        let got: Vec<(ArtifactKind, String)> = extract(&[m])
            .into_iter()
            .map(|a| (a.kind, a.value))
            .collect();
        assert!(got.contains(&(ArtifactKind::Command, "cargo build --release".into())));
        assert!(got.contains(&(ArtifactKind::Command, "psql -c 'select 1'".into())));
        assert!(
            got.contains(&(ArtifactKind::Path, "src/lib.rs".into())),
            "disallowed tools still yield paths"
        );
        assert!(got.contains(&(ArtifactKind::Path, "docs/a.md".into())));
    }

    #[test]
    fn identifiers() {
        let text = "Commit 9f3c2ab71e fixed ENG-1234 (see #4821) for 123e4567-e89b-12d3-a456-426614174000, CVE-2024-3094. Not UTF-8, not deadbeef, not 1234567.";
        assert_eq!(
            values_of(text, ArtifactKind::Identifier),
            [
                "9f3c2ab71e",
                "ENG-1234",
                "#4821",
                "123e4567-e89b-12d3-a456-426614174000",
                "CVE-2024-3094"
            ]
        );
    }

    #[test]
    fn error_codes_are_normalised() {
        let text = "error[E0502] then ENOENT, got HTTP 503 and status code: 429, a 502 Bad Gateway, ORA-00942, TS2345, SQLSTATE 23505.";
        assert_eq!(
            values_of(text, ArtifactKind::ErrorCode),
            [
                "E0502",
                "ENOENT",
                "HTTP 503",
                "HTTP 429",
                "HTTP 502",
                "ORA-00942",
                "TS2345",
                "SQLSTATE 23505"
            ]
        );
    }

    #[test]
    fn quantities_with_units() {
        let text = "Use 512 MB, 1.5 GiB, 30s timeout, 200 ms p99, 5 minutes, 99.9% SLO, 80k tokens, 120,000 chars, 8 cores. Not 42 apples or version 3.";
        assert_eq!(
            values_of(text, ArtifactKind::Quantity),
            [
                "512 MB",
                "1.5 GiB",
                "30s",
                "200 ms",
                "5 minutes",
                "99.9%",
                "80k tokens",
                "120,000 chars",
                "8 cores"
            ]
        );
    }

    #[test]
    fn sources_reasoning_and_successful_output_never_yield() {
        let msgs = vec![
            Message::new(
                1,
                Role::Assistant,
                vec![Part::Reasoning {
                    text: "maybe src/secret.rs".into(),
                }],
            ),
            Message::new(
                2,
                Role::Tool,
                vec![Part::ToolResult {
                    call_id: "a".into(),
                    tool_name: "bash".into(),
                    output: "src/listing.rs\n".into(),
                    is_error: false,
                    pruned: false,
                }],
            ),
            Message::new(
                3,
                Role::Tool,
                vec![Part::ToolResult {
                    call_id: "b".into(),
                    tool_name: "bash".into(),
                    output: "\nerror[E0599]: no method in src/x.rs\nsecond line src/y.rs".into(),
                    is_error: true,
                    pruned: false,
                }],
            ),
            Message::new(
                4,
                Role::User,
                vec![
                    Part::File {
                        uri: "docs/spec.pdf".into(),
                        media_type: None,
                        name: None,
                    },
                    Part::File {
                        uri: "https://a.io/f.png".into(),
                        media_type: None,
                        name: None,
                    },
                ],
            ),
        ];
        let got: Vec<(ArtifactKind, String, i64)> = extract(&msgs)
            .into_iter()
            .map(|a| (a.kind, a.value, a.last_seen.0))
            .collect();
        assert_eq!(
            got,
            vec![
                (ArtifactKind::ErrorCode, "E0599".into(), 3),
                (ArtifactKind::Path, "src/x.rs".into(), 3),
                (ArtifactKind::Path, "docs/spec.pdf".into(), 4),
                (ArtifactKind::Url, "https://a.io/f.png".into(), 4),
            ]
        );
    }

    #[test]
    fn one_message_yields_at_most_the_per_message_cap() {
        let text: String = (0..500).map(|i| format!("src/f{i}.rs ")).collect();
        assert_eq!(kinds(&text).len(), MAX_PER_MESSAGE);
    }

    #[test]
    fn has_artifact_detects_any_kind() {
        assert!(has_artifact("look at src/main.rs"));
        assert!(has_artifact("it took 30 s"));
        assert!(!has_artifact("nothing special here"));
    }

    fn artifact(kind: ArtifactKind, value: &str, id: i64) -> Artifact {
        Artifact {
            kind,
            value: value.into(),
            last_seen: MessageId(id),
        }
    }

    #[test]
    fn ledger_dedupes_to_the_end_keeping_the_newest_sighting() {
        let mut l = ArtifactLedger::default();
        let caps = LedgerCaps::default();
        l.record(
            [
                artifact(ArtifactKind::Path, "a.rs", 5),
                artifact(ArtifactKind::Path, "b.rs", 6),
            ],
            &caps,
        );
        l.record([artifact(ArtifactKind::Path, "a.rs", 3)], &caps);
        let got: Vec<(&str, i64)> = l
            .entries()
            .iter()
            .map(|a| (a.value.as_str(), a.last_seen.0))
            .collect();
        assert_eq!(got, [("b.rs", 6), ("a.rs", 5)]);
    }

    #[test]
    fn ledger_caps_evict_the_oldest_of_that_kind_only() {
        let caps = LedgerCaps {
            paths: 2,
            ..Default::default()
        };
        let mut l = ArtifactLedger::default();
        l.record(
            [
                artifact(ArtifactKind::Url, "https://u", 1),
                artifact(ArtifactKind::Path, "a.rs", 2),
                artifact(ArtifactKind::Path, "b.rs", 3),
                artifact(ArtifactKind::Path, "c.rs", 4),
            ],
            &caps,
        );
        let got: Vec<&str> = l.entries().iter().map(|a| a.value.as_str()).collect();
        assert_eq!(got, ["https://u", "b.rs", "c.rs"]);
    }

    #[test]
    fn ledger_skips_overlong_values_and_is_idempotent() {
        let caps = LedgerCaps {
            max_value_chars: 10,
            ..Default::default()
        };
        let seen = vec![
            artifact(ArtifactKind::Command, "make", 1),
            artifact(ArtifactKind::Command, "x".repeat(11).as_str(), 2),
        ];
        let mut l = ArtifactLedger::default();
        l.record(seen.clone(), &caps);
        let once = l.clone();
        l.record(seen, &caps);
        assert_eq!(l, once);
        assert_eq!(l.len(), 1);
        assert_eq!(l.render(), "Commands:\n- make\n");
    }
}
