//! Entity keys: `EntityKey::parse_bytes` accepts exactly the documented
//! alphabet (checked against an independent reference), and a rendered job
//! key parses back to the same key (so rendering is injective).
#![no_main]

use compactor_shared::key::{KeyError, MAX_DOMAIN_LEN, MAX_ENTITY_ID_LEN};
use compactor_shared::EntityKey;
use libfuzzer_sys::fuzz_target;

/// domain: 1–32 bytes of `a-z 0-9 _ -`, starting with a letter.
fn valid_domain(s: &[u8]) -> bool {
    (1..=MAX_DOMAIN_LEN).contains(&s.len())
        && s[0].is_ascii_lowercase()
        && s.iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// entity id: 1–128 bytes of `A-Z a-z 0-9 _ - .`, starting with a letter or
/// a digit.
fn valid_entity_id(s: &[u8]) -> bool {
    (1..=MAX_ENTITY_ID_LEN).contains(&s.len())
        && s[0].is_ascii_alphanumeric()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn check_key(key: &EntityKey) {
    let rendered = key.to_string();
    assert_eq!(
        rendered,
        format!("compact:{}:{}", key.domain(), key.entity_id())
    );
    assert_eq!(rendered.parse::<EntityKey>().as_ref(), Ok(key));
    let json = serde_json::to_string(key).expect("a key serializes");
    let back: EntityKey = serde_json::from_str(&json).expect("a serialized key deserializes");
    assert_eq!(&back, key);
}

fuzz_target!(|data: &[u8]| {
    // `domain \0 entity_id`; without a NUL, all of it is the domain.
    let (domain, entity_id) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let expected = valid_domain(domain) && valid_entity_id(entity_id);
    match EntityKey::parse_bytes(domain, entity_id) {
        Ok(key) => {
            assert!(expected, "accepted {domain:?} / {entity_id:?}");
            assert_eq!(key.domain().as_bytes(), domain);
            assert_eq!(key.entity_id().as_bytes(), entity_id);
            check_key(&key);
        }
        Err(e) => {
            assert!(!expected, "refused valid {domain:?} / {entity_id:?}: {e}");
            let utf8 =
                std::str::from_utf8(domain).is_ok() && std::str::from_utf8(entity_id).is_ok();
            assert_eq!(matches!(e, KeyError::NotUtf8 { .. }), !utf8);
            assert!(!e.to_string().is_empty());
        }
    }

    // Any string that parses as a job key is exactly that key's rendering.
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(key) = s.parse::<EntityKey>() {
            assert_eq!(key.to_string(), s, "two strings render the same key");
            check_key(&key);
        }
        // Keys read from JSON are validated too.
        if let Ok(key) = serde_json::from_str::<EntityKey>(s) {
            assert!(valid_domain(key.domain().as_bytes()));
            assert!(valid_entity_id(key.entity_id().as_bytes()));
        }
    }
});
