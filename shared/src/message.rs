//! Messages of a workstream and their typed parts.
//!
//! A message is what the chat backend stored: a role and an ordered list of
//! parts. Tool activity is modelled the way both OpenAI and Anthropic see it:
//! a [`Part::ToolCall`] (in an assistant message) and a matching
//! [`Part::ToolResult`] (usually in a later `tool` or `user` message) share a
//! `call_id`. The engine never separates such a pair (see `boundary`), and a
//! context it builds never contains one half without the other (see
//! `context`).

use serde::{Deserialize, Serialize};

/// Monotonic, storage-assigned position of a message within its workstream.
/// Read from a JSON integer, or from a number with a zero fraction
/// (`42.0`, as clients in languages without an integer type send it), as
/// JSON Schema's `integer` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Default)]
#[serde(transparent)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageId(pub i64);

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<MessageId, D::Error> {
        struct Whole;

        impl serde::de::Visitor<'_> for Whole {
            type Value = MessageId;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a message id (a whole number)")
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<MessageId, E> {
                Ok(MessageId(v))
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<MessageId, E> {
                i64::try_from(v)
                    .map(MessageId)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }

            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<MessageId, E> {
                // 2^63 as f64: every whole float in [-2^63, 2^63) fits an i64.
                const LIMIT: f64 = 9_223_372_036_854_775_808.0;
                if v.fract() == 0.0 && (-LIMIT..LIMIT).contains(&v) {
                    #[allow(clippy::cast_possible_truncation)]
                    Ok(MessageId(v as i64))
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Float(v), &self))
                }
            }
        }

        deserializer.deserialize_any(Whole)
    }
}

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Who produced a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One typed piece of a message. Unknown `type` values are refused by serde
/// with an error naming the accepted kinds, never silently dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Part {
    Text {
        text: String,
    },
    ToolCall {
        call_id: String,
        tool_name: String,
        #[serde(default)]
        input: serde_json::Value,
    },
    ToolResult {
        call_id: String,
        tool_name: String,
        #[serde(default)]
        output: String,
        #[serde(default, skip_serializing_if = "is_false")]
        is_error: bool,
        /// Set by tool-output pruning: the output stays stored but is shown
        /// to the model as `PRUNED_PLACEHOLDER` ("[Old tool result content cleared]").
        #[serde(default, skip_serializing_if = "is_false")]
        pruned: bool,
    },
    Reasoning {
        text: String,
    },
    File {
        /// Path or URL of the file.
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What a pruned tool result is replaced with when shown to a model
/// (OpenCode's wording).
pub const PRUNED_PLACEHOLDER: &str = "[Old tool result content cleared]";

impl Part {
    /// Bytes of content: text and reasoning, a tool call's input (as
    /// compact JSON), a tool's output, a file's path or URL. How the
    /// benchmarks measure a conversation's size (MB/s of a compaction).
    pub fn content_len(&self) -> usize {
        match self {
            Part::Text { text } | Part::Reasoning { text } => text.len(),
            Part::ToolCall { input, .. } => input.to_string().len(),
            Part::ToolResult { output, .. } => output.len(),
            Part::File { uri, .. } => uri.len(),
        }
    }

    pub fn text(text: impl Into<String>) -> Part {
        Part::Text { text: text.into() }
    }

    /// A tool call.
    pub fn tool_call(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        input: serde_json::Value,
    ) -> Part {
        Part::ToolCall {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            input,
        }
    }

    /// A successful, unpruned tool result.
    pub fn tool_result(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        output: impl Into<String>,
    ) -> Part {
        Part::ToolResult {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            output: output.into(),
            is_error: false,
            pruned: false,
        }
    }

    /// The `call_id` for tool parts.
    pub fn call_id(&self) -> Option<&str> {
        match self {
            Part::ToolCall { call_id, .. } | Part::ToolResult { call_id, .. } => Some(call_id),
            _ => None,
        }
    }

    /// How deeply a tool call's input nests (0 for other parts and for a
    /// scalar input).
    pub fn input_depth(&self) -> usize {
        match self {
            Part::ToolCall { input, .. } => json_depth(input),
            _ => 0,
        }
    }

    /// Name of the part kind, as in its serialized `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Part::Text { .. } => "text",
            Part::ToolCall { .. } => "tool_call",
            Part::ToolResult { .. } => "tool_result",
            Part::Reasoning { .. } => "reasoning",
            Part::File { .. } => "file",
        }
    }
}

/// Deepest tool call input accepted, in nested arrays and objects.
///
/// Stored parts are read back with `serde_json`, whose parser refuses more
/// than 128 levels; a message nested deeper than that could be written (the
/// writer has no limit) but never read again, and its workstream could not
/// be compacted. The bound leaves room for the levels around the input.
pub const MAX_INPUT_DEPTH: usize = 100;

/// Nesting depth of a JSON value: 0 for a scalar, 1 for a flat array or
/// object. Iterative, so a value built in memory with any depth is measured
/// without recursion.
pub fn json_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &serde_json::Value>> = match v {
            serde_json::Value::Array(items) => Box::new(items.iter()),
            serde_json::Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    deepest
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub id: MessageId,
    pub role: Role,
    pub parts: Vec<Part>,
    /// Pinned messages are never compacted (CoWork's pinned messages).
    #[serde(default, skip_serializing_if = "is_false")]
    pub pinned: bool,
}

impl Message {
    pub fn new(id: i64, role: Role, parts: Vec<Part>) -> Message {
        Message {
            id: MessageId(id),
            role,
            parts,
            pinned: false,
        }
    }

    /// A message with a single text part.
    pub fn text(id: i64, role: Role, text: impl Into<String>) -> Message {
        Message::new(id, role, vec![Part::text(text)])
    }

    /// Call ids of the tool calls this message makes.
    pub fn tool_calls(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
    }

    /// Call ids of the tool results this message carries.
    pub fn tool_results(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
    }

    /// Whether this message starts a user turn (a user message with something
    /// other than tool results in it).
    pub fn starts_turn(&self) -> bool {
        self.role == Role::User
            && self
                .parts
                .iter()
                .any(|p| !matches!(p, Part::ToolResult { .. }))
    }
}

/// Error from decoding a message coming from outside (app code, HTTP, CLI).
#[derive(Debug, thiserror::Error)]
#[error("invalid message JSON: {0}")]
pub struct MessageDecodeError(#[from] serde_json::Error);

impl Message {
    /// Decodes one message from JSON, with an error that names what is wrong
    /// (e.g. "unknown variant `image`, expected one of `text`, `tool_call`…").
    pub fn from_json(json: &str) -> Result<Message, MessageDecodeError> {
        Ok(serde_json::from_str(json)?)
    }
}

/// Decodes a JSON array of parts: exactly what
/// `serde_json::from_str::<Vec<Part>>` gives (the same parts, the same
/// errors), faster for parts written by `serde_json` (the `type` key
/// first).
///
/// Why: `Part` is an internally tagged enum, which serde decodes by
/// buffering every part into an intermediate tree before choosing the
/// variant; a context of 10k messages spends much of its decoding there.
/// Here the tag is read first and the variant's fields straight after.
/// Anything else — a part whose `type` is not its first key, an unknown or
/// repeated key, a missing field, a wrong type — is decoded again by serde's
/// own derive, so what is accepted, and every error, stays serde's.
pub fn parts_from_json(json: &str) -> Result<Vec<Part>, serde_json::Error> {
    match serde_json::from_str::<FastParts>(json) {
        Ok(FastParts(parts)) => Ok(parts),
        Err(_) => serde_json::from_str(json),
    }
}

/// A part array decoded by [`parts_from_json`]'s fast path.
struct FastParts(Vec<Part>);

/// One part decoded by the fast path.
struct FastPart(Part);

impl<'de> Deserialize<'de> for FastParts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<FastParts, D::Error> {
        struct Parts;
        impl<'de> serde::de::Visitor<'de> for Parts {
            type Value = FastParts;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of parts")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<FastParts, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(1).min(64));
                while let Some(FastPart(part)) = seq.next_element()? {
                    parts.push(part);
                }
                Ok(FastParts(parts))
            }
        }
        deserializer.deserialize_seq(Parts)
    }
}

/// The keys a part may have; anything else ends the fast path.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum PartKey {
    Type,
    Text,
    CallId,
    ToolName,
    Input,
    Output,
    IsError,
    Pruned,
    Uri,
    MediaType,
    Name,
}

/// A part's `type`; any other ends the fast path.
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PartType {
    Text,
    ToolCall,
    ToolResult,
    Reasoning,
    File,
}

/// Reads one field into `slot`: an error if the key was seen already.
fn field<'de, A: serde::de::MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(serde::de::Error::custom("repeated key"));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

impl<'de> Deserialize<'de> for FastPart {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<FastPart, D::Error> {
        struct PartVisitor;
        impl<'de> serde::de::Visitor<'de> for PartVisitor {
            type Value = FastPart;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a part with its type first")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<FastPart, A::Error> {
                use serde::de::Error;
                if map.next_key::<PartKey>()? != Some(PartKey::Type) {
                    return Err(A::Error::custom("type is not the first key"));
                }
                let ty: PartType = map.next_value()?;
                let mut text: Option<String> = None;
                let mut call_id: Option<String> = None;
                let mut tool_name: Option<String> = None;
                let mut input: Option<serde_json::Value> = None;
                let mut output: Option<String> = None;
                let mut is_error: Option<bool> = None;
                let mut pruned: Option<bool> = None;
                let mut uri: Option<String> = None;
                let mut media_type: Option<Option<String>> = None;
                let mut name: Option<Option<String>> = None;
                while let Some(key) = map.next_key::<PartKey>()? {
                    match (ty, key) {
                        (PartType::Text | PartType::Reasoning, PartKey::Text) => {
                            field(&mut map, &mut text)?;
                        }
                        (PartType::ToolCall | PartType::ToolResult, PartKey::CallId) => {
                            field(&mut map, &mut call_id)?;
                        }
                        (PartType::ToolCall | PartType::ToolResult, PartKey::ToolName) => {
                            field(&mut map, &mut tool_name)?;
                        }
                        (PartType::ToolCall, PartKey::Input) => field(&mut map, &mut input)?,
                        (PartType::ToolResult, PartKey::Output) => field(&mut map, &mut output)?,
                        (PartType::ToolResult, PartKey::IsError) => {
                            field(&mut map, &mut is_error)?;
                        }
                        (PartType::ToolResult, PartKey::Pruned) => field(&mut map, &mut pruned)?,
                        (PartType::File, PartKey::Uri) => field(&mut map, &mut uri)?,
                        (PartType::File, PartKey::MediaType) => {
                            field(&mut map, &mut media_type)?;
                        }
                        (PartType::File, PartKey::Name) => field(&mut map, &mut name)?,
                        _ => return Err(A::Error::custom("not a key of this type")),
                    }
                }
                let missing = || A::Error::custom("a required key is missing");
                let part = match ty {
                    PartType::Text => Part::Text {
                        text: text.ok_or_else(missing)?,
                    },
                    PartType::Reasoning => Part::Reasoning {
                        text: text.ok_or_else(missing)?,
                    },
                    PartType::ToolCall => Part::ToolCall {
                        call_id: call_id.ok_or_else(missing)?,
                        tool_name: tool_name.ok_or_else(missing)?,
                        input: input.unwrap_or_default(),
                    },
                    PartType::ToolResult => Part::ToolResult {
                        call_id: call_id.ok_or_else(missing)?,
                        tool_name: tool_name.ok_or_else(missing)?,
                        output: output.unwrap_or_default(),
                        is_error: is_error.unwrap_or_default(),
                        pruned: pruned.unwrap_or_default(),
                    },
                    PartType::File => Part::File {
                        uri: uri.ok_or_else(missing)?,
                        media_type: media_type.flatten(),
                        name: name.flatten(),
                    },
                };
                Ok(FastPart(part))
            }
        }
        deserializer.deserialize_map(PartVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_len_counts_what_a_part_says_not_its_envelope() {
        assert_eq!(Part::text("héllo").content_len(), 6);
        let call = Part::tool_call("c1", "bash", serde_json::json!({"cmd": "ls"}));
        assert_eq!(call.content_len(), r#"{"cmd":"ls"}"#.len());
        assert_eq!(Part::tool_result("c1", "bash", "ok\n").content_len(), 3);
        let file = Part::File {
            uri: "src/a.rs".into(),
            media_type: Some("text/x-rust".into()),
            name: None,
        };
        assert_eq!(file.content_len(), 8);
    }

    fn sample() -> Message {
        Message {
            id: MessageId(7),
            role: Role::Assistant,
            pinned: true,
            parts: vec![
                Part::text("hello"),
                Part::Reasoning { text: "hmm".into() },
                Part::ToolCall {
                    call_id: "c1".into(),
                    tool_name: "bash".into(),
                    input: serde_json::json!({"cmd": "ls -la"}),
                },
                Part::ToolResult {
                    call_id: "c1".into(),
                    tool_name: "bash".into(),
                    output: "total 0".into(),
                    is_error: false,
                    pruned: true,
                },
                Part::File {
                    uri: "src/main.rs".into(),
                    media_type: Some("text/x-rust".into()),
                    name: None,
                },
            ],
        }
    }

    #[test]
    fn serde_round_trips_every_part_kind() {
        let m = sample();
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(Message::from_json(&json).unwrap(), m);
        assert!(json.contains(r#""type":"tool_result""#));
    }

    #[test]
    fn unknown_part_kinds_are_rejected_with_a_clear_error() {
        let json = r#"{"id":1,"role":"user","parts":[{"type":"image","url":"x"}]}"#;
        let err = Message::from_json(json).unwrap_err().to_string();
        assert!(err.contains("unknown variant `image`"), "{err}");
        assert!(err.contains("tool_call"), "lists accepted kinds: {err}");
    }

    #[test]
    fn unknown_roles_and_fields_are_rejected() {
        assert!(Message::from_json(r#"{"id":1,"role":"robot","parts":[]}"#).is_err());
        let err = Message::from_json(
            r#"{"id":1,"role":"user","parts":[{"type":"text","text":"a","x":1}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field `x`"), "{err}");
    }

    #[test]
    fn deeply_nested_input_is_an_error_not_a_stack_overflow() {
        let depth = 100_000;
        let input = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let json = format!(
            r#"{{"id":1,"role":"assistant","parts":[{{"type":"tool_call","call_id":"c","tool_name":"t","input":{input}}}]}}"#
        );
        let err = Message::from_json(&json).unwrap_err().to_string();
        assert!(err.contains("recursion limit"), "{err}");
    }

    #[test]
    fn json_depth_counts_nested_arrays_and_objects() {
        assert_eq!(json_depth(&serde_json::json!("x")), 0);
        assert_eq!(json_depth(&serde_json::json!([])), 1);
        assert_eq!(json_depth(&serde_json::json!({"a": [1, {"b": []}]})), 4);
        let mut deep = serde_json::json!(1);
        for _ in 0..100_000 {
            deep = serde_json::Value::Array(vec![deep]);
        }
        assert_eq!(json_depth(&deep), 100_000);
        let part = Part::tool_call("c", "t", deep);
        assert_eq!(part.input_depth(), 100_000);
        assert_eq!(Part::text("x").input_depth(), 0);
        // Dropping (or cloning) a value this deep recurses in serde_json:
        // take it apart level by level instead.
        let Part::ToolCall { input: mut v, .. } = part else {
            unreachable!()
        };
        while let serde_json::Value::Array(mut items) = v {
            v = items.pop().unwrap_or(serde_json::Value::Null);
        }
    }

    #[test]
    fn input_at_the_depth_bound_reads_back() {
        let mut input = serde_json::json!("bottom");
        for _ in 0..MAX_INPUT_DEPTH {
            input = serde_json::json!([input]);
        }
        let m = Message::new(1, Role::Assistant, vec![Part::tool_call("c", "t", input)]);
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(Message::from_json(&json).unwrap(), m);
        let parts = serde_json::to_string(&m.parts).unwrap();
        let back: Vec<Part> = serde_json::from_str(&parts).unwrap();
        assert_eq!(back, m.parts);
    }

    #[test]
    fn a_turn_starts_at_a_user_message_that_is_not_only_tool_results() {
        let result_only = Message::new(
            1,
            Role::User,
            vec![Part::ToolResult {
                call_id: "c".into(),
                tool_name: "t".into(),
                output: String::new(),
                is_error: false,
                pruned: false,
            }],
        );
        assert!(!result_only.starts_turn());
        assert!(Message::text(2, Role::User, "hi").starts_turn());
        assert!(!Message::text(3, Role::Assistant, "hi").starts_turn());
    }

    /// The fast path of `parts_from_json` against serde's derive: the same
    /// parts, or the same error, for parts as written and for every shape
    /// the fast path leaves to the derive.
    #[test]
    fn parts_from_json_decodes_exactly_as_serde() {
        let written = serde_json::to_string(&vec![
            Part::text("hello \"there\"\n\u{e9}"),
            Part::Reasoning {
                text: "thinking".into(),
            },
            Part::tool_call(
                "c1",
                "bash",
                serde_json::json!({"cmd": "ls", "n": [1, -2, 3.5, null, true], "u": u64::MAX}),
            ),
            Part::tool_result("c1", "bash", "ok"),
            Part::ToolResult {
                call_id: "c2".into(),
                tool_name: "t".into(),
                output: String::new(),
                is_error: true,
                pruned: true,
            },
            Part::File {
                uri: "file:///a".into(),
                media_type: Some("text/plain".into()),
                name: None,
            },
        ])
        .unwrap();
        let cases = [
            written.as_str(),
            "[]",
            r#"[{"type":"text","text":"a"},{"text":"b","type":"text"}]"#,
            r#"[{"type":"tool_call","call_id":"c","tool_name":"t"}]"#,
            r#"[{"type":"tool_call","call_id":"c","tool_name":"t","input":null}]"#,
            r#"[{"type":"tool_result","call_id":"c","tool_name":"t"}]"#,
            r#"[{"type":"tool_result","call_id":"c","tool_name":"t","output":null}]"#,
            r#"[{"type":"file","uri":"u","name":null,"media_type":"m"}]"#,
            r#"[{"type":"file","uri":"u","name":"n","name":"m"}]"#,
            r#"[{"type":"text"}]"#,
            r#"[{"type":"text","text":"a","text":"b"}]"#,
            r#"[{"type":"text","text":"a","extra":1}]"#,
            r#"[{"type":"text","text":"a","call_id":"c"}]"#,
            r#"[{"type":"text","type":"text","text":"a"}]"#,
            r#"[{"type":"image","url":"x"}]"#,
            r#"[{"type":1,"text":"a"}]"#,
            r#"[{"text":"a"}]"#,
            r#"[["text","a"]]"#,
            r#"[{"type":"tool_result","call_id":"c","tool_name":"t","pruned":"yes"}]"#,
            r#"[{"type":"text","text":"a"}"#,
            r#"[{"type":"text","text":"a"}] x"#,
            r#"{"type":"text","text":"a"}"#,
            r#"[{"t\u0079pe":"text","te\u0078t":"a"}]"#,
            "",
        ];
        for json in cases {
            let fast = parts_from_json(json);
            let serde = serde_json::from_str::<Vec<Part>>(json);
            match (fast, serde) {
                (Ok(fast), Ok(serde)) => assert_eq!(fast, serde, "{json}"),
                (Err(fast), Err(serde)) => {
                    assert_eq!(fast.to_string(), serde.to_string(), "{json}");
                }
                (fast, serde) => panic!("{json}: fast {fast:?}, serde {serde:?}"),
            }
        }
        assert_eq!(parts_from_json(&written).unwrap().len(), 6);
    }
}
