//! Values named by their JSON key.
//!
//! Tools that talk to APIs answer in JSON, and there the key says what a
//! value is: `"refund_id": "RF-54569194"`, `"alt_phone": "+44 131 496
//! 6017"`, `"name": "Noor Achterberg"`, `"departure": "07:40"`. Read as
//! plain text those values have no shape a pattern could trust (a refund
//! id is just letters and digits), so a field whose key names a kind is
//! taken as that kind when its value fits it. Every other string is still
//! scanned as text.

use super::scan::Candidate;
use crate::ledger::ArtifactKind;

/// Deepest JSON nesting followed.
const MAX_DEPTH: usize = 16;
/// Most fields taken from one JSON document.
const MAX_FIELDS: usize = 64;
/// Longest value taken as a reference (longer is prose or a blob).
const MAX_REFERENCE_CHARS: usize = 40;

/// The values of `value` that their keys name, in document order.
pub(super) fn named(value: &serde_json::Value) -> Vec<Candidate> {
    let mut out = Vec::new();
    walk(value, None, 0, &mut out);
    out
}

fn walk(value: &serde_json::Value, key: Option<&str>, depth: usize, out: &mut Vec<Candidate>) {
    if depth > MAX_DEPTH || out.len() >= MAX_FIELDS {
        return;
    }
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                walk(v, Some(k), depth + 1, out);
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                walk(v, key, depth + 1, out);
            }
        }
        serde_json::Value::String(s) => {
            if let Some(kind) = key.and_then(|k| kind_of(k, s)) {
                push(out, kind, s.trim());
            }
        }
        // A numeric id (`"order_id": 48213`); numbers under other keys
        // carry no unit and stay out.
        serde_json::Value::Number(n)
            if key.is_some_and(|k| key_kind(k) == Some(ArtifactKind::Reference)) && n.is_u64() =>
        {
            push(out, ArtifactKind::Reference, &n.to_string());
        }
        _ => {}
    }
}

fn push(out: &mut Vec<Candidate>, kind: ArtifactKind, value: &str) {
    out.push(Candidate {
        at: 0,
        kind,
        key: None,
        value: value.to_owned(),
    });
}

/// The kind a key names, before looking at the value.
fn key_kind(key: &str) -> Option<ArtifactKind> {
    let words = super::words_of(key);
    let last = words.last()?.as_str();
    let any = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    if any(&["email", "mail"]) {
        return Some(ArtifactKind::Email);
    }
    if any(&["phone", "tel", "telephone", "mobile", "fax"]) {
        return Some(ArtifactKind::Phone);
    }
    if any(&["url", "link", "href", "uri"]) {
        return Some(ArtifactKind::Url);
    }
    if any(&["address", "street"]) {
        return Some(ArtifactKind::Address);
    }
    if matches!(
        key.to_ascii_lowercase().as_str(),
        "name"
            | "full_name"
            | "fullname"
            | "customer_name"
            | "contact_name"
            | "guest_name"
            | "passenger"
            | "passenger_name"
            | "holder"
            | "account_holder"
            | "contact"
            | "agent"
    ) {
        return Some(ArtifactKind::Person);
    }
    if matches!(
        last,
        "id" | "ref"
            | "reference"
            | "number"
            | "no"
            | "code"
            | "confirmation"
            | "booking"
            | "pnr"
            | "locator"
            | "ticket"
            | "case"
            | "tracking"
            | "order"
            | "invoice"
            | "reservation"
    ) && !any(&[
        "error", "status", "country", "currency", "postal", "zip", "post", "lang", "language",
        "area", "dial",
    ]) {
        return Some(ArtifactKind::Reference);
    }
    if any(&[
        "amount", "price", "total", "cost", "fee", "refund", "balance", "charge", "fare",
    ]) {
        return Some(ArtifactKind::Amount);
    }
    if any(&[
        "date",
        "time",
        "at",
        "day",
        "departure",
        "departs",
        "arrival",
        "arrives",
        "checkin",
        "checkout",
        "deadline",
        "due",
        "eta",
        "slot",
        "start",
        "end",
        "until",
        "since",
    ]) {
        return Some(ArtifactKind::DateTime);
    }
    None
}

/// The kind of the field `key: value`, if the key names one and the value
/// fits it.
fn kind_of(key: &str, value: &str) -> Option<ArtifactKind> {
    let v = value.trim();
    if v.is_empty() || v.len() > 200 {
        return None;
    }
    let digits = v.bytes().filter(u8::is_ascii_digit).count();
    let kind = key_kind(key)?;
    let fits = match kind {
        ArtifactKind::Email => v.contains('@') && !v.contains(char::is_whitespace),
        ArtifactKind::Phone => {
            (7..=15).contains(&digits)
                && v.chars()
                    .all(|c| c.is_ascii_digit() || " +-().".contains(c))
        }
        ArtifactKind::Url => v.starts_with("http://") || v.starts_with("https://"),
        ArtifactKind::Address => digits > 0 && v.split_whitespace().count() >= 2,
        ArtifactKind::Person => {
            let words: Vec<&str> = v.split_whitespace().collect();
            (2..=4).contains(&words.len())
                && words.iter().all(|w| {
                    w.chars().next().is_some_and(char::is_uppercase)
                        && w.chars().all(|c| c.is_alphabetic() || "-'.".contains(c))
                })
        }
        ArtifactKind::Reference => {
            let chars = v.chars().count();
            (3..=MAX_REFERENCE_CHARS).contains(&chars)
                && v.split_whitespace().count() <= 2
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_/.# ".contains(c))
                && (digits > 0 || (chars >= 5 && v.chars().all(|c| c.is_ascii_uppercase())))
        }
        ArtifactKind::Amount => {
            digits > 0
                && (v.contains(['€', '$', '£', '¥', '₹'])
                    || v.split(|c: char| !c.is_ascii_alphabetic())
                        .any(|w| w.len() == 3 && w.chars().all(|c| c.is_ascii_uppercase())))
        }
        ArtifactKind::DateTime => digits > 0 && v.chars().count() <= 40,
        _ => false,
    };
    fits.then_some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(v: serde_json::Value) -> Vec<(ArtifactKind, String)> {
        named(&v).into_iter().map(|c| (c.kind, c.value)).collect()
    }

    #[test]
    fn keys_name_what_their_values_are() {
        let got = found(json!({
            "refund_id": "RF-54569194",
            "status": "approved",
            "alt_phone": "+44 131 496 6017",
            "name": "Noor Achterberg",
            "customer": {"email": "noor@example.org", "orderId": 48213},
            "legs": [{"departure": "07:40", "flight_number": "TP 7401"}],
            "total": "€578.00",
            "country_code": "PT",
        }));
        let want = [
            (ArtifactKind::Phone, "+44 131 496 6017"),
            (ArtifactKind::Email, "noor@example.org"),
            (ArtifactKind::Reference, "48213"),
            (ArtifactKind::DateTime, "07:40"),
            (ArtifactKind::Reference, "TP 7401"),
            (ArtifactKind::Person, "Noor Achterberg"),
            (ArtifactKind::Reference, "RF-54569194"),
            (ArtifactKind::Amount, "€578.00"),
        ];
        for (kind, value) in want {
            assert!(
                got.contains(&(kind, value.to_owned())),
                "{kind:?} {value}: {got:?}"
            );
        }
        assert!(
            !got.iter().any(|(_, v)| v == "approved" || v == "PT"),
            "{got:?}"
        );
    }

    #[test]
    fn values_that_do_not_fit_their_key_are_left_to_the_text_scan() {
        let got = found(json!({
            "name": "a good chef's knife",
            "id": "x",
            "phone": "ask at the desk",
            "price": 12.5,
            "order": "please hurry, the parcel is late and I need it",
        }));
        assert!(got.is_empty(), "{got:?}");
    }
}
