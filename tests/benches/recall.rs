//! Recall latency at 1M messages on PostgreSQL: `recall_in` (the whole
//! path of `GET …/recall` below HTTP: the workstream lookup, then the
//! recall query) over a freshly migrated schema holding 1,000,000 messages
//! in ten workstreams — one of 900,000 and nine of about 11,000 — loaded
//! with one `INSERT … SELECT generate_series` so the migrations' search
//! column (its trigger) and indexes are maintained as appends maintain them.
//!
//! The words are planted to cover the shapes a recall meets, not one
//! corpus: a unique code per message (`rare<i>`), a word in every message
//! (`common`), a word in 1 % of the two workstreams queried (`often`), words frequent
//! in the small workstreams and absent from the big one (`medium` 1 %,
//! `weekly` 0.1 %), a topic dense in the big workstream's oldest tenth and
//! never since (`legacy`), a sparse old one (`archived`), a word nobody
//! wrote, and a two-word query. 95 % of the messages are compacted, by 100
//! runs. Classes are queried round-robin (so no class runs on a cache the
//! previous iterations of the same query warmed alone), a different
//! `rare<i>` each time; limit 20 (the API's default).
//!
//! Run:
//! ```text
//! cargo bench -p compactor-e2e --bench recall
//! ```
//! `RECALL_BENCH_MESSAGES` (default 1,000,000), `RECALL_BENCH_ITERATIONS`
//! per class (default 200), `BENCH_RUNS` (default 1),
//! `TEST_DATABASE_URL`. Target: p99 ≤ 50 ms over all classes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use compactor_e2e::bench::{bench_runs, env_or, ms, percentile, result};
use compactor_e2e::db::TestDb;
use compactor_producer::recall::{recall_in, RecallLimit, RecallQuery};
use compactor_shared::EntityKey;

/// One kind of query: a label, whether it asks the big workstream, and
/// the query (`{rare}` replaced by a code of that workstream).
struct Class {
    label: &'static str,
    big: bool,
    query: &'static str,
    /// Matches expected: `Some(n)` exactly, or at least one (`None`).
    expect: Expect,
}

#[derive(Clone, Copy)]
enum Expect {
    Exactly(usize),
    /// A full page (the recall limit).
    Full,
    /// A full page, or every match when fewer than a page exist among `n`
    /// messages (this function of `n` counts them).
    FullOf(fn(u64) -> usize),
    Some,
}

/// Messages of the first small workstream saying `often` among `n`: the
/// multiples of 9,000 (see [`load_sql`]).
fn often_small(n: u64) -> usize {
    usize::try_from(n / 9_000).unwrap_or(usize::MAX)
}

const CLASSES: &[Class] = &[
    Class {
        label: "rare_big",
        big: true,
        query: "{rare}",
        expect: Expect::Exactly(1),
    },
    Class {
        label: "rare_small",
        big: false,
        query: "{rare}",
        expect: Expect::Exactly(1),
    },
    Class {
        label: "common_big",
        big: true,
        query: "common",
        expect: Expect::Full,
    },
    Class {
        label: "two_words_big",
        big: true,
        query: "build common",
        expect: Expect::Full,
    },
    Class {
        label: "often_big",
        big: true,
        query: "often",
        expect: Expect::Full,
    },
    Class {
        label: "often_small",
        big: false,
        query: "often",
        expect: Expect::FullOf(often_small),
    },
    Class {
        label: "elsewhere_only_big",
        big: true,
        query: "medium",
        expect: Expect::Exactly(0),
    },
    Class {
        label: "elsewhere_rare_big",
        big: true,
        query: "weekly",
        expect: Expect::Exactly(0),
    },
    Class {
        label: "medium_small",
        big: false,
        query: "medium",
        expect: Expect::Full,
    },
    Class {
        label: "old_dense_big",
        big: true,
        query: "legacy",
        expect: Expect::Full,
    },
    Class {
        label: "old_sparse_big",
        big: true,
        query: "archived",
        expect: Expect::Some,
    },
    Class {
        label: "absent_big",
        big: true,
        query: "nosuchword",
        expect: Expect::Exactly(0),
    },
];

/// The load: `n` messages; workstream index `k` (0 = big) of message `i`
/// is 0 unless `i % 10 == 0`, then `1 + i % 9`.
fn load_sql(n: u64, ws: &[i64]) -> Vec<String> {
    let ids = ws.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let big = ws[0];
    vec![
        format!(
            "INSERT INTO compaction_runs (workstream_id, job_id, attempt, trigger, started_at, \
             finished_at, outcome, tokens_before, tokens_after, messages_compacted, chunks, \
             rollups, llm_tokens_in, llm_tokens_out) \
             SELECT {big}, g, 1, 'auto', now(), now(), 'committed', 0, 0, 0, 0, 0, 0, 0 \
             FROM generate_series(1, 100) AS g"
        ),
        format!(
            "INSERT INTO messages (workstream_id, role, parts, token_estimate, created_at) \
             SELECT (ARRAY[{ids}])[CASE WHEN i % 10 = 0 THEN 2 + i % 9 ELSE 1 END], \
               CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END, \
               json_build_array(json_build_object('type', 'text', 'text', \
                 'common words about the build rare' || i || ' ' \
                 || CASE WHEN i % 100 = 1 OR i % 9000 = 0 THEN 'often ' ELSE '' END \
                 || CASE WHEN i % 100 = 0 THEN 'medium ' ELSE '' END \
                 || CASE WHEN i % 1000 = 0 THEN 'weekly ' ELSE '' END \
                 || CASE WHEN i < {n} / 10 AND i % 10 = 1 THEN 'legacy ' ELSE '' END \
                 || CASE WHEN i < {n} / 2 AND i % 1000 = 3 THEN 'archived ' ELSE '' END \
                 || md5(i::text)))::text, \
               24, now() \
             FROM generate_series(1, {n}) AS i"
        ),
        // Message `i` (id `base + i`) is compacted when `i < 95 %`, by run
        // `i * 100 / n`: run `k`'s watermark is the id of the last `i` it
        // folds, and each workstream's watermark its last message below
        // 95 %.
        format!(
            "UPDATE compaction_runs SET watermark = \
               (SELECT min(id) - 1 FROM messages) \
               + ((id - (SELECT min(id) FROM compaction_runs) + 1) * {n} + 99) / 100 - 1 \
             WHERE workstream_id = {big}"
        ),
        format!(
            "UPDATE workstreams SET last_compacted_message_id = \
               (SELECT max(m.id) FROM messages m WHERE m.workstream_id = workstreams.id \
                  AND m.id - (SELECT min(id) - 1 FROM messages) < {n} * 95 / 100) \
             WHERE id IN ({ids})"
        ),
    ]
}

/// A `rare<i>` code of the big workstream (`i % 10 != 0`) or of the first
/// small one (`i % 10 == 0`, `i % 9 == 0`: multiples of 90), from `seed`.
fn rare_code(n: u64, big: bool, seed: u64) -> String {
    let x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 11;
    if big {
        let i = 1 + x % (n - 1);
        let i = if i.is_multiple_of(10) { i - 1 } else { i };
        format!("rare{i}")
    } else {
        let i = 90 * (1 + x % (n / 90 - 1));
        format!("rare{i}")
    }
}

fn main() {
    let rt = compactor_e2e::bench::runtime();
    rt.block_on(async {
        let n: u64 = env_or("RECALL_BENCH_MESSAGES", 1_000_000);
        let iterations: usize = env_or("RECALL_BENCH_ITERATIONS", 200);
        let db = TestDb::postgres().await;
        let mut ws = Vec::new();
        let mut keys = Vec::new();
        for k in 0..10 {
            let key = EntityKey::parse("bench", &format!("recall{k}")).unwrap();
            ws.push(db.store.ensure_workstream(&key).await.unwrap().id);
            keys.push(key);
        }
        let loading = Instant::now();
        // One transaction without the store's statement timeout (a load of
        // 1M rows takes minutes; the timeout guards service queries).
        let load = load_sql(n, &ws).join("; ");
        db.exec(&format!(
            "BEGIN; SET LOCAL statement_timeout = 0; {load}; COMMIT"
        ))
        .await;
        println!(
            "loaded {n} messages in {:.1} s (search column and indexes maintained)",
            loading.elapsed().as_secs_f64()
        );
        db.exec("ANALYZE messages").await;
        db.exec("ANALYZE compaction_runs").await;
        let limit = RecallLimit::default();
        for run in 0..bench_runs(1) {
            let mut by_class: Vec<Vec<Duration>> = vec![Vec::new(); CLASSES.len()];
            let mut all = Vec::new();
            for it in 0..iterations {
                for (c, class) in CLASSES.iter().enumerate() {
                    let seed = (run * iterations + it) as u64 * 31 + c as u64;
                    let q = class
                        .query
                        .replace("{rare}", &rare_code(n, class.big, seed));
                    let query = RecallQuery::parse(&q).unwrap();
                    let key = if class.big { &keys[0] } else { &keys[1] };
                    let started = Instant::now();
                    let found = recall_in(&db.store, key, &query, limit).await.unwrap();
                    let took = started.elapsed();
                    let got = found.messages.len();
                    match class.expect {
                        Expect::Exactly(e) => assert_eq!(got, e, "{}: {q}", class.label),
                        Expect::Full => {
                            assert_eq!(got, limit.get() as usize, "{}: {q}", class.label)
                        }
                        Expect::FullOf(matches) => assert_eq!(
                            got,
                            (limit.get() as usize).min(matches(n)),
                            "{}: {q}",
                            class.label
                        ),
                        Expect::Some => assert!(got > 0, "{}: {q}", class.label),
                    }
                    by_class[c].push(took);
                    all.push(took);
                }
            }
            for (class, times) in CLASSES.iter().zip(&mut by_class) {
                times.sort();
                let (p50, p99) = (percentile(times, 0.50), percentile(times, 0.99));
                result("recall", &format!("{}_p50", class.label), ms(p50), "ms");
                result("recall", &format!("{}_p99", class.label), ms(p99), "ms");
                println!(
                    "{:<20} p50 {:>7.2} ms  p99 {:>7.2} ms",
                    class.label,
                    ms(p50),
                    ms(p99)
                );
            }
            all.sort();
            let (p50, p99) = (percentile(&all, 0.50), percentile(&all, 0.99));
            result("recall", "all_p50", ms(p50), "ms");
            result("recall", "all_p99", ms(p99), "ms");
            println!(
                "all classes ({} recalls): p50 {:.2} ms, p99 {:.2} ms (target p99 ≤ 50 ms)",
                all.len(),
                ms(p50),
                ms(p99)
            );
        }
    });
}
