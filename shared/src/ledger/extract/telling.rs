//! What in a tool's output tells that something happened.
//!
//! Most tool output is reading: file contents, listings, green test runs,
//! logs of a healthy service. Its values (the hundreds of paths an agent
//! reads, the names of passing tests) are the stable state of the world:
//! the agent can read them again, and keeping them all would crowd out
//! the few that matter. Two kinds of output are events instead, and their
//! values cannot be read again once the moment has passed:
//!
//! - **What an action answered.** The SHA in `git commit`'s output, the
//!   URL `gh pr create` prints, the row count of an `UPDATE`: the output of
//!   a command that changes something ([`command_reads_only`] is false).
//! - **Lines that report a failure.** `error[E0502]: …`, `Reason:
//!   OOMKilled`, `ERROR … invoice 02e3c5… failed`, `panicked at
//!   src/round.rs:212:9` ([`signal_lines`]), whatever command printed them.
//!
//! Values from either rank as written, not read (see `Salience`).

use crate::text::is_one_of;

/// Verbs in a tool's name that say it changes something.
const ACTING_VERBS: &[&str] = &[
    "write", "edit", "create", "update", "delete", "remove", "apply", "patch", "replace", "insert",
    "move", "rename", "run", "exec", "execute", "set", "put", "post", "send", "deploy", "commit",
    "push", "install", "make", "add", "book", "reserve", "cancel", "submit", "pay", "refund",
    "request", "schedule", "transfer", "charge", "order", "purchase", "buy", "sign", "approve",
    "merge", "close", "assign", "upload", "save", "store", "register", "issue", "grant", "revoke",
    "restart", "stop", "start", "kill", "scale", "rollback", "migrate", "release", "publish",
    "notify", "invite", "confirm", "change", "modify", "reset", "enable", "disable",
];

/// Whether a (non-shell) tool named `tool_name` changes something: its
/// name holds an acting verb (`request_refund`, `book_hotel`,
/// `createIssue`) and no reading one (`lookup_order` reads). A name with
/// none (`track_parcel`, `weather`,
/// `calendar_list`) is taken to read: what it answered ranks as read
/// unless a line of it reports a failure.
pub(super) fn tool_acts(tool_name: &str) -> bool {
    !super::reads_only(tool_name)
        && super::words_of(tool_name)
            .iter()
            .any(|w| is_one_of(w.as_str(), ACTING_VERBS))
}

/// Programs that only read or check, whatever their arguments.
const READING_PROGRAMS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "ack",
    "find",
    "fd",
    "ls",
    "ll",
    "tree",
    "wc",
    "stat",
    "file",
    "diff",
    "pwd",
    "env",
    "printenv",
    "which",
    "whereis",
    "type",
    "ps",
    "top",
    "htop",
    "df",
    "du",
    "free",
    "uname",
    "date",
    "id",
    "whoami",
    "hostname",
    "jq",
    "yq",
    "sort",
    "uniq",
    "cut",
    "awk",
    "column",
    "nl",
    "xxd",
    "hexdump",
    "od",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "lsof",
    "netstat",
    "ss",
    "dig",
    "nslookup",
    "host",
    "ping",
    "uptime",
    "journalctl",
    "dmesg",
    "bat",
    "man",
    "echo",
    "printf",
    "test",
    "true",
    "pytest",
    "tox",
    "jest",
    "vitest",
    "mocha",
    "rspec",
    "phpunit",
    "tsc",
    "eslint",
    "ruff",
    "mypy",
    "flake8",
    "pylint",
    "shellcheck",
    "hadolint",
];

/// Subcommands that only read or check, per program.
const READING_SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "git",
        &[
            "log",
            "show",
            "diff",
            "status",
            "blame",
            "branch",
            "remote",
            "rev-parse",
            "grep",
            "ls-files",
            "describe",
            "shortlog",
            "reflog",
            "config",
            "tag",
        ],
    ),
    (
        "kubectl",
        &[
            "get",
            "describe",
            "logs",
            "top",
            "explain",
            "version",
            "api-resources",
            "events",
        ],
    ),
    (
        "docker",
        &[
            "ps", "logs", "images", "inspect", "version", "info", "stats",
        ],
    ),
    (
        "podman",
        &["ps", "logs", "images", "inspect", "version", "info"],
    ),
    (
        "cargo",
        &[
            "test", "build", "check", "clippy", "tree", "metadata", "doc", "bench", "nextest",
            "fmt", "search", "version",
        ],
    ),
    (
        "npm",
        &[
            "test",
            "ls",
            "list",
            "view",
            "outdated",
            "audit",
            "run test",
            "run lint",
            "run check",
            "run build",
        ],
    ),
    (
        "pnpm",
        &["test", "ls", "list", "outdated", "run test", "run lint"],
    ),
    (
        "yarn",
        &["test", "list", "info", "outdated", "run test", "run lint"],
    ),
    (
        "go",
        &["test", "build", "vet", "list", "doc", "version", "env"],
    ),
    ("pip", &["list", "show", "freeze", "check"]),
    ("python", &["-c", "-m"]),
    (
        "systemctl",
        &["status", "show", "list-units", "is-active", "cat"],
    ),
    (
        "helm",
        &["list", "get", "status", "history", "template", "lint"],
    ),
    ("terraform", &["plan", "show", "validate", "output", "fmt"]),
    (
        "gh",
        &[
            "pr view",
            "issue view",
            "run view",
            "pr list",
            "issue list",
            "run list",
        ],
    ),
    ("mvn", &["test", "verify", "compile"]),
    ("gradle", &["test", "build", "check"]),
    ("make", &["test", "check", "lint"]),
];

/// Whether every command in the shell line `command` only reads or checks
/// (`cat`, `git log`, `kubectl describe`, `cargo test`, `… --version`).
/// Unknown programs count as acting: not knowing that a command only reads
/// is no reason to rank what it answered as mere reading.
pub(super) fn command_reads_only(command: &str) -> bool {
    let segments = command
        .split(['\n', ';', '|', '&'])
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let mut any = false;
    for segment in segments {
        let words: Vec<&str> = segment
            .split_whitespace()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .skip_while(|w| matches!(*w, "sudo" | "time" | "nice" | "env" | "exec"))
            .collect();
        let Some(&program) = words.first() else {
            continue;
        };
        any = true;
        let program = program.rsplit('/').next().unwrap_or(program);
        if program == "cd" || is_one_of(program, READING_PROGRAMS) {
            continue;
        }
        let args = &words[1..];
        if args
            .iter()
            .any(|a| matches!(*a, "--version" | "-V" | "--help" | "-h" | "version"))
        {
            continue;
        }
        let after_options = skip_option_values(args);
        let subcommand_reads = READING_SUBCOMMANDS
            .iter()
            .filter(|(p, _)| *p == program)
            .flat_map(|(_, subs)| subs.iter())
            .any(|s| {
                let mut parts = s.split(' ');
                let first = parts.next().unwrap_or("");
                if first.starts_with('-') {
                    return args.first() == Some(&first);
                }
                after_options.first() == Some(&first)
                    && parts
                        .next()
                        .is_none_or(|w| after_options.get(1).is_some_and(|a| a.starts_with(w)))
            });
        if !subcommand_reads {
            return false;
        }
    }
    any
}

/// `args` from the first word that is neither an option nor an option's
/// value (`-n billing get pods` → `get pods`): a short option followed by
/// a plain word is taken to carry that word as its value.
fn skip_option_values<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        let takes_value = args[i].len() == 2 && !args[i].starts_with("--");
        i += if takes_value { 2 } else { 1 };
    }
    args.get(i..).map(<[&str]>::to_vec).unwrap_or_default()
}

super::scan::pattern!(
    /// Words that make a line of tool output report a failure, at the start
    /// of a word, any case. One pass over the text finds them all (the
    /// regex crate's literal prefilter), so a long log costs one scan.
    SIGNAL,
    r"(?i-u)\b(?:error|err[ :]|fail|fatal|panic|exception|traceback|killed|oomkilled|denied|refused|timed out|timeout|reason:|warn|abort|crash|rejected|invalid|exit code|exit status|conflict|unauthorized|forbidden|not found|cannot|can't|could not|unable|segfault|evicted|backoff)"
);

/// Whether the signal word matched at `at..end` of `line` is a zero count
/// ("0 failed", "failed=0", "errors: 0"), which reports no failure.
fn zero_count(line: &str, at: usize, end: usize) -> bool {
    let before = line[..at].trim_end();
    if before == "0" || before.ends_with(" 0") {
        return true;
    }
    let rest = &line[end..];
    let word_end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let after = rest[word_end..].trim_start_matches([' ', '=', ':']);
    after.starts_with('0')
        && !after[1..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '.')
}

/// Whether `line` reports a failure: it holds a failure word that is not a
/// zero count ("0 failed", "failed=0", "errors: 0").
pub(super) fn is_signal_line(line: &str) -> bool {
    super::scan::matches(&SIGNAL, line).any(|m| !zero_count(line, m.start(), m.end()))
}

/// The lines of `text` that report a failure, joined by newlines (empty
/// when there are none). Linear in the text: the lines are found from the
/// matches, not the other way round.
pub(super) fn signal_lines(text: &str) -> String {
    let mut out = String::new();
    // End of the last line decided: later matches on it are skipped, so
    // every line is looked at once, whatever it holds.
    let mut decided_to = 0;
    for m in super::scan::matches(&SIGNAL, text) {
        if m.start() < decided_to {
            continue;
        }
        let start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let end = text[m.start()..]
            .find('\n')
            .map_or(text.len(), |i| m.start() + i);
        decided_to = end;
        let line = &text[start..end];
        if is_signal_line(line) {
            out.push_str(line.trim_end_matches('\r'));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_that_act_are_told_by_their_verbs() {
        for acts in [
            "request_refund",
            "book_hotel",
            "createIssue",
            "git_commit",
            "send_email",
        ] {
            assert!(tool_acts(acts), "{acts}");
        }
        for reads in [
            "track_parcel",
            "weather",
            "calendar_list",
            "lookup_order",
            "read_file",
        ] {
            assert!(!tool_acts(reads), "{reads}");
        }
    }

    #[test]
    fn reading_commands_are_told_from_acting_ones() {
        for reads in [
            "cat src/main.rs",
            "git log --oneline -n 15",
            "git show --stat ae45fda5",
            "kubectl -n billing-staging describe pod p-1",
            "kubectl -n billing-staging logs deploy/invoice-worker --since=1h",
            "cargo test -p billing-core --test fx_roundtrip -- --nocapture",
            "rustc --version && cargo --version",
            "cd admin-ui && npm run test:e2e",
            "RUST_LOG=debug cargo build -p invoice-worker",
            "grep -rn TODO src | head -20",
        ] {
            assert!(command_reads_only(reads), "{reads}");
        }
        for acts in [
            "git commit -am \"fx: refresh\"",
            "gh pr create --draft --fill",
            "psql \"$DEV_DATABASE_URL\" -f scripts/backfill.sql",
            "kubectl -n billing-staging rollout restart deploy/invoice-worker",
            "kubectl -n staging exec pod-1 -- env",
            "billingctl config get fx --env staging",
            "cat a.txt && rm -rf build",
            "sqlx migrate run --source migrations",
            "",
        ] {
            assert!(!command_reads_only(acts), "{acts}");
        }
    }

    #[test]
    fn failure_lines_are_found_and_zero_counts_are_not_failures() {
        for line in [
            "error[E0502]: cannot borrow `self.pending` as mutable",
            "      Reason:       OOMKilled",
            "2024-05-21T09:41:07Z ERROR invoice_worker: invoice 02e3c557 failed: upstream 503",
            "thread 'x' panicked at src/round.rs:212:9:",
            "Error: connect ECONNREFUSED 127.0.0.1:8081",
            "test result: FAILED. 11 passed; 3 failed; 0 ignored",
        ] {
            assert!(is_signal_line(line), "{line}");
        }
        for line in [
            "test result: ok. 28 passed; 0 failed; 0 ignored; 0 measured",
            "2024-05-21T03:41:55Z  INFO reconcile: finished in 1h44m invoices=2410 failed=0",
            "Compiling billing-core v0.14.2",
            "errors: 0, warnings: 0",
            "terrorist", // not at a word start
            "",
        ] {
            assert!(!is_signal_line(line), "{line}");
        }
        assert_eq!(
            signal_lines("ok\nerror: boom\nfine\nwarning: unused\n"),
            "error: boom\nwarning: unused\n"
        );
    }
}
