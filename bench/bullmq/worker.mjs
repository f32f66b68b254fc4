// BullMQ side of worker/benches/runtime.rs: a no-op Worker draining a
// backlog of distinct jobs at concurrency 2 (20k jobs) and 50 (40k jobs),
// and pickup latency of an idle Worker (concurrency 2, 1,000 adds one at a
// time, 2 ms apart: from calling `add` to the processor starting).
// Completed-job retention mirrors compactor's default (10,000 records).
//
// Run: node bench/bullmq/worker.mjs   (REDIS_URL, BENCH_RUNS,
//      RUNTIME_BENCH = noop2 | noop50 | pickup, as worker/benches/runtime.rs;
//      not BENCH_ONLY, which bench/run sets to its own step globs)
import { Queue, Worker } from 'bullmq';
import { cleanup, connection, nowMs, percentile, PREFIX, result, RUNS, sleep, uniqueName } from './common.mjs';

const data = (i) => ({ domain: 'bench', entity_id: `e${i}`, trigger: 'auto' });
const opts = (i) => ({ deduplication: { id: `compact:bench:e${i}` } });
const workerOpts = (conn, concurrency) => ({
  connection: conn,
  prefix: PREFIX,
  concurrency,
  autorun: false,
  removeOnComplete: { count: 10_000 },
});

async function noop(n, concurrency) {
  const name = uniqueName(`noop${concurrency}`);
  const qconn = connection();
  const queue = new Queue(name, { connection: qconn, prefix: PREFIX });
  for (let i = 0; i < n; i += 1_000) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 1_000); j++) batch.push({ name: 'compact', data: data(j), opts: opts(j) });
    await queue.addBulk(batch);
  }
  let seen = 0;
  let finished;
  const done = new Promise((resolve) => (finished = resolve));
  const wconn = connection();
  const worker = new Worker(
    name,
    async () => {
      seen += 1;
      if (seen === n) finished(nowMs());
    },
    workerOpts(wconn, concurrency),
  );
  await worker.waitUntilReady();
  const start = nowMs();
  const running = worker.run();
  const end = await done;
  await worker.close();
  await running;
  const counts = await queue.getJobCounts('wait', 'active');
  if (counts.wait !== 0 || counts.active !== 0) throw new Error(`not drained: ${JSON.stringify(counts)}`);
  await queue.close();
  qconn.disconnect();
  wconn.disconnect();
  await cleanup(name);
  return (n * 1000) / (end - start);
}

async function pickup(n) {
  const name = uniqueName('pickup');
  const qconn = connection();
  const queue = new Queue(name, { connection: qconn, prefix: PREFIX });
  await queue.waitUntilReady();
  let waiter = null;
  const wconn = connection();
  const worker = new Worker(
    name,
    async () => {
      const t = nowMs();
      if (waiter) waiter(t);
    },
    workerOpts(wconn, 2),
  );
  const running = worker.run();
  const started = () => new Promise((resolve) => (waiter = resolve));
  // Warm up: connections open, scripts loaded, worker blocked and idle.
  let s = started();
  await queue.add('compact', data('warm'), opts('warm'));
  await s;
  const lat = [];
  for (let i = 0; i < n; i++) {
    await sleep(2);
    s = started();
    const t = nowMs();
    await queue.add('compact', data(i), opts(i));
    lat.push((await s) - t);
  }
  await worker.close();
  await running;
  await queue.close();
  qconn.disconnect();
  wconn.disconnect();
  await cleanup(name);
  lat.sort((a, b) => a - b);
  return lat;
}

const only = process.env.RUNTIME_BENCH;
const wanted = (x) => !only || only === x;
const suite = 'runtime';
console.log(`BullMQ worker benchmark, Redis at ${process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'}, ${RUNS} run(s)`);
for (let r = 0; r < RUNS; r++) {
  for (const [concurrency, n] of [[2, 20_000], [50, 40_000]]) {
    if (!wanted(`noop${concurrency}`)) continue;
    const rate = await noop(n, concurrency);
    result(suite, `noop_c${concurrency}`, rate, 'jobs/s');
    console.log(`no-op jobs, concurrency ${concurrency} (${n} jobs): ${rate.toFixed(0)} jobs/s`);
  }
  if (wanted('pickup')) {
    const lat = await pickup(1_000);
    const p50 = percentile(lat, 0.5);
    const p99 = percentile(lat, 0.99);
    result(suite, 'pickup_p50', p50, 'ms');
    result(suite, 'pickup_p99', p99, 'ms');
    console.log(`pickup latency, idle worker (1000 adds): p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms`);
  }
}
process.exit(0);
