// Shared helpers of the BullMQ side of bench/run: Redis connection, unique
// queue names under a prefix of their own, key cleanup, percentiles and the
// machine-readable result lines bench/report.py collects.
import IORedis from 'ioredis';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const PREFIX = 'bullbench';
export const RUNS = Number(process.env.BENCH_RUNS ?? 3);

/** A new ioredis connection (BullMQ 6.7 needs one given to it under ESM). */
export function connection() {
  return new IORedis(REDIS_URL, { maxRetriesPerRequest: null });
}

let n = 0;
/** A queue name no other run uses. */
export function uniqueName(tag) {
  n += 1;
  return `bench-bull-${tag}-${process.pid}-${n}`;
}

/** Deletes every key of queue `name` (BullMQ keys are `<prefix>:<name>:…`). */
export async function cleanup(name) {
  const redis = connection();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}:${name}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
  // The meta/marker keys have no trailing segment on some versions.
  await redis.del(`${PREFIX}:${name}`);
  redis.disconnect();
}

/** The p-quantile of sorted numbers (nearest rank, as the Rust benches). */
export function percentile(sorted, p) {
  const i = Math.round((sorted.length - 1) * p);
  return sorted[Math.min(i, sorted.length - 1)];
}

/** One measurement: a line for bench/report.py. */
export function result(suite, metric, value, unit, extra = {}) {
  console.log(
    'BENCH_RESULT ' +
      JSON.stringify({ suite, impl: 'bullmq', metric, value, unit, ...extra }),
  );
}

export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
