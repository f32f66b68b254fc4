"""Drives a compactor-worker that summarizes with a real (tiny) model.

Subcommands (stdlib only, so any python3 runs it):

  admin-url --log FILE --timeout S
      Waits for the worker's "compactor-worker ready" JSON log line and
      prints its admin API address.
  health --url URL --timeout S
      Waits until URL answers 200 (the model server's /health).
  run --admin URL --cli PATH --log FILE --deadline EPOCH [--rounds N]
      Appends realistic conversations to two workstreams (a coding agent
      with tools, a support chat of short turns), requests a compaction of
      each after every slice, waits for each, then reads every run with
      `compactor --json runs` and checks: every compaction committed
      (degraded or not), no committed summary is empty where the one
      before it had content, and none echoes the prompt (its document tags
      or closing instruction: junk committed as a summary). Prints a table
      of the runs and what the model did; exits 1 when a check fails.
  redis-cleanup --url redis://HOST:PORT --queue NAME
      Deletes every key of the queue (its hash tag {cq:NAME}).
"""

import argparse
import collections
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

# --- HTTP -------------------------------------------------------------------


def http(method, url, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_until(what, timeout, probe, every=0.25):
    end = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > end:
            sys.exit(f"real-llm: {what} not ready within {timeout:.0f} s")
        time.sleep(every)


def cmd_health(args):
    def ok():
        status, _ = http("GET", args.url, timeout=5)
        return status == 200

    wait_until(f"model server at {args.url}", args.timeout, ok)


def cmd_admin_url(args):
    def ready():
        try:
            with open(args.log, encoding="utf-8", errors="replace") as f:
                for line in f:
                    event = parse_log_line(line)
                    if event and event.get("message") == "compactor-worker ready":
                        return event.get("admin")
        except FileNotFoundError:
            return None
        return None

    admin = wait_until("compactor-worker", args.timeout, ready)
    print(f"http://{admin}")


def parse_log_line(line):
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        return json.loads(line)
    except ValueError:
        return None


# --- Conversations ------------------------------------------------------------
#
# Two shapes, each a list of slices (one slice appended before each
# compaction). Values are the kind that must survive compaction: paths,
# commands, ids, error codes, amounts, dates, decisions, constraints; some
# appear only in tool output, some are superseded later.


def text(role, body):
    return {"role": role, "parts": [{"type": "text", "text": body}]}


class Calls:
    def __init__(self, prefix):
        self.prefix = prefix
        self.n = 0

    def call(self, tool, args, say=None):
        self.n += 1
        cid = f"{self.prefix}{self.n}"
        parts = []
        if say:
            parts.append({"type": "text", "text": say})
        parts.append({"type": "tool_call", "call_id": cid, "tool_name": tool, "input": args})
        return cid, {"role": "assistant", "parts": parts}

    @staticmethod
    def result(cid, tool, output, error=False):
        part = {"type": "tool_result", "call_id": cid, "tool_name": tool, "output": output}
        if error:
            part["is_error"] = True
        return {"role": "tool", "parts": [part]}


def agent_slices():
    c = Calls("call_")
    s = []
    # 1: the bug report, a failing command, reading the code, a decision.
    m = [text("user", "The nightly export in ~/src/ledgerly fails since yesterday's deploy. "
                      "Find out why `make export` breaks. Don't touch migrations/0042_invoice_fx.sql, "
                      "it is already applied in production.")]
    cid, a = c.call("bash", {"command": "cd ~/src/ledgerly && make export"}, "Running the export to see the failure.")
    m += [a, c.result(cid, "bash",
                      "python -m ledgerly.export --since 2025-10-01\n"
                      "Traceback (most recent call last):\n"
                      '  File "ledgerly/export/csv_writer.py", line 88, in write_row\n'
                      "    rate = row.fx['fx_rate']\n"
                      "KeyError: 'fx_rate'\n"
                      "make: *** [Makefile:41: export] Error 1", error=True)]
    cid, a = c.call("read_file", {"path": "ledgerly/export/csv_writer.py", "lines": "70-100"})
    m += [a, c.result(cid, "read_file",
                      "78  def write_row(self, row):\n"
                      "79      amount = row.amount\n"
                      "88      rate = row.fx['fx_rate']\n"
                      "89      self.out.writerow([row.invoice_id, amount * rate, row.currency])")]
    m += [text("assistant", "The export reads row.fx['fx_rate'], which migration 0042 made optional: "
                            "invoices booked in EUR have no fx entry since the deploy, hence KeyError at "
                            "csv_writer.py:88.")]
    m += [text("user", "OK. We'll go with falling back to the daily ECB reference rate when fx_rate is "
                       "missing. Money is Decimal, never float.")]
    m += [text("assistant", "Understood: fallback to the ECB daily rate, Decimal only. I'll write the patch "
                            "and a test for an EUR invoice without fx.")]
    s.append(m)
    # 2: the patch, a test run with failures, a constraint with a value, a pass.
    m = []
    cid, a = c.call("apply_patch", {"path": "ledgerly/export/csv_writer.py",
                                    "diff": "-    rate = row.fx['fx_rate']\n+    rate = row.fx.get('fx_rate') or ecb.daily_rate(row.currency, row.booked_on)"},
                    "Patching the writer.")
    m += [a, c.result(cid, "apply_patch", "patched ledgerly/export/csv_writer.py (1 hunk)")]
    cid, a = c.call("bash", {"command": "pytest -q tests/export/test_csv_writer.py"})
    m += [a, c.result(cid, "bash",
                      "FFF.........................................\n"
                      "FAILED tests/export/test_csv_writer.py::test_eur_without_fx - ConnectionError: ECB timeout after 30s\n"
                      "3 failed, 41 passed in 92.31s", error=True)]
    m += [text("assistant", "Three tests fail because the ECB fetch has no timeout and the test network "
                            "is closed. I'll add a timeout and a cached rate.")]
    m += [text("user", "The ECB fetch must never block the export for long: set export.fx.timeout_ms to "
                       "4500 and cache the rate for the day in /var/cache/ledgerly/ecb-2025.json.")]
    cid, a = c.call("bash", {"command": "pytest -q tests/export/"})
    m += [a, c.result(cid, "bash", "............................................\n44 passed in 3.02s")]
    cid, a = c.call("bash", {"command": "git commit -am 'export: fall back to the ECB daily rate'"})
    m += [a, c.result(cid, "bash", "[fix/export-fx 9f3c2ab] export: fall back to the ECB daily rate\n 2 files changed, 31 insertions(+), 4 deletions(-)")]
    m += [text("assistant", "All 44 export tests pass; committed as 9f3c2ab on fix/export-fx.")]
    s.append(m)
    # 3: staging deploy, an OOMKilled pod, a superseded limit.
    m = [text("user", "Deploy it to staging: `kubectl rollout restart deploy/ledgerly-export -n billing`. "
                      "The staging database is staging-db.internal:5432.")]
    cid, a = c.call("bash", {"command": "kubectl rollout restart deploy/ledgerly-export -n billing && kubectl get pods -n billing -l app=ledgerly-export"})
    m += [a, c.result(cid, "bash",
                      "deployment.apps/ledgerly-export restarted\n"
                      "NAME                               READY   STATUS      RESTARTS   AGE\n"
                      "ledgerly-export-7d9f8b6c5d-x2kqp   0/1     OOMKilled   3          2m")]
    m += [text("assistant", "The pod is OOMKilled with the 512Mi limit: the day's rate cache plus 48213 "
                            "invoice rows do not fit.")]
    m += [text("user", "Scrap the 512Mi limit, use 768Mi instead. And keep the export under 10 minutes.")]
    cid, a = c.call("apply_patch", {"path": "deploy/k8s/export.yaml", "diff": "-            memory: 512Mi\n+            memory: 768Mi"})
    m += [a, c.result(cid, "apply_patch", "patched deploy/k8s/export.yaml (1 hunk)")]
    cid, a = c.call("bash", {"command": "kubectl apply -f deploy/k8s/export.yaml && kubectl get pods -n billing -l app=ledgerly-export"})
    m += [a, c.result(cid, "bash", "deployment.apps/ledgerly-export configured\nledgerly-export-5c6d7f8e9a-9qwzt   1/1     Running   0          40s")]
    m += [text("assistant", "Running with 768Mi; the staging export finished in 6m12s.")]
    s.append(m)
    # 4: an alert, a rollback decision.
    m = [text("user", "Sentry shows LEDG-4412 on staging: 'Decimal * float' in csv_writer.py:89. Why?")]
    cid, a = c.call("bash", {"command": "grep -n 'daily_rate' -r ledgerly/fx/"})
    m += [a, c.result(cid, "bash", "ledgerly/fx/ecb.py:27:def daily_rate(currency, day) -> float:")]
    m += [text("assistant", "ecb.daily_rate returns a float; the user's rule is Decimal only. I'll convert "
                            "at the source and add a type check.")]
    m += [text("user", "Yes, fix it in ledgerly/fx/ecb.py, and open a PR against main titled 'fx: Decimal ECB rates'.")]
    cid, a = c.call("bash", {"command": "gh pr create --base main --title 'fx: Decimal ECB rates'"})
    m += [a, c.result(cid, "bash", "https://github.com/acme/ledgerly/pull/1187")]
    m += [text("assistant", "PR #1187 is open: https://github.com/acme/ledgerly/pull/1187")]
    s.append(m)
    return s


def support_slices():
    s = []
    s.append([
        text("user", "Hi, I'm Maria Keller, customer number KD-5512-0937. My blender from order "
                     "A-2025-118342 arrived cracked."),
        text("assistant", "I'm sorry to hear that, Ms Keller. I found order A-2025-118342: the Vitamix E310, "
                          "89.90 EUR, delivered on 3 October 2025. Would you like a refund or a replacement?"),
        text("user", "A refund please, to the card I paid with."),
        text("assistant", "Refund of 89.90 EUR to the Visa ending 4417 is requested, reference RF-77120. "
                          "It takes 3 to 5 business days."),
        text("user", "Thanks. Also, I'm moving next month."),
        text("assistant", "Congratulations! Shall I update your delivery address now?"),
        text("user", "Yes: Lindenstraße 14, 10969 Berlin, from 1 November."),
        text("assistant", "Done: from 1 November 2025 deliveries go to Lindenstraße 14, 10969 Berlin."),
    ])
    s.append([
        text("user", "Never call me before 10am, I work nights. My number is +49 30 1234 5678."),
        text("assistant", "Noted: calls only after 10:00, at +49 30 1234 5678."),
        text("user", "Can you also book the flight to Lisbon we talked about? 14 November, back 21 November."),
        text("assistant", "I found LH 1166 Berlin–Lisbon on Fri 14 Nov 2025 at 07:05 CET, back TP 542 on "
                          "Fri 21 Nov at 18:40 WET, 312.40 EUR in total. Book it?"),
        text("user", "Book it. I'm vegetarian, please note the meal."),
        text("assistant", "Booked: reference LH-7QK2ZD, vegetarian meals on both flights. The confirmation "
                          "goes to maria.keller@example.org."),
        text("user", "never mind the seat, any seat is fine"),
        text("assistant", "All right, seats will be assigned at check-in."),
    ])
    s.append([
        text("user", "The refund RF-77120 still isn't on my card."),
        text("assistant", "RF-77120 was sent to your bank on 8 October; banks take up to 5 business days. "
                          "It should arrive by 15 October."),
        text("user", "Actually change the move date: we now move on 8 November, not 1 November."),
        text("assistant", "Updated: deliveries go to Lindenstraße 14, 10969 Berlin from 8 November 2025."),
        text("user", "And the replacement blender I ordered yesterday, order A-2025-120077, should go to "
                     "the new address."),
        text("assistant", "Order A-2025-120077 (Vitamix E310, 89.90 EUR) ships on 10 November to "
                          "Lindenstraße 14, 10969 Berlin."),
    ])
    s.append([
        text("user", "Can I get the invoice for A-2025-120077 as PDF?"),
        text("assistant", "Sent to maria.keller@example.org: invoice INV-2025-55120, 89.90 EUR incl. 19% VAT."),
        text("user", "Perfect. Is my flight still on time?"),
        text("assistant", "LH 1166 on 14 November is on time; online check-in opens 23 hours before departure."),
        text("user", "Thanks, that's all for today."),
        text("assistant", "You're welcome, Ms Keller. Have a good move!"),
    ])
    return s


WORKSTREAMS = [("agent", "ledgerly-export", agent_slices), ("support", "maria-keller", support_slices)]


# --- The run ------------------------------------------------------------------


# The compaction document's own markup (shared/src/prompt.rs): a summary
# that contains it echoes the prompt instead of summarizing.
PROMPT_MARKUP = (
    "<context-compaction-input>", "</context-compaction-input>",
    "<previous-summary>", "</previous-summary>",
    "<existing-workstream-state>", "</existing-workstream-state>",
    "<new-messages>", "</new-messages>", "<operator-instructions>",
    "Write the replacement summary and the STATE DELTA now",
)


def echoed(summary):
    # A closing tag embedded in a later prompt is neutralised as `<\/tag>`;
    # an answer echoing that prompt carries it so.
    text = (summary or "").replace("<\\/", "</")
    return [m for m in PROMPT_MARKUP if m in text]


def bullets(summary):
    if not summary:
        return 0
    return sum(1 for line in summary.splitlines()
               if line.startswith("- ") and line.strip() != "- (none)")


def cmd_run(args):
    admin = args.admin.rstrip("/")
    deadline = args.deadline

    def left():
        return deadline - time.time()

    wait_until("admin API", min(60, max(1, left())),
               lambda: http("GET", f"{admin}/readyz", timeout=5)[0] == 200)

    requested = []  # (domain, entity, job_id, round)
    plans = [(d, e, f()) for d, e, f in WORKSTREAMS]
    rounds = min(args.rounds, min(len(p[2]) for p in plans))
    started = time.time()
    for r in range(rounds):
        for domain, entity, slices in plans:
            base = f"{admin}/v1/workstreams/{domain}/{entity}"
            status, body = http("POST", f"{base}/messages", {"messages": slices[r]})
            if status != 200:
                sys.exit(f"real-llm: append to {domain}/{entity} failed: {status} {body[:300]!r}")
            status, body = http("POST", f"{base}/compact", {})
            if status != 202:
                sys.exit(f"real-llm: compact {domain}/{entity} failed: {status} {body[:300]!r}")
            job = json.loads(body)["job_id"]
            requested.append((domain, entity, job, r + 1))
            t0 = time.time()
            state = wait_job(base, job, left)
            print(f"  round {r + 1} {domain}/{entity}: job {job} {state or 'still running'} after "
                  f"{time.time() - t0:.1f} s", flush=True)
            if state is None:
                break
        else:
            continue
        break
    print(f"  {len(requested)} compactions in {time.time() - started:.0f} s", flush=True)

    failures = []
    if left() <= 0:
        failures.append(f"out of time: the budget ended after {time.time() - started:.0f} s "
                        f"with job {requested[-1][2]} unfinished")
    table = []
    answers = collections.Counter()
    reasons = collections.Counter()
    for domain, entity, _ in plans:
        runs = cli_runs(args.cli, domain, entity)
        runs.sort(key=lambda r: r["id"])
        by_job = collections.defaultdict(list)
        for run in runs:
            by_job[run["job_id"]].append(run)
        for d, e, job, rnd in requested:
            if (d, e) != (domain, entity):
                continue
            attempts = by_job.get(job, [])
            last = attempts[-1] if attempts else None
            if last is None or last["outcome"] not in ("committed", "no_progress"):
                failures.append(f"{domain}/{entity} job {job} (round {rnd}) did not commit: "
                                f"{[(a['attempt'], a['outcome'], a.get('error')) for a in attempts]}")
        previous = None
        for run in runs:
            table.append((domain, entity, run))
            committed = run["outcome"] in ("committed", "no_progress")
            if not committed:
                continue
            if run["degraded"]:
                reasons[run.get("degraded_reason") or "(no reason recorded)"] += 1
            elif run.get("llm_model"):
                answers["used"] += 1
            n = bullets(run.get("summary"))
            echo = echoed(run.get("summary"))
            if echo:
                who = ("the LLM's answer" if not run["degraded"] and run.get("llm_model")
                       else "the extractive fallback, carrying an earlier summary's bullets")
                failures.append(f"{domain}/{entity} run {run['id']} (job {run['job_id']}) committed a "
                                f"summary that echoes the prompt ({', '.join(echo[:3])}), written by "
                                f"{who}")
            if previous is not None and previous > 0 and n == 0:
                failures.append(f"{domain}/{entity} run {run['id']} (job {run['job_id']}) committed an "
                                f"empty summary over one of {previous} bullets "
                                f"(degraded={run['degraded']}, model={run.get('llm_model')})")
            previous = n

    print_table(table)
    print_model_behaviour(table, answers, reasons, args.log)
    written = [(d, e, r) for d, e, r in table
               if r["outcome"] in ("committed", "no_progress") and not r["degraded"]
               and r.get("llm_model")]
    for domain, entity, run in written:
        lines = [line for line in (run.get("summary") or "").splitlines() if line.startswith("- ")]
        print(f"\nwhat the model wrote for {domain}/{entity} job {run['job_id']} "
              f"(run {run['id']}, {bullets(run.get('summary'))} bullets), first lines:")
        for line in lines[:6]:
            print(f"  | {line[:160]}")
    for domain, entity, _ in plans:
        runs = [r for d, e, r in table if (d, e) == (domain, entity)
                and r["outcome"] in ("committed", "no_progress")]
        if runs:
            last = max(runs, key=lambda r: r["id"])
            print(f"\nlast summary of {domain}/{entity} (run {last['id']}, "
                  f"{'degraded' if last['degraded'] else 'LLM'}):")
            for line in (last.get("summary") or "").splitlines()[:24]:
                print(f"  | {line[:160]}")
    if len(requested) < 5:
        failures.append(f"only {len(requested)} compactions requested (at least 5 expected)")
    if failures:
        print("\nFAILED:")
        for f in failures:
            print(f"  - {f}")
        sys.exit(1)
    print(f"\nOK: {len(requested)} compactions of {len(plans)} workstreams all committed; "
          "no empty summary over a non-empty one, none echoing the prompt.")


def wait_job(base, job, left):
    """The job's final state, or None when the budget ends first."""
    while True:
        status, body = http("GET", f"{base}/status", timeout=10)
        if status == 200:
            j = json.loads(body).get("job") or {}
            if j.get("job_id") == job and j.get("state") in ("done", "dead"):
                return j["state"]
        if left() <= 0:
            return None
        time.sleep(0.5)


def cli_runs(cli, domain, entity):
    out = subprocess.run([cli, "--json", "runs", domain, entity, "--limit", "1000"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"real-llm: compactor runs failed ({out.returncode}): {out.stderr[:500]}")
    return json.loads(out.stdout)


def field(run, key):
    value = run.get(key)
    return "-" if value is None else str(value)


def seconds(run):
    from datetime import datetime

    def at(s):
        return datetime.fromisoformat(s.replace("Z", "+00:00"))

    try:
        return f"{(at(run['finished_at']) - at(run['started_at'])).total_seconds():.1f}"
    except (KeyError, ValueError):
        return "-"


def print_table(table):
    head = ["workstream", "job", "att", "outcome", "degraded", "degraded_reason", "model",
            "tok in/out", "llm calls (failed)", "secs", "bullets"]
    rows = []
    for domain, entity, r in table:
        calls = "-"
        if r.get("llm_calls") is not None:
            calls = f"{r['llm_calls']} ({field(r, 'llm_failed_calls')})"
        rows.append([f"{domain}/{entity}", str(r["job_id"]), str(r["attempt"]), r["outcome"],
                     "yes" if r["degraded"] else "no", field(r, "degraded_reason"),
                     field(r, "llm_model"), f"{r.get('llm_tokens_in', 0)}/{r.get('llm_tokens_out', 0)}",
                     calls, seconds(r), str(bullets(r.get("summary")))])
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    print()
    for row in [head] + rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)))


def print_model_behaviour(table, answers, reasons, log):
    committed = [r for _, _, r in table if r["outcome"] in ("committed", "no_progress")]
    print(f"\nmodel: {answers['used']} committed run(s) written by the LLM, "
          f"{sum(reasons.values())} degraded of {len(committed)} committed")
    for reason, n in reasons.most_common():
        print(f"  degraded: {n} x {reason}")
    calls = [r for _, _, r in table if r.get("llm_calls") is not None]
    if calls:
        total = sum(r["llm_calls"] for r in calls)
        failed = sum(r.get("llm_failed_calls") or 0 for r in calls)
        print(f"  LLM calls: {total}, failed or rejected: {failed}, usable: {total - failed}")
    probe, warnings = None, collections.Counter()
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                event = parse_log_line(line)
                if not event:
                    continue
                message = str(event.get("message", ""))
                if message.startswith("LLM probe:"):
                    probe = f"{event.get('level')} {message}"
                elif event.get("level") in ("WARN", "ERROR"):
                    warnings[message[:150]] += 1
    except FileNotFoundError:
        pass
    print(f"  start-up probe: {probe or '(no probe line in the worker log)'}")
    for message, n in warnings.most_common(12):
        print(f"  worker log: {n} x {message}")


# --- Redis ----------------------------------------------------------------------


class Redis:
    """Just enough of RESP for SCAN and DEL."""

    def __init__(self, url):
        from urllib.parse import urlparse

        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), timeout=5)
        self.reader = self.sock.makefile("rb")
        if u.password:
            self.call("AUTH", *([u.username, u.password] if u.username else [u.password]))
        self.call("SELECT", (u.path or "/0").lstrip("/") or "0")

    def call(self, *parts):
        out = f"*{len(parts)}\r\n".encode()
        for p in parts:
            b = p if isinstance(p, bytes) else str(p).encode()
            out += f"${len(b)}\r\n".encode() + b + b"\r\n"
        self.sock.sendall(out)
        return self.reply()

    def reply(self):
        line = self.reader.readline()
        kind, rest = line[:1], line[1:].rstrip(b"\r\n")
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.reader.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError(f"unexpected Redis reply {line!r}")

    def close(self):
        self.reader.close()
        self.sock.close()


def cmd_redis_cleanup(args):
    redis = Redis(args.url)
    cursor, deleted = b"0", 0
    pattern = "{cq:" + args.queue + "}*"
    try:
        while True:
            cursor, keys = redis.call("SCAN", cursor, "MATCH", pattern, "COUNT", 500)
            if keys:
                deleted += int(redis.call("DEL", *keys))
            if cursor == b"0":
                break
    finally:
        redis.close()
    print(f"real-llm: deleted {deleted} Redis key(s) of queue {args.queue}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("admin-url")
    a.add_argument("--log", required=True)
    a.add_argument("--timeout", type=float, default=60)
    h = sub.add_parser("health")
    h.add_argument("--url", required=True)
    h.add_argument("--timeout", type=float, default=60)
    r = sub.add_parser("run")
    r.add_argument("--admin", required=True)
    r.add_argument("--cli", required=True)
    r.add_argument("--log", required=True)
    r.add_argument("--deadline", type=float, required=True)
    r.add_argument("--rounds", type=int, default=3)
    c = sub.add_parser("redis-cleanup")
    c.add_argument("--url", required=True)
    c.add_argument("--queue", required=True)
    args = ap.parse_args()
    {"admin-url": cmd_admin_url, "health": cmd_health, "run": cmd_run,
     "redis-cleanup": cmd_redis_cleanup}[args.cmd](args)


if __name__ == "__main__":
    main()
