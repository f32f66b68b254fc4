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

/// Descriptors each connection of the drop-in proxy holds: the client's,
/// and the one it opens to the provider for the request.
pub const PROXY_DESCRIPTORS: u64 = 2;

/// The connection caps fitted to the descriptor limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The admin settings with the admin API's caps lowered.
    pub admin: AdminSettings,
    /// The drop-in proxy's connection cap (`admin.max_connections`
    /// lowered); meaningful only where the proxy is served.
    pub proxy_connections: usize,
}

/// `admin` with its connection cap lowered to what `limit` leaves after
/// `reserved` descriptors (under a limit so low that it leaves less than
/// the reserve, half of it), and the long-poll bound kept below that cap.
/// With the drop-in proxy served too (`proxy`), the two listeners share
/// that room, a proxied connection counting [`PROXY_DESCRIPTORS`]: each
/// gets a third of it beside the admin API, half of it alone. Never below
/// 2 connections: the settings' own floor.
pub fn fit(admin: &AdminSettings, limit: u64, reserved: u64, proxy: bool) -> Fitted {
    let room = if limit > reserved.saturating_mul(2) {
        limit - reserved
    } else {
        limit / 2
    };
    let (admin_room, proxy_room) = match (proxy, admin.enabled) {
        (false, _) => (room, 0),
        // One share for an API connection, PROXY_DESCRIPTORS for a proxied one.
        (true, true) => {
            let share = room / (1 + PROXY_DESCRIPTORS);
            (share, share)
        }
        (true, false) => (0, room / PROXY_DESCRIPTORS),
    };
    let cap = |room: u64| {
        let room = usize::try_from(room).unwrap_or(usize::MAX);
        admin.max_connections.min(room).max(2)
    };
    let max_connections = cap(admin_room);
    let max_long_polls = if admin.max_long_polls < max_connections {
        admin.max_long_polls
    } else {
        (max_connections / 2).max(1)
    };
    Fitted {
        admin: AdminSettings {
            max_connections,
            max_long_polls,
            ..admin.clone()
        },
        proxy_connections: cap(proxy_room),
    }
}

/// `admin` fitted to this process: raises the soft file-descriptor limit,
/// [`fit`]s the caps to it for a worker running `concurrency` jobs (and
/// serving the drop-in proxy, `proxy`), and logs what it found and chose.
/// Unchanged where there is no such limit.
pub fn fit_to_process(admin: &AdminSettings, concurrency: usize, proxy: bool) -> Fitted {
    let Some(found) = DescriptorLimit::raise() else {
        return Fitted {
            admin: admin.clone(),
            proxy_connections: admin.max_connections,
        };
    };
    if let Some(before) = found.raised_from {
        info!(
            from = before,
            to = found.limit,
            "raised the file-descriptor limit to its hard limit"
        );
    }
    let kept = reserved(concurrency);
    let fitted = fit(admin, found.limit, kept, proxy);
    let lowered = (admin.enabled && fitted.admin.max_connections < admin.max_connections)
        || (proxy && fitted.proxy_connections < admin.max_connections);
    if lowered {
        warn!(
            configured = admin.max_connections,
            max_connections = fitted.admin.max_connections,
            max_long_polls = fitted.admin.max_long_polls,
            proxy_connections = proxy.then_some(fitted.proxy_connections),
            descriptor_limit = found.limit,
            reserved = kept,
            "admin API / proxy: connections capped below admin.max_connections to what the \
             file-descriptor limit leaves beside the database, Redis and outgoing calls; \
             raise the limit (ulimit -n, LimitNOFILE) to serve more"
        );
    } else {
        info!(
            max_connections = fitted.admin.max_connections,
            proxy_connections = proxy.then_some(fitted.proxy_connections),
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
        let fitted = fit(&admin(512, 256), 1_048_576, reserved(2), false).admin;
        assert_eq!((fitted.max_connections, fitted.max_long_polls), (512, 256));
    }

    #[test]
    fn a_low_limit_lowers_the_cap_below_it_and_the_long_polls_below_the_cap() {
        // The chaos run's limit: 256 descriptors, 2 jobs at once.
        let kept = reserved(2);
        assert_eq!(kept, 100);
        let fitted = fit(&admin(512, 256), 256, kept, false).admin;
        assert_eq!(fitted.max_connections, 156);
        assert_eq!(fitted.max_long_polls, 78);
        assert!(fitted.validate().is_ok());
    }

    #[test]
    fn a_limit_below_twice_the_reserve_gives_the_api_half() {
        let fitted = fit(&admin(512, 256), 150, reserved(2), false).admin;
        assert_eq!(fitted.max_connections, 75);
        let tiny = fit(&admin(512, 256), 3, reserved(2), false).admin;
        assert_eq!((tiny.max_connections, tiny.max_long_polls), (2, 1));
        assert!(tiny.validate().is_ok());
    }

    #[test]
    fn the_proxy_shares_the_room_and_counts_its_upstream_connection() {
        // 256 descriptors, 2 jobs: 156 left for connections.
        let both = fit(&admin(512, 256), 256, reserved(2), true);
        assert_eq!(
            (both.admin.max_connections, both.proxy_connections),
            (52, 52)
        );
        // What both listeners may hold at once fits what the limit left.
        let held =
            both.admin.max_connections as u64 + PROXY_DESCRIPTORS * both.proxy_connections as u64;
        assert!(held <= 156, "{held}");
        assert!(both.admin.max_long_polls < both.admin.max_connections);
        // The proxy alone (the admin API off) has the room to itself.
        let alone = fit(
            &AdminSettings {
                enabled: false,
                ..admin(512, 256)
            },
            256,
            reserved(2),
            true,
        );
        assert_eq!(alone.proxy_connections, 78);
        // A generous limit keeps the configured cap for both.
        let generous = fit(&admin(512, 256), 1_048_576, reserved(2), true);
        assert_eq!(
            (generous.admin.max_connections, generous.proxy_connections),
            (512, 512)
        );
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
