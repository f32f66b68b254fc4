// When and how long to wait before trying a request again.

/** How a client retries what is safe to retry. */
export interface RetryOptions {
  /** Tries in all, the first included (default 4; 1 turns retries off). */
  attempts?: number | undefined;
  /** The first back-off's upper bound in ms (default 250), doubled each try. */
  baseDelayMs?: number | undefined;
  /** No back-off is longer (default 10 000 ms). */
  maxDelayMs?: number | undefined;
  /**
   * A `Retry-After` longer than this (default 60 000 ms) is not waited for:
   * the error is thrown at once, so a caller is never parked for minutes.
   */
  maxRetryAfterMs?: number | undefined;
}

/** What a retry hook is told before each wait. */
export interface RetryEvent {
  operation: string;
  /** The try that failed, from 1. */
  attempt: number;
  /** How long the client waits before the next try. */
  delayMs: number;
  /** Whether `delayMs` is the server's `Retry-After`. */
  fromRetryAfter: boolean;
  error: Error;
}

export interface ResolvedRetry {
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  maxRetryAfterMs: number;
}

export function resolveRetry(options: RetryOptions | undefined): ResolvedRetry {
  return {
    attempts: Math.max(1, Math.floor(options?.attempts ?? 4)),
    baseDelayMs: Math.max(0, options?.baseDelayMs ?? 250),
    maxDelayMs: Math.max(0, options?.maxDelayMs ?? 10_000),
    maxRetryAfterMs: Math.max(0, options?.maxRetryAfterMs ?? 60_000),
  };
}

/**
 * The back-off before try `attempt + 1`: "full jitter" (a random share of
 * an exponentially growing bound), so clients that failed together do not
 * come back together.
 */
export function backoffMs(attempt: number, retry: ResolvedRetry): number {
  const bound = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(Math.random() * bound);
}

/**
 * A `Retry-After` header in ms: delta-seconds, or an HTTP date (a date in
 * the past is 0). `undefined` when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An HTTP date opens with its day's name ("Sun, 06 Dec 2026 …").
  if (!/^[A-Za-z]{3,9},? /.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
