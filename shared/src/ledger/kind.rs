//! What an artifact is, who said it, and how much that counts.

use serde::{Deserialize, Serialize};

/// What an artifact is. The serialized names are stored in workstream
/// state: never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    /// A file system path (`src/main.rs`, `/etc/hosts`, `./run.sh`).
    Path,
    /// An http(s) URL.
    Url,
    /// A shell command line (from a shell tool call or a `$ ` / fenced line).
    Command,
    /// A code identifier: git SHAs, UUIDs, ticket keys (`ENG-123`), `#1234`.
    Identifier,
    /// An error code (`E0502`, `ENOENT`, `HTTP 503`, `OOMKilled`,
    /// `exit code 137`, `KeyError`).
    ErrorCode,
    /// A number with a unit that is not time (`512 MB`, `99.9%`, `8 cores`).
    Quantity,
    /// A value for a named setting (`MAX_RETRIES=5`, `billing.fx_cache = on`,
    /// "set the timeout to 37s"); the name is the artifact's `key`. A newer
    /// value for the same key supersedes the older one.
    Setting,
    /// A dotted config or flag name (`spark.executor.memory`).
    ConfigName,
    /// A version (`v2.14.3`, `1.8.0-rc.1`).
    Version,
    /// A host with a port, or an IPv4 address (`db-primary.internal:5432`).
    Host,
    /// A count of something (`48213 rows`, `3 of 412 tests`, `412 tests passed`).
    Count,
    /// A duration (`37s`, `1h30m`, `250 ms`, `2 weeks`).
    Duration,
    /// A booking, order, customer or case reference (`KD-5512-0937`,
    /// `#A-99812`, "PNR X7K2QB").
    Reference,
    /// An amount of money (`€249.99`, `USD 1,200`, `1.200,50 EUR`).
    Amount,
    /// A date or a time (`2026-03-14`, `Tue 3 Dec`, `09:30 CET`, `3:45 pm`).
    DateTime,
    /// A street line or a postcode with its city.
    Address,
    /// A phone number.
    Phone,
    /// An e-mail address.
    Email,
    /// A person's name, as given in the chat ("my name is Dana Whitfield").
    Person,
}

impl ArtifactKind {
    /// Every kind, in the order the ledger is rendered.
    pub const ALL: [ArtifactKind; 19] = [
        ArtifactKind::Person,
        ArtifactKind::Reference,
        ArtifactKind::Setting,
        ArtifactKind::Path,
        ArtifactKind::Url,
        ArtifactKind::Command,
        ArtifactKind::Identifier,
        ArtifactKind::ErrorCode,
        ArtifactKind::ConfigName,
        ArtifactKind::Version,
        ArtifactKind::Host,
        ArtifactKind::Count,
        ArtifactKind::Duration,
        ArtifactKind::Quantity,
        ArtifactKind::Amount,
        ArtifactKind::DateTime,
        ArtifactKind::Address,
        ArtifactKind::Phone,
        ArtifactKind::Email,
    ];

    /// Heading used when the ledger is rendered.
    pub fn title(self) -> &'static str {
        match self {
            ArtifactKind::Path => "Files",
            ArtifactKind::Url => "URLs",
            ArtifactKind::Command => "Commands",
            ArtifactKind::Identifier => "Identifiers",
            ArtifactKind::ErrorCode => "Error codes",
            ArtifactKind::Quantity => "Numbers",
            ArtifactKind::Setting => "Settings",
            ArtifactKind::ConfigName => "Config and flag names",
            ArtifactKind::Version => "Versions",
            ArtifactKind::Host => "Hosts",
            ArtifactKind::Count => "Counts",
            ArtifactKind::Duration => "Durations",
            ArtifactKind::Reference => "References (orders, bookings, customers, cases)",
            ArtifactKind::Amount => "Amounts",
            ArtifactKind::DateTime => "Dates and times",
            ArtifactKind::Address => "Addresses",
            ArtifactKind::Phone => "Phone numbers",
            ArtifactKind::Email => "E-mail addresses",
            ArtifactKind::Person => "People",
        }
    }
}

/// Who said a value: the role of its message and the type of its part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Text (or a file) of a user message.
    User,
    /// Text (or a file) of a system message.
    System,
    /// Text (or a file) of an assistant message.
    Assistant,
    /// The input of a tool call.
    ToolInput,
    /// The output of a tool call, failed or not (text of a `tool` message
    /// counts as output too).
    ToolOutput,
    /// Recorded before provenance was kept (state stored by an older
    /// version).
    #[default]
    Unknown,
}

/// How much a value counts when the ledger must drop some: what a person
/// stated outranks what was written or failed, which outranks what a
/// reading call answered in a few lines, which outranks what was only read
/// in bulk, which outranks one item of a listing. Ordered:
/// `Listed < Read < Answered < Written < Stated`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Salience {
    /// One of a list: a value of a kind that a reading call's output holds
    /// three or more of (the prices of every search result, the times of a
    /// calendar, the names of every passing test). It ranks below a value
    /// that a reading call answered alone.
    Listed,
    /// Only read: the output of calls that only read, and inputs of tools
    /// that only read (`read_file`, `grep`, `web_fetch`, …).
    Read,
    /// What a reading call answered in a few lines (`rustc --version`, the
    /// last three lines of a log, one row of a query): a brief output is
    /// what the call was made to learn, where the values of a long one are
    /// mostly incidental (the crate versions a test run prints).
    Answered,
    /// Written or failed: assistant text, inputs of tools that act, failed
    /// tool output, and what a user pasted (fenced code, very long text).
    /// Entries stored before salience was kept rank here: the old extractor
    /// read only text, tool inputs and the first line of errors.
    #[default]
    Written,
    /// Stated by the user (or the system prompt) in their own words.
    Stated,
}
