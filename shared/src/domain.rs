//! A domain on its own, without an entity: what an operator pauses, filters
//! or retries by. Validated exactly as the domain of an [`EntityKey`], so a
//! `Domain` can go wherever a key's domain goes (Redis keys, Lua arguments,
//! metric labels).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::key::{check_domain, EntityKey, KeyError};

/// A validated domain: 1–32 bytes of `a-z 0-9 _ -`, starting with a letter.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Domain(String);

impl Domain {
    pub fn parse(domain: &str) -> Result<Domain, KeyError> {
        check_domain(domain)?;
        Ok(Domain(domain.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `key` is of this domain.
    pub fn holds(&self, key: &EntityKey) -> bool {
        key.domain() == self.0
    }
}

impl From<&EntityKey> for Domain {
    fn from(key: &EntityKey) -> Domain {
        Domain(key.domain().to_owned())
    }
}

impl TryFrom<String> for Domain {
    type Error = KeyError;
    fn try_from(domain: String) -> Result<Domain, KeyError> {
        Domain::parse(&domain)
    }
}

impl From<Domain> for String {
    fn from(domain: Domain) -> String {
        domain.0
    }
}

impl FromStr for Domain {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Domain, KeyError> {
        Domain::parse(s)
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_parses_as_a_keys_domain_does() {
        for good in ["chat", "a", "support-2", "x_y"] {
            assert_eq!(Domain::parse(good).unwrap().as_str(), good);
            assert!(EntityKey::parse(good, "e").is_ok());
        }
        for bad in ["", "Chat", "1chat", "a:b", "a{b}", "a*", &"a".repeat(33)] {
            assert!(Domain::parse(bad).is_err(), "{bad:?}");
            assert!(EntityKey::parse(bad, "e").is_err(), "{bad:?}");
        }
        let key = EntityKey::parse("chat", "7f3c").unwrap();
        assert!(Domain::from(&key).holds(&key));
        assert!(!Domain::parse("support").unwrap().holds(&key));
    }

    #[test]
    fn a_domain_deserializes_only_when_valid() {
        let d: Domain = serde_json::from_str("\"chat\"").unwrap();
        assert_eq!(d.to_string(), "chat");
        assert!(serde_json::from_str::<Domain>("\"Chat!\"").is_err());
    }
}
