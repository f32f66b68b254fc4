// BullMQ side of producer/benches/enqueue.rs: add with deduplication,
// sequential (new ids and one id, coalesced), 100 in flight, and addBulk in
// batches of 500; same job counts and payload shape as compactor's bench.
//
// Run: node bench/bullmq/enqueue.mjs   (REDIS_URL, BENCH_RUNS = runs per scenario)
import { Queue } from 'bullmq';
import { cleanup, connection, nowMs, percentile, PREFIX, result, RUNS, uniqueName } from './common.mjs';

const data = (i) => ({ domain: 'bench', entity_id: `e${i}`, trigger: 'auto' });
const opts = (i) => ({ deduplication: { id: `compact:bench:e${i}` } });

async function freshQueue(tag) {
  const name = uniqueName(tag);
  const conn = connection();
  const queue = new Queue(name, { connection: conn, prefix: PREFIX });
  await queue.waitUntilReady();
  return { queue, name, conn };
}

async function close({ queue, name, conn }) {
  await queue.close();
  conn.disconnect();
  await cleanup(name);
}

async function sequential(tag, n, sameKey) {
  const q = await freshQueue(tag);
  const lat = new Array(n);
  const start = nowMs();
  for (let i = 0; i < n; i++) {
    const k = sameKey ? 0 : i;
    const t = nowMs();
    await q.queue.add('compact', data(k), opts(k));
    lat[i] = nowMs() - t;
  }
  const total = nowMs() - start;
  if (sameKey) {
    const waiting = await q.queue.getWaitingCount();
    if (waiting !== 1) throw new Error(`dedup: expected 1 waiting job, found ${waiting}`);
  }
  await close(q);
  lat.sort((a, b) => a - b);
  return { perSec: (n * 1000) / total, p50: percentile(lat, 0.5), p99: percentile(lat, 0.99) };
}

async function inFlight(n, parallel) {
  const q = await freshQueue('inflight');
  let next = 0;
  const start = nowMs();
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      for (;;) {
        const i = next++;
        if (i >= n) return;
        await q.queue.add('compact', data(i), opts(i));
      }
    }),
  );
  const total = nowMs() - start;
  await close(q);
  return { perSec: (n * 1000) / total };
}

async function bulk(n, batch) {
  const q = await freshQueue('bulk');
  const jobs = Array.from({ length: n }, (_, i) => ({ name: 'compact', data: data(i), opts: opts(i) }));
  const start = nowMs();
  for (let i = 0; i < n; i += batch) {
    await q.queue.addBulk(jobs.slice(i, i + batch));
  }
  const total = nowMs() - start;
  await close(q);
  return { perSec: (n * 1000) / total };
}

const suite = 'queue';
console.log(`BullMQ enqueue benchmark, Redis at ${process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'}, ${RUNS} run(s)`);
for (let r = 0; r < RUNS; r++) {
  for (const [metric, sameKey] of [['enqueue_seq_new', false], ['enqueue_seq_coalesced', true]]) {
    const s = await sequential(metric, 20_000, sameKey);
    result(suite, metric, s.perSec, 'ops/s');
    result(suite, `${metric}_p50`, s.p50, 'ms');
    result(suite, `${metric}_p99`, s.p99, 'ms');
    console.log(`${metric} (20k): ${s.perSec.toFixed(0)} ops/s, p50 ${s.p50.toFixed(3)} ms, p99 ${s.p99.toFixed(3)} ms`);
  }
  const f = await inFlight(50_000, 100);
  result(suite, 'enqueue_inflight100', f.perSec, 'ops/s');
  console.log(`enqueue, 100 in flight (50k): ${f.perSec.toFixed(0)} ops/s`);
  const b = await bulk(100_000, 500);
  result(suite, 'enqueue_bulk500', b.perSec, 'ops/s');
  console.log(`addBulk, batches of 500 (100k): ${b.perSec.toFixed(0)} ops/s`);
}
process.exit(0);
