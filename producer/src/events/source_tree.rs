//! Metrics are recorded only by events: no `counter!`, `histogram!` or
//! `gauge!` outside an `events` module, in the crates listed.

use std::path::{Path, PathBuf};

/// The crates' source directories checked, from the workspace root.
const CHECKED: &[&str] = &[
    "producer/src",
    "shared/src",
    "worker/src",
    "tests/src",
    "tests/testkit/src",
];

/// The macros that record a metric.
const MACROS: &[&str] = &["counter!", "histogram!", "gauge!"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn metrics_are_recorded_only_in_events_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned();
    let mut stray = Vec::new();
    let mut checked = 0;
    for dir in CHECKED {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        for file in files {
            let relative = file
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let in_events = relative.contains("/events/") || relative.ends_with("/events.rs");
            checked += 1;
            if in_events {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if MACROS.iter().any(|m| line.contains(m)) {
                    stray.push(format!("{relative}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(checked > 10, "only {checked} files found under {CHECKED:?}");
    assert!(
        stray.is_empty(),
        "metrics recorded outside an events module:\n{}",
        stray.join("\n")
    );
}
