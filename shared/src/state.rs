//! Structured workstream state and the merge of the summarizer's deltas.
//!
//! The state carries what a summary paragraph tends to lose: decisions,
//! constraints, tasks with their status, open questions, risks, artifacts and
//! what each agent contributed. Each field is capped (the seed's limits) so
//! the state can be shown in every context without growing; within a field
//! the list is kept in recency order (oldest first) and eviction drops the
//! oldest *closed* items (done tasks, resolved questions) before the oldest
//! open ones, so a finished task is remembered as finished for as long as
//! there is room, instead of resurfacing as new work. What the current delta
//! brings is evicted last (its earliest items first, should the delta alone
//! exceed a cap).
//!
//! [`WorkstreamState::merge`] is deterministic and idempotent: merging the
//! same delta twice changes nothing, so a retried job cannot corrupt state.
//!
//! Beside the seven fields the state holds two records no summarizer
//! writes: the decisions and constraints the user stated
//! ([`UserStatements`]) and the evidence, lines of compacted messages kept
//! verbatim ([`Evidence`]). A delta cannot remove anything from them.
//! What the summarizer wrote is rendered in their light: an item that only
//! repeats a current user statement is not shown twice, and an item that
//! still states something the user superseded is marked so.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::evidence::Evidence;
use crate::stated::{superseded_marker, UserStatements};

/// One entry of a state field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateItem {
    /// Stable identifier when the summarizer gives one (e.g. `"T3"`); items
    /// without one are identified by their normalized text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub text: String,
    /// Free-form status, e.g. `open`, `in_progress`, `done`, `resolved`.
    /// See [`StateItem::is_closed`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl StateItem {
    pub fn new(text: impl Into<String>) -> StateItem {
        StateItem {
            id: None,
            text: text.into(),
            status: None,
        }
    }

    pub fn with_id(mut self, id: impl Into<String>) -> StateItem {
        self.id = Some(id.into());
        self
    }

    pub fn with_status(mut self, status: impl Into<String>) -> StateItem {
        self.status = Some(status.into());
        self
    }

    /// Closed items (finished, resolved, dropped) are evicted first.
    pub fn is_closed(&self) -> bool {
        self.status.as_deref().is_some_and(|s| {
            matches!(
                normalize(s).as_str(),
                "done"
                    | "completed"
                    | "complete"
                    | "resolved"
                    | "closed"
                    | "cancelled"
                    | "canceled"
                    | "dropped"
                    | "obsolete"
                    | "superseded"
                    | "answered"
            )
        })
    }
}

pub use crate::text::normalize;

/// Per-field caps (the seed's limits by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateCaps {
    pub key_decisions: usize,
    pub active_constraints: usize,
    pub tasks: usize,
    pub open_questions: usize,
    pub risks: usize,
    pub artifacts: usize,
    pub agent_contributions: usize,
}

impl Default for StateCaps {
    fn default() -> Self {
        StateCaps {
            key_decisions: 8,
            active_constraints: 6,
            tasks: 10,
            open_questions: 5,
            risks: 5,
            artifacts: 10,
            agent_contributions: 6,
        }
    }
}

/// The seven capped fields, shared by the state and its delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    KeyDecisions,
    ActiveConstraints,
    Tasks,
    OpenQuestions,
    Risks,
    Artifacts,
    AgentContributions,
}

impl Field {
    pub const ALL: [Field; 7] = [
        Field::KeyDecisions,
        Field::ActiveConstraints,
        Field::Tasks,
        Field::OpenQuestions,
        Field::Risks,
        Field::Artifacts,
        Field::AgentContributions,
    ];

    /// JSON name of the field (as in the delta the summarizer writes).
    pub fn name(self) -> &'static str {
        match self {
            Field::KeyDecisions => "key_decisions",
            Field::ActiveConstraints => "active_constraints",
            Field::Tasks => "tasks",
            Field::OpenQuestions => "open_questions",
            Field::Risks => "risks",
            Field::Artifacts => "artifacts",
            Field::AgentContributions => "agent_contributions",
        }
    }

    /// Heading used when the state is rendered for a model.
    pub fn title(self) -> &'static str {
        match self {
            Field::KeyDecisions => "Key decisions",
            Field::ActiveConstraints => "Active constraints",
            Field::Tasks => "Tasks",
            Field::OpenQuestions => "Open questions",
            Field::Risks => "Risks",
            Field::Artifacts => "Artifacts",
            Field::AgentContributions => "Agent contributions",
        }
    }

    pub fn cap(self, caps: &StateCaps) -> usize {
        match self {
            Field::KeyDecisions => caps.key_decisions,
            Field::ActiveConstraints => caps.active_constraints,
            Field::Tasks => caps.tasks,
            Field::OpenQuestions => caps.open_questions,
            Field::Risks => caps.risks,
            Field::Artifacts => caps.artifacts,
            Field::AgentContributions => caps.agent_contributions,
        }
    }
}

macro_rules! fields_struct {
    ($(#[$meta:meta])* $name:ident { $($extra:tt)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $name {
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub key_decisions: Vec<StateItem>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub active_constraints: Vec<StateItem>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub tasks: Vec<StateItem>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub open_questions: Vec<StateItem>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub risks: Vec<StateItem>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub artifacts: Vec<StateItem>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub agent_contributions: Vec<StateItem>,
            $($extra)*
        }

        impl $name {
            pub fn field(&self, field: Field) -> &Vec<StateItem> {
                match field {
                    Field::KeyDecisions => &self.key_decisions,
                    Field::ActiveConstraints => &self.active_constraints,
                    Field::Tasks => &self.tasks,
                    Field::OpenQuestions => &self.open_questions,
                    Field::Risks => &self.risks,
                    Field::Artifacts => &self.artifacts,
                    Field::AgentContributions => &self.agent_contributions,
                }
            }

            pub fn field_mut(&mut self, field: Field) -> &mut Vec<StateItem> {
                match field {
                    Field::KeyDecisions => &mut self.key_decisions,
                    Field::ActiveConstraints => &mut self.active_constraints,
                    Field::Tasks => &mut self.tasks,
                    Field::OpenQuestions => &mut self.open_questions,
                    Field::Risks => &mut self.risks,
                    Field::Artifacts => &mut self.artifacts,
                    Field::AgentContributions => &mut self.agent_contributions,
                }
            }
        }
    };
}

fields_struct!(
    /// Changes proposed by one summarization: items to add or update, per
    /// field. An item matching an existing one (same id, or same normalized
    /// text) updates it (text and status) and makes it the most recent.
    StateDelta {}
);

fields_struct!(
    /// The structured state of a workstream, stored as JSON beside the
    /// summary.
    WorkstreamState {
        /// Decisions and constraints the user stated, current and
        /// superseded (absent from states stored before it existed).
        #[serde(skip_serializing_if = "UserStatements::is_empty")]
        pub stated: UserStatements,
        /// Lines of compacted messages kept verbatim (absent from states
        /// stored before it existed).
        #[serde(skip_serializing_if = "Evidence::is_empty")]
        pub evidence: Evidence,
    }
);

impl StateDelta {
    pub fn is_empty(&self) -> bool {
        Field::ALL.iter().all(|&f| self.field(f).is_empty())
    }

    /// Items in all fields.
    pub fn len(&self) -> usize {
        Field::ALL.iter().map(|&f| self.field(f).len()).sum()
    }
}

impl WorkstreamState {
    /// Applies `delta`, then enforces `caps`. Deterministic and idempotent.
    pub fn merge(&mut self, delta: &StateDelta, caps: &StateCaps) {
        for field in Field::ALL {
            merge_field(self.field_mut(field), delta.field(field), field.cap(caps));
        }
    }

    /// Enforces `caps` without merging anything (e.g. after caps shrank).
    pub fn enforce_caps(&mut self, caps: &StateCaps) {
        for field in Field::ALL {
            evict(self.field_mut(field), field.cap(caps));
        }
    }

    /// Whether the seven fields are all empty (the user's statements and
    /// the evidence are not looked at).
    pub fn fields_empty(&self) -> bool {
        Field::ALL.iter().all(|&f| self.field(f).is_empty())
    }

    /// Renders the seven fields as a compact, stable text block (used in the
    /// compaction prompt and in the built context). Empty fields are skipped.
    ///
    /// Decisions and constraints that repeat a current statement of the user
    /// are left out (the user's statements are rendered on their own), and
    /// any item that still states what the user superseded says so.
    pub fn render(&self) -> String {
        let outdated = self.stated.outdated();
        let mut out = String::new();
        for field in Field::ALL {
            let user_owned = matches!(field, Field::KeyDecisions | Field::ActiveConstraints);
            let items: Vec<&StateItem> = self
                .field(field)
                .iter()
                .filter(|i| !(user_owned && self.stated.is_current_text(&i.text)))
                .collect();
            if items.is_empty() {
                continue;
            }
            out.push_str(field.title());
            out.push_str(":\n");
            for item in items {
                out.push_str("- ");
                if let Some(id) = &item.id {
                    out.push('[');
                    out.push_str(id);
                    out.push_str("] ");
                }
                out.push_str(&item.text);
                if let Some(status) = &item.status {
                    out.push_str(" (");
                    out.push_str(status);
                    out.push(')');
                }
                if let Some(by) = outdated.superseded_by(&item.text) {
                    out.push_str(&superseded_marker(by));
                }
                out.push('\n');
            }
        }
        out
    }
}

/// An item during a merge, with its normalized id and text computed once
/// (a delta of hundreds of items is compared against every item, and
/// normalizing on each comparison made merging quadratic in allocations).
struct Entry {
    item: StateItem,
    /// The order in which this delta touched it (None: not touched).
    /// Eviction uses it, see `evict_merged`.
    touched: Option<usize>,
    id_key: Option<String>,
    text_key: String,
}

impl Entry {
    fn new(item: StateItem, touched: Option<usize>) -> Entry {
        Entry {
            id_key: item.id.as_deref().map(normalize),
            text_key: normalize(&item.text),
            item,
            touched,
        }
    }

    /// The same item: the same id when both have one, else the same text
    /// (what [`Merging::remove_same_as`] removes by its indexes).
    #[cfg(test)]
    fn same_as(&self, other: &Entry) -> bool {
        match (&self.id_key, &other.id_key) {
            (Some(a), Some(b)) => a == b,
            _ => self.text_key == other.text_key,
        }
    }
}

fn merge_field(items: &mut Vec<StateItem>, delta: &[StateItem], cap: usize) {
    let mut list = Merging::new(items.drain(..));
    // Items that name their id are applied before items known only by their
    // text. A delta may rename an item by id and also mention it by its old
    // text; resolving ids first means the text-only mention is matched
    // against the state as the delta leaves it, which makes merging the same
    // delta a second time a no-op.
    let by_id = delta.iter().filter(|i| i.id.is_some());
    let by_text = delta.iter().filter(|i| i.id.is_none());
    for (seq, incoming) in by_id.chain(by_text).enumerate() {
        if incoming.text.trim().is_empty() && incoming.id.is_none() {
            continue;
        }
        let id_key = incoming.id.as_deref().map(normalize);
        let text_key = normalize(&incoming.text);
        // The item this one updates: the same id first; otherwise the most
        // recent item with the same text that could be it (no id on one
        // side). Most recent, so that a second merge picks the same item.
        let target = id_key
            .as_deref()
            .and_then(|id| list.first_with_id(id))
            .or_else(|| list.last_with_text(&text_key, incoming.id.is_none()));
        let merged = match target.and_then(|at| list.take(at)) {
            Some(mut entry) => {
                if !incoming.text.trim().is_empty() {
                    entry.item.text = incoming.text.trim().to_owned();
                    entry.text_key = text_key;
                }
                if incoming.status.is_some() {
                    entry.item.status = incoming.status.clone();
                }
                if entry.item.id.is_none() {
                    entry.item.id = incoming.id.clone();
                    entry.id_key = id_key;
                }
                entry.touched = Some(seq);
                entry
            }
            None => Entry {
                item: StateItem {
                    id: incoming.id.clone(),
                    text: incoming.text.trim().to_owned(),
                    status: incoming.status.clone(),
                },
                touched: Some(seq),
                id_key,
                text_key,
            },
        };
        // An update can make the item equal to another one (new text, or a
        // newly learnt id): it absorbs that one, so no item is listed twice.
        list.remove_same_as(&merged);
        list.push(merged);
    }
    let mut list = list.into_entries();
    evict_merged(&mut list, cap);
    items.extend(list.into_iter().map(|e| e.item));
}

/// A field's items during a merge, in order, with the places of each
/// normalized id and text: finding the item an incoming one updates, and
/// the items it absorbs, costs a lookup instead of a scan of the list (a
/// delta of thousands of items made a merge quadratic). Removed items
/// leave an empty slot, so places stay valid and the order of the rest is
/// the list's.
struct Merging {
    slots: Vec<Option<Entry>>,
    by_id: HashMap<String, BTreeSet<usize>>,
    by_text: HashMap<String, BTreeSet<usize>>,
}

impl Merging {
    fn new(items: impl Iterator<Item = StateItem>) -> Merging {
        let mut list = Merging {
            slots: Vec::new(),
            by_id: HashMap::new(),
            by_text: HashMap::new(),
        };
        for item in items {
            list.push(Entry::new(item, None));
        }
        list
    }

    fn push(&mut self, entry: Entry) {
        let at = self.slots.len();
        if let Some(id) = &entry.id_key {
            self.by_id.entry(id.clone()).or_default().insert(at);
        }
        self.by_text
            .entry(entry.text_key.clone())
            .or_default()
            .insert(at);
        self.slots.push(Some(entry));
    }

    /// The first item with the normalized id `id`.
    fn first_with_id(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).and_then(|at| at.first().copied())
    }

    /// The last item with the normalized text `text`; only one without an
    /// id unless `any_id`.
    fn last_with_text(&self, text: &str, any_id: bool) -> Option<usize> {
        let places = self.by_text.get(text)?;
        places
            .iter()
            .rev()
            .copied()
            .find(|&at| any_id || self.entry(at).is_some_and(|e| e.id_key.is_none()))
    }

    /// The item at `at`, unless it was taken out.
    fn entry(&self, at: usize) -> Option<&Entry> {
        self.slots.get(at).and_then(Option::as_ref)
    }

    /// Takes the item at `at` out of the list.
    fn take(&mut self, at: usize) -> Option<Entry> {
        let entry = self.slots.get_mut(at)?.take()?;
        if let Some(id) = &entry.id_key {
            unplace(&mut self.by_id, id, at);
        }
        unplace(&mut self.by_text, &entry.text_key, at);
        Some(entry)
    }

    /// Removes every item that is the same as `merged`: those with its id
    /// when both have one, those with its text when either has none.
    fn remove_same_as(&mut self, merged: &Entry) {
        let mut gone: Vec<usize> = Vec::new();
        if let Some(id) = &merged.id_key {
            gone.extend(self.by_id.get(id).into_iter().flatten());
        }
        if let Some(places) = self.by_text.get(&merged.text_key) {
            gone.extend(places.iter().copied().filter(|&at| {
                merged.id_key.is_none() || self.entry(at).is_some_and(|e| e.id_key.is_none())
            }));
        }
        for at in gone {
            self.take(at);
        }
    }

    fn into_entries(self) -> Vec<Entry> {
        self.slots.into_iter().flatten().collect()
    }
}

/// Forgets that the item at `at` has `key`.
fn unplace(index: &mut HashMap<String, BTreeSet<usize>>, key: &str, at: usize) {
    if let Some(places) = index.get_mut(key) {
        places.remove(&at);
        if places.is_empty() {
            index.remove(key);
        }
    }
}

/// Eviction after a merge: items the delta did not touch go first (closed
/// before open, oldest first); only if the delta alone is over the cap are
/// touched items dropped, in the order the delta applied them. Eviction
/// therefore depends on the delta, not on what the state happened to hold,
/// which keeps the merge idempotent.
fn evict_merged(list: &mut Vec<Entry>, cap: usize) {
    let mut excess = list.len().saturating_sub(cap);
    for closed_pass in [true, false] {
        list.retain(|e| {
            if excess > 0 && e.touched.is_none() && e.item.is_closed() == closed_pass {
                excess -= 1;
                false
            } else {
                true
            }
        });
    }
    if excess > 0 {
        let mut order: Vec<usize> = list.iter().filter_map(|e| e.touched).collect();
        order.sort_unstable();
        let cutoff = order.get(excess - 1).copied().unwrap_or(usize::MAX);
        list.retain(|e| e.touched.is_none_or(|t| t > cutoff));
    }
}

/// Drops the oldest closed items, then the oldest open ones, until `cap`.
fn evict(items: &mut Vec<StateItem>, cap: usize) {
    let mut excess = items.len().saturating_sub(cap);
    if excess == 0 {
        return;
    }
    let closed = items.iter().filter(|i| i.is_closed()).count();
    let mut drop_closed = excess.min(closed);
    excess -= drop_closed;
    items.retain(|i| {
        if drop_closed > 0 && i.is_closed() {
            drop_closed -= 1;
            false
        } else {
            true
        }
    });
    items.drain(..excess);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stated::{StatedCaps, UserStatements};

    /// The merge as it was written before [`Merging`]: a scan of the list
    /// for each incoming item. The indexed merge must give the same result.
    fn merge_field_by_scans(items: &mut Vec<StateItem>, delta: &[StateItem], cap: usize) {
        let mut list: Vec<Entry> = items.drain(..).map(|i| Entry::new(i, None)).collect();
        let by_id = delta.iter().filter(|i| i.id.is_some());
        let by_text = delta.iter().filter(|i| i.id.is_none());
        for (seq, incoming) in by_id.chain(by_text).enumerate() {
            if incoming.text.trim().is_empty() && incoming.id.is_none() {
                continue;
            }
            let target = incoming
                .id
                .as_ref()
                .and_then(|id| {
                    let id = normalize(id);
                    list.iter()
                        .position(|e| e.id_key.as_deref() == Some(id.as_str()))
                })
                .or_else(|| {
                    let text = normalize(&incoming.text);
                    list.iter().rposition(|e| {
                        (incoming.id.is_none() || e.item.id.is_none()) && e.text_key == text
                    })
                });
            let merged = match target {
                Some(at) => {
                    let mut existing = list.remove(at).item;
                    if !incoming.text.trim().is_empty() {
                        existing.text = incoming.text.trim().to_owned();
                    }
                    if incoming.status.is_some() {
                        existing.status = incoming.status.clone();
                    }
                    if existing.id.is_none() {
                        existing.id = incoming.id.clone();
                    }
                    existing
                }
                None => StateItem {
                    id: incoming.id.clone(),
                    text: incoming.text.trim().to_owned(),
                    status: incoming.status.clone(),
                },
            };
            let merged = Entry::new(merged, Some(seq));
            list.retain(|e| !e.same_as(&merged));
            list.push(merged);
        }
        evict_merged(&mut list, cap);
        items.extend(list.into_iter().map(|e| e.item));
    }

    /// Items from a small alphabet, so that ids and texts collide often:
    /// renames, absorbed duplicates, text-only mentions of items with ids.
    fn small_item() -> impl proptest::strategy::Strategy<Value = StateItem> {
        use proptest::prelude::*;
        (
            proptest::option::of(prop_oneof!["A-1", "a-1 ", "B-2", "C-3"]),
            prop_oneof!["use X", "Use  x.", "drop Y", "", "  ", "keep Z", "keep z!"],
            proptest::option::of(prop_oneof!["open", "done", "closed"]),
        )
            .prop_map(|(id, text, status)| StateItem { id, text, status })
    }

    proptest::proptest! {
        #[test]
        fn the_indexed_merge_is_the_merge_by_scans(
            state in proptest::collection::vec(small_item(), 0..12),
            delta in proptest::collection::vec(small_item(), 0..24),
            cap in 0usize..10,
        ) {
            let mut indexed = state.clone();
            merge_field(&mut indexed, &delta, cap);
            let mut scanned = state;
            merge_field_by_scans(&mut scanned, &delta, cap);
            proptest::prop_assert_eq!(indexed, scanned);
        }
    }

    fn texts(items: &[StateItem]) -> Vec<&str> {
        items.iter().map(|i| i.text.as_str()).collect()
    }

    #[test]
    fn duplicates_by_normalized_text_are_merged_and_move_to_the_end() {
        let mut state = WorkstreamState::default();
        let delta = StateDelta {
            key_decisions: vec![
                StateItem::new("Use Postgres."),
                StateItem::new("Ship on Friday"),
            ],
            ..Default::default()
        };
        state.merge(&delta, &StateCaps::default());
        let again = StateDelta {
            key_decisions: vec![StateItem::new("use   postgres")],
            ..Default::default()
        };
        state.merge(&again, &StateCaps::default());
        assert_eq!(
            texts(&state.key_decisions),
            ["Ship on Friday", "use   postgres"]
        );
    }

    #[test]
    fn a_task_update_by_id_changes_its_status_in_place() {
        let mut state = WorkstreamState::default();
        let caps = StateCaps::default();
        state.merge(
            &StateDelta {
                tasks: vec![StateItem::new("Write the migration")
                    .with_id("T1")
                    .with_status("open")],
                ..Default::default()
            },
            &caps,
        );
        state.merge(
            &StateDelta {
                tasks: vec![StateItem::new("").with_id("t1").with_status("done")],
                ..Default::default()
            },
            &caps,
        );
        assert_eq!(state.tasks.len(), 1);
        assert_eq!(state.tasks[0].text, "Write the migration");
        assert_eq!(state.tasks[0].status.as_deref(), Some("done"));
    }

    #[test]
    fn caps_evict_closed_items_of_the_history_first_then_the_oldest() {
        let caps = StateCaps {
            tasks: 3,
            ..Default::default()
        };
        let mut state = WorkstreamState::default();
        let history = StateDelta {
            tasks: vec![
                StateItem::new("a").with_status("open"),
                StateItem::new("b").with_status("done"),
                StateItem::new("c"),
            ],
            ..Default::default()
        };
        state.merge(&history, &caps);
        let one_more = StateDelta {
            tasks: vec![StateItem::new("d")],
            ..Default::default()
        };
        state.merge(&one_more, &caps);
        assert_eq!(
            texts(&state.tasks),
            ["a", "c", "d"],
            "closed b goes before older open a"
        );
        let two_more = StateDelta {
            tasks: vec![StateItem::new("e"), StateItem::new("f")],
            ..Default::default()
        };
        state.merge(&two_more, &caps);
        assert_eq!(texts(&state.tasks), ["d", "e", "f"]);
    }

    #[test]
    fn a_delta_over_the_cap_keeps_its_latest_items() {
        let caps = StateCaps {
            tasks: 3,
            ..Default::default()
        };
        let mut state = WorkstreamState::default();
        let delta = StateDelta {
            tasks: ["a", "b", "c", "d", "e"].map(StateItem::new).to_vec(),
            ..Default::default()
        };
        state.merge(&delta, &caps);
        assert_eq!(texts(&state.tasks), ["c", "d", "e"]);
    }

    #[test]
    fn every_seed_cap_is_enforced() {
        let caps = StateCaps::default();
        let many: Vec<StateItem> = (0..30)
            .map(|i| StateItem::new(format!("item {i}")))
            .collect();
        let delta = StateDelta {
            key_decisions: many.clone(),
            active_constraints: many.clone(),
            tasks: many.clone(),
            open_questions: many.clone(),
            risks: many.clone(),
            artifacts: many.clone(),
            agent_contributions: many,
        };
        let mut state = WorkstreamState::default();
        state.merge(&delta, &caps);
        let lens: Vec<usize> = Field::ALL.iter().map(|&f| state.field(f).len()).collect();
        assert_eq!(lens, [8, 6, 10, 5, 5, 10, 6]);
        assert_eq!(
            state.key_decisions.last().unwrap().text,
            "item 29",
            "most recent wins"
        );
    }

    #[test]
    fn merging_the_same_delta_twice_changes_nothing() {
        let caps = StateCaps::default();
        let mut state = WorkstreamState::default();
        state.merge(
            &StateDelta {
                risks: vec![StateItem::new("old risk")],
                ..Default::default()
            },
            &caps,
        );
        let delta = StateDelta {
            risks: vec![
                StateItem::new("r1"),
                StateItem::new("R1"),
                StateItem::new("r2"),
            ],
            ..Default::default()
        };
        state.merge(&delta, &caps);
        let once = state.clone();
        state.merge(&delta, &caps);
        assert_eq!(state, once);
    }

    fn user_said(stated: &mut UserStatements, lines: &[(i64, &str)]) {
        for &(id, text) in lines {
            let m = crate::message::Message::text(id, crate::message::Role::User, text);
            stated.record(
                crate::stated::extract(&[m]),
                &StatedCaps::default(),
                crate::evidence::EvidenceConfig::default().scope_messages,
            );
        }
    }

    #[test]
    fn a_state_stored_before_user_statements_existed_still_reads() {
        // Versions before the evidence also wrote an artifact ledger: its
        // key is read and ignored, and not written again.
        let old = r#"{"key_decisions":[{"text":"Use Postgres"}],"ledger":[{"kind":"path","value":"src/a.rs","first_seen":2,"last_seen":3,"source":"user","salience":"stated"}]}"#;
        let state: WorkstreamState = serde_json::from_str(old).unwrap();
        assert!(state.stated.is_empty());
        assert_eq!(state.key_decisions[0].text, "Use Postgres");
        let written = serde_json::to_string(&state).unwrap();
        assert_eq!(
            written, r#"{"key_decisions":[{"text":"Use Postgres"}]}"#,
            "nothing added or carried over on write"
        );
    }

    #[test]
    fn user_statements_round_trip_with_the_state() {
        let mut state = WorkstreamState::default();
        user_said(
            &mut state.stated,
            &[(1, "Ship on Friday."), (2, "Ship on Monday instead.")],
        );
        let json = serde_json::to_string(&state).unwrap();
        assert!(
            json.starts_with(r#"{"stated":[{"kind":"request""#),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<WorkstreamState>(&json).unwrap(),
            state
        );
    }

    #[test]
    fn a_delta_cannot_remove_or_override_a_user_statement() {
        let caps = StateCaps {
            key_decisions: 2,
            active_constraints: 1,
            ..Default::default()
        };
        let mut state = WorkstreamState::default();
        user_said(
            &mut state.stated,
            &[
                (1, "Never push to main."),
                (2, "Use Postgres for the ledger."),
            ],
        );
        let before = state.stated.clone();
        let delta = StateDelta {
            key_decisions: ["a", "b", "c"].map(StateItem::new).to_vec(),
            active_constraints: vec![
                StateItem::new("x"),
                StateItem::new("Never push to main.").with_status("done"),
            ],
            ..Default::default()
        };
        state.merge(&delta, &caps);
        state.enforce_caps(&caps);
        assert_eq!(state.stated, before);
        let text = state.render();
        assert!(
            !text.contains("Never push to main"),
            "shown once, by the user's block:\n{text}"
        );
    }

    #[test]
    fn summarizer_items_that_state_a_superseded_value_are_marked() {
        let mut state = WorkstreamState::default();
        user_said(
            &mut state.stated,
            &[
                (1, "Set the request timeout to 37s."),
                (9, "make the timeout 45s"),
            ],
        );
        state.merge(
            &StateDelta {
                key_decisions: vec![
                    StateItem::new("Request timeout is 37s"),
                    StateItem::new("Timeout is 45s"),
                ],
                active_constraints: vec![StateItem::new("Set the request timeout to 37s.")],
                ..Default::default()
            },
            &StateCaps::default(),
        );
        let text = state.render();
        for line in text.lines().filter(|l| l.contains("37s")) {
            assert!(line.ends_with("[superseded by the user at #9]"), "{line}");
        }
        assert!(text.contains("- Timeout is 45s\n"), "{text}");
    }

    #[test]
    fn state_serde_round_trips_and_omits_empty_fields() {
        let mut state = WorkstreamState::default();
        state.merge(
            &StateDelta {
                open_questions: vec![StateItem::new("Which region?").with_id("Q1")],
                ..Default::default()
            },
            &StateCaps::default(),
        );
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(
            json,
            r#"{"open_questions":[{"id":"Q1","text":"Which region?"}]}"#
        );
        assert_eq!(
            serde_json::from_str::<WorkstreamState>(&json).unwrap(),
            state
        );
    }
}
