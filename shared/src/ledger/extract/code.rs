//! Code-shaped values: paths, URLs, commands, ids, error codes, versions,
//! hosts, config names, counts, durations and other quantities.
//!
//! Each extractor is conservative: `and/or`, `1/2`, `e.g.` are not paths,
//! `UTF-8` is not a ticket, a hex word without a digit is not a hash,
//! `main.rs:42` is a file and line, not a host and port.

use super::scan::{pattern, Scan};
use crate::ledger::ArtifactKind;
use crate::text::{is_one_of, Words};

pattern!(URL, r#"https?://[^\s<>"'`\])}]+"#);
pattern!(
    UUID,
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
);
pattern!(
    /// A hex hash (group 1) or a ticket key (group 2), in one pass.
    HEX_OR_TICKET,
    r"\b(?:([0-9a-f]{7,40})|([A-Z][A-Z0-9]{1,9}-[0-9]{1,7}))\b"
);
pattern!(CVE, r"\bCVE-[0-9]{4}-[0-9]{4,7}\b");
pattern!(
    SYMBOL_PATH,
    r"\b[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*){2,8}\b"
);
pattern!(ISSUE_REF, r"(?:^|[ \t\r\n(\[])(#[0-9]{1,7})\b");
pattern!(
    ERROR_CODE,
    r"\b(?:E0[0-9]{3}|TS[0-9]{4,5}|CS[0-9]{4}|ORA-[0-9]{5}|ENOENT|EACCES|EPERM|ECONNREFUSED|ECONNRESET|ECONNABORTED|ETIMEDOUT|EADDRINUSE|EADDRNOTAVAIL|EEXIST|ENOTDIR|EISDIR|EMFILE|ENFILE|ENOSPC|EPIPE|EAGAIN|EHOSTUNREACH|ENETUNREACH|ENOMEM|EINVAL|EBUSY|EROFS|ENOTEMPTY|OOMKilled|CrashLoopBackOff|ImagePullBackOff|ErrImagePull|ErrImageNeverPull|CreateContainerConfigError|CreateContainerError|RunContainerError|InvalidImageName|ContainerCannotRun|DeadlineExceeded|FailedScheduling|FailedMount|NodeNotReady|Evicted|SIG(?:KILL|TERM|SEGV|ABRT|BUS|PIPE|INT|HUP|QUIT|ILL|FPE|USR1|USR2)|ERR_[A-Z0-9_]{3,40}|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:EXCEEDED|FAILED|FAILURE|DENIED|INVALID|NOT_FOUND|TIMEOUT|TIMED_OUT|UNAVAILABLE|REFUSED|REJECTED|FORBIDDEN|UNAUTHORIZED|CONFLICT|EXPIRED|MISSING|ERROR|EXHAUSTED|MISMATCH|OVERFLOW)|(?:INVALID|MISSING|UNKNOWN|DUPLICATE|UNSUPPORTED)_[A-Z0-9_]{3,40}|DEADLINE_EXCEEDED|RESOURCE_EXHAUSTED|PERMISSION_DENIED|FAILED_PRECONDITION|UNAUTHENTICATED)\b"
);
pattern!(
    EXCEPTION,
    r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*(?:Error|Exception)\b"
);
pattern!(
    EXIT_CODE,
    r"(?i-u)\b(?:exit(?:ed)?(?: with)?|returned non-zero exit)[ \t]+(?:code|status)[ \t]*:?[ \t]*([0-9]{1,3})\b"
);
pattern!(
    PREFIXED_CODE,
    r"\b(?:error|ERROR|Error|fatal|FATAL|Fatal)[ \t]*[\[(:]?[ \t]*([A-Z]{1,6}[0-9]{2,6}|[0-9]{3,5})\b"
);
pattern!(GATE_EXIT, r"(?i-u:exit)");
pattern!(GATE_ERROR, r"error|ERROR|Error|fatal|FATAL|Fatal");
pattern!(GATE_HTTP, r"(?i-u:http|status)");
pattern!(
    GATE_HTTP_REASON,
    r"Service Unavailable|Internal Server Error|Bad Gateway|Gateway Timeout|Too Many Requests|Not Found|Unauthorized|Forbidden|Bad Request|Conflict|Payload Too Large"
);
pattern!(SQLSTATE, r"\bSQLSTATE[ \t]*\[?([0-9A-Z]{5})\]?");
pattern!(
    HTTP_STATUS,
    r"(?i-u)\b(?:HTTP(?:/[0-9.]+)?|status(?: code)?)[ \t]*:?[ \t]*([1-5][0-9]{2})\b"
);
pattern!(
    HTTP_REASON,
    r"\b([45][0-9]{2}) (?:Service Unavailable|Internal Server Error|Bad Gateway|Gateway Timeout|Too Many Requests|Not Found|Unauthorized|Forbidden|Bad Request|Conflict|Payload Too Large)\b"
);
pattern!(
    HOST_PORT,
    r"\b((?:[0-9]{1,3}\.){3}[0-9]{1,3}|localhost|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+|[a-z][a-z0-9]*(?:-[a-z0-9]+)+):([0-9]{2,5})\b"
);
pattern!(IPV4, r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b");
pattern!(
    VERSION,
    r"\b(?:v[0-9]+\.[0-9]+(?:\.[0-9]+)?|[0-9]+\.[0-9]+\.[0-9]+)(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?:\+[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?\b"
);
pattern!(
    DURATION_COMPOUND,
    r"\b[0-9]+(?:d ?[0-9]+h|h ?[0-9]+m(?:in)?|m ?[0-9]+s)(?: ?[0-9]+(?:m|s))?\b"
);
pattern!(
    DURATION,
    r"\b[0-9]+(?:[.,][0-9]+)?(?:(?:ms|µs|us|ns|s|m|h|d)\b| ?(?:ms|µs|us|ns|s|h|secs?|seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|wks?|months?|years?|yrs?)\b)"
);
pattern!(
    QUANTITY,
    r"\b([0-9]+(?:[.,][0-9]+)*[kKM]?)( ?)(?:(%)|(B|KB|MB|GB|TB|PB|KiB|MiB|GiB|TiB|kB|Gi|Mi|Ki|tokens?|chars?|characters?|req/s|rps|qps|ops/s|cores?|vCPUs?|CPUs?|px|dpi|fps|Hz|kHz|MHz|GHz|kWh|kW|mAh|kg|mg|lbs?|km|cm|mm|mi|ft|ml|°C|°F|Mbps|Gbps|MB/s|GB/s)\b)"
);
pattern!(
    /// A number, then (in one pass, tried in this order): "of N noun"
    /// (groups 2, 3), an optional noun and an outcome (groups 4, 5), or a
    /// noun (group 6).
    COUNT,
    r"\b([0-9][0-9,]*) (?:(?:of|out of) ([0-9][0-9,]*) ([a-z][a-z-]{1,30})|(?:([a-z][a-z-]{1,30}) )?(passed|failed|skipped|ignored|succeeded|errored|deleted|updated|inserted|created|affected|returned|remaining|pending|processed|migrated|imported|exported|dropped|matched|changed|removed|added|queued|retried|rejected|refunded|cancelled|canceled|shipped|delivered)|([a-z]{2,30}))\b"
);
pattern!(
    CONFIG_NAME,
    r"\b[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*){1,7}\b"
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
    "TCP", "UDP", "X", "PEP", "ES", "COVID", "CP", "WIN", "ECMA", "EAN", "F", "RFC", "IEC", "DIN",
    "EN", "IEEE", "UTC", "GMT",
];

/// Whether `prefix` (the part before the first `-`) names a standard, not
/// a ticket or reference.
pub(super) fn is_standard(prefix: &str) -> bool {
    is_one_of(prefix, NOT_TICKETS)
}

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
    "gh",
    "aws",
    "gcloud",
    "az",
    "mvn",
    "gradle",
    "dotnet",
    "uv",
    "poetry",
    "pytest",
    "bundle",
    "rails",
    "deno",
    "bun",
];

/// [`CLI_WORDS`], for the test of every word of a text.
static CLI: Words = Words::new(CLI_WORDS);

/// File extensions that make a bare `name.ext` a path.
pub(super) const EXTENSIONS: &[&str] = &[
    "rs",
    "ts",
    "tsx",
    "js",
    "jsx",
    "mjs",
    "cjs",
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
    "pdf",
    "png",
    "jpg",
    "jpeg",
    "gif",
    "svg",
    "webp",
    "zip",
    "gz",
    "tgz",
    "ipynb",
    "parquet",
    "xlsx",
    "docx",
];

/// Last labels that make a dotted name a domain, not a config key.
const DOMAINS: &[&str] = &[
    "com",
    "org",
    "net",
    "io",
    "dev",
    "app",
    "ai",
    "co",
    "de",
    "uk",
    "fr",
    "eu",
    "us",
    "internal",
    "local",
    "lan",
    "cloud",
    "svc",
    "cluster",
    "edu",
    "gov",
    "info",
    "biz",
    "me",
    "nl",
    "ch",
    "at",
    "es",
    "it",
    "se",
    "no",
    "dk",
    "fi",
    "pl",
    "jp",
    "cn",
    "in",
    "br",
    "ca",
    "au",
    "example",
    "test",
    "localhost",
    "onion",
    "sh",
    "so",
    "xyz",
    "tech",
    "site",
];

/// First segments that make a dotted name a member access in code.
pub(super) const CODE_OWNERS: &[&str] = &[
    "self", "this", "super", "cls", "ctx", "std", "os", "sys", "np", "pd", "math", "console",
    "document", "window", "process", "req", "res", "e", "err", "t", "r", "s", "x", "obj", "args",
    "opts", "options", "props", "state", "module", "exports", "json", "vec", "string", "str",
];

/// Nouns a bare small number counts (`3 nights`, `2 pods`): with them a
/// number carries meaning; with other words (`2 options`) it is prose.
/// Numbers of three digits or more count any plural noun (`48213 rows`).
const COUNTED: &[&str] = &[
    "row",
    "record",
    "test",
    "file",
    "item",
    "user",
    "customer",
    "order",
    "request",
    "error",
    "warning",
    "failure",
    "line",
    "message",
    "event",
    "job",
    "task",
    "pod",
    "node",
    "replica",
    "connection",
    "retry",
    "retries",
    "attempt",
    "worker",
    "thread",
    "entry",
    "entries",
    "key",
    "document",
    "ticket",
    "commit",
    "issue",
    "bug",
    "account",
    "product",
    "invoice",
    "table",
    "column",
    "query",
    "queries",
    "call",
    "package",
    "dependency",
    "dependencies",
    "module",
    "crate",
    "service",
    "instance",
    "server",
    "shard",
    "partition",
    "batch",
    "batches",
    "chunk",
    "page",
    "result",
    "session",
    "night",
    "guest",
    "room",
    "bag",
    "seat",
    "passenger",
    "adult",
    "child",
    "children",
    "people",
    "person",
    "persons",
    "piece",
    "parcel",
    "box",
    "boxes",
    "unit",
    "license",
    "licence",
    "seat",
    "device",
    "machine",
    "container",
    "cluster",
    "region",
    "subscription",
    "member",
    "employee",
    "student",
    "patient",
    "visit",
    "click",
    "download",
    "install",
    "signup",
];

/// Words that follow a number but are units or prose, never counted.
const NOT_COUNTED: &[&str] = &[
    "times", "ways", "things", "steps", "options", "cases", "points", "years", "days", "weeks",
    "months", "hours", "minutes", "seconds", "bytes", "tokens", "chars", "percent", "and", "or",
    "of", "to", "in", "on", "at", "is", "are", "was", "were", "for", "the", "a", "an",
];

/// Tools whose input *is* a shell command.
pub(super) fn is_shell_tool(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(
        name.as_str(),
        "bash" | "shell" | "sh" | "terminal" | "run_command" | "run_terminal_cmd"
    ) || name.starts_with("exec")
}

pub(super) fn commands(s: &mut Scan<'_>) {
    let text = s.text;
    let mut fenced = Vec::new();
    for caps in s.captures_all(&FENCE) {
        if let Some(body) = caps.get(2) {
            fenced.push(body.range());
            let mut offset = body.start();
            for line in body.as_str().split('\n') {
                let cmd = line.trim();
                let cmd = cmd.strip_prefix("$ ").unwrap_or(cmd);
                if !cmd.is_empty() && !cmd.starts_with('#') {
                    s.note(offset, ArtifactKind::Command, cmd);
                }
                offset += line.len() + 1;
            }
        }
    }
    for caps in s.captures_all(&DOLLAR_LINE) {
        if let Some(m) = caps
            .get(1)
            .filter(|m| !fenced.iter().any(|r| r.contains(&m.start())))
        {
            s.note(m.start(), ArtifactKind::Command, m.as_str());
        }
    }
    let mut ticked = Vec::new();
    for caps in s.captures_all(&BACKTICK) {
        if let Some(m) = caps.get(1) {
            ticked.push(m.range());
            let span = m.as_str().trim();
            let first = span.split_whitespace().next().unwrap_or("");
            if span.contains(' ') && CLI.contains(first) {
                s.note(m.start(), ArtifactKind::Command, span);
            }
        }
    }
    if text.len() <= PROSE_COMMAND_TEXT {
        for (at, cmd) in prose_commands(text) {
            let inside = |r: &std::ops::Range<usize>| r.contains(&at);
            if !fenced.iter().any(inside) && !ticked.iter().any(inside) {
                s.note(at, ArtifactKind::Command, cmd);
            }
        }
    }
}

/// Longest text searched for commands written in prose.
const PROSE_COMMAND_TEXT: usize = 8_000;
/// Most words of a command written in prose.
const PROSE_COMMAND_WORDS: usize = 14;

/// Words that end a command written in prose: "… up -d db for the
/// database", "… cargo run -p api, after …".
const PROSE_STOPS: &[&str] = &[
    "for", "to", "and", "then", "after", "before", "which", "that", "so", "if", "when", "but",
    "or", "because", "since", "while", "until", "again", "first", "instead", "please",
];

/// Commands written in running text without backticks: "I use
/// RUST_LOG=debug cargo run -p billing-api, after docker compose -f
/// dev.yml up -d db". A command starts at a known program (after any
/// `NAME=value` environment words), runs to the end of its clause, and
/// counts only with a subcommand or option and at least one word shaped
/// like code (an option, a path, a `key=value`): "I use git every day" is
/// prose.
fn prose_commands(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split('\n') {
        if !line.trim_start().starts_with("$ ") {
            out.extend(
                prose_commands_in_line(line)
                    .into_iter()
                    .map(|(at, cmd)| (offset + at, cmd)),
            );
        }
        offset += line.len() + 1;
    }
    out
}

/// [`prose_commands`] of one line.
fn prose_commands_in_line(line: &str) -> Vec<(usize, &str)> {
    // A command starts at a known program: a line without one (most) has
    // none, and is not cut into words.
    if !line.split_whitespace().any(|w| CLI.contains(w)) {
        return Vec::new();
    }
    let words: Vec<(usize, &str)> = line
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - line.as_ptr() as usize, w))
        .collect();
    let env = |w: &str| {
        w.split_once('=').is_some_and(|(k, v)| {
            !k.is_empty()
                && !v.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        })
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let mut start = i;
        while start < words.len() && env(words[start].1) {
            start += 1;
        }
        let program = words.get(start).map_or("", |(_, w)| *w);
        if !CLI.contains(program) || matches!(program, "cd" | "ls" | "go" | "make") {
            i = start + 1;
            continue;
        }
        // The command's words, to the end of its clause.
        let mut span: Vec<&str> = vec![program];
        for &(_, w) in words.iter().skip(start + 1).take(PROSE_COMMAND_WORDS) {
            let bare = w.trim_end_matches([',', ';', '.', ':', ')', '!', '?']);
            if bare.is_empty() || is_one_of(bare, PROSE_STOPS) {
                break;
            }
            span.push(bare);
            let clause_ends = w.ends_with([',', ';', ':', ')', '!', '?'])
                || (w.ends_with('.') && !bare.contains('.'));
            if clause_ends {
                break;
            }
        }
        let args = &span[1..];
        let sub = args.first().is_some_and(|w| {
            w.starts_with('-')
                || w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-' || b.is_ascii_digit())
        });
        let code_like = args
            .iter()
            .any(|w| w.starts_with('-') || w.contains('/') || w.contains('=') || w.contains('.'));
        if sub && code_like && span.len() >= 3 {
            let from = words[i].0;
            let last = words[start + span.len() - 1];
            let to = last.0 + span[span.len() - 1].len();
            out.push((from, &line[from..to]));
            i = start + span.len();
        } else {
            i = start + 1;
        }
    }
    out
}

pub(super) fn urls(s: &mut Scan<'_>) {
    if !s.text.contains("://") {
        return;
    }
    for m in s.find_all(&URL) {
        s.take(m.range(), ArtifactKind::Url, trim_url(m.as_str()));
    }
}

pub(super) fn uuids(s: &mut Scan<'_>) {
    if !s.has_digit || !s.text.contains('-') {
        return;
    }
    for m in s.find_all(&UUID) {
        s.take(m.range(), ArtifactKind::Identifier, m.as_str());
    }
}

pub(super) fn hosts(s: &mut Scan<'_>) {
    let text = s.text;
    if !s.has_digit || !(text.contains('.') || text.contains(':')) {
        return;
    }
    let with_port = text.contains(':').then_some(&HOST_PORT);
    for caps in with_port.map(|p| s.captures_all(p)).into_iter().flatten() {
        let (Some(all), Some(host), Some(port)) = (caps.get(0), caps.get(1), caps.get(2)) else {
            continue;
        };
        let last_label = host.as_str().rsplit('.').next().unwrap_or("");
        let glued = matches!(
            s.byte_before(all.start()),
            Some(b'/' | b'.' | b'-' | b'_' | b':')
        ) || s.byte_at(all.end()) == Some(b'.')
            && s.byte_at(all.end() + 1).is_some_and(|b| b.is_ascii_digit());
        let is_ip = host
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.');
        let port_ok = port.as_str().parse::<u32>().is_ok_and(|p| p <= 65_535);
        if glued
            || !port_ok
            || (is_ip && !octets_ok(host.as_str()))
            || (!is_ip && is_one_of(last_label, EXTENSIONS))
        {
            continue;
        }
        s.take(all.range(), ArtifactKind::Host, all.as_str());
    }
    let ip = text.contains('.').then_some(&IPV4);
    for m in ip.map(|p| s.find_all(p)).into_iter().flatten() {
        let glued = matches!(s.byte_before(m.start()), Some(b'.' | b'-'))
            || (s.byte_at(m.end()) == Some(b'.')
                && s.byte_at(m.end() + 1).is_some_and(|b| b.is_ascii_digit()));
        if !glued && octets_ok(m.as_str()) {
            s.take(m.range(), ArtifactKind::Host, m.as_str());
        }
    }
}

fn octets_ok(ip: &str) -> bool {
    ip.split('.')
        .all(|o| o.parse::<u16>().is_ok_and(|n| n <= 255))
}

/// Bytes that end a token that may be a path.
fn breaks_token(b: u8) -> bool {
    b.is_ascii_whitespace()
        || matches!(
            b,
            b'`' | b'"'
                | b'\''
                | b'('
                | b')'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'{'
                | b'}'
                | b','
                | b';'
                | b'='
        )
}

/// Paths: every token around a `/`, `.` or `\` (found with `memchr`, so
/// text without them costs next to nothing), checked by [`path_of`].
pub(super) fn paths(s: &mut Scan<'_>) {
    let text = s.text;
    let bytes = text.as_bytes();
    // End of the last token looked at: each byte is visited at most twice.
    let mut done = 0;
    for at in memchr::memchr3_iter(b'/', b'.', b'\\', bytes) {
        if at < done {
            continue;
        }
        let start = bytes[done..at]
            .iter()
            .rposition(|&b| breaks_token(b))
            .map_or(done, |i| done + i + 1);
        let end = bytes[at..]
            .iter()
            .position(|&b| breaks_token(b))
            .map_or(bytes.len(), |i| at + i);
        done = end.max(at + 1);
        // Token breaks are ASCII, so both ends are char boundaries.
        let Some(token) = text.get(start..end) else {
            continue;
        };
        if token.len() < 3 || token.contains("://") {
            continue;
        }
        if let Some(path) = path_of(token) {
            s.take(start..start + path.len(), ArtifactKind::Path, path);
        }
    }
}

/// The path in `token`, if it is one (trailing punctuation and a
/// `:line[:col]` suffix removed).
pub(super) fn path_of(token: &str) -> Option<&str> {
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
    if !has_letter || token.contains('@') && !token.contains('/') {
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
        .filter(|(stem, ext)| !stem.is_empty() && is_one_of(ext.as_str(), EXTENSIONS));
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

pub(super) fn trim_url(url: &str) -> &str {
    url.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '}', '\'', '"'])
}

pub(super) fn versions(s: &mut Scan<'_>) {
    if !s.has_digit || !s.text.contains('.') {
        return;
    }
    for m in s.find_all(&VERSION) {
        let glued = matches!(s.byte_before(m.start()), Some(b'.' | b'-' | b'/' | b'_'))
            || (s.byte_at(m.end()) == Some(b'.')
                && s.byte_at(m.end() + 1).is_some_and(|b| b.is_ascii_digit()));
        if !glued {
            s.take(m.range(), ArtifactKind::Version, m.as_str());
        }
    }
}

pub(super) fn identifiers(s: &mut Scan<'_>) {
    if !s.has_digit {
        return;
    }
    let text = s.text;
    for caps in s.captures_all(&HEX_OR_TICKET) {
        let Some(m) = caps.get(0) else { continue };
        let v = m.as_str();
        let keep = if caps.get(1).is_some() {
            let glued = s.byte_before(m.start()) == Some(b'-') || s.byte_at(m.end()) == Some(b'-');
            v.bytes().any(|b| b.is_ascii_digit())
                && v.bytes().any(|b| b.is_ascii_alphabetic())
                && !glued
        } else {
            let prefix = v.split('-').next().unwrap_or("");
            let continues = s.byte_at(m.end()) == Some(b'-')
                && s.byte_at(m.end() + 1)
                    .is_some_and(|b| b.is_ascii_alphanumeric());
            !is_standard(prefix) && !continues
        };
        if keep {
            s.take(m.range(), ArtifactKind::Identifier, v);
        }
    }
    for m in s.find_all(&CVE) {
        s.take(m.range(), ArtifactKind::Identifier, m.as_str());
    }
    let symbols = if text.contains("::") {
        Some(&SYMBOL_PATH)
    } else {
        None
    };
    for m in symbols.map(|p| s.find_all(p)).into_iter().flatten() {
        let root = m.as_str().split("::").next().unwrap_or("");
        if !matches!(root, "std" | "core" | "alloc") && s.byte_before(m.start()) != Some(b':') {
            s.take(m.range(), ArtifactKind::Identifier, m.as_str());
        }
    }
    if !text.contains('#') {
        return;
    }
    for caps in s.captures_all(&ISSUE_REF) {
        if let Some(m) = caps.get(1) {
            s.take(m.range(), ArtifactKind::Identifier, m.as_str());
        }
    }
}

pub(super) fn error_codes(s: &mut Scan<'_>) {
    for m in s.find_all(&ERROR_CODE) {
        s.take(m.range(), ArtifactKind::ErrorCode, m.as_str());
    }
    for m in s.find_all(&EXCEPTION) {
        s.take(m.range(), ArtifactKind::ErrorCode, m.as_str());
    }
    if !s.has_digit {
        return;
    }
    let exit = s.gated(&GATE_EXIT).then_some(&EXIT_CODE);
    for caps in exit.map(|p| s.captures_all(p)).into_iter().flatten() {
        if let (Some(all), Some(code)) = (caps.get(0), caps.get(1)) {
            let value = format!("exit code {}", code.as_str());
            s.take(all.range(), ArtifactKind::ErrorCode, &value);
        }
    }
    let prefixed = s.gated(&GATE_ERROR).then_some(&PREFIXED_CODE);
    for caps in prefixed.map(|p| s.captures_all(p)).into_iter().flatten() {
        if let (Some(all), Some(code)) = (caps.get(0), caps.get(1)) {
            let code = code.as_str();
            let value = if code.bytes().all(|b| b.is_ascii_digit()) {
                format!("error {code}")
            } else {
                code.to_owned()
            };
            s.take(all.range(), ArtifactKind::ErrorCode, &value);
        }
    }
    for caps in s.captures_all(&SQLSTATE) {
        if let (Some(all), Some(code)) = (caps.get(0), caps.get(1)) {
            let value = format!("SQLSTATE {}", code.as_str());
            s.take(all.range(), ArtifactKind::ErrorCode, &value);
        }
    }
    let http = [
        s.gated(&GATE_HTTP).then_some(&HTTP_STATUS),
        s.gated(&GATE_HTTP_REASON).then_some(&HTTP_REASON),
    ];
    for re in http.into_iter().flatten() {
        for caps in s.captures_all(re) {
            if let (Some(all), Some(code)) = (caps.get(0), caps.get(1)) {
                let value = format!("HTTP {}", code.as_str());
                s.take(all.range(), ArtifactKind::ErrorCode, &value);
            }
        }
    }
}

pub(super) fn durations(s: &mut Scan<'_>) {
    if !s.has_digit {
        return;
    }
    for re in [&DURATION_COMPOUND, &DURATION] {
        for m in s.find_all(re) {
            if !glued_number(s, m.start()) {
                s.take(m.range(), ArtifactKind::Duration, m.as_str());
            }
        }
    }
}

/// Whether the number starting at `at` continues something before it
/// (`v1.5s`, `x2`, `1.2.3`), so it is no value of its own.
fn glued_number(s: &Scan<'_>, at: usize) -> bool {
    matches!(
        s.byte_before(at),
        Some(b) if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b'$' | b'#')
    )
}

pub(super) fn quantities(s: &mut Scan<'_>) {
    if !s.has_digit {
        return;
    }
    for caps in s.captures_all(&QUANTITY) {
        let (Some(all), Some(number)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        if glued_number(s, all.start()) {
            continue;
        }
        let unit = caps
            .get(3)
            .or_else(|| caps.get(4))
            .map_or("", |m| m.as_str());
        let space = caps.get(2).map_or("", |m| m.as_str());
        let value = format!("{}{space}{unit}", number.as_str());
        s.take(all.range(), ArtifactKind::Quantity, &value);
    }
}

pattern!(
    /// A SQL command tag on a line of its own, as psql and most drivers
    /// print it: `UPDATE 49953`, `INSERT 0 12`, `DELETE 3`, `COPY 1000`.
    SQL_TAG,
    r"(?m)^(?:UPDATE|DELETE|SELECT|COPY|MERGE|MOVE|FETCH|INSERT 0)[ ]([0-9]{1,12})[ \t]*\r?$"
);

pub(super) fn counts(s: &mut Scan<'_>) {
    if !s.has_digit {
        return;
    }
    let tagged = [
        "UPDATE ",
        "DELETE ",
        "SELECT ",
        "COPY ",
        "INSERT 0 ",
        "MERGE ",
    ]
    .iter()
    .any(|t| s.text.contains(t));
    for m in tagged
        .then_some(&SQL_TAG)
        .map(|p| s.find_all(p))
        .into_iter()
        .flatten()
    {
        let tag = m.as_str().trim_end();
        if !tag.ends_with(" 0") {
            s.take(m.start()..m.start() + tag.len(), ArtifactKind::Count, tag);
        }
    }
    for caps in s.captures_all(&COUNT) {
        let (Some(all), Some(n)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        let counted = if caps.get(2).is_some() {
            true
        } else if caps.get(5).is_some() {
            caps.get(4)
                .is_none_or(|w| !is_one_of(w.as_str(), NOT_COUNTED))
        } else if let Some(noun) = caps.get(6) {
            let noun = noun.as_str();
            let digits = n.as_str().bytes().filter(u8::is_ascii_digit).count();
            !is_one_of(noun, NOT_COUNTED)
                && (is_one_of(noun, COUNTED)
                    || noun
                        .strip_suffix('s')
                        .is_some_and(|stem| is_one_of(stem, COUNTED))
                    || (digits >= 3 && noun.len() >= 4 && noun.ends_with('s')))
        } else {
            false
        };
        if counted && !is_zero(n.as_str()) && !glued_number(s, all.start()) {
            s.take(all.range(), ArtifactKind::Count, all.as_str());
        }
    }
}

fn is_zero(n: &str) -> bool {
    n.bytes().all(|b| b == b'0' || b == b',')
}

pub(super) fn config_names(s: &mut Scan<'_>) {
    if !s.text.contains('.') {
        return;
    }
    for m in s.find_all(&CONFIG_NAME) {
        let name = m.as_str();
        let segments: Vec<&str> = name.split('.').collect();
        let first = segments.first().copied().unwrap_or("");
        let last = segments.last().copied().unwrap_or("");
        let glued = matches!(
            s.byte_before(m.start()),
            Some(b'.' | b'/' | b'@' | b'-' | b':' | b'\\' | b'$')
        ) || matches!(s.byte_at(m.end()), Some(b'(' | b'/' | b'@' | b'-' | b'['))
            || (s.byte_at(m.end()) == Some(b'.')
                && s.byte_at(m.end() + 1)
                    .is_some_and(|b| b.is_ascii_alphanumeric()));
        let backticked = s.byte_before(m.start()) == Some(b'`') && s.byte_at(m.end()) == Some(b'`');
        let shaped = name.contains('_')
            || name.bytes().any(|b| b.is_ascii_digit())
            || segments.len() >= 3
            || backticked;
        if glued
            || !shaped
            || segments.iter().any(|seg| seg.len() < 2)
            || is_one_of(first, CODE_OWNERS)
            || is_one_of(last, DOMAINS)
            || is_one_of(last, EXTENSIONS)
        {
            continue;
        }
        s.take(m.range(), ArtifactKind::ConfigName, name);
    }
}
