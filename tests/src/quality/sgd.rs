//! Sessions made of third-party data: task dialogues of the Schema-Guided
//! Dialogue dataset (SGD, Google Research, CC BY-SA 4.0), whose facts come
//! from the dataset's own slot annotations, not from us.
//!
//! The fixtures (`tests/data/sgd/train.json`, the split the engine may be
//! tuned on; `tests/data/sgd/test.json`, held out: never read while tuning)
//! are derived by `tests/data/sgd/make.py` (see its README): per turn the
//! speaker, the utterance and its slot spans (service, slot name, the
//! span's text). A session is the fixture's dialogues, one after another,
//! in one workstream: USER turns as user text, SYSTEM turns as assistant
//! text. Data of other sources may add tool use in the same format (the
//! SGD fixtures have none): a SYSTEM turn's `call` (a tool's name and JSON
//! input) follows its text as a tool call, and a `TOOL` turn is that
//! call's result, its utterance the tool's output.
//!
//! Facts, by rules fixed before any scoring:
//! - every slot value whose span is in an utterance is an exact value
//!   ([`Class::Value`]), once per session (values equal but for case are
//!   one fact, spelt as first annotated); its message and source are
//!   measured, as for generated sessions: the first message holding it as
//!   a whole token, `user` if any user turn holds it;
//! - skipped: values of 1–2 characters, yes/no-like values (`True`,
//!   `False`, `dontcare`, `yes`, `no`, `none`), and a span that is not a
//!   whole token of its utterance (a piece of a word);
//! - the kind is a rough class of the slot name ([`kind_of`]);
//! - superseded: within one dialogue, when a USER turn gives a (service,
//!   slot) values none of which the previous USER turn that gave it had,
//!   those previous values are superseded at that turn, by the new value;
//!   not when the old value is said again at or after that turn anywhere in
//!   the session (it is current again, or history repeated), is at that
//!   moment another slot's current user value, or the new value is no fact.

use std::collections::{BTreeMap, HashMap};

use compactor_producer::client::IncomingMessage;
use compactor_shared::{Part, Role};
use serde::Deserialize;

use super::score::{contains_value, line_has_value};
use super::sessions::{check, Class, Fact, Kind, Session, SessionSpec, Source, Supersession};

/// Which task-dialogue fixture: the SGD splits, and the CrossWOZ ones
/// (`tests/data/crosswoz`, Chinese task dialogues in the same format, from
/// the dataset's dialogue acts: a second source in a script written
/// without spaces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// SGD `train/`: the part the engine may be tuned on.
    Train,
    /// SGD `test/`: held out.
    Test,
    /// CrossWOZ `val`: the part the engine may be tuned on.
    CrossWozTune,
    /// CrossWOZ `test`: held out.
    CrossWozHeldOut,
}

impl Split {
    /// The fixture, relative to the crate (`tests/`).
    pub fn path(self) -> &'static str {
        match self {
            Split::Train => "data/sgd/train.json",
            Split::Test => "data/sgd/test.json",
            Split::CrossWozTune => "data/crosswoz/tune.json",
            Split::CrossWozHeldOut => "data/crosswoz/held-out.json",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Split::Train => {
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/sgd/train.json"))
            }
            Split::Test => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/sgd/test.json")),
            Split::CrossWozTune => {
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/data/crosswoz/tune.json"
                ))
            }
            Split::CrossWozHeldOut => include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/data/crosswoz/held-out.json"
            )),
        }
    }

    /// The variable naming a file to read in place of the fixture: any
    /// conversation written in the fixture's format, such as a published
    /// benchmark that may not be kept here (`bench/locomo`). Only the SGD
    /// splits have one.
    pub fn override_var(self) -> Option<&'static str> {
        match self {
            Split::Train => Some("QUALITY_SGD_TRAIN"),
            Split::Test => Some("QUALITY_SGD_TEST"),
            Split::CrossWozTune | Split::CrossWozHeldOut => None,
        }
    }

    /// The fixture, parsed (panics on a broken fixture): the file
    /// [`Split::override_var`] names when it is set, else the one kept here.
    pub fn fixture(self) -> Fixture {
        if let Some(path) = self.override_var().and_then(std::env::var_os) {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.to_string_lossy()));
            return serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not a fixture: {e}", path.to_string_lossy()));
        }
        serde_json::from_str(self.text())
            .unwrap_or_else(|e| panic!("tests/{}: not a fixture: {e}", self.path()))
    }
}

/// A derived SGD fixture (`tests/data/sgd/make.py`).
#[derive(Debug, Clone, Deserialize)]
pub struct Fixture {
    pub source: String,
    pub commit: String,
    pub licence: String,
    pub split: String,
    pub dialogues: Vec<Dialogue>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Dialogue {
    pub id: String,
    pub file: String,
    pub services: Vec<String>,
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Turn {
    /// `USER`, `SYSTEM`, or `TOOL` (the result of the last `call`).
    pub speaker: String,
    pub utterance: String,
    pub slots: Vec<Span>,
    /// A SYSTEM turn's tool call, after its text.
    #[serde(default)]
    pub call: Option<Call>,
}

/// A tool call of a SYSTEM turn.
#[derive(Debug, Clone, Deserialize)]
pub struct Call {
    pub tool: String,
    #[serde(default)]
    pub input: serde_json::Value,
}

/// A slot value annotated in an utterance.
#[derive(Debug, Clone, Deserialize)]
pub struct Span {
    pub service: String,
    pub slot: String,
    /// The utterance's text at the span.
    pub value: String,
}

impl Fixture {
    /// Messages of all its dialogues.
    pub fn messages(&self) -> usize {
        self.dialogues.iter().map(|d| d.turns.len()).sum()
    }

    /// One line: where it comes from.
    pub fn provenance(&self) -> String {
        format!(
            "{} dialogues of {} ({}) at commit {}, {}",
            self.dialogues.len(),
            self.source,
            self.split,
            &self.commit[..self.commit.len().min(12)],
            self.licence
        )
    }
}

/// A rough kind for an SGD slot name, for the per-kind table.
pub fn kind_of(slot: &str) -> Kind {
    let has = |words: &[&str]| words.iter().any(|w| slot.contains(w));
    let part = |words: &[&str]| slot.split('_').any(|p| words.contains(&p));
    if has(&["phone"]) {
        Kind::Phone
    } else if has(&["email"]) {
        Kind::Email
    } else if has(&["address"]) {
        Kind::Address
    } else if has(&["date", "time"]) {
        Kind::DateTime
    } else if has(&["price", "fare", "rent", "total", "balance", "amount"]) {
        Kind::Amount
    } else if has(&[
        "rating",
        "humidity",
        "precipitation",
        "temperature",
        "wind",
        "number",
    ]) {
        Kind::Quantity
    } else if has(&[
        "city",
        "location",
        "area",
        "origin",
        "destination",
        "station",
        "airport",
        "where_to",
        "venue",
    ]) || part(&["from", "to"])
    {
        Kind::Place
    } else if has(&[
        "name",
        "title",
        "album",
        "artist",
        "directed_by",
        "cast",
        "track",
        "song",
    ]) {
        Kind::NamedEntity
    } else if has(&["category", "cuisine", "genre", "type"]) {
        Kind::Category
    } else {
        Kind::Slot
    }
}

/// Whether an annotated value is scored at all.
fn scored(value: &str) -> bool {
    const YES_NO: [&str; 6] = ["true", "false", "dontcare", "yes", "no", "none"];
    value.chars().count() > 2 && !YES_NO.contains(&value.to_lowercase().as_str())
}

/// The session of `split`: its dialogues, whole, while they fit in
/// `spec.messages` (at least one).
pub fn session(spec: SessionSpec, split: Split) -> Session {
    from_fixture(spec, &split.fixture(), split.path())
}

/// The session of `fixture` (`name` says which, in a panic).
pub fn from_fixture(spec: SessionSpec, fixture: &Fixture, name: &str) -> Session {
    let mut dialogues = Vec::new();
    let mut n = 0;
    for d in &fixture.dialogues {
        if !dialogues.is_empty() && n + d.turns.len() > spec.messages {
            break;
        }
        n += d.turns.len();
        dialogues.push(d);
    }

    // Messages, and where each dialogue's turns are.
    let mut messages = Vec::new();
    let mut at: Vec<Vec<usize>> = Vec::new();
    let mut calls = Vec::new();
    for d in &dialogues {
        let mut idx = Vec::new();
        for t in &d.turns {
            idx.push(messages.len());
            messages.push(turn_message(t, &mut calls));
        }
        at.push(idx);
    }
    let texts: Vec<String> = messages
        .iter()
        .map(|m| {
            m.parts
                .iter()
                .map(|p| match p {
                    Part::Text { text } => text.clone(),
                    Part::ToolCall { input, .. } => input.to_string(),
                    Part::ToolResult { output, .. } => output.clone(),
                    _ => String::new(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();

    // Facts: every scored value, once, located by measurement.
    let mut facts: Vec<Fact> = Vec::new();
    let mut by_value: HashMap<String, usize> = HashMap::new();
    for (d, idx) in dialogues.iter().zip(&at) {
        for (t, &m) in d.turns.iter().zip(idx) {
            for s in &t.slots {
                let key = s.value.to_lowercase();
                if !scored(&s.value)
                    || by_value.contains_key(&key)
                    || !contains_value(&texts[m], &s.value, false)
                {
                    continue;
                }
                let Some(first) = texts
                    .iter()
                    .position(|t| contains_value(t, &s.value, false))
                else {
                    continue;
                };
                let user = messages
                    .iter()
                    .zip(&texts)
                    .any(|(msg, t)| msg.role == Role::User && contains_value(t, &s.value, false));
                by_value.insert(key, facts.len());
                facts.push(Fact {
                    value: s.value.clone(),
                    kind: kind_of(&s.slot),
                    class: Class::Value,
                    source: if user {
                        Source::User
                    } else {
                        Source::Assistant
                    },
                    message: first,
                    superseded: None,
                });
            }
        }
    }

    // Supersession, per dialogue, from USER turns.
    for (d, idx) in dialogues.iter().zip(&at) {
        // (service, slot) -> the values the last USER turn that gave it gave.
        let mut current: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (t, &m) in d.turns.iter().zip(idx) {
            if t.speaker != "USER" {
                continue;
            }
            let mut given: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
            for s in &t.slots {
                given
                    .entry((s.service.clone(), s.slot.clone()))
                    .or_default()
                    .push(s.value.clone());
            }
            for (key, new) in &given {
                let Some(old) = current.get(key) else {
                    continue;
                };
                let same = |a: &String, b: &String| a.eq_ignore_ascii_case(b);
                if old.iter().any(|o| new.iter().any(|n| same(o, n))) {
                    continue;
                }
                let Some(&by) = new.iter().find_map(|n| by_value.get(&n.to_lowercase())) else {
                    continue;
                };
                for o in old {
                    let Some(&i) = by_value.get(&o.to_lowercase()) else {
                        continue;
                    };
                    let elsewhere = current
                        .iter()
                        .chain(&given)
                        .any(|(k, vs)| k != key && vs.iter().any(|v| same(v, o)));
                    let again = texts[m..].iter().any(|t| {
                        t.lines()
                            .any(|line| line_has_value(line, &facts[i].value, true))
                    });
                    if elsewhere || again || facts[i].message >= m || facts[i].superseded.is_some()
                    {
                        continue;
                    }
                    facts[i].superseded = Some(Supersession {
                        by,
                        at: m,
                        change_phrase: None,
                    });
                }
            }
            current.extend(given);
        }
    }

    let session = Session {
        spec,
        messages,
        facts,
    };
    if let Err(e) = check(&session) {
        panic!("SGD fixture {name}: {e}");
    }
    session
}

/// A turn as a message. `calls` holds the ids of the calls made so far: a
/// `TOOL` turn answers the last one.
fn turn_message(t: &Turn, calls: &mut Vec<(String, String)>) -> IncomingMessage {
    let (role, parts) = match t.speaker.as_str() {
        "USER" => (Role::User, vec![Part::text(&t.utterance)]),
        "TOOL" => {
            let (call_id, tool_name) = calls
                .last()
                .cloned()
                .unwrap_or_else(|| ("call_0".to_owned(), "tool".to_owned()));
            let result = Part::ToolResult {
                call_id,
                tool_name,
                output: t.utterance.clone(),
                is_error: false,
                pruned: false,
            };
            (Role::Tool, vec![result])
        }
        _ => {
            let mut parts = Vec::new();
            if !t.utterance.is_empty() {
                parts.push(Part::text(&t.utterance));
            }
            if let Some(call) = &t.call {
                let id = format!("call_{:04}", calls.len() + 1);
                calls.push((id.clone(), call.tool.clone()));
                parts.push(Part::tool_call(id, &call.tool, call.input.clone()));
            }
            (Role::Assistant, parts)
        }
    };
    IncomingMessage {
        role,
        parts,
        pinned: false,
        client_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quality::sessions::Shape;

    /// The session of every dialogue of an inline `fixture`.
    fn whole(fixture: &Fixture) -> Session {
        let mut spec = SessionSpec::new(Shape::SgdTrain, 1);
        spec.messages = usize::MAX;
        from_fixture(spec, fixture, "inline")
    }

    #[test]
    fn slot_names_map_to_kinds() {
        assert_eq!(kind_of("phone_number"), Kind::Phone);
        assert_eq!(kind_of("venue_address"), Kind::Address);
        assert_eq!(kind_of("pickup_time"), Kind::DateTime);
        assert_eq!(kind_of("price_per_day"), Kind::Amount);
        assert_eq!(kind_of("destination_station_name"), Kind::Place);
        assert_eq!(kind_of("to"), Kind::Place);
        assert_eq!(kind_of("restaurant_name"), Kind::NamedEntity);
        assert_eq!(kind_of("cuisine"), Kind::Category);
        assert_eq!(kind_of("total"), Kind::Amount);
    }

    #[test]
    fn both_fixtures_make_checked_sessions() {
        for (shape, split) in [
            (Shape::SgdTrain, Split::Train),
            (Shape::SgdTest, Split::Test),
            (Shape::CrossWozTune, Split::CrossWozTune),
            (Shape::CrossWozHeldOut, Split::CrossWozHeldOut),
        ] {
            let fixture = split.fixture();
            let s = Session::generate(SessionSpec::new(shape, 1));
            assert_eq!(s.messages.len(), fixture.messages());
            assert!(
                (1_000..=1_400).contains(&s.messages.len()),
                "{shape:?}: {} messages",
                s.messages.len()
            );
            check(&s).unwrap();
            println!("{}", s.describe());
            assert!(s.facts.len() >= 100, "{shape:?}: {} facts", s.facts.len());
            assert!(s.count(|f| f.superseded.is_some()) >= 5, "{shape:?}");
            // Everything is in the history: an uncompacted context keeps all.
            let n = s.messages.len();
            let sc =
                crate::quality::score(&s, n, &crate::quality::ContextView::verbatim(&s.messages));
            assert_eq!(sc.values.kept, sc.values.total);
            assert_eq!(sc.superseded_shown, 0);
            // Shorter: whole dialogues only.
            let mut spec = SessionSpec::new(shape, 1);
            spec.messages = 400;
            let short = Session::generate(spec);
            assert!(short.messages.len() <= 400 && short.messages.len() > 300);
            check(&short).unwrap();
        }
    }

    #[test]
    fn a_user_change_supersedes_the_old_value() {
        let fixture: Fixture = serde_json::from_value(serde_json::json!({
            "source": "s", "commit": "c", "licence": "l", "split": "train",
            "dialogues": [{"id": "1", "file": "f", "services": ["Rest_1"], "turns": [
                {"speaker": "USER", "utterance": "A table in San Jose at 7 pm.",
                 "slots": [{"service": "Rest_1", "slot": "city", "value": "San Jose"},
                           {"service": "Rest_1", "slot": "time", "value": "7 pm"}]},
                {"speaker": "SYSTEM", "utterance": "Booked Sushi Zen in San Jose.",
                 "slots": [{"service": "Rest_1", "slot": "restaurant_name", "value": "Sushi Zen"}]},
                {"speaker": "USER", "utterance": "Sorry, make it Fremont.",
                 "slots": [{"service": "Rest_1", "slot": "city", "value": "Fremont"}]},
                {"speaker": "USER", "utterance": "And at 8 pm. Yes.",
                 "slots": [{"service": "Rest_1", "slot": "time", "value": "8 pm"},
                           {"service": "Rest_1", "slot": "x", "value": "Yes"}]},
                {"speaker": "SYSTEM", "utterance": "Done, 7 pm is gone.", "slots": []}
            ]}]
        }))
        .unwrap();
        let s = whole(&fixture);
        let get = |v: &str| s.facts.iter().find(|f| f.value == v).unwrap();
        assert_eq!(s.facts.len(), 5, "{:?}", s.facts);
        let old = get("San Jose").superseded.as_ref().unwrap();
        assert_eq!((old.at, s.facts[old.by].value.as_str()), (2, "Fremont"));
        assert!(get("7 pm").superseded.is_none(), "said again later");
        assert_eq!(get("Sushi Zen").source, Source::Assistant);
        assert_eq!(get("Sushi Zen").kind, Kind::NamedEntity);
    }

    #[test]
    fn a_tool_call_and_its_result_become_tool_messages() {
        let fixture: Fixture = serde_json::from_value(serde_json::json!({
            "source": "s", "commit": "c", "licence": "l", "split": "train",
            "dialogues": [{"id": "1", "file": "f", "services": ["bank"], "turns": [
                {"speaker": "USER", "utterance": "Send 158,76 € to ES83 7888 7182.",
                 "slots": [{"service": "bank", "slot": "amount", "value": "158,76 €"}]},
                {"speaker": "SYSTEM", "utterance": "",
                 "call": {"tool": "create_transfer", "input": {"amount": "158,76 €"}},
                 "slots": []},
                {"speaker": "TOOL", "utterance": "{\"transfer_id\": \"TR-701508\"}", "slots": []},
                {"speaker": "SYSTEM", "utterance": "Transfer TR-701508 is scheduled.",
                 "slots": [{"service": "bank", "slot": "transfer_id", "value": "TR-701508"}]}
            ]}]
        }))
        .unwrap();
        let s = whole(&fixture);
        let roles: Vec<Role> = s.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
        );
        let (
            Part::ToolCall { call_id, .. },
            Part::ToolResult {
                call_id: answers,
                output,
                ..
            },
        ) = (&s.messages[1].parts[0], &s.messages[2].parts[0])
        else {
            panic!("{:?}", s.messages);
        };
        assert_eq!(
            (call_id, output.as_str()),
            (answers, "{\"transfer_id\": \"TR-701508\"}")
        );
        // A value is found first where the tool returned it.
        let id = s.facts.iter().find(|f| f.value == "TR-701508").unwrap();
        assert_eq!(id.message, 2);
    }
}
