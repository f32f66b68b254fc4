//! Pausing and resuming the queue, or one domain of it, for an operator
//! who must stop compactions without stopping the workers (an LLM
//! provider's outage, a bad deploy of one domain's prompts, a database
//! migration).
//!
//! A pause is a mark in the queue's pause record, read by every claim; it
//! takes nothing off the queue. Paused jobs stay waiting: counted, listed,
//! and deduplicating requests for their entities exactly as before (an
//! urgent request still moves one to the urgent lane). Running jobs finish,
//! fail, back off and add their follow-ups as ever; what they put back in
//! line waits with the rest.
//!
//! A paused queue hands out nothing: claims stop at one read of the pause
//! record. A paused domain's jobs are met by claims in their lane's order;
//! each one met is moved aside to the domain's parked set, keeping its
//! score (its record keeps its lane), so claims step over a paused domain's
//! backlog once, not on every call. Resuming the domain moves its parked
//! jobs back to their places in line, and every resumption wakes idle
//! workers on the queue's wake channel, so the jobs start at once.
//!
//! The repair sweep and the next request for an entity know parked jobs as
//! waiting (`repair_job` in `scripts/prelude.lua`), and [`Queue::counts`]
//! counts them with the waiting ones.

use std::str::FromStr;

use compactor_shared::{Domain, KeyError};
use redis::Value;
use serde::Serialize;

use super::error::{redis_error, QueueError};
use super::handle::Queue;

/// What a pause or resume applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PauseScope {
    /// Every job of the queue.
    Queue,
    /// The jobs of one domain.
    Domain(Domain),
}

impl PauseScope {
    /// The scope an operator names: a domain, or (none given) the whole
    /// queue. An empty domain is refused like any other invalid one.
    pub fn parse(domain: Option<&str>) -> Result<PauseScope, KeyError> {
        match domain {
            None => Ok(PauseScope::Queue),
            Some(domain) => Domain::parse(domain).map(PauseScope::Domain),
        }
    }

    /// The domain argument of the pause script ('' for the whole queue).
    fn arg(&self) -> &str {
        match self {
            PauseScope::Queue => "",
            PauseScope::Domain(domain) => domain.as_str(),
        }
    }
}

impl FromStr for PauseScope {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<PauseScope, KeyError> {
        PauseScope::parse(Some(s))
    }
}

impl std::fmt::Display for PauseScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PauseScope::Queue => f.write_str("queue"),
            PauseScope::Domain(domain) => write!(f, "domain {domain}"),
        }
    }
}

/// A paused domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PausedDomain {
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "chat"))]
    pub domain: Domain,
    /// How long it has been paused (ms, server clock).
    pub paused_for_ms: u64,
    /// Its waiting jobs that claims have set aside so far. Jobs of the
    /// domain not yet met by a claim wait in their lane, just as paused.
    pub parked: u64,
}

/// What is paused, and how long the oldest waiting job has waited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PauseState {
    /// Whether the whole queue is paused.
    pub queue_paused: bool,
    /// How long the whole queue has been paused (ms), when it is.
    pub queue_paused_for_ms: Option<u64>,
    /// The paused domains, by name.
    pub paused_domains: Vec<PausedDomain>,
    /// Age (ms) of the oldest waiting job, paused and parked ones
    /// included, counted from when it could first run (when it was added,
    /// or when its retry delay ended: a job backing off is not old).
    /// Null when no job waits.
    pub oldest_waiting_ms: Option<u64>,
    /// Age (ms) of the oldest job waiting to be claimed, the jobs parked
    /// behind a paused domain left out: what workers falling behind shows
    /// as (the `CompactorOldestJobWaiting` alert). Null when none waits.
    pub oldest_runnable_ms: Option<u64>,
}

impl PauseState {
    /// Whether anything is paused.
    pub fn any_paused(&self) -> bool {
        self.queue_paused || !self.paused_domains.is_empty()
    }

    /// Whether `domain`'s jobs are held: the queue or the domain is paused.
    pub fn holds(&self, domain: &Domain) -> bool {
        self.queue_paused || self.paused_domains.iter().any(|d| &d.domain == domain)
    }
}

impl Queue {
    /// Pauses `scope` (see the module docs). Pausing what is paused already
    /// changes nothing (it stays paused since the first time). Returns the
    /// state it leaves.
    pub async fn pause(&self, scope: &PauseScope) -> Result<PauseState, QueueError> {
        Ok(self.run_pause("pause", scope).await?.0)
    }

    /// Resumes `scope`: puts a domain's parked jobs back in line and wakes
    /// idle workers. Resuming what runs changes nothing. Returns the state
    /// it leaves. A domain paused inside a paused queue stays held until
    /// both are resumed, and the other way round.
    ///
    /// The domain's parked jobs go back a batch of 1,000 (`UNPARK_BATCH`) per
    /// script call, so a parked set of 100,000 never holds Redis in one
    /// script (it took 0.55 s): the calls repeat until none is left, or
    /// until the domain is paused again meanwhile. Should the caller stop
    /// half-way (a crash), resuming again moves the rest, and the repair
    /// walk puts back any job it finds parked behind a domain that runs.
    pub async fn resume(&self, scope: &PauseScope) -> Result<PauseState, QueueError> {
        let (mut state, mut left) = self.run_pause("resume", scope).await?;
        while left > 0 {
            let (now, after) = self.run_pause("unpark", scope).await?;
            state = now;
            if after >= left {
                // Paused again: its jobs stay parked.
                break;
            }
            left = after;
        }
        Ok(state)
    }

    /// What is paused, and the age of the oldest waiting job.
    pub async fn pause_state(&self) -> Result<PauseState, QueueError> {
        Ok(self.run_pause("state", &PauseScope::Queue).await?.0)
    }

    /// Jobs parked in the paused domains' sets (part of
    /// [`Queue::counts`]' waiting jobs): one read when nothing is paused.
    pub(super) async fn parked_count(&self) -> Result<u64, QueueError> {
        const OP: &str = "counts";
        let mut conn = self.conn.clone();
        let fields: Vec<String> = redis::cmd("HKEYS")
            .arg(self.keys.paused())
            .query_async(&mut conn)
            .await
            .map_err(redis_error(OP))?;
        let domains: Vec<Domain> = fields
            .iter()
            .filter_map(|f| Domain::parse(f.strip_prefix("domain:")?).ok())
            .collect();
        if domains.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for domain in &domains {
            pipe.zcard(self.keys.parked(domain));
        }
        let counts: Vec<u64> = pipe.query_async(&mut conn).await.map_err(redis_error(OP))?;
        Ok(counts.iter().sum())
    }

    /// One call of the pause script: the state it leaves, and the parked
    /// jobs of `scope` left to move after a resume or an unpark.
    async fn run_pause(
        &self,
        op: &str,
        scope: &PauseScope,
    ) -> Result<(PauseState, u64), QueueError> {
        const OP: &str = "pause";
        let mut conn = self.conn.clone();
        let reply: Vec<Value> = self
            .scripts
            .pause
            .key(self.keys.paused())
            .key(self.keys.waiting())
            .key(self.keys.urgent())
            .arg(self.keys.prefix())
            .arg(self.keys.wake_channel())
            .arg(op)
            .arg(scope.arg())
            .arg(UNPARK_BATCH)
            .invoke_async(&mut conn)
            .await
            .map_err(redis_error(OP))?;
        pause_state(&reply).map_err(|detail| QueueError::Protocol { op: OP, detail })
    }
}

/// Parked jobs moved back in line per call of a resume: a few ms of
/// Redis each.
const UNPARK_BATCH: u64 = 1_000;

/// Reads the pause script's reply: {queue paused at, {domain, paused at,
/// parked}..., oldest age, now, oldest runnable age, parked left to move}.
fn pause_state(reply: &[Value]) -> Result<(PauseState, u64), String> {
    let [queue_since, domains, oldest, now, runnable, left] = reply else {
        return Err(format!("{} fields, 6 expected", reply.len()));
    };
    let left = number(left).ok_or("unreadable count of parked jobs left")?;
    let now = number(now).ok_or("no server time")?;
    let since = |v: &Value| number(v).map(|at| now.saturating_sub(at));
    let queue_paused_for_ms = match text(queue_since).as_deref() {
        Some("") => None,
        _ => Some(since(queue_since).ok_or("unreadable queue pause time")?),
    };
    let Value::Array(domains) = domains else {
        return Err("paused domains are not a list".to_owned());
    };
    let mut paused_domains = Vec::with_capacity(domains.len());
    for entry in domains {
        let Value::Array(fields) = entry else {
            return Err("a paused domain is not a list".to_owned());
        };
        let [name, at, parked] = fields.as_slice() else {
            return Err(format!("a paused domain of {} fields", fields.len()));
        };
        // A field of the pause record no build wrote (a hand edit) is not
        // a domain: it is left out, not an error that hides the rest.
        let Some(domain) = text(name).and_then(|n| Domain::parse(&n).ok()) else {
            continue;
        };
        paused_domains.push(PausedDomain {
            domain,
            paused_for_ms: since(at).unwrap_or(0),
            parked: number(parked).unwrap_or(0),
        });
    }
    paused_domains.sort_by(|a, b| a.domain.cmp(&b.domain));
    let age = |value: &Value| match text(value).as_deref() {
        Some("") => Ok(None),
        _ => number(value).map(Some).ok_or("unreadable age"),
    };
    let state = PauseState {
        queue_paused: queue_paused_for_ms.is_some(),
        queue_paused_for_ms,
        paused_domains,
        oldest_waiting_ms: age(oldest)?,
        oldest_runnable_ms: age(runnable)?,
    };
    Ok((state, left))
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        other => text(other)?.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_scope_is_the_queue_or_a_valid_domain() {
        assert_eq!(PauseScope::parse(None).unwrap(), PauseScope::Queue);
        assert_eq!(
            PauseScope::parse(Some("chat")).unwrap(),
            PauseScope::Domain(Domain::parse("chat").unwrap())
        );
        for bad in ["", "Chat", "a:b", "a{b}", "*"] {
            assert!(PauseScope::parse(Some(bad)).is_err(), "{bad:?}");
        }
        assert_eq!("chat".parse::<PauseScope>().unwrap().arg(), "chat");
        assert_eq!(PauseScope::Queue.arg(), "");
    }

    #[test]
    fn the_reply_reads_as_the_state() {
        let reply = [
            bulk("1000"),
            Value::Array(vec![
                Value::Array(vec![bulk("support"), bulk("1500"), Value::Int(3)]),
                Value::Array(vec![bulk("chat"), bulk("1900"), Value::Int(0)]),
                Value::Array(vec![bulk("Bad:Field"), bulk("1"), Value::Int(0)]),
            ]),
            bulk("250"),
            Value::Int(2000),
            bulk("40"),
            Value::Int(7),
        ];
        let (state, left) = pause_state(&reply).unwrap();
        assert_eq!(left, 7);
        assert!(state.queue_paused);
        assert_eq!(state.queue_paused_for_ms, Some(1000));
        assert_eq!(state.oldest_waiting_ms, Some(250));
        assert_eq!(state.oldest_runnable_ms, Some(40));
        let names: Vec<&str> = state
            .paused_domains
            .iter()
            .map(|d| d.domain.as_str())
            .collect();
        assert_eq!(names, ["chat", "support"]);
        assert_eq!(state.paused_domains[1].paused_for_ms, 500);
        assert_eq!(state.paused_domains[1].parked, 3);
        assert!(state.holds(&Domain::parse("other").unwrap()));
    }

    #[test]
    fn nothing_paused_and_nothing_waiting_reads_as_such() {
        let reply = [
            bulk(""),
            Value::Array(vec![]),
            bulk(""),
            Value::Int(5),
            bulk(""),
            Value::Int(0),
        ];
        let (state, _) = pause_state(&reply).unwrap();
        assert!(!state.any_paused());
        assert_eq!(state.queue_paused_for_ms, None);
        assert_eq!(state.oldest_waiting_ms, None);
        assert_eq!(state.oldest_runnable_ms, None);
        assert!(!state.holds(&Domain::parse("chat").unwrap()));
    }

    #[test]
    fn a_malformed_reply_is_an_error() {
        assert!(pause_state(&[]).is_err());
        let six = |first: Value, second: Value| {
            [
                first,
                second,
                bulk(""),
                Value::Int(5),
                bulk(""),
                Value::Int(0),
            ]
        };
        assert!(pause_state(&six(bulk("x"), Value::Array(vec![]))).is_err());
        assert!(pause_state(&six(bulk(""), bulk("x"))).is_err());
        // The reply of the build before the batched resume: five fields.
        assert!(pause_state(&[
            bulk(""),
            Value::Array(vec![]),
            bulk(""),
            Value::Int(5),
            bulk("")
        ])
        .is_err());
    }
}
