//! The coding-agent session: a developer and an agent with tools (`bash`,
//! `read_file`, `edit_file`, `grep`, `list_files`, `kubectl`) spend a long
//! day on a Rust billing service: a stale-FX-rate bug, a migration and
//! backfill, a staging pod that keeps dying, a release.
//!
//! Planted facts: paths (one the user names in the very first message),
//! commands, SHAs, UUIDs, ticket keys, error codes, URLs, counts, dotted
//! config names, `UPPER_SNAKE` settings, versions, host:port, durations and
//! a name; 15 of them only ever in tool output (an error code on the third
//! line of a compiler error, the SHA in `git commit` output, `OOMKilled` in
//! `kubectl describe`…). Twenty decisions and constraints, six of them
//! replaced later ("Scrap SQLite, use Postgres instead", 37s then 45s).
//!
//! Noise: files read and searched (hundreds of distinct paths the agent
//! merely reads), green test runs, git logs full of SHAs, pod listings,
//! "thanks" and "never mind, found it".

use serde_json::json;

use super::sessions::{Builder, Kind, Rng, Session, SessionSpec, Source};
use super::weave::{in_order, weave, Episode};

const CRATES: &[&str] = &[
    "billing-core",
    "billing-api",
    "invoice-worker",
    "fx-client",
    "ledger-export",
    "tax-rules",
];
const DIRS: &[&str] = &[
    "src",
    "src/model",
    "src/db",
    "src/http",
    "src/export",
    "src/tax",
    "src/util",
    "tests",
];
const FILES: &[&str] = &[
    "mod.rs",
    "invoice.rs",
    "line_item.rs",
    "tenant.rs",
    "retry.rs",
    "snapshot.rs",
    "csv.rs",
    "schema.rs",
    "handlers.rs",
    "auth.rs",
    "metrics.rs",
    "error.rs",
    "clock.rs",
    "pagination.rs",
    "currency.rs",
    "vat.rs",
    "credit_note.rs",
    "payout.rs",
    "webhook.rs",
    "idempotency.rs",
];
/// Files the agent keeps coming back to.
const COMMON: &[&str] = &[
    "crates/billing-core/src/lib.rs",
    "crates/billing-core/src/money/mod.rs",
    "crates/billing-api/src/routes/invoices.rs",
    "crates/invoice-worker/src/main.rs",
    "crates/fx-client/src/client.rs",
    "Cargo.toml",
    "README.md",
];
const TYPES: &[&str] = &[
    "Invoice",
    "LineItem",
    "Money",
    "Currency",
    "RateSnapshot",
    "TenantId",
    "TaxRule",
    "CreditNote",
    "Payout",
    "ExportBatch",
];
const FIELDS: &[&str] = &[
    "amount_minor",
    "currency",
    "issued_at",
    "tenant_id",
    "lines",
    "rate",
    "status",
    "due_on",
    "vat_rate",
    "external_ref",
];
const FNS: &[&str] = &[
    "total",
    "apply_vat",
    "convert",
    "for_tenant",
    "load_page",
    "mark_paid",
    "to_csv_row",
    "validate",
    "with_retry",
    "next_due",
];

/// Seeded values of one session.
struct Values {
    ticket: String,
    incident: String,
    fix_sha: String,
    bad_sha: String,
    log_uuid: String,
    tenant_uuid: String,
    pr: u64,
    rows: u64,
    tests_total: u64,
    pool: u64,
    mem: &'static str,
    db_ip: String,
    redis_port: u64,
    timeout_ms: u64,
    t_old: u64,
    msrv_old: u64,
    batch_old: u64,
    rustc_minor: u64,
    nightly: String,
    p99: u64,
    migration: String,
    release_minor: u64,
    in_flight: u64,
    oncall: &'static str,
}

impl Values {
    fn new(rng: &mut Rng) -> Values {
        Values {
            ticket: format!("BILL-{}", rng.digits(4)),
            incident: format!("INC-{}", rng.digits(5)),
            fix_sha: rng.hex(7),
            bad_sha: rng.hex(8),
            log_uuid: rng.uuid(),
            tenant_uuid: rng.uuid(),
            pr: rng.range(1_100, 2_999),
            rows: rng.range(20_000, 89_999),
            tests_total: rng.range(300, 499),
            pool: rng.range(16, 40),
            mem: rng.pick(&["384Mi", "512Mi", "640Mi"]),
            db_ip: format!("10.42.{}.{}", rng.range(2, 250), rng.range(2, 250)),
            redis_port: rng.range(6_380, 6_399),
            timeout_ms: rng.range(6, 16) * 250,
            t_old: rng.range(31, 39),
            msrv_old: rng.range(70, 74),
            batch_old: rng.range(5, 15) * 50,
            rustc_minor: rng.range(77, 80),
            nightly: format!("{}h{:02}m", rng.range(1, 2), rng.range(10, 59)),
            p99: rng.range(61, 99) * 10,
            migration: format!("2024{:02}{:02}", rng.range(3, 9), rng.range(10, 28)),
            release_minor: rng.range(10, 20),
            in_flight: rng.range(3, 8) * 4,
            oncall: rng.pick(&["Priya Raman", "Jonas Eklund", "Marta Kowalczyk"]),
        }
    }
}

/// A coding session of `spec.messages` messages (at least what its story
/// needs).
pub fn generate(spec: SessionSpec) -> Session {
    let mut b = Builder::new(spec.seed);
    let v = Values::new(&mut b.rng);
    // Each replacement comes a while after what it replaces, spread over
    // the second half of the session.
    let mut order: Vec<usize> = (0..=17).collect();
    order.push(35); // Postgres instead of SQLite
    order.extend(18..=22);
    order.push(36); // the new timeout
    order.extend(23..=25);
    order.push(37); // the new MSRV
    order.extend(26..=33);
    order.push(38); // the new batch size
    order.push(34);
    order.push(39); // the new canary region
    order.push(40); // the renamed route
    let episodes = in_order(story(&v), &order);
    weave(&mut b, spec.messages, &episodes, noise);
    b.finish(spec)
}

fn bash(command: &str) -> serde_json::Value {
    json!({ "command": command })
}

fn story(v: &Values) -> Vec<Episode<'_>> {
    vec![
        // 1. The user names the file in the very first message.
        Box::new(move |b: &mut Builder| {
            let ticket = b.value(Kind::Identifier, Source::User, &v.ticket);
            let path = b.value(
                Kind::Path,
                Source::User,
                "services/billing/src/fx/rates_cache.rs",
            );
            b.user(format!(
                "Morning! Today we're picking up {ticket}: invoices in non-EUR currencies are sometimes priced \
                 with a stale FX rate. I'm fairly sure the bug is in {path}, the TTL check looks off to me. \
                 Can you read it and the tests around it first, before changing anything?"
            ));
            let content = rust_file(&mut b.rng, "RateCache");
            b.tool(
                Some("Sure. Reading the cache module first."),
                "read_file",
                json!({ "path": path }),
                content,
            );
            b.assistant(
                "The cache stores one snapshot per currency pair and compares `fetched_at` against the TTL, \
                 but it uses the snapshot's *provider* timestamp, not the time we fetched it. When the provider \
                 publishes late, a fresh fetch already looks old, and when it publishes early an old one looks \
                 fresh. That matches the symptom. I'll look at the tests next.",
            );
        }),
        // 2. Ground rules.
        Box::new(move |b: &mut Builder| {
            let prod = b.constraint(Kind::Identifier, "billing-prod-eu1");
            let ask = b.constraint(Kind::Phrase, "without asking me first");
            b.user(format!(
                "Ground rules before you touch anything: never run migrations against {prod} from this machine, \
                 and don't add new crates to billing-core {ask}."
            ));
            b.assistant(
                "Understood: no migrations against the production database from here, and no new dependencies \
                 in billing-core unless you approve them.",
            );
        }),
        // 3. A failing test run; the failing file is only in the panic message.
        Box::new(move |b: &mut Builder| {
            let cmd = b.value(
                Kind::Command,
                Source::User,
                "cargo test -p billing-core --test fx_roundtrip -- --nocapture",
            );
            let path = b.value(
                Kind::Path,
                Source::ToolOutputOnly,
                "crates/billing-core/src/money/round.rs",
            );
            b.user(format!("Run the FX round-trip tests: {cmd}"));
            let line = b.rng.range(180, 260);
            b.tool(
                None,
                "bash",
                bash(&cmd),
                format!(
                    "   Compiling billing-core v0.14.2 (/work/ledgerline/crates/billing-core)\n    Finished test [unoptimized + debuginfo] target(s) in 9.81s\n     Running tests/fx_roundtrip.rs (target/debug/deps/fx_roundtrip-3b1f0c9a2d7e4f60)\n\nrunning 14 tests\ntest fx_roundtrip::eur_to_eur_is_identity ... ok\ntest fx_roundtrip::usd_to_eur_rounds_half_even ... ok\ntest fx_roundtrip::eur_to_sek_uses_fresh_rate ... FAILED\ntest fx_roundtrip::eur_to_nok_uses_fresh_rate ... FAILED\ntest fx_roundtrip::gbp_to_eur_small_amounts ... ok\ntest fx_roundtrip::jpy_has_no_minor_units ... ok\ntest fx_roundtrip::eur_to_dkk_uses_fresh_rate ... FAILED\n\nfailures:\n\n---- fx_roundtrip::eur_to_sek_uses_fresh_rate stdout ----\nthread 'fx_roundtrip::eur_to_sek_uses_fresh_rate' panicked at {path}:{line}:9:\nassertion `left == right` failed: converted with a stale snapshot\n  left: 1148213\n right: 1151790\n\nfailures:\n    fx_roundtrip::eur_to_dkk_uses_fresh_rate\n    fx_roundtrip::eur_to_nok_uses_fresh_rate\n    fx_roundtrip::eur_to_sek_uses_fresh_rate\n\ntest result: FAILED. 11 passed; 3 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.31s\n"
                ),
            );
            b.assistant(
                "Three failures, all Nordic currencies, all in the rounding of converted amounts: the rounding \
                 helper runs on the cached rate before the refresh decision is made. So the stale rate is used \
                 exactly when the TTL check misfires.",
            );
        }),
        // 4. A count the user gives.
        Box::new(move |b: &mut Builder| {
            let total = b.value(Kind::Quantity, Source::User, v.tests_total.to_string());
            b.user(format!(
                "FYI CI is red as well: 3 of {total} tests fail on main since this morning."
            ));
            b.assistant("Noted. Those are likely the same three; I'll confirm once the fix is in.");
        }),
        // 5. An edit that does not compile; the error code is on line 3.
        Box::new(move |b: &mut Builder| {
            let path = b.value(
                Kind::Path,
                Source::ToolInput,
                "crates/invoice-worker/src/jobs/reconcile.rs",
            );
            let code = b.value(Kind::ErrorCode, Source::ToolOutputOnly, "E0502");
            b.tool(
                Some("The reconcile job caches rates the same way; fixing it there too."),
                "edit_file",
                json!({ "path": path, "old": "let rate = cache.get(pair);", "new": "let rate = cache.get_fresh(pair, now)?;" }),
                "Edited 1 location.",
            );
            b.tool(
                None,
                "bash",
                bash("cargo build -p invoice-worker"),
                format!(
                    "   Compiling fx-client v0.9.3 (/work/ledgerline/crates/fx-client)\n   Compiling invoice-worker v0.8.0 (/work/ledgerline/crates/invoice-worker)\nerror[{code}]: cannot borrow `self.pending` as mutable because it is also borrowed as immutable\n  --> {path}:88:17\n   |\n85 |         for inv in self.pending.values() {{\n   |                    --------------------- immutable borrow occurs here\n...\n88 |                 self.pending.insert(inv.id, retry);\n   |                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ mutable borrow occurs here\n\nerror: could not compile `invoice-worker` (bin \"invoice-worker\") due to 1 previous error\n"
                ),
            );
            b.assistant(
                "The borrow checker rejects the loop: it keeps a reference into the pending map while inserting \
                 into it. I'll collect the retries first and insert them after the loop.",
            );
            b.tool(
                None,
                "edit_file",
                json!({ "path": path, "old": "self.pending.insert(inv.id, retry);", "new": "retries.push((inv.id, retry));" }),
                "Edited 1 location.",
            );
            b.tool(None, "bash", bash("cargo build -p invoice-worker"), "   Compiling invoice-worker v0.8.0 (/work/ledgerline/crates/invoice-worker)\n    Finished dev [unoptimized + debuginfo] target(s) in 14.02s\n");
        }),
        // 6. A decision, replaced much later.
        Box::new(move |b: &mut Builder| {
            let sqlite = b.decision(Kind::Phrase, "SQLite");
            b.user(format!(
                "For the local job store let's go with {sqlite}: one file, nothing to run."
            ));
            b.assistant("OK, SQLite for the local job store; I'll keep the schema portable.");
        }),
        // 7. A setting and a URL from the user.
        Box::new(move |b: &mut Builder| {
            let setting = b.value(
                Kind::Setting,
                Source::User,
                format!("FX_PROVIDER_TIMEOUT_MS={}", v.timeout_ms),
            );
            let url = b.value(
                Kind::Url,
                Source::User,
                "https://fx.internal.example.com/v2/rates?base=EUR",
            );
            b.user(format!(
                "The FX client reads {setting} from the environment, keep that name. The provider endpoint is {url}."
            ));
            b.assistant(
                "Got it, the client config stays as it is; I'll only change when we refresh.",
            );
        }),
        // 8. A timeout, replaced later.
        Box::new(move |b: &mut Builder| {
            let t = b.decision(Kind::Duration, format!("{}s", v.t_old));
            b.user(format!(
                "Set the request timeout of the invoice API client to {t}; upstream sometimes needs half a minute."
            ));
            b.assistant("Done in the client builder; the timeout is now a named constant.");
        }),
        // 9. An application error code on the second line of a failed request.
        Box::new(move |b: &mut Builder| {
            let code = b.value(Kind::ErrorCode, Source::ToolOutputOnly, "ERR_FX_STALE_RATE");
            let request = b.rng.hex(12);
            b.tool_error(
                Some("Reproducing through the API with a SEK invoice."),
                "bash",
                bash("curl -s -i -X POST http://localhost:8080/v1/invoices/preview -d @fixtures/sek_invoice.json"),
                format!(
                    "HTTP/1.1 422 Unprocessable Entity\n{{\"error\":{{\"code\":\"{code}\",\"message\":\"rate for SEK is older than the allowed age\",\"request_id\":\"req_{request}\"}}}}\n"
                ),
            );
            b.assistant("The API refuses the preview instead of pricing it with the stale rate, so that path is safe; only the batch path misprices.");
        }),
        // 10. A UUID only in the logs.
        Box::new(move |b: &mut Builder| {
            let uuid = b.value(Kind::Identifier, Source::ToolOutputOnly, &v.log_uuid);
            let mut out = String::new();
            for _ in 0..4 {
                out.push_str(&format!(
                    "2024-05-21T09:{:02}:{:02}Z  INFO invoice_worker::jobs::export: batch exported count={}\n",
                    b.rng.range(10, 59),
                    b.rng.range(10, 59),
                    b.rng.range(10, 90)
                ));
            }
            out.push_str(&format!(
                "2024-05-21T09:41:07Z ERROR invoice_worker::jobs::reconcile: invoice {uuid} failed: upstream returned 503\n"
            ));
            out.push_str("2024-05-21T09:41:07Z  WARN invoice_worker::retry: scheduling retry attempt=2 backoff_ms=800\n");
            b.tool(
                Some("Checking the staging worker's recent errors."),
                "kubectl",
                json!({ "args": "-n billing-staging logs deploy/invoice-worker --since=1h" }),
                out,
            );
            b.assistant("One invoice failed on an upstream 503 and is being retried; unrelated to the FX bug.");
        }),
        // 11. A dotted config name only in a tool's output.
        Box::new(move |b: &mut Builder| {
            let name = b.value(
                Kind::ConfigName,
                Source::ToolOutputOnly,
                "fx.cache.ttl_seconds",
            );
            b.tool(
                Some("Let me see what the running config says about the cache."),
                "bash",
                bash("billingctl config get fx --env staging"),
                format!(
                    "fx.provider = \"primary\"\n{name} = 900\nfx.cache.max_entries = 4096\nfx.refresh.jitter_ms = 250\nfx.fallback.enabled = true\n"
                ),
            );
            b.assistant("Staging keeps rates for fifteen minutes. The bug is not the TTL value, it's which timestamp is compared.");
        }),
        // 12. A flag name and a constraint on it.
        Box::new(move |b: &mut Builder| {
            let flag = b.value(
                Kind::ConfigName,
                Source::User,
                "billing.invoice_v2_fx_cache",
            );
            let off = b.constraint(Kind::Phrase, "stay off in prod");
            b.user(format!(
                "The fix ships behind the flag {flag}. It has to {off} until finance signs off."
            ));
            b.assistant(
                "Understood. I'll wire the new refresh path behind that flag, default off.",
            );
        }),
        // 13. A migration, a backfill and its row count.
        Box::new(move |b: &mut Builder| {
            let path = b.value(
                Kind::Path,
                Source::ToolInput,
                format!("migrations/{}_add_fx_snapshot.sql", v.migration),
            );
            let cmd = b.value(
                Kind::Command,
                Source::Assistant,
                "sqlx migrate run --source migrations",
            );
            let rows = b.value(Kind::Quantity, Source::ToolOutputOnly, v.rows.to_string());
            b.tool(
                Some("Adding a table that records which snapshot priced each invoice."),
                "edit_file",
                json!({ "path": path, "old": "", "new": "CREATE TABLE fx_snapshot (\n  invoice_id UUID PRIMARY KEY,\n  pair TEXT NOT NULL,\n  rate NUMERIC(18, 8) NOT NULL,\n  fetched_at TIMESTAMPTZ NOT NULL\n);" }),
                "Created file.",
            );
            b.tool(
                Some(&format!("Running {cmd} against the dev database.")),
                "bash",
                bash(&cmd),
                "Applied 20240301_init.sql (4.2ms)\nApplied 20240415_tenants.sql (2.9ms)\nApplied the fx snapshot migration (6.1ms)\n",
            );
            b.tool(
                Some("Backfilling the snapshot for open invoices."),
                "bash",
                bash("psql \"$DEV_DATABASE_URL\" -f scripts/backfill_fx_snapshot.sql"),
                format!("BEGIN\nINSERT 0 0\nUPDATE {rows}\nCOMMIT\n"),
            );
            b.assistant("Migration applied and the backfill went through in one transaction.");
        }),
        // 14. A pod that keeps dying: OOMKilled, its limit and an env setting, all in tool output.
        Box::new(move |b: &mut Builder| {
            let pod = format!("invoice-worker-{}-{}", b.rng.hex(9), b.rng.hex(5));
            let oom = b.value(Kind::ErrorCode, Source::ToolOutputOnly, "OOMKilled");
            let mem = b.value(Kind::Quantity, Source::ToolOutputOnly, v.mem);
            let pool = b.value(
                Kind::Setting,
                Source::ToolOutputOnly,
                format!("DATABASE_POOL_SIZE={}", v.pool),
            );
            b.user("The staging worker restarted 6 times overnight. Can you find out why?");
            let image = b.rng.hex(7);
            b.tool(
                None,
                "kubectl",
                json!({ "args": format!("-n billing-staging describe pod {pod}") }),
                format!(
                    "Name:             {pod}\nNamespace:        billing-staging\nPriority:         0\nNode:             ip-10-0-3-17.eu-west-1.compute.internal\nStatus:           Running\nContainers:\n  invoice-worker:\n    Image:          registry.example.com/billing/invoice-worker:sha-{image}\n    State:          Running\n      Started:      Tue, 21 May 2024 04:12:55 +0000\n    Last State:     Terminated\n      Reason:       {oom}\n      Exit Code:    137\n    Ready:          True\n    Restart Count:  6\n    Limits:\n      cpu:     500m\n      memory:  {mem}\n    Requests:\n      cpu:     250m\n      memory:  256Mi\nEvents:\n  Type     Reason     Age                 From     Message\n  ----     ------     ----                ----     -------\n  Warning  BackOff    12m (x4 over 3h)    kubelet  Back-off restarting failed container\n"
                ),
            );
            b.tool(
                None,
                "kubectl",
                json!({ "args": format!("-n billing-staging exec {pod} -- env") }),
                format!("RUST_LOG=info\n{pool}\nFX_CACHE_BACKEND=redis\nHOSTNAME={pod}\nHOME=/home/app\n"),
            );
            b.assistant(
                "It is killed for memory: the export job loads a whole tenant's invoices at once, and with that many \
                 pool connections each holding a prepared result set it goes over the limit. Streaming the export \
                 would fix it; raising the limit would only hide it.",
            );
        }),
        // 15. A connection error: host:port on its third line.
        Box::new(move |b: &mut Builder| {
            let hp = b.value(
                Kind::HostPort,
                Source::ToolOutputOnly,
                format!("{}:5432", v.db_ip),
            );
            b.tool_error(
                Some("Running the worker against the staging job store."),
                "bash",
                bash("cargo run -p invoice-worker -- --once"),
                format!(
                    "Error: failed to connect to the job store\n\nCaused by:\n    connection refused (os error 111) at {hp}\n"
                ),
            );
            let econn = b.value(Kind::ErrorCode, Source::ToolOutputOnly, "ECONNREFUSED");
            b.tool_error(
                None,
                "bash",
                bash("cd admin-ui && npm run test:e2e"),
                format!(
                    "> admin-ui@0.3.0 test:e2e\n> playwright test\n\nRunning 12 tests using 2 workers\n  1) invoices.spec.ts:14:3 > lists invoices\n    Error: connect {econn} 127.0.0.1:8081\n\n  1 failed\n  11 passed (21.4s)\n"
                ),
            );
            b.assistant("Both are just the port-forward being down; I'll restart it and carry on.");
        }),
        // 16. Where the FX cache lives.
        Box::new(move |b: &mut Builder| {
            let hp = b.value(
                Kind::HostPort,
                Source::User,
                format!("redis-fx.billing.svc:{}", v.redis_port),
            );
            let inproc = b.decision(Kind::Phrase, "rather than in-process");
            b.user(format!(
                "The FX cache lives in {hp} in staging, use that and not the shared Redis. And keep the cache in Redis {inproc} memory, we run several replicas."
            ));
            b.assistant("Will do: the cache client takes its address from the config, and the in-memory map goes away.");
        }),
        // 17. The commit: its SHA only in git's output.
        Box::new(move |b: &mut Builder| {
            let sha = b.value(Kind::Identifier, Source::ToolOutputOnly, &v.fix_sha);
            b.user("Looks right. Commit it.");
            b.tool(
                None,
                "bash",
                bash(&format!("git commit -am \"fx: refresh stale rates before rounding ({})\"", v.ticket)),
                format!(
                    "[fix/fx-stale-rate {sha}] fx: refresh stale rates before rounding ({})\n 4 files changed, 112 insertions(+), 29 deletions(-)\n",
                    v.ticket
                ),
            );
            b.assistant("Committed on the fix branch.");
        }),
        // 18. The pull request: its URL only in the tool's output.
        Box::new(move |b: &mut Builder| {
            let url = b.value(
                Kind::Url,
                Source::ToolOutputOnly,
                format!("https://github.com/acme/ledgerline/pull/{}", v.pr),
            );
            b.user("Open a PR please, draft is fine.");
            b.tool(
                None,
                "bash",
                bash("gh pr create --draft --fill"),
                format!("Creating draft pull request for fix/fx-stale-rate into main in acme/ledgerline\n\n{url}\n"),
            );
            b.assistant("Draft PR is open.");
        }),
        // 19. The user points at the regression.
        Box::new(move |b: &mut Builder| {
            let sha = b.value(Kind::Identifier, Source::User, &v.bad_sha);
            b.user(format!("I think the regression came in with {sha}, the lazy refresh refactor. Can you read that diff?"));
            let rest = b.rng.hex(32);
            b.tool(
                None,
                "bash",
                bash(&format!("git show --stat {sha}")),
                format!(
                    "commit {sha}{rest}\nAuthor: Sam Ortiz <sam@acme.example>\nDate:   Mon May 13 16:02:11 2024 +0200\n\n    fx: refresh rates lazily on first use\n\n crates/fx-client/src/client.rs      | 41 ++++++++-----\n services/billing/src/fx/mod.rs      | 18 +++---\n 2 files changed, 37 insertions(+), 22 deletions(-)\n"
                ),
            );
            b.assistant("Yes: that change moved the timestamp the cache compares from fetch time to the provider's publish time.");
        }),
        // 20. A release and the toolchain.
        Box::new(move |b: &mut Builder| {
            let rc = b.value(
                Kind::Version,
                Source::User,
                format!("v2.{}.0-rc.2", v.release_minor),
            );
            b.user(format!(
                "We release this as {rc} on Thursday. Which toolchain is CI on?"
            ));
            let rustc = b.value(
                Kind::Version,
                Source::ToolOutputOnly,
                format!("1.{}.0", v.rustc_minor),
            );
            let (h1, h2) = (b.rng.hex(9), b.rng.hex(9));
            b.tool(
                None,
                "bash",
                bash("rustc --version && cargo --version"),
                format!("rustc {rustc} ({h1} 2024-04-29)\ncargo {rustc} ({h2} 2024-04-16)\n"),
            );
            b.assistant("CI uses the toolchain from rust-toolchain.toml, the same stable as here.");
        }),
        // 21. MSRV, replaced later.
        Box::new(move |b: &mut Builder| {
            let msrv = b.decision(Kind::Version, format!("1.{}", v.msrv_old));
            b.user(format!(
                "Keep the MSRV at {msrv}: the on-prem customers build with an old toolchain, so no let-else chains or newer std APIs."
            ));
            b.assistant("OK, I'll stick to what that release supports and set rust-version in the manifests.");
        }),
        // 22. The nightly duration, only in logs.
        Box::new(move |b: &mut Builder| {
            let d = b.value(Kind::Duration, Source::ToolOutputOnly, &v.nightly);
            let invoices = b.rng.range(2_000, 3_000);
            b.tool(
                Some("How long does the nightly reconcile take now?"),
                "kubectl",
                json!({ "args": "-n billing-staging logs job/reconcile-nightly --tail=3" }),
                format!(
                    "2024-05-21T02:00:01Z  INFO reconcile: started tenants=61\n2024-05-21T03:41:55Z  INFO reconcile: finished in {d} invoices={invoices} failed=0\n2024-05-21T03:41:55Z  INFO reconcile: exported to s3://acme-billing-exports/2024-05-21/\n"
                ),
            );
            b.assistant("The nightly run is long but healthy; nothing failed.");
        }),
        // 23. A latency the user quotes, and who is on call.
        Box::new(move |b: &mut Builder| {
            let p99 = b.value(Kind::Duration, Source::User, format!("{}ms", v.p99));
            let who = b.value(Kind::PersonName, Source::User, v.oncall);
            b.user(format!(
                "Also, the p99 of the preview endpoint is {p99}; it should be well under 300ms. {who} is on call for billing this week if you need a second pair of eyes."
            ));
            b.assistant("I'll look at the preview path after the fix; the refresh should not sit on the request path at all.");
        }),
        // 24. How the user runs things.
        Box::new(move |b: &mut Builder| {
            let run = b.value(
                Kind::Command,
                Source::User,
                "RUST_LOG=billing=debug cargo run -p billing-api",
            );
            let up = b.value(
                Kind::Command,
                Source::User,
                "docker compose -f deploy/compose.dev.yml up -d db",
            );
            b.user(format!(
                "To run the API locally I use {run}, after {up} for the database."
            ));
            b.assistant("Thanks, I'll use the same so the logs look the same as yours.");
        }),
        // 25. Restarting staging: a command only in a tool input.
        Box::new(move |b: &mut Builder| {
            let cmd = b.value(
                Kind::Command,
                Source::ToolInput,
                "kubectl -n billing-staging rollout restart deploy/invoice-worker",
            );
            b.tool(
                Some("Restarting the staging worker to pick up the new config."),
                "bash",
                bash(&cmd),
                "deployment.apps/invoice-worker restarted\n",
            );
        }),
        // 26. Two files the user names.
        Box::new(move |b: &mut Builder| {
            let deploy = b.value(
                Kind::Path,
                Source::User,
                "deploy/k8s/invoice-worker/deployment.yaml",
            );
            let etc = b.value(Kind::Path, Source::User, "/etc/billing/fx-providers.toml");
            b.user(format!(
                "The resource limits are in {deploy}. On the hosts, {etc} lists the providers and their priorities."
            ));
            let yaml = yaml_deployment(&mut b.rng);
            b.tool(None, "read_file", json!({ "path": deploy }), yaml);
            b.assistant("The limits are set per container there; I'll leave them alone for now.");
        }),
        // 27. A script the assistant creates.
        Box::new(move |b: &mut Builder| {
            let path = b.value(Kind::Path, Source::Assistant, "scripts/seed_fx_fixtures.py");
            b.assistant(format!(
                "I'll add a small fixture generator at {path} so the round-trip tests get rates with explicit fetch times."
            ));
            b.tool(
                None,
                "edit_file",
                json!({ "path": path, "old": "", "new": "import json, sys\n\nPAIRS = [\"EURSEK\", \"EURNOK\", \"EURDKK\"]\n" }),
                "Created file.",
            );
        }),
        // 28. Links.
        Box::new(move |b: &mut Builder| {
            let dash = b.value(
                Kind::Url,
                Source::User,
                "https://grafana.internal.example.com/d/inv-worker/invoice-worker?orgId=1",
            );
            b.user(format!(
                "Dashboard for the worker, if you want to watch the rollout: {dash}"
            ));
            let runbook = b.value(
                Kind::Url,
                Source::Assistant,
                "https://wiki.acme.internal/runbooks/billing/fx-cache",
            );
            b.tool(None, "read_file", json!({ "path": "docs/operations.md" }), format!(
                "# Operations\n\n## FX cache\n\nSee the runbook: {runbook}\n\nFlushing the cache is safe at any time; rates are refetched on demand.\n"
            ));
            b.assistant(format!("The runbook at {runbook} says flushing the cache is safe, so the rollout needs no migration step for it."));
        }),
        // 29. An incident, a provider error code, the affected tenant.
        Box::new(move |b: &mut Builder| {
            let inc = b.value(Kind::Identifier, Source::User, &v.incident);
            let code = b.value(Kind::ErrorCode, Source::User, "RATE_LIMIT_EXCEEDED");
            let tenant = b.value(Kind::Identifier, Source::User, &v.tenant_uuid);
            b.user(format!(
                "This is also {inc} on the incident board. Careful with refreshes: the provider answers 429 with {code} if we refresh more than once a minute. The tenant that reported it is {tenant}."
            ));
            b.assistant("Then the refresh needs a per-pair single-flight guard so a burst of invoices triggers one fetch, not one each.");
        }),
        // 30. A worker setting.
        Box::new(move |b: &mut Builder| {
            let s = b.value(
                Kind::Setting,
                Source::User,
                format!("RECONCILE_MAX_IN_FLIGHT={}", v.in_flight),
            );
            b.user(format!(
                "Staging runs the worker with {s}; production uses the same."
            ));
            b.assistant("OK, I'll size the single-flight map for that.");
        }),
        // 31. Batch size, replaced later.
        Box::new(move |b: &mut Builder| {
            let batch = b.decision(Kind::Setting, format!("INVOICE_BATCH_SIZE={}", v.batch_old));
            b.user(format!(
                "For the backfill job use {batch}; we can tune it later."
            ));
            b.assistant("Set in the job's config map.");
        }),
        // 32. Canary region, replaced later.
        Box::new(move |b: &mut Builder| {
            let region = b.decision(Kind::Identifier, "eu-west-1");
            b.user(format!("Deploy the canary to {region} first."));
            b.assistant("Noted for the rollout plan.");
        }),
        // 33. A route, renamed later.
        Box::new(move |b: &mut Builder| {
            let route = b.decision(Kind::Path, "/v2/fx-snapshots");
            b.user(format!("Expose the snapshots read-only under {route}."));
            b.assistant("I'll add the handler with a read-only scope.");
        }),
        // 34. More constraints and decisions.
        Box::new(move |b: &mut Builder| {
            let cents = b.decision(Kind::Phrase, "i64 cents");
            let mask = b.constraint(Kind::Phrase, "mask all but the last 4");
            b.user(format!(
                "Two things that always hold here: amounts stay integer minor units, {cents}, never floats. And never log full card numbers, {mask} digits."
            ));
            b.assistant("Both already hold in the code I touched; I'll keep it that way.");
        }),
        Box::new(move |b: &mut Builder| {
            let apply = b.constraint(Kind::Phrase, "kubectl apply by hand");
            b.user(format!(
                "Staging changes go through the pipeline only: no {apply}, even for a quick test."
            ));
            b.assistant("Understood; I'll only restart deployments, never apply manifests.");
        }),
        // 35. The replacements.
        Box::new(move |b: &mut Builder| {
            let pg = b.decision(Kind::Phrase, "Postgres");
            b.supersede("SQLite", &pg, Some("Scrap SQLite"));
            b.user(format!(
                "Scrap SQLite, use {pg} instead: the reconcile job needs concurrent writers."
            ));
            b.assistant(
                "Switching the local job store; the compose file already has a database service.",
            );
        }),
        Box::new(move |b: &mut Builder| {
            let t = b.decision(Kind::Duration, format!("{}s", v.t_old + 8));
            b.supersede(&format!("{}s", v.t_old), &t, None);
            b.user(format!(
                "Make the invoice API client timeout {t}; upstream's p99 went up again."
            ));
            b.assistant("Changed the constant.");
        }),
        Box::new(move |b: &mut Builder| {
            let msrv = b.decision(Kind::Version, format!("1.{}", v.msrv_old + 2));
            b.supersede(&format!("1.{}", v.msrv_old), &msrv, None);
            b.user(format!(
                "Good news: the on-prem build box was upgraded, so we can bump the MSRV to {msrv}."
            ));
            b.assistant("I'll update rust-version in the manifests.");
        }),
        Box::new(move |b: &mut Builder| {
            let batch = b.decision(
                Kind::Setting,
                format!("INVOICE_BATCH_SIZE={}", v.batch_old * 4),
            );
            b.supersede(&format!("INVOICE_BATCH_SIZE={}", v.batch_old), &batch, None);
            b.user(format!("The backfill is too slow, set {batch}."));
            b.assistant("Updated the config map.");
        }),
        Box::new(move |b: &mut Builder| {
            let region = b.decision(Kind::Identifier, "eu-central-1");
            b.supersede("eu-west-1", &region, Some("instead of eu-west-1"));
            b.user(format!("Change of plan: canary in {region} instead of eu-west-1, that's where the incident is."));
            b.assistant("Rollout plan updated.");
        }),
        Box::new(move |b: &mut Builder| {
            let route = b.decision(Kind::Path, "/v2/fx/snapshots");
            b.supersede("/v2/fx-snapshots", &route, None);
            b.user(format!(
                "Rename the route to {route}, it matches the other v2 routes."
            ));
            b.assistant("Renamed, and the OpenAPI file follows.");
        }),
    ]
}

/// One noise episode.
fn noise(b: &mut Builder) {
    match b.rng.below(12) {
        0 | 1 => read_common(b),
        2 => grep(b),
        3 | 4 => tests_green(b),
        5 => listing(b),
        6 => git_log(b),
        7 => pods(b),
        8 | 9 => filler(b),
        10 => question(b),
        _ => clippy(b),
    }
}

fn noise_path(rng: &mut Rng) -> String {
    format!(
        "crates/{}/{}/{}",
        rng.pick(CRATES),
        rng.pick(DIRS),
        rng.pick(FILES)
    )
}

fn read_common(b: &mut Builder) {
    let path = if b.rng.chance(60) {
        (*b.rng.pick(COMMON)).to_owned()
    } else {
        noise_path(&mut b.rng)
    };
    let ty = b.rng.pick(TYPES);
    let say = *b.rng.pick(&[
        &"Let me check how this is wired before going on.",
        &"Reading the module to see who owns the conversion.",
        &"I want to see the type's invariants first.",
        &"Checking the call site once more.",
    ]);
    let content = if path.ends_with(".rs") {
        rust_file(&mut b.rng, ty)
    } else {
        "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n\n[workspace.dependencies]\nserde = { version = \"1\", features = [\"derive\"] }\ntokio = { version = \"1\", features = [\"full\"] }\nsqlx = { version = \"0.7\", features = [\"runtime-tokio\", \"macros\"] }\n".to_owned()
    };
    b.tool(Some(say), "read_file", json!({ "path": path }), content);
    let after = *b.rng.pick(&[
        &"Nothing surprising there; the conversion goes through `Money::convert` everywhere.",
        &"This module only re-exports; the logic is elsewhere.",
        &"That confirms the invariant: amounts never leave minor units.",
        &"OK, the error type already covers this case.",
    ]);
    b.assistant(after);
}

fn grep(b: &mut Builder) {
    let f = b.rng.pick(FNS);
    let mut out = String::new();
    let hits = b.rng.range(6, 22);
    for _ in 0..hits {
        let line = b.rng.range(12, 480);
        out.push_str(&format!(
            "{}:{line}:    let x = {}.{f}(&ctx)?;\n",
            noise_path(&mut b.rng),
            b.rng
                .pick(&[&"invoice", &"batch", &"line", &"tenant", &"payout"])
        ));
    }
    b.tool(
        Some(&format!("Finding every caller of `{f}`.")),
        "grep",
        json!({ "pattern": format!("\\.{f}\\("), "path": "crates/" }),
        out,
    );
    b.assistant(format!(
        "{hits} call sites; none of them depend on the cache's timestamp."
    ));
}

fn tests_green(b: &mut Builder) {
    let krate = b.rng.pick(CRATES);
    let n = b.rng.range(8, 40);
    let mut out = format!(
        "   Compiling {krate} v0.{}.{} (/work/ledgerline/crates/{krate})\n    Finished test [unoptimized + debuginfo] target(s) in {}.{}s\n     Running unittests src/lib.rs\n\nrunning {n} tests\n",
        b.rng.range(3, 15),
        b.rng.range(0, 9),
        b.rng.range(2, 30),
        b.rng.range(10, 99)
    );
    for _ in 0..n {
        out.push_str(&format!(
            "test {}::tests::{}_{} ... ok\n",
            b.rng.pick(&[&"model", &"db", &"http", &"export", &"tax"]),
            b.rng.pick(FNS),
            b.rng.pick(&[
                &"works",
                &"rejects_negative",
                &"round_trips",
                &"handles_empty",
                &"is_idempotent"
            ])
        ));
    }
    out.push_str(&format!(
        "\ntest result: ok. {n} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.{}s\n",
        b.rng.range(10, 99)
    ));
    b.tool(
        Some("Running the crate's tests."),
        "bash",
        bash(&format!("cargo test -p {krate}")),
        out,
    );
    if b.rng.chance(50) {
        b.assistant("All green.");
    }
}

fn listing(b: &mut Builder) {
    let krate = b.rng.pick(CRATES);
    let mut out = String::new();
    for _ in 0..b.rng.range(12, 36) {
        out.push_str(&format!(
            "crates/{krate}/{}/{}\n",
            b.rng.pick(DIRS),
            b.rng.pick(FILES)
        ));
    }
    b.tool(
        None,
        "list_files",
        json!({ "path": format!("crates/{krate}") }),
        out,
    );
}

fn git_log(b: &mut Builder) {
    let mut out = String::new();
    for _ in 0..b.rng.range(8, 16) {
        out.push_str(&format!(
            "{} {}: {}\n",
            b.rng.hex(7),
            b.rng
                .pick(&[&"fx", &"api", &"worker", &"export", &"ci", &"deps"]),
            b.rng.pick(&[
                &"tidy error messages",
                &"bump dependencies",
                &"add tracing spans to the export",
                &"fix flaky pagination test",
                &"document the retry policy",
                &"split the handlers module",
            ])
        ));
    }
    b.tool(
        Some("Looking at recent history."),
        "bash",
        bash("git log --oneline -n 15"),
        out,
    );
}

fn pods(b: &mut Builder) {
    let mut out =
        "NAME                                  READY   STATUS    RESTARTS   AGE\n".to_owned();
    for name in ["billing-api", "invoice-worker", "fx-refresher"] {
        for _ in 0..b.rng.range(1, 3) {
            out.push_str(&format!(
                "{name}-{}-{}   1/1     Running   {}          {}h\n",
                b.rng.hex(9),
                b.rng.hex(5),
                b.rng.range(0, 2),
                b.rng.range(1, 40)
            ));
        }
    }
    b.tool(
        None,
        "kubectl",
        json!({ "args": "-n billing-staging get pods" }),
        out,
    );
}

fn filler(b: &mut Builder) {
    let (user, assistant) = *b.rng.pick(&[
        &("thanks", "You're welcome."),
        &("ok, go on", "Continuing."),
        &(
            "never mind, found it",
            "Good; tell me if you want me to look anyway.",
        ),
        &("nice", "Thanks."),
        &(
            "sorry, was in a meeting, where were we?",
            "We were in the middle of the cache fix; the tests are next.",
        ),
        &("hm, let me think about that", "Sure, take your time."),
        &("can you keep the answers shorter?", "Will do."),
    ]);
    b.user(user);
    b.assistant(assistant);
}

fn question(b: &mut Builder) {
    let (q, a) = *b.rng.pick(&[
        &(
            "Why do we round half-even again?",
            "Banker's rounding keeps the sum of many rounded amounts unbiased: with half-up, every .5 goes the same way and a large batch drifts upwards. Tax authorities in several countries also expect it for VAT lines, which is why the money module applies it at the line level and never on totals.",
        ),
        &(
            "Is it safe to hold the pool connection across the await?",
            "It is safe but wasteful: the connection stays checked out while we wait on the provider, so under load the pool drains. Fetch the rate first, then take a connection for the write only.",
        ),
        &(
            "What does the export do when a tenant has no invoices?",
            "It writes an empty file with the header row, so downstream jobs can tell an empty day from a missing one.",
        ),
        &(
            "Should the refresh be a background task instead?",
            "For staging it doesn't matter much. For production a background refresher per pair would take the provider off the request path entirely, at the cost of one more moving part; the single-flight guard gets most of the benefit with less code.",
        ),
    ]);
    b.user(q);
    b.assistant(a);
}

fn clippy(b: &mut Builder) {
    let mut out =
        String::from("    Checking billing-core v0.14.2 (/work/ledgerline/crates/billing-core)\n");
    for _ in 0..b.rng.range(1, 4) {
        let path = noise_path(&mut b.rng);
        out.push_str(&format!(
            "warning: {}\n  --> {path}:{}:{}\n   |\n   = help: for further information visit https://rust-lang.github.io/rust-clippy/master/index.html\n\n",
            b.rng.pick(&[
                &"this `if` has identical blocks",
                &"redundant clone",
                &"needless borrow",
                &"this function has too many arguments (8/7)",
            ]),
            b.rng.range(10, 300),
            b.rng.range(5, 40)
        ));
    }
    out.push_str("    Finished dev [unoptimized + debuginfo] target(s) in 6.12s\n");
    b.tool(
        Some("Linting before the next change."),
        "bash",
        bash("cargo clippy --all-targets"),
        out,
    );
    b.assistant("Only style warnings in code I haven't touched; leaving them.");
}

/// A plausible Rust module around type `ty`.
fn rust_file(rng: &mut Rng, ty: &str) -> String {
    let mut out = format!(
        "//! {ty} and the rules around it.\n\nuse std::time::{{Duration, Instant}};\n\nuse crate::error::Error;\nuse crate::money::{{Currency, Money}};\n\n#[derive(Debug, Clone, PartialEq)]\npub struct {ty} {{\n"
    );
    for _ in 0..rng.range(3, 7) {
        out.push_str(&format!(
            "    pub {}: {},\n",
            rng.pick(FIELDS),
            rng.pick(&[
                &"Money",
                &"Currency",
                &"Instant",
                &"String",
                &"u32",
                &"Option<String>"
            ])
        ));
    }
    out.push_str(&format!("}}\n\nimpl {ty} {{\n"));
    for _ in 0..rng.range(3, 6) {
        let f = rng.pick(FNS);
        out.push_str(&format!(
            "    /// {}.\n    pub fn {f}(&self, now: Instant) -> Result<Money, Error> {{\n        let age = now.duration_since(self.fetched_at);\n        if age > Duration::from_secs(self.ttl_secs) {{\n            return Err(Error::Stale {{ age }});\n        }}\n        Ok(self.rate.apply(self.amount_minor))\n    }}\n\n",
            rng.pick(&[&"Applies the rate", &"Rejects stale data", &"Loads one page", &"Converts into the invoice currency"])
        ));
    }
    out.push_str("}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn rejects_stale() {\n        // see the fixture in tests/fixtures\n    }\n}\n");
    out
}

fn yaml_deployment(rng: &mut Rng) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: invoice-worker\n  namespace: billing-staging\nspec:\n  replicas: {}\n  template:\n    spec:\n      containers:\n        - name: invoice-worker\n          image: registry.example.com/billing/invoice-worker:latest\n          resources:\n            requests:\n              cpu: 250m\n              memory: 256Mi\n",
        rng.range(2, 4)
    )
}
