//! Bounds of the ledger: per kind, per value, and the rendered size.

use serde::{Deserialize, Serialize};

use super::kind::ArtifactKind;

/// Per-kind bounds of the ledger and the token budget of its rendering.
///
/// The defaults are generous on purpose: the default trigger leaves 60k of
/// a 200k window free after a compaction, so a 6,000-token ledger costs
/// little, and a value dropped here is lost for good. Within every bound,
/// the least salient values go first (see `ArtifactLedger::record`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LedgerCaps {
    pub paths: usize,
    pub urls: usize,
    pub commands: usize,
    pub identifiers: usize,
    pub error_codes: usize,
    pub quantities: usize,
    pub settings: usize,
    pub config_names: usize,
    pub versions: usize,
    pub hosts: usize,
    pub counts: usize,
    pub durations: usize,
    pub references: usize,
    pub amounts: usize,
    pub dates: usize,
    pub addresses: usize,
    pub phones: usize,
    pub emails: usize,
    pub people: usize,
    /// Longest value kept, in chars (longer ones are skipped: a 5 KB
    /// "command" is a script, not an artifact).
    pub max_value_chars: usize,
    /// Most tokens the rendered ledger may take (0: no ledger at all).
    pub max_tokens: u64,
}

impl Default for LedgerCaps {
    fn default() -> Self {
        LedgerCaps {
            paths: 128,
            urls: 48,
            commands: 64,
            identifiers: 96,
            error_codes: 48,
            quantities: 48,
            settings: 64,
            config_names: 48,
            versions: 32,
            hosts: 32,
            counts: 48,
            durations: 48,
            references: 48,
            amounts: 48,
            dates: 48,
            addresses: 24,
            phones: 24,
            emails: 24,
            people: 24,
            max_value_chars: 300,
            max_tokens: 6_000,
        }
    }
}

impl LedgerCaps {
    /// Most entries of `kind` kept (superseded settings included).
    pub fn cap(&self, kind: ArtifactKind) -> usize {
        match kind {
            ArtifactKind::Path => self.paths,
            ArtifactKind::Url => self.urls,
            ArtifactKind::Command => self.commands,
            ArtifactKind::Identifier => self.identifiers,
            ArtifactKind::ErrorCode => self.error_codes,
            ArtifactKind::Quantity => self.quantities,
            ArtifactKind::Setting => self.settings,
            ArtifactKind::ConfigName => self.config_names,
            ArtifactKind::Version => self.versions,
            ArtifactKind::Host => self.hosts,
            ArtifactKind::Count => self.counts,
            ArtifactKind::Duration => self.durations,
            ArtifactKind::Reference => self.references,
            ArtifactKind::Amount => self.amounts,
            ArtifactKind::DateTime => self.dates,
            ArtifactKind::Address => self.addresses,
            ArtifactKind::Phone => self.phones,
            ArtifactKind::Email => self.emails,
            ArtifactKind::Person => self.people,
        }
    }
}
