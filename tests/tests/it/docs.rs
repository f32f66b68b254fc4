//! The documentation checked against its sources, with no services: every
//! figure the README quotes comes from BENCHMARKS.md; the addresses it
//! names are the embedded defaults of `config/default.toml`, and its Rust
//! version is the workspace's `rust-version`; every relative link of the
//! README, BENCHMARKS.md and `docs/*.md` leads to a file that exists (and,
//! for a `#fragment` into Markdown, to a heading there); and every
//! repository path they name in inline code exists.
//!
//! **A figure** is a number in the README's prose — outside fenced code
//! blocks, inline code and link targets — followed (directly or after one
//! space) by one of [`UNITS`]: `0.749 ms`, `2.51×`, `95 %`, `20,805 jobs/s`.
//! A range (`2.1–2.7×`) is two figures with the unit of its end. Numbers
//! that are part of something else are not figures: a version (`1.94`,
//! `6.7.0`: not followed by a unit), a port (`127.0.0.1:9464`: after a
//! colon), `p99` (after a letter), `600-message` (no unit). A figure comes
//! from BENCHMARKS.md when the same number, written the same way, is on one
//! of its lines that also names the unit, in the line itself or in the
//! header row of the table the line belongs to. Configuration values are
//! not figures: the README writes them as inline code, and the addresses
//! among them are checked against `config/default.toml` here.
//!
//! Self-contained on purpose (no helpers from the crate's library), so the
//! file can move into any test binary as it is.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// The units that make a number a figure, longest first so that `MB/s`
/// is not read as `MB`.
const UNITS: &[&str] = &[
    "compactions/s",
    "k tokens",
    "jobs/s",
    "ops/s",
    "tokens",
    "MB/s",
    "MiB",
    "min",
    "MB",
    "GB",
    "KB",
    "ms",
    "µs",
    "×",
    "%",
    "s",
    "h",
];

/// A number as written: digits, optional thousands separators, optional
/// decimals.
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(?:,\d{3})*(?:\.\d+)?").unwrap());

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A figure found in prose: the number as written, its unit, the line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Figure {
    number: String,
    unit: &'static str,
    line: usize,
}

/// The text with fenced code blocks removed (their lines left empty, so
/// line numbers still count).
fn without_code_blocks(text: &str) -> Vec<String> {
    let mut in_block = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                return String::new();
            }
            if in_block {
                String::new()
            } else {
                line.to_owned()
            }
        })
        .collect()
}

/// One line's prose: inline code and link targets blanked out.
fn prose(line: &str) -> String {
    static CODE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`[^`]*`").unwrap());
    static TARGET: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\]\([^)]*\)").unwrap());
    let line = CODE.replace_all(line, " ");
    TARGET.replace_all(&line, "] ").into_owned()
}

/// The unit right after `rest` (one optional space first), if any: a unit
/// is followed by neither a letter nor a digit nor `/`.
fn unit_at(rest: &str) -> Option<&'static str> {
    let rest = rest
        .strip_prefix(' ')
        .or_else(|| rest.strip_prefix('\u{a0}'))
        .unwrap_or(rest);
    UNITS.iter().copied().find(|unit| {
        rest.strip_prefix(unit).is_some_and(|after| {
            after
                .chars()
                .next()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '/'))
        })
    })
}

/// Whether the number at `start` stands alone: not the continuation of a
/// word, a version, a port, a path or another number.
fn stands_alone(line: &str, start: usize) -> bool {
    line[..start]
        .chars()
        .next_back()
        .is_none_or(|c| !(c.is_alphanumeric() || ".,:/_-#".contains(c)))
}

/// Every figure of `text`'s prose (see the module doc).
fn figures(text: &str) -> Vec<Figure> {
    let mut found = Vec::new();
    for (i, line) in without_code_blocks(text).iter().enumerate() {
        let line = prose(line);
        // Numbers that open a range wait for the unit of its end.
        let mut pending: Vec<String> = Vec::new();
        for m in NUMBER.find_iter(&line) {
            let after = &line[m.end()..];
            if !stands_alone(&line, m.start()) {
                pending.clear();
                continue;
            }
            if let Some(unit) = unit_at(after) {
                for number in pending
                    .drain(..)
                    .chain(std::iter::once(m.as_str().to_owned()))
                {
                    found.push(Figure {
                        number,
                        unit,
                        line: i + 1,
                    });
                }
            } else if after.starts_with('–')
                && after['–'.len_utf8()..].starts_with(|c: char| c.is_ascii_digit())
            {
                pending.push(m.as_str().to_owned());
            } else {
                pending.clear();
            }
        }
    }
    found
}

/// Whether `line` holds `number` as a number of its own (not part of a
/// longer one).
fn holds_number(line: &str, number: &str) -> bool {
    NUMBER.find_iter(line).any(|m| {
        m.as_str() == number
            && line[..m.start()]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_ascii_digit() || c == '.'))
    })
}

/// Each line of a Markdown text with the header row of the table it is
/// in (empty outside tables).
fn lines_with_headers(text: &str) -> Vec<(&str, &str)> {
    let mut header = "";
    let mut previous_was_row = false;
    text.lines()
        .map(|line| {
            let is_row = line.trim_start().starts_with('|');
            if is_row && !previous_was_row {
                header = line;
            }
            if !is_row {
                header = "";
            }
            previous_was_row = is_row;
            (line, header)
        })
        .collect()
}

/// Whether BENCHMARKS.md has `figure`: the number on a line that names the
/// unit itself or under a header that does.
fn benchmarks_have(benchmarks: &str, figure: &Figure) -> bool {
    lines_with_headers(benchmarks).iter().any(|(line, header)| {
        holds_number(line, &figure.number)
            && (line.contains(figure.unit) || header.contains(figure.unit))
    })
}

#[test]
fn figures_are_read_as_the_module_doc_defines_them() {
    let text = "\
Rust 1.94 and BullMQ 6.7.0 on 127.0.0.1:9464; p99 0.749 ms, 2.51× BullMQ's,
enqueue 2.1–2.7× (95 %), 20,805 jobs/s and 94.6 compactions/s, 204 MB;
a 600-message session, 10 compactions, 3 summarizers, `lease_ttl = \"30s\"`,
see [notes](docs/NOTES.md#12-ms).
```
not prose: 5 ms
```
";
    let got: Vec<(String, &str)> = figures(text)
        .into_iter()
        .map(|f| (f.number, f.unit))
        .collect();
    let want = [
        ("0.749", "ms"),
        ("2.51", "×"),
        ("2.1", "×"),
        ("2.7", "×"),
        ("95", "%"),
        ("20,805", "jobs/s"),
        ("94.6", "compactions/s"),
        ("204", "MB"),
    ];
    let want: Vec<(String, &str)> = want.iter().map(|(n, u)| (n.to_string(), *u)).collect();
    assert_eq!(got, want);

    let benchmarks = "\
| database | compactions/s |
|---|---|
| PostgreSQL | 89.7 / **94.6** / 105 |

| waiter wake-up, p99 ≤ 10 ms | 0.749 ms | **met** |
";
    let figure = |number: &str, unit| Figure {
        number: number.to_owned(),
        unit,
        line: 1,
    };
    assert!(benchmarks_have(
        benchmarks,
        &figure("94.6", "compactions/s")
    ));
    assert!(benchmarks_have(benchmarks, &figure("0.749", "ms")));
    assert!(!benchmarks_have(benchmarks, &figure("0.75", "ms")));
    assert!(!benchmarks_have(benchmarks, &figure("89.7", "ms")));
    assert!(!benchmarks_have(
        benchmarks,
        &figure("4.6", "compactions/s")
    ));
}

#[test]
fn every_figure_the_readme_quotes_comes_from_benchmarks_md() {
    let readme = read(&root().join("README.md"));
    let benchmarks = read(&root().join("BENCHMARKS.md"));
    let figures = figures(&readme);
    // The README does quote the benchmarks: a test that finds nothing
    // would pass on any README.
    assert!(
        figures.len() >= 8,
        "only {} figures found in README.md: {figures:?}",
        figures.len()
    );
    let missing: Vec<String> = figures
        .iter()
        .filter(|f| !benchmarks_have(&benchmarks, f))
        .map(|f| format!("README.md:{}: {} {}", f.line, f.number, f.unit))
        .collect();
    assert!(
        missing.is_empty(),
        "figures in README.md that BENCHMARKS.md does not have (quote them as it writes them, \
         or drop them):\n{}",
        missing.join("\n")
    );
}

/// `[section] key = "value"` lines of a TOML file, as written.
fn toml_values(text: &str) -> BTreeMap<String, String> {
    let mut section = String::new();
    let mut values = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
        } else if let Some((key, value)) = line.split_once(" = ") {
            values.insert(
                format!("{section}.{key}"),
                value.trim_matches('"').to_owned(),
            );
        }
    }
    values
}

#[test]
fn the_addresses_the_readme_names_are_the_embedded_defaults() {
    let readme = read(&root().join("README.md"));
    let defaults = toml_values(&read(&root().join("config/default.toml")));
    let admin = &defaults["admin.listen"];
    let redis = defaults["redis.url"]
        .strip_prefix("redis://")
        .expect("a redis:// URL")
        .to_owned();
    let address = Regex::new(r"127\.0\.0\.1:\d+").unwrap();
    // PostgreSQL is not an embedded default: the tests' database is. An
    // opt-in listener (the proxy) has no default: the example address the
    // file gives in its comment is the one to name.
    let config = read(&root().join("config/default.toml"));
    let examples: Vec<&str> = config
        .lines()
        .filter(|l| l.trim_start().starts_with("# ") && l.contains("listen = "))
        .filter_map(|l| address.find(l).map(|m| m.as_str()))
        .collect();
    let mut allowed = vec![admin.as_str(), redis.as_str(), "127.0.0.1:5432"];
    allowed.extend(examples);
    let named: Vec<&str> = address.find_iter(&readme).map(|m| m.as_str()).collect();
    assert!(
        named.contains(&admin.as_str()),
        "README.md never names {admin}"
    );
    assert!(
        named.contains(&redis.as_str()),
        "README.md never names {redis}"
    );
    for addr in named {
        assert!(
            allowed.contains(&addr),
            "README.md names {addr}, not an address of config/default.toml ({admin}, {redis}, \
             or a commented listen example) nor the tests' PostgreSQL"
        );
    }
    // The admin address is `[admin] listen`'s value, which the README names.
    assert!(readme.contains("`[admin] listen`"));
}

#[test]
fn the_rust_version_the_readme_names_is_the_workspaces() {
    let readme = read(&root().join("README.md"));
    let manifest = toml_values(&read(&root().join("Cargo.toml")));
    let version = &manifest["workspace.package.rust-version"];
    assert!(
        readme.contains(&format!("Rust toolchain ({version} or newer")),
        "README.md does not name the workspace's rust-version {version}"
    );
}

/// GitHub's anchor of a heading: lower case, letters, digits, spaces,
/// `-` and `_` kept, spaces turned into `-`; a repeated anchor gets `-1`,
/// `-2`, ….
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for line in without_code_blocks(markdown) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.push(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

#[test]
fn heading_anchors_are_githubs() {
    let text = "# A title\n## Quality: what survives 10 compactions\n```\n# not\n```\n## A title\n";
    assert_eq!(
        anchors(text),
        [
            "a-title",
            "quality-what-survives-10-compactions",
            "a-title-1"
        ]
    );
}

/// The Markdown files whose links are checked: the README, BENCHMARKS.md
/// and every `docs/*.md`.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = read(&file);
        let dir = file.parent().unwrap();
        for (i, line) in without_code_blocks(&text).iter().enumerate() {
            for caps in link.captures_iter(line) {
                let target = &caps[1];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
                let resolved = if path.is_empty() {
                    file.clone()
                } else {
                    dir.join(path)
                };
                let at = format!("{}:{}: {target}", file.display(), i + 1);
                if !resolved.exists() {
                    broken.push(format!("{at}: no such file"));
                    continue;
                }
                let markdown = resolved.extension().is_some_and(|e| e == "md");
                if !fragment.is_empty() && markdown {
                    let anchors = anchors(&read(&resolved));
                    if !anchors.iter().any(|a| a == fragment) {
                        broken.push(format!("{at}: no heading with that anchor"));
                    }
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} relative links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Paths the docs name that exist only after a run (fuzzing's output).
const MADE_BY_RUNS: &[&str] = &["fuzz/artifacts/", "fuzz/target/"];

#[test]
fn every_repository_path_the_docs_name_exists() {
    // A path in inline code that starts at a top-level folder of the
    // repository, e.g. `tests/smoke/readme` or `worker/src/runtime/`;
    // patterns (`<name>`, `…`, `*`) are not paths.
    let code = Regex::new(r"`([^`\s]+)`").unwrap();
    let tops = [
        "shared/",
        "producer/",
        "worker/",
        "migrations/",
        "tests/",
        "config/",
        "deploy/",
        "bench/",
        "fuzz/",
        "docs/",
        ".ci/",
    ];
    let root = root();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in documents() {
        for (i, line) in read(&file).lines().enumerate() {
            for caps in code.captures_iter(line) {
                // `tests/tests/http.rs::a_test` names a file too.
                let path = caps[1].split("::").next().unwrap_or_default();
                if !tops.iter().any(|top| path.starts_with(top))
                    || path.contains(['<', '…', '*', '{'])
                    || MADE_BY_RUNS.contains(&path)
                {
                    continue;
                }
                checked += 1;
                if !root.join(path).exists() {
                    missing.push(format!("{}:{}: {path}", file.display(), i + 1));
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} paths found");
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        missing.join("\n")
    );
}
