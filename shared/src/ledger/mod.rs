//! The artifact ledger: exact values that must survive any number of
//! compactions, whatever the summarizer writes.
//!
//! Every evaluation of compaction systems finds the same weak spot: file
//! paths, commands, ids and numbers are lost (one measurement across 43
//! compactions kept 9.8 % of paths and 0.2 % of commands), and in people's
//! chats the order number, the amount and the date go the same way. The
//! ledger extracts such values deterministically from every part of the
//! compacted span (tool output included), keeps them in the workstream
//! state with who said them, and renders them into every built context.
//!
//! # Layout
//! - [`kind`]: what a value is ([`ArtifactKind`]), who said it ([`Source`])
//!   and what that makes it worth ([`Salience`]).
//! - [`artifact`]: one value with its provenance, and its stored form.
//! - [`caps`]: per-kind caps and the token budget ([`LedgerCaps`]).
//! - `extract`: finding values in messages ([`extract`]).
//! - `record`: merging sightings, supersession of settings, eviction by
//!   salience ([`ArtifactLedger::record`]).
//! - `render`: the ledger as text ([`ArtifactLedger::render`]), and as a
//!   context shows it, each value citing its source message
//!   ([`ArtifactLedger::render_cited`]).

pub mod artifact;
pub mod caps;
mod extract;
pub mod kind;
mod record;
mod render;

use serde::{Deserialize, Serialize};

pub use artifact::Artifact;
pub use caps::LedgerCaps;
pub use extract::{extract, LONG_TEXT, MAX_BULK_PER_KIND, MAX_BULK_PER_MESSAGE, MAX_PER_MESSAGE};
pub(crate) use extract::{has_artifact, may_have_path, paths};
pub use kind::{ArtifactKind, Salience, Source};

/// The ledger, as stored in the workstream state: a JSON list of
/// [`Artifact`]s in the order they entered it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ArtifactLedger {
    entries: Vec<Artifact>,
}

impl ArtifactLedger {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry, superseded settings included, in the order they
    /// entered the ledger.
    pub fn entries(&self) -> &[Artifact] {
        &self.entries
    }

    /// Whether `value` of `kind` is in the ledger (for a setting: under any
    /// key, current or superseded).
    pub fn contains(&self, kind: ArtifactKind, value: &str) -> bool {
        self.entries
            .iter()
            .any(|a| a.kind == kind && a.value == value)
    }

    /// The current value of the setting `key`, if one is recorded.
    pub fn current(&self, key: &str) -> Option<&Artifact> {
        self.entries.iter().find(|a| {
            a.kind == ArtifactKind::Setting && !a.superseded && a.key.as_deref() == Some(key)
        })
    }

    /// Renders the ledger grouped by kind, values in the order they entered
    /// it, a setting's superseded values after its current one, marked
    /// `superseded`; empty string when there is nothing. See `render`.
    pub fn render(&self) -> String {
        let entries: Vec<&Artifact> = self.entries.iter().collect();
        render::render(&entries)
    }

    /// The ledger as a built context shows it: as
    /// [`ArtifactLedger::render`], each current line citing the message its
    /// value was first seen in (` (#1234)`, the evidence packet), and with
    /// `mark(a)` appended to the line of each plain value it marks: a value
    /// that only a statement the user later superseded named is shown with
    /// that mark, never as current. This is the rendering the token budget
    /// of `record` is enforced on.
    pub fn render_cited(&self, mark: &dyn Fn(&Artifact) -> Option<String>) -> String {
        let entries: Vec<&Artifact> = self.entries.iter().collect();
        render::render_cited(&entries, mark)
    }
}

#[cfg(test)]
mod tests;
