//! The admin API's connection cap, fitted to the process's file-descriptor
//! limit.
//!
//! Every connection takes a file descriptor, and so do the database pool,
//! the Redis connections, the LLM's and the webhooks' HTTP connections and
//! the SQLite files. A cap above what the limit leaves lets a flood of
//! clients take the descriptors those need: `accept` fails with `EMFILE`,
//! then so does the next database connection. (The chaos finding: at a
//! limit of 256, 300 slow connections took `/healthz` down.)
//!
//! So at start-up the soft limit is raised to the hard one (what Go's
//! runtime does for every program, and what `LimitNOFILE` or `ulimit -n`
//! would otherwise have to), and `admin.max_connections` is lowered to
//! what the limit leaves after [`reserved`] descriptors; both are logged.

use tracing::{info, warn};

use crate::settings::AdminSettings;

/// Descriptors kept for everything but the admin API's connections,
/// before the per-job ones: the database pool (10 on PostgreSQL, 4 on
/// SQLite, plus a SQLite file's database, WAL and shared-memory files),
/// the Redis connections (commands, subscriptions, a blocking claim),
/// stdio and logs, the runtime's own (epoll, eventfd, timers), and room
/// for a probe listener's connections.
pub const RESERVED_BASE: u64 = 96;

/// Descriptors each concurrent job may hold: its LLM connection and a
/// webhook or hook call.
pub const RESERVED_PER_JOB: u64 = 2;

/// The most connections the probe listener (`admin.health_listen`) serves
/// at once: a few probes and a scrape at a time is all it is for.
pub const PROBE_MAX_CONNECTIONS: usize = 16;

/// The process's file-descriptor limit, as start-up found and left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorLimit {
    /// The soft limit in force.
    pub limit: u64,
    /// The soft limit before start-up raised it, if it did.
    pub raised_from: Option<u64>,
}

impl DescriptorLimit {
    /// Raises the soft limit to the hard one and reads it back; `None`
    /// where the platform has no such limit or it cannot be read.
    pub fn raise() -> Option<DescriptorLimit> {
        if !rlimit::Resource::NOFILE.is_supported() {
            return None;
        }
        let (before, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).ok()?;
        let limit = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(before);
        Some(DescriptorLimit {
            limit,
            raised_from: (limit > before).then_some(before),
        })
    }
}

/// Descriptors kept for everything but the admin API's connections, for
/// a worker running `concurrency` jobs at once.
pub fn reserved(concurrency: usize) -> u64 {
    let concurrency = u64::try_from(concurrency).unwrap_or(u64::MAX);
    RESERVED_BASE.saturating_add(RESERVED_PER_JOB.saturating_mul(concurrency))
}

/// `admin` with its connection cap lowered to what `limit` leaves after
/// `reserved` descriptors (under a limit so low that it leaves less than
/// the reserve, half of it), and the long-poll bound kept below that cap.
/// Never below 2 connections: the settings' own floor.
pub fn fit(admin: &AdminSettings, limit: u64, reserved: u64) -> AdminSettings {
    let room = if limit > reserved.saturating_mul(2) {
        limit - reserved
    } else {
        limit / 2
    };
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    let max_connections = admin.max_connections.min(room).max(2);
    let max_long_polls = if admin.max_long_polls < max_connections {
        admin.max_long_polls
    } else {
        (max_connections / 2).max(1)
    };
    AdminSettings {
        max_connections,
        max_long_polls,
        ..admin.clone()
    }
}

/// `admin` fitted to this process: raises the soft file-descriptor limit,
/// [`fit`]s the caps to it for a worker running `concurrency` jobs, and
/// logs what it found and chose. Unchanged where there is no such limit.
pub fn fit_to_process(admin: &AdminSettings, concurrency: usize) -> AdminSettings {
    let Some(found) = DescriptorLimit::raise() else {
        return admin.clone();
    };
    if let Some(before) = found.raised_from {
        info!(
            from = before,
            to = found.limit,
            "raised the file-descriptor limit to its hard limit"
        );
    }
    let kept = reserved(concurrency);
    let fitted = fit(admin, found.limit, kept);
    if fitted.max_connections < admin.max_connections {
        warn!(
            configured = admin.max_connections,
            max_connections = fitted.max_connections,
            max_long_polls = fitted.max_long_polls,
            descriptor_limit = found.limit,
            reserved = kept,
            "admin API: connections capped below admin.max_connections to what the \
             file-descriptor limit leaves beside the database, Redis and outgoing calls; \
             raise the limit (ulimit -n, LimitNOFILE) to serve more"
        );
    } else {
        info!(
            max_connections = fitted.max_connections,
            descriptor_limit = found.limit,
            reserved = kept,
            "admin API connection cap"
        );
    }
    fitted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin(max_connections: usize, max_long_polls: usize) -> AdminSettings {
        AdminSettings {
            max_connections,
            max_long_polls,
            ..AdminSettings::default()
        }
    }

    #[test]
    fn a_generous_limit_keeps_the_configured_cap() {
        let fitted = fit(&admin(512, 256), 1_048_576, reserved(2));
        assert_eq!((fitted.max_connections, fitted.max_long_polls), (512, 256));
    }

    #[test]
    fn a_low_limit_lowers_the_cap_below_it_and_the_long_polls_below_the_cap() {
        // The chaos run's limit: 256 descriptors, 2 jobs at once.
        let kept = reserved(2);
        assert_eq!(kept, 100);
        let fitted = fit(&admin(512, 256), 256, kept);
        assert_eq!(fitted.max_connections, 156);
        assert_eq!(fitted.max_long_polls, 78);
        assert!(fitted.validate().is_ok());
    }

    #[test]
    fn a_limit_below_twice_the_reserve_gives_the_api_half() {
        let fitted = fit(&admin(512, 256), 150, reserved(2));
        assert_eq!(fitted.max_connections, 75);
        let tiny = fit(&admin(512, 256), 3, reserved(2));
        assert_eq!((tiny.max_connections, tiny.max_long_polls), (2, 1));
        assert!(tiny.validate().is_ok());
    }

    #[test]
    fn the_reserve_grows_with_the_jobs_run_at_once() {
        assert_eq!(reserved(50), RESERVED_BASE + 100);
        assert_eq!(reserved(usize::MAX), u64::MAX);
    }

    #[test]
    fn start_up_reads_a_limit_and_never_lowers_it() {
        let found = DescriptorLimit::raise().expect("Linux has RLIMIT_NOFILE");
        let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        assert_eq!(found.limit, soft);
        if let Some(before) = found.raised_from {
            assert!(before < found.limit);
        }
    }
}
