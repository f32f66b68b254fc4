//! The `domain` label's allow-list (`[metrics] domains`), and the
//! catalogue's names re-exported from their old place.
//!
//! Every metric's name, kind, help text, labels and buckets are in
//! [`crate::events::catalogue`]; they are re-exported here so
//! `compactor_producer::metrics::names::…` keeps working.
//!
//! The `domain` label comes from callers (any HTTP client names its own
//! domain), so it is bounded by an allow-list ([`MetricsSettings::domains`],
//! `[metrics] domains` of the worker's configuration): an allowed domain is
//! its own label value, every other domain is [`OTHER_DOMAIN`]. Every
//! series is created at zero at start-up for the allowed domains and
//! `other` ([`labels`] lists the other label values), so Prometheus'
//! `increase()` sees the first event of each.

use std::collections::BTreeSet;
use std::sync::{PoisonError, RwLock};

use compactor_shared::EntityKey;
use serde::{Deserialize, Serialize};

pub use crate::events::catalogue::{
    describe, describe_families, labels, names, Family, Kind, EVENT_FAMILIES, FAMILIES,
    HISTOGRAM_BUCKETS, HOOK_FAMILIES, LLM_FAMILIES, PROXY_FAMILIES,
};

/// The `domain` label of every domain not in the allow-list.
pub const OTHER_DOMAIN: &str = "other";

/// Most domains an allow-list may name (each multiplies the series of
/// every domain-labelled family).
pub const MAX_LABELLED_DOMAINS: usize = 64;

/// `[metrics]`: which domains are metric labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// Domains labelled as themselves; every other domain is labelled
    /// [`OTHER_DOMAIN`]. Empty (the default): every domain is `other`.
    pub domains: Vec<String>,
}

impl MetricsSettings {
    /// Each entry a valid domain, not `other`, named once; at most
    /// [`MAX_LABELLED_DOMAINS`].
    pub fn validate(&self) -> Result<(), String> {
        if self.domains.len() > MAX_LABELLED_DOMAINS {
            return Err(format!(
                "metrics.domains: {} domains, at most {MAX_LABELLED_DOMAINS} (each one adds a series to every domain-labelled metric)",
                self.domains.len()
            ));
        }
        let mut seen = BTreeSet::new();
        for domain in &self.domains {
            EntityKey::parse(domain, "x")
                .map_err(|e| format!("metrics.domains: {domain:?}: {e}"))?;
            if domain == OTHER_DOMAIN {
                return Err(format!(
                    "metrics.domains: {OTHER_DOMAIN:?} is the label of every domain not listed"
                ));
            }
            if !seen.insert(domain.as_str()) {
                return Err(format!("metrics.domains: {domain:?} listed twice"));
            }
        }
        Ok(())
    }
}

/// The domains labelled as themselves. Process-wide, as the recorder is:
/// a process that configures several allow-lists (tests running workers
/// side by side) labels the union, which is still bounded by its
/// configuration.
static LABELLED_DOMAINS: RwLock<BTreeSet<String>> = RwLock::new(BTreeSet::new());

/// Adds `domains` to the domains labelled as themselves (the worker calls
/// it at start-up with `[metrics] domains`; a program embedding the client
/// calls it before recording). Names that are not valid domains are
/// ignored: they cannot occur.
pub fn allow_domains<S: AsRef<str>>(domains: impl IntoIterator<Item = S>) {
    let mut allowed = LABELLED_DOMAINS
        .write()
        .unwrap_or_else(PoisonError::into_inner);
    for domain in domains {
        let domain = domain.as_ref();
        if domain != OTHER_DOMAIN && EntityKey::parse(domain, "x").is_ok() {
            allowed.insert(domain.to_owned());
        }
    }
}

/// The `domain` label of `domain`: itself when allowed, else
/// [`OTHER_DOMAIN`] (an empty or unknown domain included).
pub fn domain_label(domain: &str) -> String {
    let allowed = LABELLED_DOMAINS
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    if allowed.contains(domain) {
        domain.to_owned()
    } else {
        OTHER_DOMAIN.to_owned()
    }
}

/// Every value the `domain` label can take now: the allowed domains, then
/// [`OTHER_DOMAIN`].
pub fn domain_labels() -> Vec<String> {
    let allowed = LABELLED_DOMAINS
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    allowed
        .iter()
        .cloned()
        .chain(std::iter::once(OTHER_DOMAIN.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_outside_the_allow_list_are_other() {
        allow_domains(["metrics-unit-a", "BAD DOMAIN", "other"]);
        assert_eq!(domain_label("metrics-unit-a"), "metrics-unit-a");
        assert_eq!(domain_label("metrics-unit-b"), OTHER_DOMAIN);
        assert_eq!(domain_label(""), OTHER_DOMAIN);
        let all = domain_labels();
        assert!(all.contains(&"metrics-unit-a".to_owned()));
        assert!(!all.iter().any(|d| d == "BAD DOMAIN" || d.is_empty()));
        assert_eq!(all.last().map(String::as_str), Some(OTHER_DOMAIN));
        assert_eq!(all.iter().filter(|d| *d == OTHER_DOMAIN).count(), 1);
    }

    #[test]
    fn allow_lists_are_checked() {
        let list = |d: &[&str]| MetricsSettings {
            domains: d.iter().map(|s| (*s).to_owned()).collect(),
        };
        assert!(list(&[]).validate().is_ok());
        assert!(list(&["chat", "support-bot"]).validate().is_ok());
        for bad in [&["Chat"][..], &["other"], &[""], &["chat", "chat"]] {
            assert!(list(bad).validate().is_err(), "{bad:?}");
        }
        let many: Vec<String> = (0..=MAX_LABELLED_DOMAINS)
            .map(|i| format!("d{i}"))
            .collect();
        assert!(MetricsSettings { domains: many }.validate().is_err());
    }
}
