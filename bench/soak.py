"""The soak's driver (run by bench/soak, which builds the worker and the
client's environment): workers, load, kills, samples, the final checks and
the table.

Two release workers share one PostgreSQL schema and one Redis queue. The
"survivor" is never killed: its RSS and descriptors are the ones whose
slopes say whether something leaks. The "victim" is killed with SIGKILL
every --kill-every seconds and started again: jobs it held are recovered,
requests it was answering fail over to the survivor. The load is spread
over both.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from compactor_client import Compactor, Retry, Workstream
from compactor_client.errors import CompactorError

WINDOW = 8000  # a small model: compactions keep coming
# Finished job records and event stream entries kept (the defaults are
# 10,000 each): low, so that Redis reaches its plateau within the run and a
# leak would show as a slope rather than hide in the retention's growth.
DONE_KEPT = 500
STREAM_KEPT = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def psql(url: str, sql: str) -> str:
    done = subprocess.run(["psql", "-qAt", "-v", "ON_ERROR_STOP=1", url, "-c", sql], check=True, capture_output=True, text=True)
    return done.stdout.strip()


@dataclass
class Worker:
    name: str
    binary: str
    config: Path
    log: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([self.binary, "--config", str(self.config)], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self.starts += 1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise SystemExit(f"{self.name} did not become ready; see {self.log}")

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def rss_kb(self) -> int:
        return status_field(self.process, "VmRSS")

    def fds(self) -> int:
        assert self.process
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))


def status_field(process: subprocess.Popen[bytes] | None, name: str) -> int:
    assert process
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0


@dataclass
class Load:
    """What the clients did and what the server acknowledged."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ops: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    acknowledged: set[int] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)

    def count(self, table: dict[str, int], what: str) -> None:
        with self.lock:
            table[what] = table.get(what, 0) + 1


def turn(i: int) -> list[dict[str, Any]]:
    words = " ".join(random.choice(["deploy", "ticket", "budget", "Berlin", "invoice", "retry", "schema", "latency"]) for _ in range(40))
    return [
        {"role": "user", "parts": [{"type": "text", "text": f"Step {i}: please check order #{random.randint(1000, 9999)} — {words}"}]},
        {"role": "assistant", "parts": [{"type": "text", "text": f"Checked step {i}; the total is {random.randint(10, 999)} EUR. {words}"}]},
    ]


def client_loop(clients: list[Compactor], keys: list[Workstream], load: Load, pause: float) -> None:
    step = 0
    while not load.stop.is_set():
        step += 1
        key = random.choice(keys)
        roll = random.random()
        # The survivor first, the victim a third of the time; a request
        # refused by a killed victim is tried once on the survivor.
        order = clients if random.random() < 0.67 else list(reversed(clients))
        for attempt, api in enumerate(order):
            try:
                if roll < 0.55:
                    done = api.append_messages(key, turn(step), finalize=True)
                    with load.lock:
                        load.acknowledged.update(done["ids"])
                    load.count(load.ops, "append+finalize")
                elif roll < 0.75:
                    api.build_context(key)
                    load.count(load.ops, "context")
                elif roll < 0.85:
                    api.wait_until_ready(key, wait=0.5)
                    load.count(load.ops, "wait")
                elif roll < 0.95:
                    api.recall(key, "invoice Berlin", limit=5)
                    load.count(load.ops, "recall")
                else:
                    api.status(key)
                    load.count(load.ops, "status")
                break
            except CompactorError as e:
                code = str(getattr(e, "code", None) or type(e).__name__)
                if code == "unknown_workstream":
                    load.count(load.ops, "unknown (not written yet)")
                    break
                load.count(load.errors, f"{code} (try {attempt + 1})")
        time.sleep(pause)


def redis_info(url: str, section: str, name: str) -> int:
    out = subprocess.run(["redis-cli", "-u", url, "INFO", section], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    return 0


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--pg-url", required=True)
    p.add_argument("--redis-url", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    minutes = float(os.environ.get("SOAK_MINUTES", "20"))
    kill_every = float(os.environ.get("SOAK_KILL_EVERY", "120"))
    n_clients = int(os.environ.get("SOAK_CLIENTS", "4"))
    rate = float(os.environ.get("SOAK_RATE", "40"))
    n_keys = int(os.environ.get("SOAK_WORKSTREAMS", "40"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    stamp = int(time.time())
    schema = f"soak_{os.getpid()}_{stamp}"
    queue = f"soak-{os.getpid()}-{stamp}"
    psql(args.pg_url, f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in args.pg_url else "?"
    db_url = f"{args.pg_url}{sep}options=-c%20search_path%3D{schema}"

    workers = []
    for name in ["survivor", "victim"]:
        port = free_port()
        config = out / f"{name}.toml"
        config.write_text(
            f'[engine.trigger]\ncontext_window = {WINDOW}\n\n[queue]\nname = "{queue}"\n\n'
            f'done_max_count = {DONE_KEPT}\n\n[redis]\nurl = "{args.redis_url}"\n\n[database]\nurl = "{db_url}"\n\n'
            f'[admin]\nlisten = "127.0.0.1:{port}"\n\n[log]\nlevel = "warn"\n\n[worker]\nname = "{name}"\n\n'
            f'[events]\nstream_maxlen = {STREAM_KEPT}\n'
        )
        workers.append(Worker(name, args.worker, config, out / f"{name}.log", port))
    survivor, victim = workers
    for w in workers:
        w.start()

    retry = Retry(attempts=3, base_delay=0.1, max_delay=1.0)
    keys = [Workstream("soak", f"w{i}") for i in range(n_keys)]
    load = Load()
    clients = [[Compactor(w.base, timeout=30, retry=retry) for w in workers] for _ in range(n_clients)]
    pause = n_clients / rate
    threads = [threading.Thread(target=client_loop, args=(c, keys, load, pause), daemon=True) for c in clients]
    started = time.monotonic()
    for t in threads:
        t.start()

    samples: list[dict[str, Any]] = []
    admin = Compactor(survivor.base, timeout=30, retry=retry)
    end = started + minutes * 60
    next_kill = started + kill_every
    next_sample = started
    kills = 0
    def sample(now: float) -> None:
        counts = admin.queue_overview()["counts"]
        samples.append({
            "minute": round((now - started) / 60, 2),
            "rss_kb": survivor.rss_kb(),
            "fds": survivor.fds(),
            "redis_used_memory": redis_info(args.redis_url, "memory", "used_memory"),
            "pg_connections": int(psql(args.pg_url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")),
            "waiting": counts["waiting"],
            "running": counts["running"],
            "dead": counts["dead"],
            "done": counts["done"],
            "messages": len(load.acknowledged),
        })
        print(json.dumps(samples[-1]), file=sys.stderr, flush=True)

    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_sample:
            sample(now)
            next_sample += 60
        if now >= next_kill:
            victim.kill()
            kills += 1
            time.sleep(1)
            victim.start()
            next_kill += kill_every
        time.sleep(0.2)
    sample(time.monotonic())
    load.stop.set()
    for t in threads:
        t.join(timeout=60)

    # Drained: nothing waiting or running (the victim's last jobs recovered).
    drained_after = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        counts = admin.queue_overview()["counts"]
        if counts["waiting"] == 0 and counts["running"] == 0:
            drained_after = time.monotonic()
            break
        time.sleep(1)
    final = admin.queue_overview()["counts"]
    stored = {int(x) for x in psql(db_url, "SELECT id FROM messages").split()}
    lost = load.acknowledged - stored
    compactions = int(psql(db_url, "SELECT COALESCE(SUM(compactions), 0) FROM workstreams"))
    for w in workers:
        w.stop()
    psql(args.pg_url, f'DROP SCHEMA "{schema}" CASCADE')
    leftover = subprocess.run(["redis-cli", "-u", args.redis_url, "--scan", "--pattern", f"*{queue}*"], capture_output=True, text=True).stdout.split()
    for i in range(0, len(leftover), 500):
        subprocess.run(["redis-cli", "-u", args.redis_url, "DEL", *leftover[i:i + 500]], capture_output=True)

    (out / "samples.json").write_text(json.dumps({"samples": samples, "ops": load.ops, "errors": load.errors}, indent=2))
    measures = [("rss_kb", "survivor RSS (KiB)"), ("fds", "survivor open descriptors"), ("redis_used_memory", "Redis used_memory (bytes)"),
                ("pg_connections", "PostgreSQL connections (the database's)"), ("waiting", "jobs waiting"), ("dead", "dead letters")]
    # The first minute is warm-up (pools filling, caches).
    steady = samples[1:] if len(samples) > 2 else samples
    lines = [
        f"Command: `bench/soak` ({minutes:g} min, the victim killed with SIGKILL every {kill_every:g} s: {kills} kills; "
        f"{n_clients} client threads at {rate:g} operations/s over {n_keys} workstreams; context window {WINDOW}; "
        f"[queue] done_max_count = {DONE_KEPT} and [events] stream_maxlen = {STREAM_KEPT} (defaults 10,000), so that Redis "
        f"reaches its plateau within the run).",
        "",
        "| minute | " + " | ".join(label for _, label in measures) + " | done jobs | messages acknowledged |",
        "|---|" + "---|" * (len(measures) + 2),
    ]
    for s in samples:
        lines.append(f"| {s['minute']:g} | " + " | ".join(f"{s[k]:,}" for k, _ in measures) + f" | {s['done']:,} | {s['messages']:,} |")
    # The second half: the retention (done records, the event stream) has
    # filled by then, so what still grows is what a leak would be.
    half = [s for s in samples if s["minute"] >= minutes / 2] or steady
    lines += [
        "",
        "| measure | slope per minute, after the first minute | slope per minute, second half | first → last (second half) |",
        "|---|---|---|---|",
    ]
    for k, label in measures:
        pts = [(s["minute"], float(s[k])) for s in steady]
        late = [(s["minute"], float(s[k])) for s in half]
        lines.append(f"| {label} | {slope(pts):+,.1f} | {slope(late):+,.1f} | {half[0][k]:,} → {half[-1][k]:,} |")
    total_ops = sum(load.ops.values())
    lines += [
        "",
        f"Operations: {total_ops:,} ({', '.join(f'{k} {v:,}' for k, v in sorted(load.ops.items()))}); "
        f"errors after the client's retries: {sum(load.errors.values()):,} ({', '.join(f'{k} {v:,}' for k, v in sorted(load.errors.items())) or 'none'}).",
        f"Nothing lost: {len(load.acknowledged):,} messages acknowledged, {len(lost)} of them missing from the database; "
        f"queue {'drained' if drained_after else 'NOT drained'} after the load (waiting {final['waiting']}, running {final['running']}), "
        f"{final['dead']} dead letters; {compactions:,} compactions committed.",
    ]
    table = "\n".join(lines)
    (out / "soak.md").write_text(table + "\n")
    print(table)
    if lost or final["dead"] or not drained_after:
        raise SystemExit("the soak lost something: see above")


if __name__ == "__main__":
    main()
