//! One exact value, where it came from and how often it was seen.

use serde::{Deserialize, Serialize};

use super::kind::{ArtifactKind, Salience, Source};
use crate::message::MessageId;

/// One extracted value with its provenance.
///
/// Stored in the workstream state as JSON. Entries written by older
/// versions (`{"kind":"path","value":"src/a.rs","last_seen":12}`) still read:
/// every newer field has a default, and a missing `first_seen` is the
/// entry's `last_seen`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredArtifact")]
pub struct Artifact {
    pub kind: ArtifactKind,
    /// For a [`ArtifactKind::Setting`], the name the value is for
    /// (`MAX_RETRIES`, `billing.fx_cache`, `timeout`); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub value: String,
    /// Who said it; for a value seen from several sources, the source of
    /// its most salient sighting (the first one on a tie).
    pub source: Source,
    /// The highest salience it was seen with.
    pub salience: Salience,
    /// Messages it was seen in (each message counts once).
    pub mentions: u32,
    /// The oldest message it was seen in.
    pub first_seen: MessageId,
    /// The newest message it was seen in.
    pub last_seen: MessageId,
    /// A setting whose key has a newer value: kept only as history, and
    /// never rendered as current.
    #[serde(default, skip_serializing_if = "is_false")]
    pub superseded: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Artifact {
    /// A value seen once, in message `at`, of unknown source (ranked as
    /// written); see [`Artifact::said_by`] and [`Artifact::setting`].
    pub fn new(kind: ArtifactKind, value: impl Into<String>, at: MessageId) -> Artifact {
        Artifact {
            kind,
            key: None,
            value: value.into(),
            source: Source::Unknown,
            salience: Salience::Written,
            mentions: 1,
            first_seen: at,
            last_seen: at,
            superseded: false,
        }
    }

    /// A value for the setting `key`, seen once in message `at`.
    pub fn setting(key: impl Into<String>, value: impl Into<String>, at: MessageId) -> Artifact {
        Artifact {
            key: Some(key.into()),
            ..Artifact::new(ArtifactKind::Setting, value, at)
        }
    }

    /// The same artifact, said by `source` with `salience`.
    pub fn said_by(self, source: Source, salience: Salience) -> Artifact {
        Artifact {
            source,
            salience,
            ..self
        }
    }

    /// Whether `self` and `other` are the same value (kind, key and value).
    pub fn same_value(&self, other: &Artifact) -> bool {
        self.kind == other.kind && self.key == other.key && self.value == other.value
    }
}

/// The stored form, every field but `kind`, `value` and `last_seen`
/// optional, so state written by older versions deserializes.
#[derive(Deserialize)]
struct StoredArtifact {
    kind: ArtifactKind,
    #[serde(default)]
    key: Option<String>,
    value: String,
    #[serde(default)]
    source: Source,
    #[serde(default)]
    salience: Salience,
    #[serde(default)]
    mentions: Option<u32>,
    #[serde(default)]
    first_seen: Option<MessageId>,
    last_seen: MessageId,
    #[serde(default)]
    superseded: bool,
}

impl From<StoredArtifact> for Artifact {
    fn from(s: StoredArtifact) -> Artifact {
        Artifact {
            kind: s.kind,
            key: s.key,
            value: s.value,
            source: s.source,
            salience: s.salience,
            mentions: s.mentions.unwrap_or(1).max(1),
            first_seen: s.first_seen.unwrap_or(s.last_seen).min(s.last_seen),
            last_seen: s.last_seen,
            superseded: s.superseded,
        }
    }
}
