//! What a generated session is: its messages and the facts planted in them,
//! and the [`Builder`] the session generators write with.
//!
//! A fact records what it is ([`Kind`], [`Class`]) and what the generator
//! intended ([`Source`]); where it really is (first message, source) is
//! *measured* on the finished messages by [`Builder::finish`], and a
//! mismatch is a generator bug that panics. So the benchmark never scores a
//! fact that is not in the conversation, and a "tool-output-only" value is
//! never in anyone's words.

use std::collections::BTreeSet;
use std::ops::Range;

use compactor_producer::client::IncomingMessage;
use compactor_shared::{Part, Role};
use serde::Serialize;

use super::score::{contains_value, line_has_value};

/// The kind of a planted value (what an engine has to recognize to keep
/// it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Path,
    Command,
    /// Commit SHAs, UUIDs, ticket and incident keys.
    Identifier,
    ErrorCode,
    Url,
    /// Counts and amounts of things (`48213` rows, `412` tests, `512Mi`).
    Quantity,
    /// Dotted config or flag names (`billing.invoice_v2_fx_cache`).
    ConfigName,
    /// `UPPER_SNAKE=value` settings.
    Setting,
    /// Semantic versions.
    Version,
    HostPort,
    Duration,
    /// Booking, order, refund and customer references of any shape.
    Reference,
    /// Money with its currency.
    Amount,
    /// Dates, and times with their zone.
    DateTime,
    Address,
    Phone,
    Email,
    /// People's names as the user gives them.
    PersonName,
    /// A plain-words marker of a decision or constraint ("vegetarian").
    Phrase,
    /// Cities, areas, stations, airports, venues (third-party data's slots).
    Place,
    /// Names of restaurants, films, songs, artists, events, people…
    NamedEntity,
    /// Cuisines, genres, categories.
    Category,
    /// Any other slot value of third-party data.
    Slot,
}

impl Kind {
    pub const ALL: [Kind; 23] = [
        Kind::Path,
        Kind::Command,
        Kind::Identifier,
        Kind::ErrorCode,
        Kind::Url,
        Kind::Quantity,
        Kind::ConfigName,
        Kind::Setting,
        Kind::Version,
        Kind::HostPort,
        Kind::Duration,
        Kind::Reference,
        Kind::Amount,
        Kind::DateTime,
        Kind::Address,
        Kind::Phone,
        Kind::Email,
        Kind::PersonName,
        Kind::Phrase,
        Kind::Place,
        Kind::NamedEntity,
        Kind::Category,
        Kind::Slot,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Path => "path",
            Kind::Command => "command",
            Kind::Identifier => "identifier",
            Kind::ErrorCode => "error_code",
            Kind::Url => "url",
            Kind::Quantity => "quantity",
            Kind::ConfigName => "config_name",
            Kind::Setting => "setting",
            Kind::Version => "version",
            Kind::HostPort => "host_port",
            Kind::Duration => "duration",
            Kind::Reference => "reference",
            Kind::Amount => "amount",
            Kind::DateTime => "date_time",
            Kind::Address => "address",
            Kind::Phone => "phone",
            Kind::Email => "email",
            Kind::PersonName => "person_name",
            Kind::Phrase => "phrase",
            Kind::Place => "place",
            Kind::NamedEntity => "named_entity",
            Kind::Category => "category",
            Kind::Slot => "other_slot",
        }
    }
}

/// What a planted fact is to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// An exact value that must survive verbatim.
    Value,
    /// A user's decision ("we'll go with SQLite"); its value is the
    /// distinctive part of it, matched case-insensitively.
    Decision,
    /// A user's constraint ("never touch billing-prod-eu1").
    Constraint,
}

impl Class {
    pub fn is_statement(self) -> bool {
        !matches!(self, Class::Value)
    }

    pub fn name(self) -> &'static str {
        match self {
            Class::Value => "value",
            Class::Decision => "decision",
            Class::Constraint => "constraint",
        }
    }
}

/// Where a fact appears, the most salient place first: a value the user
/// said is `User` even if a tool echoes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    User,
    Assistant,
    /// In a tool call's input (and maybe its output), in nobody's words.
    ToolInput,
    /// Only inside tool results.
    ToolOutputOnly,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Assistant => "assistant",
            Source::ToolInput => "tool input",
            Source::ToolOutputOnly => "tool output only",
        }
    }
}

/// How a decision or constraint was replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Supersession {
    /// Index (in [`Session::facts`]) of the fact that replaced it.
    pub by: usize,
    /// Index of the message that replaced it (the new fact's first).
    pub at: usize,
    /// Words of the replacing statement that name the old value ("Scrap
    /// SQLite"): a line carrying them shows the old value as replaced, not
    /// as current.
    pub change_phrase: Option<String>,
}

/// One planted fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fact {
    /// The exact string looked for (case-insensitively for statements).
    pub value: String,
    pub kind: Kind,
    pub class: Class,
    pub source: Source,
    /// Index of the first message that carries it.
    pub message: usize,
    pub superseded: Option<Supersession>,
}

impl Fact {
    /// Whether the fact is in the first `appended` messages.
    pub fn planted_within(&self, appended: usize) -> bool {
        self.message < appended
    }

    /// Whether it has been replaced within the first `appended` messages.
    pub fn superseded_within(&self, appended: usize) -> bool {
        self.superseded.as_ref().is_some_and(|s| s.at < appended)
    }

    /// Statements match case-insensitively (an engine may write
    /// "Vegetarian"); exact values never do.
    pub fn fold_case(&self) -> bool {
        self.class.is_statement()
    }
}

/// The shapes of session the benchmark runs: generated ones, and
/// third-party data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A coding agent with tools: bash, read_file, edit_file, grep, kubectl.
    Coding,
    /// A customer-support / personal-assistant chat of many short turns.
    Support,
    /// Schema-Guided Dialogue task dialogues, the train split (tuning).
    SgdTrain,
    /// Schema-Guided Dialogue task dialogues, the test split (held out).
    SgdTest,
    /// CrossWOZ Chinese task dialogues, the val split (tuning).
    CrossWozTune,
    /// CrossWOZ Chinese task dialogues, the test split (held out).
    CrossWozHeldOut,
    /// A real Claude Code session (tuning).
    ClaudeCodeTune,
    /// Another real Claude Code session (held out).
    ClaudeCodeHeldOut,
}

impl Shape {
    /// The generated shapes (a seed changes them).
    pub const ALL: [Shape; 2] = [Shape::Coding, Shape::Support];
    /// The shapes made of third-party data (fixed; the seed is unused).
    pub const DATA: [Shape; 6] = [
        Shape::SgdTrain,
        Shape::SgdTest,
        Shape::CrossWozTune,
        Shape::CrossWozHeldOut,
        Shape::ClaudeCodeTune,
        Shape::ClaudeCodeHeldOut,
    ];
    /// Every shape, as the benchmark runs them by default.
    pub const EVERY: [Shape; 8] = [
        Shape::Coding,
        Shape::Support,
        Shape::SgdTrain,
        Shape::SgdTest,
        Shape::CrossWozTune,
        Shape::CrossWozHeldOut,
        Shape::ClaudeCodeTune,
        Shape::ClaudeCodeHeldOut,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Shape::Coding => "coding",
            Shape::Support => "support",
            Shape::SgdTrain => "sgd-train",
            Shape::SgdTest => "sgd-test",
            Shape::CrossWozTune => "crosswoz-tune",
            Shape::CrossWozHeldOut => "crosswoz-held-out",
            Shape::ClaudeCodeTune => "claude-code-tune",
            Shape::ClaudeCodeHeldOut => "claude-code-held-out",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Shape::Coding => "coding agent with tools",
            Shape::Support => "support / assistant chat",
            Shape::SgdTrain => "SGD task dialogues (train: tuning)",
            Shape::SgdTest => "SGD task dialogues (test: held-out)",
            Shape::CrossWozTune => "CrossWOZ Chinese task dialogues (val: tuning)",
            Shape::CrossWozHeldOut => "CrossWOZ Chinese task dialogues (test: held-out)",
            Shape::ClaudeCodeTune => "real Claude Code session (tuning)",
            Shape::ClaudeCodeHeldOut => "real Claude Code session (held-out)",
        }
    }

    /// Whether the session is third-party data, not generated.
    pub fn is_data(self) -> bool {
        Shape::DATA.contains(&self)
    }

    /// The default length of a session of this shape (all of a fixture).
    pub fn default_messages(self) -> usize {
        match self {
            Shape::Coding => 1_600,
            Shape::Support => 1_200,
            Shape::SgdTrain | Shape::SgdTest | Shape::CrossWozTune | Shape::CrossWozHeldOut => {
                self.dialogue_split().map_or(0, |s| s.fixture().messages())
            }
            Shape::ClaudeCodeTune => super::claude_code::Split::Tune.fixture().messages.len(),
            Shape::ClaudeCodeHeldOut => super::claude_code::Split::HeldOut.fixture().messages.len(),
        }
    }

    /// Where a data shape comes from (`None` for generated ones).
    pub fn provenance(self) -> Option<String> {
        let (path, what) = match self {
            Shape::SgdTrain | Shape::SgdTest | Shape::CrossWozTune | Shape::CrossWozHeldOut => {
                let split = self.dialogue_split()?;
                if let Some(file) = split.override_var().and_then(std::env::var_os) {
                    let what = split.fixture().provenance();
                    return Some(format!(
                        "{} (in place of tests/{}): {what}",
                        file.to_string_lossy(),
                        split.path()
                    ));
                }
                (split.path(), split.fixture().provenance())
            }
            Shape::ClaudeCodeTune | Shape::ClaudeCodeHeldOut => {
                let split = if self == Shape::ClaudeCodeTune {
                    super::claude_code::Split::Tune
                } else {
                    super::claude_code::Split::HeldOut
                };
                (split.path(), split.fixture().provenance())
            }
            Shape::Coding | Shape::Support => return None,
        };
        Some(format!("tests/{path}: {what}"))
    }

    /// The task-dialogue fixture a shape is made of.
    fn dialogue_split(self) -> Option<super::sgd::Split> {
        use super::sgd::Split;
        match self {
            Shape::SgdTrain => Some(Split::Train),
            Shape::SgdTest => Some(Split::Test),
            Shape::CrossWozTune => Some(Split::CrossWozTune),
            Shape::CrossWozHeldOut => Some(Split::CrossWozHeldOut),
            _ => None,
        }
    }

    pub fn parse(name: &str) -> Option<Shape> {
        Shape::EVERY.into_iter().find(|s| s.name() == name)
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSpec {
    pub shape: Shape,
    /// Everything random (values, noise, positions) derives from it.
    pub seed: u64,
    /// Target length; a session is never shorter than its planted
    /// episodes need.
    pub messages: usize,
}

impl SessionSpec {
    pub fn new(shape: Shape, seed: u64) -> SessionSpec {
        SessionSpec {
            shape,
            seed,
            messages: shape.default_messages(),
        }
    }
}

/// A generated session.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub spec: SessionSpec,
    pub messages: Vec<IncomingMessage>,
    pub facts: Vec<Fact>,
}

impl Session {
    /// Generates the session `spec` describes (deterministic).
    pub fn generate(spec: SessionSpec) -> Session {
        match spec.shape {
            Shape::Coding => super::coding::generate(spec),
            Shape::Support => super::support::generate(spec),
            Shape::SgdTrain | Shape::SgdTest | Shape::CrossWozTune | Shape::CrossWozHeldOut => {
                match spec.shape.dialogue_split() {
                    Some(split) => super::sgd::session(spec, split),
                    None => unreachable!("a task-dialogue shape has its split"),
                }
            }
            Shape::ClaudeCodeTune => {
                super::claude_code::session(spec, super::claude_code::Split::Tune)
            }
            Shape::ClaudeCodeHeldOut => {
                super::claude_code::session(spec, super::claude_code::Split::HeldOut)
            }
        }
    }

    /// `rounds` consecutive slices of about equal length covering every
    /// message; each starts at a user message (a new turn), so no slice
    /// ends between a tool call and its result.
    pub fn slices(&self, rounds: usize) -> Vec<Range<usize>> {
        let n = self.messages.len();
        let rounds = rounds.max(1);
        let mut cuts = vec![0];
        for k in 1..rounds {
            let mut at = (n * k / rounds).max(cuts[cuts.len() - 1] + 1);
            while at < n && self.messages[at].role != Role::User {
                at += 1;
            }
            if at < n {
                cuts.push(at);
            }
        }
        cuts.push(n);
        cuts.windows(2).map(|w| w[0]..w[1]).collect()
    }

    /// Facts of `class`.
    pub fn count(&self, pred: impl Fn(&Fact) -> bool) -> usize {
        self.facts.iter().filter(|f| pred(f)).count()
    }

    /// One line saying what the session holds.
    pub fn describe(&self) -> String {
        let values = self.count(|f| f.class == Class::Value);
        let tool_only =
            self.count(|f| f.class == Class::Value && f.source == Source::ToolOutputOnly);
        let statements = self.count(|f| f.class.is_statement());
        let superseded = self.count(|f| f.superseded.is_some());
        let from = self
            .spec
            .shape
            .provenance()
            .unwrap_or_else(|| format!("seed {}", self.spec.seed));
        if self.spec.shape.is_data() {
            let values_superseded =
                self.count(|f| f.class == Class::Value && f.superseded.is_some());
            return format!(
                "{} ({from}): {} messages, {} facts taken from the data (its annotations, or rules fixed before scoring): {values} exact values \
                 ({values_superseded} superseded later)",
                self.spec.shape.title(),
                self.messages.len(),
                self.facts.len(),
            );
        }
        format!(
            "{} ({from}): {} messages, {} planted facts: {values} exact values ({tool_only} only in tool output), \
             {statements} decisions/constraints ({superseded} superseded later)",
            self.spec.shape.title(),
            self.messages.len(),
            self.facts.len(),
        )
    }
}

/// Where in a message a piece of text sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    UserText,
    AssistantText,
    ToolInput,
    ToolOutput,
}

/// The searchable pieces of a message.
fn pieces(m: &IncomingMessage) -> Vec<(Place, String)> {
    m.parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some((
                if m.role == Role::User {
                    Place::UserText
                } else {
                    Place::AssistantText
                },
                text.clone(),
            )),
            Part::ToolCall { input, .. } => Some((Place::ToolInput, input.to_string())),
            Part::ToolResult { output, .. } => Some((Place::ToolOutput, output.clone())),
            Part::File { uri, .. } => Some((Place::ToolInput, uri.clone())),
            Part::Reasoning { .. } => None,
        })
        .collect()
}

/// Where `value` first is in `messages` (as a whole token) and its most
/// salient source, as [`Builder::finish`] measures a planted fact; `None`
/// when it is in no message.
pub fn locate(messages: &[IncomingMessage], value: &str, fold: bool) -> Option<(usize, Source)> {
    let mut first = None;
    let mut places = BTreeSet::new();
    for (i, m) in messages.iter().enumerate() {
        for (place, text) in pieces(m) {
            if contains_value(&text, value, fold) {
                first.get_or_insert(i);
                places.insert(place as u8);
            }
        }
    }
    let source = if places.contains(&(Place::UserText as u8)) {
        Source::User
    } else if places.contains(&(Place::AssistantText as u8)) {
        Source::Assistant
    } else if places.contains(&(Place::ToolInput as u8)) {
        Source::ToolInput
    } else {
        Source::ToolOutputOnly
    };
    first.map(|i| (i, source))
}

/// Tiny deterministic PRNG (xorshift64*): the same session on every run and
/// every platform, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Never zero; seeds that differ by one give unrelated streams.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// In `0..n` (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// In `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    pub fn pick<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items[self.below(items.len())]
    }

    /// True `percent` % of the time.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    /// `n` lowercase hex digits.
    pub fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16)]))
            .collect()
    }

    /// `n` decimal digits, the first not zero.
    pub fn digits(&mut self, n: usize) -> String {
        (0..n)
            .map(|i| {
                let d = if i == 0 {
                    1 + self.below(9)
                } else {
                    self.below(10)
                };
                char::from(b'0' + d as u8)
            })
            .collect()
    }

    /// `n` uppercase letters and digits, no look-alikes (0/O, 1/I).
    pub fn code(&mut self, n: usize) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        (0..n)
            .map(|_| char::from(ALPHABET[self.below(ALPHABET.len())]))
            .collect()
    }

    /// A random v4-shaped UUID.
    pub fn uuid(&mut self) -> String {
        let variant = char::from(b"89ab"[self.below(4)]);
        format!(
            "{}-{}-4{}-{variant}{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            self.hex(3),
            self.hex(12)
        )
    }
}

/// A fact as declared by a generator, before it is located.
struct Planned {
    value: String,
    kind: Kind,
    class: Class,
    source: Source,
    superseded: Option<(String, Option<String>)>,
}

/// Writes a session: messages, and facts declared as they are written.
pub struct Builder {
    pub rng: Rng,
    messages: Vec<IncomingMessage>,
    planned: Vec<Planned>,
    calls: u32,
}

impl Builder {
    pub fn new(seed: u64) -> Builder {
        Builder {
            rng: Rng::new(seed),
            messages: Vec::new(),
            planned: Vec::new(),
            calls: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn user(&mut self, text: impl Into<String>) {
        self.messages
            .push(IncomingMessage::text(Role::User, text.into()));
    }

    pub fn assistant(&mut self, text: impl Into<String>) {
        self.messages
            .push(IncomingMessage::text(Role::Assistant, text.into()));
    }

    /// The assistant (optionally saying something first) calls `tool` with
    /// `input`, and its result comes back in a tool message.
    pub fn tool(
        &mut self,
        say: Option<&str>,
        tool: &str,
        input: serde_json::Value,
        output: impl Into<String>,
    ) {
        self.tool_result(say, tool, input, output.into(), false);
    }

    /// As [`Builder::tool`], the result flagged as an error.
    pub fn tool_error(
        &mut self,
        say: Option<&str>,
        tool: &str,
        input: serde_json::Value,
        output: impl Into<String>,
    ) {
        self.tool_result(say, tool, input, output.into(), true);
    }

    fn tool_result(
        &mut self,
        say: Option<&str>,
        tool: &str,
        input: serde_json::Value,
        output: String,
        is_error: bool,
    ) {
        self.calls += 1;
        let call_id = format!("call_{:04}", self.calls);
        let mut parts = Vec::new();
        if let Some(text) = say {
            parts.push(Part::text(text));
        }
        parts.push(Part::tool_call(call_id.clone(), tool, input));
        self.messages.push(IncomingMessage {
            role: Role::Assistant,
            parts,
            pinned: false,
            client_id: None,
        });
        self.messages.push(IncomingMessage {
            role: Role::Tool,
            parts: vec![Part::ToolResult {
                call_id,
                tool_name: tool.to_owned(),
                output,
                is_error,
                pruned: false,
            }],
            pinned: false,
            client_id: None,
        });
    }

    /// Declares an exact value (written into messages by the caller);
    /// returns it.
    pub fn value(&mut self, kind: Kind, source: Source, value: impl Into<String>) -> String {
        self.plan(kind, Class::Value, source, value.into())
    }

    /// Declares a user's decision, by its distinctive part.
    pub fn decision(&mut self, kind: Kind, value: impl Into<String>) -> String {
        self.plan(kind, Class::Decision, Source::User, value.into())
    }

    /// Declares a user's constraint, by its distinctive part.
    pub fn constraint(&mut self, kind: Kind, value: impl Into<String>) -> String {
        self.plan(kind, Class::Constraint, Source::User, value.into())
    }

    fn plan(&mut self, kind: Kind, class: Class, source: Source, value: String) -> String {
        self.planned.push(Planned {
            value: value.clone(),
            kind,
            class,
            source,
            superseded: None,
        });
        value
    }

    /// Declares that statement `new` replaces statement `old`;
    /// `change_phrase` is what of the replacing message names the old value
    /// ("Scrap SQLite"), if anything does.
    pub fn supersede(&mut self, old: &str, new: &str, change_phrase: Option<&str>) {
        let p = self
            .planned
            .iter_mut()
            .find(|p| p.value == old)
            .unwrap_or_else(|| panic!("generator bug: superseding undeclared {old:?}"));
        p.superseded = Some((new.to_owned(), change_phrase.map(str::to_owned)));
    }

    /// Locates every declared fact and checks the session's promises;
    /// panics on a generator bug.
    pub fn finish(self, spec: SessionSpec) -> Session {
        let Builder {
            messages, planned, ..
        } = self;
        let texts: Vec<Vec<(Place, String)>> = messages.iter().map(pieces).collect();
        let mut facts: Vec<Fact> = planned
            .iter()
            .map(|p| {
                let fold = p.class.is_statement();
                let mut first = None;
                let mut places = BTreeSet::new();
                for (i, ps) in texts.iter().enumerate() {
                    for (place, text) in ps {
                        if contains_value(text, &p.value, fold) {
                            first.get_or_insert(i);
                            places.insert(*place as u8);
                        }
                    }
                }
                let message = first.unwrap_or_else(|| {
                    panic!("generator bug: planted {:?} is in no message", p.value)
                });
                let source = if places.contains(&(Place::UserText as u8)) {
                    Source::User
                } else if places.contains(&(Place::AssistantText as u8)) {
                    Source::Assistant
                } else if places.contains(&(Place::ToolInput as u8)) {
                    Source::ToolInput
                } else {
                    Source::ToolOutputOnly
                };
                assert!(
                    !p.class.is_statement() || messages[message].role == Role::User,
                    "generator bug: statement {:?} is first said by someone other than the user",
                    p.value
                );
                assert_eq!(
                    source, p.source,
                    "generator bug: {:?} was declared {:?}, found {:?}",
                    p.value, p.source, source
                );
                Fact {
                    value: p.value.clone(),
                    kind: p.kind,
                    class: p.class,
                    source,
                    message,
                    superseded: None,
                }
            })
            .collect();
        for (i, p) in planned.iter().enumerate() {
            let Some((new, phrase)) = &p.superseded else {
                continue;
            };
            let by = facts
                .iter()
                .position(|f| &f.value == new)
                .unwrap_or_else(|| {
                    panic!(
                        "generator bug: {new:?} replaces {:?} but is undeclared",
                        p.value
                    )
                });
            let at = facts[by].message;
            assert!(
                at > facts[i].message,
                "generator bug: {new:?} replaces {:?} before it was said",
                p.value
            );
            facts[i].superseded = Some(Supersession {
                by,
                at,
                change_phrase: phrase.clone(),
            });
        }
        let session = Session {
            spec,
            messages,
            facts,
        };
        if let Err(e) = check(&session) {
            panic!("generator bug: {e}");
        }
        session
    }
}

/// What a session promises the benchmark: every fact is where it says it
/// is; values are distinct; a superseded statement is never repeated as
/// current after it was replaced (only on a line that names the change).
pub fn check(session: &Session) -> Result<(), String> {
    let texts: Vec<Vec<(Place, String)>> = session.messages.iter().map(pieces).collect();
    for f in &session.facts {
        let found = texts[f.message]
            .iter()
            .any(|(_, t)| contains_value(t, &f.value, f.fold_case()));
        if !found {
            return Err(format!("{:?} is not in message {}", f.value, f.message));
        }
        if texts[..f.message]
            .iter()
            .flatten()
            .any(|(_, t)| contains_value(t, &f.value, f.fold_case()))
        {
            return Err(format!(
                "{:?} appears before message {}",
                f.value, f.message
            ));
        }
        if let Some(s) = &f.superseded {
            for (i, ps) in texts.iter().enumerate().skip(s.at) {
                for (_, t) in ps {
                    for line in t.lines() {
                        if !line_has_value(line, &f.value, true) {
                            continue;
                        }
                        let named = s
                            .change_phrase
                            .as_deref()
                            .is_some_and(|c| line.to_lowercase().contains(&c.to_lowercase()));
                        if i > s.at || !named {
                            return Err(format!(
                                "superseded {:?} repeated in message {i}: {line:?}",
                                f.value
                            ));
                        }
                    }
                }
            }
        }
    }
    for (i, a) in session.facts.iter().enumerate() {
        for b in &session.facts[i + 1..] {
            if a.value.eq_ignore_ascii_case(&b.value) {
                return Err(format!("{:?} is planted twice", a.value));
            }
        }
    }
    Ok(())
}
