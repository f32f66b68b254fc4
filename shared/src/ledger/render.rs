//! The ledger as text, and what each line of it costs.
//!
//! Kinds come in [`ArtifactKind::ALL`] order; within a kind, values come in
//! the order they entered the ledger (first seen first). That order is
//! stable from one compaction to the next: a value does not jump around as
//! its mention count grows, so the rendered ledger reads like the
//! conversation did, and salience decides only *what* is kept (see
//! `record`), never where it shows.
//!
//! A setting is rendered once, with its current value, and the values it
//! replaced after it: `- timeout: 45s (superseded: 37s)`. A superseded value
//! never appears on a line of its own, and every line that shows one
//! contains the word "superseded". That holds for plain values too: a plain
//! value equal to a replaced setting value (and to no current one) is left
//! out, as it is most likely an echo of that setting ("done, timeout 37s");
//! the setting's history still shows it.
//!
//! In a built context every current line also cites the message its value
//! was first seen in, `- src/billing/rounding.rs (#1234)` or
//! `- timeout: 45s (#88) (superseded: 37s)` (the evidence packet): the id
//! is the database message id, the one recall returns and the user's
//! statements cite, so a model or a person reading the context can look
//! the value up where it was said. [`cost`] counts the citation, so the
//! cited rendering fits the ledger's budget; the uncited one (the
//! summarizer's prompt) is only shorter.

use std::collections::{HashMap, HashSet};

use super::{Artifact, ArtifactKind};
use crate::tokens::TokenEstimator;

/// Whether a setting's key is a code name (`MAX_RETRIES`,
/// `billing.fx_cache`), rendered `KEY=value`, rather than words ("request
/// timeout"), rendered `key: value`.
fn is_code_key(key: &str) -> bool {
    !key.contains(char::is_whitespace)
        && (key.contains('_') || key.contains('.') || key.bytes().all(|b| !b.is_ascii_lowercase()))
}

/// The line of `a` without its history: `- value` or `- key=value`.
fn line(a: &Artifact) -> String {
    match (&a.key, a.kind) {
        (Some(key), ArtifactKind::Setting) if is_code_key(key) => format!("- {key}={}", a.value),
        (Some(key), ArtifactKind::Setting) => format!("- {key}: {}", a.value),
        _ => format!("- {}", a.value),
    }
}

/// The citation of a current value: ` (#1234)`, the message it was first
/// seen in.
fn citation(a: &Artifact) -> String {
    format!(" (#{})", a.first_seen)
}

/// The history suffix of a current setting: ` (superseded: 37s, 30s)`.
fn history(values: &[&Artifact]) -> String {
    let values: Vec<&str> = values.iter().map(|a| a.value.as_str()).collect();
    format!(" (superseded: {})", values.join(", "))
}

/// What `a` adds to the cited rendering, in tokens: its line with its
/// citation (counted as one text, as it is rendered: counted apart, the
/// rounding of each piece would overcharge every line for its id), or for
/// a superseded value its part of the history (counted as if it were the
/// only one, so the sum is never short).
pub(super) fn cost(a: &Artifact, estimator: &dyn TokenEstimator) -> u64 {
    if a.superseded {
        estimator.count(&history(&[a]))
    } else {
        estimator.count(&format!("{}{}", line(a), citation(a))) + estimator.count("\n")
    }
}

/// What the heading of `kind` costs.
pub(super) fn heading_cost(kind: ArtifactKind, estimator: &dyn TokenEstimator) -> u64 {
    estimator.count(kind.title()) + estimator.count(":\n")
}

/// Renders `entries` (see the module docs) without citations; empty when
/// there are none.
pub(super) fn render(entries: &[&Artifact]) -> String {
    render_lines(entries, false, &|_| None)
}

/// As [`render`], every current line citing the message its value was
/// first seen in, and with `mark(a)` appended to the line of every plain
/// (non-setting) value it returns a mark for.
pub(super) fn render_cited(
    entries: &[&Artifact],
    mark: &dyn Fn(&Artifact) -> Option<String>,
) -> String {
    render_lines(entries, true, mark)
}

fn render_lines(
    entries: &[&Artifact],
    cite: bool,
    mark: &dyn Fn(&Artifact) -> Option<String>,
) -> String {
    // Superseded values per key, newest first (ties in stored order).
    let mut replaced: HashMap<&str, Vec<&Artifact>> = HashMap::new();
    for a in entries.iter().copied().filter(|a| a.superseded) {
        if let Some(key) = &a.key {
            replaced.entry(key.as_str()).or_default().push(a);
        }
    }
    for values in replaced.values_mut() {
        values.sort_by_key(|a| std::cmp::Reverse(a.last_seen));
    }
    // A plain value equal to a replaced setting value is most likely an
    // echo of that setting ("done, timeout 37s"): on a line of its own it
    // would read as current. The setting's history shows it, marked.
    let current_values: HashSet<&str> = entries
        .iter()
        .filter(|a| a.kind == ArtifactKind::Setting && !a.superseded)
        .map(|a| a.value.as_str())
        .collect();
    let echoes: HashSet<&str> = replaced
        .values()
        .flatten()
        .map(|a| a.value.as_str())
        .filter(|v| !current_values.contains(v))
        .collect();
    let mut by_kind: HashMap<ArtifactKind, Vec<&Artifact>> = HashMap::new();
    for a in entries.iter().copied().filter(|a| !a.superseded) {
        if a.kind == ArtifactKind::Setting || !echoes.contains(a.value.as_str()) {
            by_kind.entry(a.kind).or_default().push(a);
        }
    }

    let mut out = String::new();
    for kind in ArtifactKind::ALL {
        let current = by_kind.remove(&kind).unwrap_or_default();
        // A superseded value whose current one is not kept (`record` never
        // leaves one behind, but a ledger can be built from any JSON).
        let mut orphans: Vec<&str> = Vec::new();
        if kind == ArtifactKind::Setting {
            let mut keys: Vec<&str> = replaced
                .keys()
                .copied()
                .filter(|k| !current.iter().any(|a| a.key.as_deref() == Some(*k)))
                .collect();
            keys.sort_unstable();
            orphans = keys;
        }
        if current.is_empty() && orphans.is_empty() {
            continue;
        }
        out.push_str(kind.title());
        out.push_str(":\n");
        for a in current {
            out.push_str(&line(a));
            if cite {
                out.push_str(&citation(a));
            }
            if let Some(old) = a.key.as_deref().and_then(|k| replaced.get(k)) {
                if kind == ArtifactKind::Setting {
                    out.push_str(&history(old));
                }
            } else if kind != ArtifactKind::Setting {
                if let Some(m) = mark(a) {
                    out.push_str(&m);
                }
            }
            out.push('\n');
        }
        for key in orphans {
            if let Some(old) = replaced.get(key) {
                let values: Vec<&str> = old.iter().map(|a| a.value.as_str()).collect();
                out.push_str(&format!(
                    "- {key}: superseded: {} (current value not recorded)\n",
                    values.join(", ")
                ));
            }
        }
    }
    out
}
