//! The Lua scripts of the queue, one per transition (`scripts/*.lua`).
//! Each runs as a function of one Redis function library, the shared
//! prelude (`scripts/prelude.lua`) at its top level, made once at load
//! (see the `call` module); on a server without functions, by SHA, with
//! the part of the prelude it uses in front (see `with_prelude`): Redis
//! Lua has no includes. Built once per [`Queue`](super::Queue) and loaded
//! on every node at connect time, so pipelines can call them by name; a
//! call that finds its code gone loads it again.

use std::sync::Arc;

use redis::Script;

use super::call::{Library, QueueScript};
use super::conn::Conn;
use super::error::{redis_error, QueueError};

/// Every script of the queue. The operations that call them live in the
/// module of their operation.
pub(super) struct Scripts {
    pub(super) enqueue: QueueScript,
    /// Many requests in one call (`enqueue` module).
    pub(super) enqueue_many: QueueScript,
    /// Completes finished jobs and claims due ones (`settle` module).
    pub(super) settle: QueueScript,
    pub(super) renew: QueueScript,
    pub(super) fail: QueueScript,
    pub(super) recover: QueueScript,
    pub(super) release: QueueScript,
    /// The worker registry (`workers` module).
    pub(super) heartbeat: QueueScript,
    pub(super) workers: QueueScript,
    /// A job's progress, for chat-side waiters (`progress` module).
    pub(super) progress: QueueScript,
    /// Puts records back in their set (`repair` module).
    pub(super) repair: QueueScript,
    /// Bulk dead-letter retry and purge (`dead_bulk` module).
    pub(super) dead_retry: QueueScript,
    pub(super) dead_purge: QueueScript,
    /// Pauses and resumes the queue or a domain (`pause` module).
    pub(super) pause: QueueScript,
    /// Pages of jobs and jobs by id, for operators (`jobs` module).
    pub(super) jobs: QueueScript,
    /// Cancels a job by id (`cancel` module).
    pub(super) cancel: QueueScript,
    library: Arc<Library>,
}

/// Every script's name and source, in `Scripts`' order.
const SOURCES: [(&str, &str); 16] = [
    ("enqueue", include_str!("scripts/enqueue.lua")),
    ("settle", include_str!("scripts/settle.lua")),
    ("renew", include_str!("scripts/renew.lua")),
    ("fail", include_str!("scripts/fail.lua")),
    ("recover", include_str!("scripts/recover.lua")),
    ("release", include_str!("scripts/release.lua")),
    ("heartbeat", include_str!("scripts/heartbeat.lua")),
    ("workers", include_str!("scripts/workers.lua")),
    ("progress", include_str!("scripts/progress.lua")),
    ("repair", include_str!("scripts/repair.lua")),
    ("dead_retry", include_str!("scripts/dead_retry.lua")),
    ("dead_purge", include_str!("scripts/dead_purge.lua")),
    ("pause", include_str!("scripts/pause.lua")),
    ("jobs", include_str!("scripts/jobs.lua")),
    ("cancel", include_str!("scripts/cancel.lua")),
    ("enqueue_many", include_str!("scripts/enqueue_many.lua")),
];

/// The definitions every script may use (`scripts/prelude.lua`).
const PRELUDE: &str = include_str!("scripts/prelude.lua");

/// `script` with, in front, the definitions of `prelude` it uses, directly
/// or through another one, in the prelude's order. Redis runs a script's
/// whole text on every call, and each `local function` of the prelude
/// makes a closure then: a call of `enqueue` spent as much on defining
/// claiming, completing and dead-lettering as on its own work.
///
/// A line of the script starting `-- @prelude` puts the definitions the
/// code after it uses, and the code before it does not, there instead of
/// in front: a script that returns before it (enqueue's common requests)
/// does not make them.
///
/// The prelude is a list of top-level `local` definitions, each up to the
/// next one; a definition is used when a name it defines appears in the
/// code (comments left out) of the script or of a definition used. A
/// name found only in a string keeps a definition for nothing, never the
/// reverse, since Redis scripts cannot reach a local by any other way.
/// A prelude of another shape (a top-level line that is not a `local`
/// definition, its `end`, a comment or blank; a long string or comment,
/// which the scan does not read) is kept whole.
fn with_prelude(prelude: &str, script: &str) -> String {
    let Some(definitions) = definitions(prelude) else {
        return format!("{prelude}{script}");
    };
    let mut made = vec![false; definitions.len()];
    let mut source = String::with_capacity(prelude.len() + script.len());
    for part in parts(script) {
        let mut names = identifiers(part);
        let mut used = vec![false; definitions.len()];
        while let Some(found) = definitions
            .iter()
            .enumerate()
            .position(|(i, d)| !made[i] && !used[i] && d.names.iter().any(|n| names.contains(n)))
        {
            used[found] = true;
            names.extend(identifiers(definitions[found].text));
        }
        for (i, definition) in definitions.iter().enumerate() {
            if used[i] {
                source.push_str(definition.text);
                made[i] = true;
            }
        }
        source.push_str(part);
    }
    source
}

/// `script` cut before each line starting `-- @prelude` (see
/// [`with_prelude`]).
fn parts(script: &str) -> Vec<&str> {
    let mut cuts = vec![0];
    let mut offset = 0;
    for line in script.split_inclusive('\n') {
        if offset > 0 && line.starts_with("-- @prelude") {
            cuts.push(offset);
        }
        offset += line.len();
    }
    cuts.push(script.len());
    cuts.windows(2).map(|w| &script[w[0]..w[1]]).collect()
}

/// A top-level definition of the prelude: the names it defines and its
/// text, comments after it up to the next one included.
struct Definition<'p> {
    names: Vec<&'p str>,
    text: &'p str,
}

/// The prelude's top-level `local` definitions, or `None` when it has
/// another shape (see [`with_prelude`]).
fn definitions(prelude: &str) -> Option<Vec<Definition<'_>>> {
    if prelude.contains("[[") || prelude.contains("[=") {
        return None;
    }
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in prelude.split_inclusive('\n') {
        let code = line.trim_end();
        if line.starts_with("local ") {
            starts.push(offset);
        } else if !(code.is_empty()
            || line.starts_with(char::is_whitespace)
            || code.starts_with("--")
            || code == "end")
        {
            return None;
        }
        offset += line.len();
    }
    let ends = starts.iter().skip(1).copied().chain([prelude.len()]);
    Some(
        starts
            .iter()
            .zip(ends)
            .map(|(&start, end)| {
                let text = &prelude[start..end];
                let head = text.lines().next().unwrap_or_default();
                let names = match head.strip_prefix("local function ") {
                    Some(rest) => vec![rest.split('(').next().unwrap_or_default().trim()],
                    None => head
                        .trim_start_matches("local ")
                        .split('=')
                        .next()
                        .unwrap_or_default()
                        .split(',')
                        .map(str::trim)
                        .collect(),
                };
                Definition { names, text }
            })
            .collect(),
    )
}

/// The identifiers (and keywords) in Lua `code`, comments left out.
fn identifiers(code: &str) -> std::collections::HashSet<&str> {
    let mut found = std::collections::HashSet::new();
    for line in code.lines() {
        let line = without_comment(line);
        found.extend(
            line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')),
        );
    }
    found
}

/// A line of Lua up to its `--` comment, if any: one outside a quoted
/// string (`'…'` or `"…"`, with `\` escapes).
fn without_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut quote = None;
    let mut i = 0;
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (Some(_), b'\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (None, c @ (b'\'' | b'"')) => quote = Some(c),
            (None, b'-') if bytes.get(i + 1) == Some(&b'-') => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        let library = Arc::new(Library::new(PRELUDE, &SOURCES));
        let make = |(name, source): (&str, &str)| {
            QueueScript::new(
                name,
                Script::new(&with_prelude(PRELUDE, source)),
                library.clone(),
            )
        };
        Scripts {
            enqueue: make(SOURCES[0]),
            settle: make(SOURCES[1]),
            renew: make(SOURCES[2]),
            fail: make(SOURCES[3]),
            recover: make(SOURCES[4]),
            release: make(SOURCES[5]),
            heartbeat: make(SOURCES[6]),
            workers: make(SOURCES[7]),
            progress: make(SOURCES[8]),
            repair: make(SOURCES[9]),
            dead_retry: make(SOURCES[10]),
            dead_purge: make(SOURCES[11]),
            pause: make(SOURCES[12]),
            jobs: make(SOURCES[13]),
            cancel: make(SOURCES[14]),
            enqueue_many: make(SOURCES[15]),
            library,
        }
    }

    /// Loads the library on the server, or, where it has no functions,
    /// `SCRIPT LOAD`s every script, so pipelines can call them by name or
    /// SHA. On a cluster the client sends either to every primary, so
    /// whichever node owns the queue's slot (now, or after a failover) has
    /// them.
    pub(super) async fn load(&self, conn: &Conn) -> Result<(), QueueError> {
        let mut conn = conn.clone();
        let functions = self
            .library
            .load(&mut conn)
            .await
            .map_err(redis_error("FUNCTION LOAD"))?;
        if functions {
            return Ok(());
        }
        for script in [
            &self.enqueue,
            &self.settle,
            &self.renew,
            &self.fail,
            &self.recover,
            &self.release,
            &self.heartbeat,
            &self.workers,
            &self.progress,
            &self.repair,
            &self.dead_retry,
            &self.dead_purge,
            &self.pause,
            &self.jobs,
            &self.cancel,
            &self.enqueue_many,
        ] {
            script
                .script
                .load_async(&mut conn)
                .await
                .map_err(redis_error("SCRIPT LOAD"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use compactor_shared::EntityKey;
    use redis::Script;

    use crate::queue::keys::{Keys, QueueName};

    use super::{definitions, with_prelude, PRELUDE};

    /// Every script's own source, the prelude included.
    fn sources() -> Vec<(&'static str, &'static str)> {
        std::iter::once(("prelude", PRELUDE))
            .chain(super::SOURCES)
            .collect()
    }

    fn redis_url() -> String {
        std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
    }

    /// The key names the prelude's builders make: run on Redis, as the
    /// scripts run them (the prelude is plain Lua, but only Redis runs it).
    /// Touches no key.
    #[tokio::test]
    async fn lua_builds_the_key_names_keys_builds() {
        let keys = Keys::new(&QueueName::parse("key-names").unwrap());
        let key = EntityKey::parse("chat", "7f3c").unwrap();
        let member = Keys::member(&key);
        let check = Script::new(&format!(
            "{PRELUDE}\n\
             local prefix, member, job_id = ARGV[1], ARGV[2], ARGV[3]\n\
             return {{\n\
               job_key(prefix, member),\n\
               job_key(prefix, '*'),\n\
               member_of_job_key(prefix, job_key(prefix, member)),\n\
               set_entry(member, job_id),\n\
               dead_record_key(prefix, set_entry(member, job_id)),\n\
               released_channel(prefix, member),\n\
               paused_key(prefix),\n\
               parked_key(prefix, domain_of(member)),\n\
               job_ids_key(prefix),\n\
               revoked_lease_key(prefix, job_id),\n\
               prefix_of_job_key(job_key(prefix, member), member),\n\
             }}"
        ));
        let client = redis::Client::open(redis_url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let built: Vec<String> = check
            .arg(keys.prefix())
            .arg(&member)
            .arg("12")
            .invoke_async(&mut conn)
            .await
            .unwrap();
        let entry = format!("{member}|12");
        assert_eq!(
            built,
            [
                keys.job(&key),
                // The repair walk's SCAN pattern: every job record.
                keys.job_of_member("*"),
                member.clone(),
                entry.clone(),
                keys.dead_record(&entry),
                keys.released_channel(&key),
                keys.paused(),
                keys.parked(&compactor_shared::Domain::from(&key)),
                keys.job_ids(),
                keys.revoked_lease("12"),
                keys.prefix().to_owned(),
            ]
        );
        // What Rust reads back from those names.
        assert_eq!(keys.member_of_released(&built[5]), Some(member.as_str()));
        assert_eq!(entry.split('|').next(), Some(member.as_str()));
    }

    /// The lanes as the scripts name and choose them: the words Rust's
    /// [`Lane`](crate::queue::Lane) passes, and each lane's set among the
    /// keys `Keys` builds (the urgent lane for `urgent` only; a record
    /// without a lane, as older builds wrote, in the normal one). Run on
    /// Redis; touches no key.
    #[tokio::test]
    async fn lua_names_and_chooses_the_lanes_as_rust_does() {
        use crate::queue::Lane;
        let keys = Keys::new(&QueueName::parse("lane-names").unwrap());
        let check = Script::new(&format!(
            "{PRELUDE}\n\
             local lanes = lanes_of(ARGV[1], ARGV[2])\n\
             local urgent_set, urgent_other = lane_set(lanes, ARGV[3])\n\
             local normal_set, normal_other = lane_set(lanes, ARGV[4])\n\
             return {{\n\
               URGENT, NORMAL,\n\
               urgent_set, urgent_other, normal_set, normal_other,\n\
               (lane_set(lanes, false)), (lane_set(lanes, 'other')),\n\
               max_lane(ARGV[4], ARGV[3]), max_lane(false, ARGV[4]),\n\
             }}"
        ));
        let client = redis::Client::open(redis_url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let got: Vec<String> = check
            .arg(keys.waiting())
            .arg(keys.urgent())
            .arg(Lane::Urgent.as_str())
            .arg(Lane::Normal.as_str())
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            got,
            [
                Lane::Urgent.as_str().to_owned(),
                Lane::Normal.as_str().to_owned(),
                keys.urgent(),
                keys.waiting(),
                keys.waiting(),
                keys.urgent(),
                keys.waiting(),
                keys.waiting(),
                Lane::Urgent.as_str().to_owned(),
                Lane::Normal.as_str().to_owned(),
            ]
        );
    }

    /// Each script gets every prelude definition its code reaches, through
    /// others too, and no other, each before the first code that uses it:
    /// a name of the prelude in the built code is defined there, earlier.
    #[test]
    fn each_script_gets_the_prelude_it_uses() {
        let definitions = definitions(PRELUDE).expect("the prelude is a list of definitions");
        assert!(definitions.len() > 40, "{}", definitions.len());
        for (name, own) in &super::SOURCES {
            let built = with_prelude(PRELUDE, own);
            let used = super::identifiers(&built);
            let at = |text: &str| built.find(text).unwrap_or(usize::MAX);
            // Every piece of code: the script's parts, in order, and the
            // definitions it got.
            let mut pieces: Vec<&str> = super::parts(own);
            let mut last = 0;
            for part in &pieces {
                assert!(at(part) != usize::MAX && at(part) >= last, "{name}: {part}");
                last = at(part);
            }
            for d in &definitions {
                let named = d.names.iter().any(|n| used.contains(n));
                assert_eq!(built.contains(d.text), named, "{name}: {:?}", d.names);
                if named {
                    pieces.push(d.text);
                }
            }
            for piece in pieces {
                let names = super::identifiers(piece);
                for d in &definitions {
                    if d.text != piece && d.names.iter().any(|n| names.contains(n)) {
                        assert!(
                            at(d.text) < at(piece),
                            "{name}: {:?} after its use",
                            d.names
                        );
                    }
                }
            }
        }
        // Enqueue decides its common requests before the definitions only
        // the rest uses are made.
        let enqueue = with_prelude(PRELUDE, super::SOURCES[0].1);
        let cut = enqueue.find("-- @prelude").expect("enqueue has two parts");
        let at = |text: &str| enqueue.find(text).unwrap_or(usize::MAX);
        assert!(at("local function request_common(") < cut);
        assert!(at("local function add_requested_job(") < cut);
        assert!(cut < at("local function request_rest("));
        assert!(cut < at("local function repair_job("));
        assert!(cut < at("local function pause_of("));
        assert_eq!(at("local function claim_some("), usize::MAX);
        assert_eq!(at("local function request_job("), usize::MAX);
        assert!(enqueue.len() < PRELUDE.len(), "the prelude is trimmed");
    }

    /// Comments name definitions without using them; strings may hold
    /// `--`; a prelude of a shape the scan does not read is kept whole.
    #[test]
    fn the_prelude_is_trimmed_by_code_only() {
        let prelude = "-- head\n\
                       local function a()\n  return '--'\nend\n\n\
                       -- b is not a()\n\
                       local function b()\n  return 1 -- c()\nend\n\
                       local C, D = 1, 2\n\
                       local function c()\n  return a() .. \"\\\"--\" .. C\nend\n";
        assert_eq!(
            with_prelude(prelude, "return c()"),
            "local function a()\n  return '--'\nend\n\n\
             -- b is not a()\n\
             local C, D = 1, 2\n\
             local function c()\n  return a() .. \"\\\"--\" .. C\nend\n\
             return c()"
        );
        assert_eq!(
            with_prelude(prelude, "return D"),
            "local C, D = 1, 2\nreturn D"
        );
        for other in [
            "local function a()\nend\nredis.call('TIME')\n",
            "local a = [[\nlocal b = 1\n]]\n",
        ] {
            assert_eq!(with_prelude(other, "return 1"), format!("{other}return 1"));
        }
    }

    /// A `-- @prelude` line puts what the code after it uses, and the code
    /// before it does not, there.
    #[test]
    fn a_prelude_line_makes_the_rest_later() {
        let prelude = "local function a()\nend\n\
                       local function b()\n  a()\nend\n\
                       local function c()\n  b()\nend\n";
        assert_eq!(
            with_prelude(
                prelude,
                "if a() then\n  return\nend\n-- @prelude\nreturn c()\n"
            ),
            "local function a()\nend\n\
             if a() then\n  return\nend\n\
             local function b()\n  a()\nend\n\
             local function c()\n  b()\nend\n\
             -- @prelude\nreturn c()\n"
        );
        assert_eq!(
            with_prelude(prelude, "-- @prelude first\nreturn b()\n"),
            "local function a()\nend\n\
             local function b()\n  a()\nend\n\
             -- @prelude first\nreturn b()\n"
        );
    }

    /// Whether a line of Lua joins something to a key prefix: the queue's
    /// (`prefix ..`) or one passed in (`ARGV[1] ..`).
    fn joins_to_prefix(code: &str) -> bool {
        let mut pieces: Vec<&str> = code.split("..").map(str::trim_end).collect();
        pieces.pop(); // What follows the last `..` is joined, not joined to.
        pieces.into_iter().any(|before| {
            before.ends_with("prefix")
                || before.rsplit_once("ARGV[").is_some_and(|(_, index)| {
                    index
                        .strip_suffix(']')
                        .is_some_and(|i| i.parse::<u32>().is_ok())
                })
        })
    }

    /// Keys a script does not get in `KEYS` it builds with the prelude's
    /// builders only, so the test above covers every name Lua makes: no
    /// other line joins anything to a prefix, and only `set_entry` joins
    /// with `|`.
    #[test]
    fn no_script_builds_a_key_name_outside_the_builders() {
        assert!(joins_to_prefix("  local job = ARGV[1] .. 'job:' .. member"));
        assert!(joins_to_prefix("redis.call('DEL', prefix .. 'dead:' .. e)"));
        assert!(!joins_to_prefix("local token = f[2] .. ':' .. attempt"));
        assert!(!joins_to_prefix("redis.call('SET', KEYS[3], ARGV[1])"));
        let mut joins = Vec::new();
        for (name, source) in sources() {
            for line in source.lines() {
                let code = line.split("--").next().unwrap_or_default();
                if joins_to_prefix(code) || code.contains("'|'") || code.contains("\"|\"") {
                    joins.push(format!("{name}: {}", line.trim()));
                }
            }
        }
        assert_eq!(
            joins,
            [
                "prelude: return prefix .. 'job:' .. member",
                "prelude: return member .. '|' .. job_id",
                "prelude: return prefix .. 'dead:' .. entry",
                "prelude: return prefix .. 'ids'",
                "prelude: return prefix .. 'revoked:' .. token",
                "prelude: return prefix .. 'released:' .. member",
                "prelude: return prefix .. 'paused'",
                "prelude: return prefix .. 'parked:' .. domain",
            ]
        );
    }
}
