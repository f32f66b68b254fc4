//! The identity of a workstream: `(domain, entity_id)`.
//!
//! Both parts end up inside Redis keys, Lua script arguments, URL paths and
//! metric labels (the domain only), so they are parsed once at the boundary
//! into [`EntityKey`] and never re-validated: a value that exists is valid.
//! The allowed alphabet deliberately excludes everything that is special to
//! Redis glob patterns (`*?[]`), Redis Cluster hash tags (`{}`), our own key
//! separator (`:`), URL paths (`/`), whitespace and control characters.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Longest accepted domain, in bytes (domains are low-cardinality labels).
pub const MAX_DOMAIN_LEN: usize = 32;
/// Longest accepted entity id, in bytes (fits UUIDs, ULIDs, snowflakes, slugs).
pub const MAX_ENTITY_ID_LEN: usize = 128;
/// Prefix of the rendered job key, as named by the seed.
pub const KEY_PREFIX: &str = "compact";

/// Why a domain or entity id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{field} is empty")]
    Empty { field: KeyField },
    #[error("{field} is {len} bytes long; at most {max} are allowed")]
    TooLong {
        field: KeyField,
        len: usize,
        max: usize,
    },
    #[error("{field} contains {found:?} at byte {at}; allowed are {allowed}")]
    InvalidChar {
        field: KeyField,
        found: char,
        at: usize,
        allowed: &'static str,
    },
    #[error("{field} must start with {allowed}")]
    InvalidStart {
        field: KeyField,
        allowed: &'static str,
    },
    #[error("{field} is not valid UTF-8")]
    NotUtf8 { field: KeyField },
    #[error("{0:?} is not a job key of the form compact:{{domain}}:{{entity_id}}")]
    Malformed(String),
}

/// Which part of the key an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyField {
    Domain,
    EntityId,
}

impl fmt::Display for KeyField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyField::Domain => "domain",
            KeyField::EntityId => "entity id",
        })
    }
}

/// A validated workstream key.
///
/// * domain: 1–32 bytes of `a-z 0-9 _ -`, starting with a letter (it is a
///   metric label, so it is kept lower-case and short);
/// * entity id: 1–128 bytes of `A-Z a-z 0-9 _ - .`, starting with a letter or
///   digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "RawEntityKey", into = "RawEntityKey")]
pub struct EntityKey {
    domain: String,
    entity_id: String,
}

#[derive(Serialize, Deserialize)]
struct RawEntityKey {
    domain: String,
    entity_id: String,
}

impl TryFrom<RawEntityKey> for EntityKey {
    type Error = KeyError;
    fn try_from(raw: RawEntityKey) -> Result<Self, Self::Error> {
        EntityKey::parse(&raw.domain, &raw.entity_id)
    }
}

impl From<EntityKey> for RawEntityKey {
    fn from(key: EntityKey) -> Self {
        RawEntityKey {
            domain: key.domain,
            entity_id: key.entity_id,
        }
    }
}

const DOMAIN_ALLOWED: &str = "a-z, 0-9, '_' and '-'";
const ENTITY_ALLOWED: &str = "A-Z, a-z, 0-9, '_', '-' and '.'";

impl EntityKey {
    /// Parses and validates both parts.
    pub fn parse(domain: &str, entity_id: &str) -> Result<Self, KeyError> {
        check_domain(domain)?;
        check(
            KeyField::EntityId,
            entity_id,
            MAX_ENTITY_ID_LEN,
            |b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.',
            |b| b.is_ascii_alphanumeric(),
            ENTITY_ALLOWED,
            "a letter or a digit",
        )?;
        Ok(EntityKey {
            domain: domain.to_owned(),
            entity_id: entity_id.to_owned(),
        })
    }

    /// Parses raw bytes (from HTTP paths, Redis replies, CLI arguments),
    /// refusing non-UTF-8 with a typed error instead of a lossy conversion.
    pub fn parse_bytes(domain: &[u8], entity_id: &[u8]) -> Result<Self, KeyError> {
        let domain = std::str::from_utf8(domain).map_err(|_| KeyError::NotUtf8 {
            field: KeyField::Domain,
        })?;
        let entity_id = std::str::from_utf8(entity_id).map_err(|_| KeyError::NotUtf8 {
            field: KeyField::EntityId,
        })?;
        Self::parse(domain, entity_id)
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    pub fn entity_id(&self) -> &str {
        &self.entity_id
    }

    /// The job key, `compact:{domain}:{entity_id}`; same as `to_string()`.
    pub fn job_key(&self) -> String {
        self.to_string()
    }
}

/// Validates a domain (see [`EntityKey`]); [`crate::Domain`] parses with it.
pub(crate) fn check_domain(domain: &str) -> Result<(), KeyError> {
    check(
        KeyField::Domain,
        domain,
        MAX_DOMAIN_LEN,
        |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-',
        |b| b.is_ascii_lowercase(),
        DOMAIN_ALLOWED,
        "a lower-case letter",
    )
}

fn check(
    field: KeyField,
    value: &str,
    max: usize,
    allowed: impl Fn(u8) -> bool,
    allowed_first: impl Fn(u8) -> bool,
    allowed_text: &'static str,
    first_text: &'static str,
) -> Result<(), KeyError> {
    let bytes = value.as_bytes();
    let Some(&first) = bytes.first() else {
        return Err(KeyError::Empty { field });
    };
    if bytes.len() > max {
        return Err(KeyError::TooLong {
            field,
            len: bytes.len(),
            max,
        });
    }
    if let Some((at, found)) = value.char_indices().find(|&(_, c)| {
        let mut buf = [0u8; 4];
        let encoded = c.encode_utf8(&mut buf);
        encoded.len() != 1 || !allowed(encoded.as_bytes()[0])
    }) {
        return Err(KeyError::InvalidChar {
            field,
            found,
            at,
            allowed: allowed_text,
        });
    }
    if !allowed_first(first) {
        return Err(KeyError::InvalidStart {
            field,
            allowed: first_text,
        });
    }
    Ok(())
}

impl fmt::Display for EntityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{KEY_PREFIX}:{}:{}", self.domain, self.entity_id)
    }
}

impl FromStr for EntityKey {
    type Err = KeyError;

    /// Parses a rendered job key, `compact:{domain}:{entity_id}`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let malformed = || KeyError::Malformed(s.chars().take(200).collect());
        let rest = s
            .strip_prefix(KEY_PREFIX)
            .and_then(|r| r.strip_prefix(':'))
            .ok_or_else(malformed)?;
        let (domain, entity_id) = rest.split_once(':').ok_or_else(malformed)?;
        EntityKey::parse(domain, entity_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_seed_job_key() {
        let key = EntityKey::parse("chat", "7f3c-11ab.x_y").unwrap();
        assert_eq!(key.to_string(), "compact:chat:7f3c-11ab.x_y");
        assert_eq!(key.job_key().parse::<EntityKey>().unwrap(), key);
    }

    #[test]
    fn rejects_empty_and_too_long_parts() {
        assert_eq!(
            EntityKey::parse("", "a"),
            Err(KeyError::Empty {
                field: KeyField::Domain
            })
        );
        assert_eq!(
            EntityKey::parse("chat", ""),
            Err(KeyError::Empty {
                field: KeyField::EntityId
            })
        );
        let long = "a".repeat(10 * 1024);
        assert!(matches!(
            EntityKey::parse("chat", &long),
            Err(KeyError::TooLong {
                len: 10240,
                max: 128,
                ..
            })
        ));
        assert!(matches!(
            EntityKey::parse(&"d".repeat(33), "a"),
            Err(KeyError::TooLong { max: 32, .. })
        ));
        assert!(EntityKey::parse(&"d".repeat(32), &"e".repeat(128)).is_ok());
    }

    #[test]
    fn rejects_characters_special_to_redis_urls_and_logs() {
        for bad in [
            "a:b", "a*", "a{b}", "a?", "a[b]", "a/b", "a b", "a\nb", "a\0b", "é", "a\\b",
        ] {
            let err = EntityKey::parse("chat", bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    KeyError::InvalidChar {
                        field: KeyField::EntityId,
                        ..
                    }
                ),
                "{bad:?} gave {err:?}"
            );
        }
        assert!(matches!(
            EntityKey::parse("Chat", "a"),
            Err(KeyError::InvalidChar { found: 'C', .. })
        ));
        assert!(matches!(
            EntityKey::parse("1chat", "a"),
            Err(KeyError::InvalidStart { .. })
        ));
        assert!(matches!(
            EntityKey::parse("chat", ".hidden"),
            Err(KeyError::InvalidStart { .. })
        ));
    }

    #[test]
    fn rejects_non_utf8_bytes() {
        assert_eq!(
            EntityKey::parse_bytes(b"chat", &[0xff, 0xfe]),
            Err(KeyError::NotUtf8 {
                field: KeyField::EntityId
            })
        );
        assert!(EntityKey::parse_bytes(b"chat", b"abc").is_ok());
    }

    #[test]
    fn parses_rendered_keys_strictly() {
        for bad in [
            "chat:1",
            "compact:chat",
            "compact::1",
            "compact:chat:1:2",
            "x:chat:1",
        ] {
            assert!(bad.parse::<EntityKey>().is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_validates_on_the_way_in() {
        let key: EntityKey = serde_json::from_str(r#"{"domain":"chat","entity_id":"42"}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&key).unwrap(),
            r#"{"domain":"chat","entity_id":"42"}"#
        );
        let err = serde_json::from_str::<EntityKey>(r#"{"domain":"chat","entity_id":"4*2"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("entity id contains '*'"), "{err}");
    }
}
