//! The two lanes of waiting jobs. Manual and reactive requests (and the
//! follow-ups they make) wait in the urgent lane, automatic ones (and
//! theirs) in the normal lane; a claim takes due jobs of the urgent lane
//! before any of the normal lane's, so a backlog of automatic jobs, from
//! one domain or many, never delays a request someone waits on or a
//! context that no longer fits its model's window. Both lanes are sorted
//! sets scored by the time a job may run, so a retry's back-off holds in
//! either. An entity has one job whatever its lane: dedup and the one
//! follow-up rule are those of the queue (see the module docs); a request
//! of the urgent lane coalesced into a waiting job of the normal lane moves
//! it over, keeping its place in time.

use compactor_shared::payload::Trigger;
use serde::Serialize;

/// The lane of a waiting job, as its record's `lane` field names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// Automatic requests and their follow-ups.
    Normal,
    /// Manual and reactive requests and their follow-ups: claimed first.
    Urgent,
}

impl Lane {
    /// The lane a request with `trigger` waits in.
    pub fn of(trigger: &Trigger) -> Lane {
        if trigger.is_urgent() {
            Lane::Urgent
        } else {
            Lane::Normal
        }
    }

    /// The word the scripts store and compare (`URGENT` and `NORMAL` in
    /// `scripts/prelude.lua`; a test checks they agree).
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Normal => "normal",
            Lane::Urgent => "urgent",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_and_reactive_requests_are_urgent_automatic_ones_are_not() {
        assert_eq!(Lane::of(&Trigger::Auto), Lane::Normal);
        assert_eq!(Lane::of(&Trigger::FollowUp), Lane::Normal);
        assert_eq!(Lane::of(&Trigger::Reactive), Lane::Urgent);
        assert_eq!(
            Lane::of(&Trigger::Manual {
                instructions: Some("focus".into())
            }),
            Lane::Urgent
        );
    }
}
