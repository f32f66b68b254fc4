// Every verb of the client against a live worker (PostgreSQL, Redis, a
// bearer token): tests/clients/run starts it. Each test works in a
// workstream, and a domain, of its own.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ApiError, isApiError, NetworkError, TimeoutError, type IncomingMessage } from "../src/index.js";
import { client, forward, json, serve, unique, worker, workstream } from "./support.js";

const QUESTION = "Why does the deploy of invoice-svc fail with E4012?";
const turn: IncomingMessage[] = [
  { role: "user", parts: [{ type: "text", text: QUESTION }] },
  { role: "assistant", parts: [{ type: "text", text: "Migration 0042 times out on the orders table." }] },
];

/**
 * A long session: `turns` exchanges of about 90 tokens a message, the first
 * naming an error code, so that an 8,000-token window is over its trigger.
 */
function session(turns: number): IncomingMessage[] {
  const messages: IncomingMessage[] = [];
  for (let i = 0; i < turns; i++) {
    const filler = `step ${i}: we looked at shard ${i * 7} of the orders table and its replication lag, the pool sizes, and the retry budget`;
    const asked = i === 0 ? `${QUESTION} First, ${filler}.` : `What about ${filler}?`;
    messages.push({ role: "user", parts: [{ type: "text", text: asked }] });
    messages.push({ role: "assistant", parts: [{ type: "text", text: `For ${filler}, nothing unusual: latency stayed under ${40 + i} ms.` }] });
  }
  return messages;
}

describe("a chat turn", () => {
  it("appends, finalizes over the trigger, waits for the compaction, builds the context, and recalls", async () => {
    const api = client();
    const key = workstream();
    const stored = await api.appendMessages(key, session(70));
    assert.equal(stored.ids.length, 140);
    assert.equal(stored.already_stored, 0);
    assert.equal(stored.turn, undefined, "no turn ended without finalize");

    const ended = await api.appendMessages(key, turn, { finalize: true, usage: { input_tokens: 7200, output_tokens: 30 } });
    assert.equal(ended.turn?.outcome, "requested", JSON.stringify(ended.turn));
    const ready = await api.waitUntilReady(key, { waitMs: 30_000 });
    assert.equal(ready.outcome, "compacted", JSON.stringify(ready));

    const context = await api.buildContext(key);
    assert.equal(context.truncated, false);
    assert.equal(context.messages[0]?.role, "system", "the summary opens the context");
    assert.ok(context.messages.length < 142, `compacted: ${context.messages.length} messages`);
    assert.match(JSON.stringify(context.messages), /E4012/, "the error code survives the compaction");

    const status = await api.status(key);
    assert.equal(status.compactions, 1, JSON.stringify(status));
    const runs = await api.runs(key, { limit: 10 });
    assert.equal(runs.runs.length, 1, JSON.stringify(runs));

    const recall = await api.recall(key, "E4012", { limit: 5 });
    assert.deepEqual(
      recall.messages.map((m) => [m.id, m.compacted]),
      [
        [ended.ids[0], false],
        [stored.ids[0], true],
      ],
    );

    const manual = await api.compactNow(key, { instructions: "keep the error codes" });
    assert.equal(manual.outcome, "added", JSON.stringify(manual));
    const after = await api.waitUntilReady(key, { waitMs: 30_000 });
    assert.ok(["compacted", "ready"].includes(after.outcome), JSON.stringify(after));

    const listed = await api.listWorkstreams({ domain: key.domain });
    assert.deepEqual(
      listed.workstreams.map((w) => w.entity_id),
      [key.entity],
    );
  });

  it("moves the head back and forks a branch", async () => {
    const api = client();
    const key = workstream();
    const first = await api.appendMessages(key, turn);
    const second = await api.appendMessages(key, [{ role: "user", parts: [{ type: "text", text: "And the rollback?" }] }]);
    const moved = await api.moveHead(key, first.ids[1] ?? -1);
    assert.equal(moved.head, first.ids[1], JSON.stringify(moved));
    const context = await api.buildContext(key);
    assert.ok(
      !context.messages.some((m) => m.source === second.ids[0]),
      "the message left on the other branch is not in the context",
    );
  });

  it("a wait that times out says so, with the phase, and a later wait sees the compaction", async () => {
    const api = client();
    const key = workstream();
    await api.appendMessages(key, session(70));
    await api.pauseQueue({ domain: key.domain });
    try {
      const job = await api.compactNow(key);
      const waited = await api.waitUntilReady(key, { waitMs: 300 });
      assert.equal(waited.outcome, "timed_out", JSON.stringify(waited));
      if (waited.outcome === "timed_out") {
        assert.equal(waited.phase, "paused", "the domain is paused");
        assert.equal(waited.job_id, job.job_id);
      }
    } finally {
      await api.resumeQueue({ domain: key.domain });
    }
    const after = await api.waitUntilReady(key, { waitMs: 30_000 });
    assert.equal(after.outcome, "compacted", JSON.stringify(after));
  });
});

describe("bulk dead letters", () => {
  it("a retry larger than one call is sent as several and added up", async () => {
    // The test worker's bulk calls take one batch of 200 letters each
    // (`bulk_call_budget` in tests/clients/run): 230 letters take at least
    // two calls, each after the first going on from where the last stopped.
    const { url } = worker();
    const api = client();
    const domain = unique("bulk");
    await api.pauseQueue({ domain });
    const proxy = await serve(async (request, response) => {
      const answer = await forward(url, request);
      response.writeHead(answer.status, answer.headers);
      response.end(answer.body);
    });
    try {
      for (let i = 0; i < 230; i++) {
        const key = { domain, entity: `e${i}` };
        await api.appendMessages(key, turn);
        await api.cancelJob((await api.compactNow(key)).job_id);
      }
      const through = client({ baseUrl: proxy.url });
      const dry = await through.purgeDeadLetters({ domain }, { dryRun: true });
      assert.deepEqual([dry.matched, dry.purged, dry.next_cursor], [230, 0, null], JSON.stringify(dry));
      const report = await through.retryDeadLetters({ domain });
      assert.deepEqual([report.matched, report.retried, report.skipped], [230, 230, 0], JSON.stringify(report));
      assert.equal(report.next_cursor, null);
      assert.equal(report.sample.length, 10);
      const calls = proxy.requests
        .filter((r) => r.url.endsWith("/dead-letters/retry"))
        .map((r) => JSON.parse(r.body) as Record<string, unknown>);
      assert.ok(calls.length >= 2, JSON.stringify(calls));
      assert.equal(calls[0]?.["after"], undefined);
      assert.ok(calls.slice(1).every((c) => typeof c["after"] === "string" && c["after"] !== ""), JSON.stringify(calls));
      assert.equal((await api.listDeadLetters({ domain })).dead_letters.length, 0);
    } finally {
      await proxy.close();
      await api.resumeQueue({ domain });
    }
  });
});

describe("retries", () => {
  it("an append whose answer was lost is retried with its key and stored once", async () => {
    const { url } = worker();
    let dropped = 0;
    const proxy = await serve(async (request, response) => {
      const answer = await forward(url, request);
      if (request.url.endsWith("/messages") && dropped === 0) {
        // The worker stored the messages; the client never hears it.
        dropped++;
        response.socket?.destroy();
        return;
      }
      response.writeHead(answer.status, answer.headers);
      response.end(answer.body);
    });
    try {
      const retries: string[] = [];
      const api = client({ baseUrl: proxy.url, onRetry: (e) => retries.push(e.error.name) });
      const key = workstream();
      const stored = await api.appendMessages(key, turn);
      assert.deepEqual(retries, ["NetworkError"]);
      assert.equal(stored.already_stored, 2, "the retry found both messages stored");
      const keys = proxy.requests.filter((r) => r.url.endsWith("/messages")).map((r) => r.headers["idempotency-key"]);
      assert.equal(keys.length, 2);
      assert.ok(typeof keys[0] === "string" && keys[0] !== "");
      assert.equal(keys[0], keys[1], "both tries carry the same Idempotency-Key");
      const context = await client().buildContext(key);
      assert.equal(context.messages.length, 2, "stored once");
      assert.deepEqual(
        context.messages.map((m) => m.source),
        stored.ids,
      );
    } finally {
      await proxy.close();
    }
  });

  it("the same Idempotency-Key sent twice by hand stores once and answers the same ids", async () => {
    const api = client();
    const key = workstream();
    const first = await api.appendMessages(key, turn, { idempotencyKey: "turn-1" });
    const second = await api.appendMessages(key, turn, { idempotencyKey: "turn-1" });
    assert.deepEqual(second.ids, first.ids);
    assert.equal(second.already_stored, 2);
  });

  it("honours Retry-After", async () => {
    const { url } = worker();
    let refused = 0;
    const proxy = await serve(async (request, response) => {
      if (refused === 0) {
        refused++;
        json(response, 503, { error: { code: "overloaded", message: "too many long polls" } }, { "retry-after": "1" });
        return;
      }
      const answer = await forward(url, request);
      response.writeHead(answer.status, answer.headers);
      response.end(answer.body);
    });
    try {
      const delays: Array<{ delayMs: number; fromRetryAfter: boolean }> = [];
      const api = client({ baseUrl: proxy.url, onRetry: (e) => delays.push({ delayMs: e.delayMs, fromRetryAfter: e.fromRetryAfter }) });
      const queue = await api.queueOverview();
      assert.equal(typeof queue.counts, "object");
      assert.deepEqual(delays, [{ delayMs: 1000, fromRetryAfter: true }]);
      assert.equal(proxy.requests.length, 2);
    } finally {
      await proxy.close();
    }
  });

  it("does not retry an operator action, nor an error that is not transient", async () => {
    let calls = 0;
    const proxy = await serve((_request, response) => {
      calls++;
      json(response, 503, { error: { code: "redis_unavailable", message: "down" } });
    });
    try {
      const api = client({ baseUrl: proxy.url });
      await assert.rejects(api.cancelJob(1), (e: unknown) => isApiError(e, "redis_unavailable") && e.status === 503);
      assert.equal(calls, 1, "a cancel is sent once");
    } finally {
      await proxy.close();
    }
    let retried = 0;
    const strict = client({ onRetry: () => retried++ });
    await assert.rejects(strict.finalizeTurn(workstream()), (e: unknown) => isApiError(e, "unknown_workstream") && e.status === 404);
    assert.equal(retried, 0);
  });
});

describe("errors", () => {
  it("401 without the token and with a wrong one", async () => {
    const key = workstream();
    for (const token of [undefined, "not-the-token"]) {
      const api = client(token === undefined ? { token: "" } : { token });
      await assert.rejects(api.status(key), (e: unknown) => {
        assert.ok(e instanceof ApiError, String(e));
        assert.equal(e.status, 401);
        assert.equal(e.code, "unauthorized");
        return true;
      });
    }
  });

  it("a 400 carries its error code", async () => {
    const api = client();
    await assert.rejects(
      api.appendMessages({ domain: "Not A Domain", entity: "x" }, turn),
      (e: unknown) => isApiError(e, "invalid_key") && e.status === 400,
    );
    await assert.rejects(
      api.recall(workstream(), "!!!"),
      (e: unknown) => isApiError(e, "invalid_query") && e.status === 400,
    );
  });

  it("an unknown workstream is a 404 unknown_workstream", async () => {
    await assert.rejects(client().status(workstream()), (e: unknown) => isApiError(e, "unknown_workstream") && e.status === 404);
  });

  it("a try that outlasts timeoutMs is a TimeoutError, after the retries", async () => {
    const silent = await serve(() => undefined);
    try {
      let retries = 0;
      const api = client({ baseUrl: silent.url, timeoutMs: 50, retry: { attempts: 2, baseDelayMs: 1 }, onRetry: () => retries++ });
      await assert.rejects(api.status(workstream()), (e: unknown) => e instanceof TimeoutError && e.timeoutMs === 50);
      assert.equal(retries, 1);
      assert.equal(silent.requests.length, 2);
    } finally {
      await silent.close();
    }
  });

  it("an aborted call rejects with the signal's reason and is not retried", async () => {
    const silent = await serve(() => undefined);
    try {
      const api = client({ baseUrl: silent.url });
      const controller = new AbortController();
      const reason = new Error("the user left");
      const call = api.buildContext(workstream(), { signal: controller.signal });
      setTimeout(() => controller.abort(reason), 20);
      await assert.rejects(call, (e: unknown) => e === reason);
      assert.ok(silent.requests.length <= 1);
    } finally {
      await silent.close();
    }
  });

  it("nothing listening is a NetworkError", async () => {
    const gone = await serve(() => undefined);
    await gone.close();
    const api = client({ baseUrl: gone.url, retry: { attempts: 1 } });
    await assert.rejects(api.status(workstream()), (e: unknown) => e instanceof NetworkError);
  });
});

describe("the queue and dead letters", () => {
  it("lists workers and jobs, cancels a paused job into the dead letters, retries and purges it", async () => {
    const api = client();
    const workers = await api.listWorkers();
    assert.ok(workers.workers.length >= 1, JSON.stringify(workers));

    const key = workstream();
    await api.appendMessages(key, session(70));
    await api.pauseQueue({ domain: key.domain });
    try {
      const job = await api.compactNow(key);
      const seen = await api.getJob(job.job_id);
      assert.equal(seen.job_id, job.job_id);
      assert.equal(seen.state, "waiting", JSON.stringify(seen));

      const cancelled = await api.cancelJob(job.job_id);
      assert.equal(cancelled.was, "waiting", JSON.stringify(cancelled));
      assert.equal(cancelled.then, "dead");
      const letters = await api.listDeadLetters({ domain: key.domain });
      assert.equal(letters.dead_letters.length, 1, JSON.stringify(letters));
      assert.equal(letters.dead_letters[0]?.reason, "cancelled");
      const dead = await api.listJobs({ state: "dead", limit: 500 });
      assert.ok(dead.jobs.some((j) => j.job_id === job.job_id), "listed among the dead jobs");

      const dry = await api.purgeDeadLetters({ domain: key.domain }, { dryRun: true });
      assert.equal(dry.matched, 1, JSON.stringify(dry));
      const retried = await api.retryDeadLetters({ domain: key.domain });
      assert.equal(retried.retried, 1, JSON.stringify(retried));
      assert.equal((await api.listDeadLetters({ domain: key.domain })).dead_letters.length, 0);
      const overview = await api.queueOverview();
      assert.ok(overview.paused_domains.some((d) => d.domain === key.domain), JSON.stringify(overview));
    } finally {
      await api.resumeQueue({ domain: key.domain });
    }
    assert.equal((await api.waitUntilReady(key, { waitMs: 30_000 })).outcome, "compacted");
    const deliveries = await api.listDeliveries({ limit: 10 });
    assert.ok(Array.isArray(deliveries.deliveries));
    const resent = await api.retryDeliveries({ state: "failed", endpoint: unique("nowhere-") });
    assert.equal(resent.requeued, 0, JSON.stringify(resent));
    await assert.rejects(api.retryDelivery(987654321), (e: unknown) => isApiError(e, "unknown_delivery") && e.status === 404);
  });
});
