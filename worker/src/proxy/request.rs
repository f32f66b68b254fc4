//! A request body as the proxy reads it: every field but `messages`
//! parsed, and each message found but kept as the bytes the client sent.
//!
//! A history of 10,000 messages is a megabyte resent every turn, and all
//! but the newest message or two were in the turn before. Parsing it into
//! values costs milliseconds; finding where each message starts and ends
//! costs a fraction of that, and lets the proxy compare a message with the
//! one it saw last turn byte for byte ([`super::seen`]) and parse only what
//! is new. A message sent on as the client wrote it is sent as those bytes.

use std::fmt;
use std::ops::Range;

use axum::body::Bytes;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A request body, read.
#[derive(Debug)]
pub(super) struct Payload {
    /// The body as sent.
    pub(super) raw: Bytes,
    /// Every top-level field but `messages`.
    pub(super) rest: Map<String, Value>,
    /// Where each message of `messages` is in `raw`; `None` when the body
    /// has no `messages` array.
    pub(super) spans: Option<Vec<Range<usize>>>,
}

impl Payload {
    /// Reads a body; `None` when it is not a JSON object.
    pub(super) fn parse(raw: Bytes) -> Option<Payload> {
        let top: Top<'_> = serde_json::from_slice(&raw).ok()?;
        let base = raw.as_ptr() as usize;
        let spans = top.messages.map(|messages| {
            messages
                .iter()
                .map(|m| {
                    let start = m.get().as_ptr() as usize - base;
                    start..start + m.get().len()
                })
                .collect()
        });
        let rest = top.rest;
        Some(Payload { raw, rest, spans })
    }

    /// Reads a body that may start as `before` did, the same bytes up to
    /// the end of its last message (at `spans`): then only what follows
    /// is read, and those messages are where they were. Else as
    /// [`Payload::parse`].
    pub(super) fn parse_after(
        raw: Bytes,
        before: &Bytes,
        spans: &[Range<usize>],
    ) -> Option<Payload> {
        match Payload::after(&raw, before, spans) {
            Some(payload) => Some(payload),
            None => Payload::parse(raw),
        }
    }

    fn after(raw: &Bytes, before: &Bytes, spans: &[Range<usize>]) -> Option<Payload> {
        let (first, end) = (spans.first()?.start, spans.last()?.end);
        if raw.len() <= end || before.get(..end)? != &raw[..end] {
            return None;
        }
        // After the last message: more of them (`,`), or the array's end.
        let after = &raw[end..];
        let blank = after.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let skip = match after.get(blank) {
            Some(b',') => blank + 1,
            Some(b']') => 0,
            _ => return None,
        };
        // The body without the messages read before: what precedes them,
        // then what follows them. It is read as a body is; the messages
        // before are valid JSON where they are, read so last turn.
        let mut rest = Vec::with_capacity(first + raw.len() - end - skip);
        rest.extend_from_slice(&raw[..first]);
        rest.extend_from_slice(&raw[end + skip..]);
        let top: Top<'_> = serde_json::from_slice(&rest).ok()?;
        if top.messages_keys != 1 {
            return None;
        }
        let base = rest.as_ptr() as usize;
        let moved = end + skip - first;
        let mut all = spans.to_vec();
        for m in top.messages? {
            let start = m.get().as_ptr() as usize - base;
            if start < first {
                return None;
            }
            all.push(start + moved..start + moved + m.get().len());
        }
        Some(Payload {
            raw: raw.clone(),
            rest: top.rest,
            spans: Some(all),
        })
    }

    /// The JSON text at a span of [`Payload::spans`].
    pub(super) fn message(&self, span: &Range<usize>) -> &str {
        // The spans are of a body serde_json read as UTF-8 text.
        std::str::from_utf8(&self.raw[span.clone()]).unwrap_or_default()
    }
}

/// The top level of a body.
struct Top<'a> {
    rest: Map<String, Value>,
    messages: Option<Vec<&'a RawValue>>,
    /// How many times `messages` is a key.
    messages_keys: usize,
}

impl<'de> de::Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
        let mut top = Top {
            rest: Map::new(),
            messages: None,
            messages_keys: 0,
        };
        while let Some(key) = map.next_key::<String>()? {
            if key == "messages" {
                // The last of a key said twice counts, as in a parsed value.
                top.messages = map.next_value::<Messages<'de>>()?.0;
                top.messages_keys += 1;
            } else {
                let value = map.next_value::<Value>()?;
                top.rest.insert(key, value);
            }
        }
        Ok(top)
    }
}

/// `messages`: each element's bytes when it is an array, `None` for
/// anything else (the caller says what is wrong with it).
struct Messages<'a>(Option<Vec<&'a RawValue>>);

impl<'de> de::Deserialize<'de> for Messages<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MessagesVisitor)
    }
}

struct MessagesVisitor;

impl<'de> Visitor<'de> for MessagesVisitor {
    type Value = Messages<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages<'de>, A::Error> {
        let mut messages = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(m) = seq.next_element::<&'de RawValue>()? {
            messages.push(m);
        }
        Ok(Messages(Some(messages)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Messages<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Messages(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Messages<'de>, E> {
        Ok(Messages(None))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Messages<'de>, E> {
        Ok(Messages(None))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Messages<'de>, E> {
        Ok(Messages(None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Messages<'de>, E> {
        Ok(Messages(None))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Messages<'de>, E> {
        Ok(Messages(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Messages<'de>, E> {
        Ok(Messages(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Option<Payload> {
        Payload::parse(Bytes::copy_from_slice(body.as_bytes()))
    }

    #[test]
    fn messages_are_found_as_sent_and_the_rest_is_parsed() {
        let body = r#"{"model":"m", "messages": [ {"role":"user","content":"a \"b\" é"} ,{"role":"assistant","content":null}], "stream":true}"#;
        let request = parse(body).unwrap();
        let spans = request.spans.clone().unwrap();
        let texts: Vec<&str> = spans.iter().map(|s| request.message(s)).collect();
        assert_eq!(
            texts,
            [
                r#"{"role":"user","content":"a \"b\" é"}"#,
                r#"{"role":"assistant","content":null}"#
            ]
        );
        assert_eq!(request.rest.get("model"), Some(&Value::from("m")));
        assert_eq!(request.rest.get("stream"), Some(&Value::Bool(true)));
        assert!(!request.rest.contains_key("messages"));
    }

    #[test]
    fn a_body_without_a_messages_array_is_read_and_says_so() {
        for body in [
            r#"{"model":"m"}"#,
            r#"{"messages":"hi"}"#,
            r#"{"messages":{"role":"user"}}"#,
            r#"{"messages":null}"#,
            r#"{"messages":3}"#,
        ] {
            let request = parse(body).unwrap();
            assert!(request.spans.is_none(), "{body}");
        }
        // The last of a key said twice counts.
        let twice = parse(r#"{"messages":"no","messages":[{"role":"user","content":"a"}]}"#);
        assert_eq!(twice.unwrap().spans.map(|s| s.len()), Some(1));
    }

    #[test]
    fn a_body_that_starts_as_the_last_one_is_read_from_where_it_differs() {
        let before = r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],"stream":true}"#;
        let last = parse(before).unwrap();
        let spans = last.spans.clone().unwrap();
        for (body, read_after) in [
            // One more message, none, others after the array, blanks.
            (
                r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"stream":true}"#,
                true,
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],"stream":false,"n":2}"#,
                true,
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"} ,
              {"role":"user","content":"c"} ] , "user":"u"}"#,
                true,
            ),
            // An earlier message changed, a second `messages`, not JSON:
            // read whole, as a body is.
            (
                r#"{"model":"m","messages":[{"role":"user","content":"A"},{"role":"assistant","content":"b"}]}"#,
                false,
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}],"messages":[]}"#,
                false,
            ),
            (
                r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},"#,
                false,
            ),
        ] {
            let raw = Bytes::copy_from_slice(body.as_bytes());
            let whole = Payload::parse(raw.clone());
            assert_eq!(
                Payload::after(&raw, &last.raw, &spans).is_some(),
                read_after,
                "{body}"
            );
            let after = Payload::parse_after(raw, &last.raw, &spans);
            assert_eq!(
                after.as_ref().map(|p| (&p.rest, &p.spans)),
                whole.as_ref().map(|p| (&p.rest, &p.spans)),
                "{body}"
            );
        }
    }

    #[test]
    fn what_is_not_a_json_object_is_not_read() {
        for body in ["[1,2]", "not json", r#"{"messages":[{"role":"user"}"#, ""] {
            assert!(parse(body).is_none(), "{body}");
        }
    }
}
