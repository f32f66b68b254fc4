import {
  ApiError,
  CompactorError,
  NetworkError,
  TimeoutError,
  UnexpectedResponseError,
} from "./errors.js";
import {
  backoffMs,
  parseRetryAfter,
  resolveRetry,
  sleep,
  type ResolvedRetry,
  type RetryEvent,
  type RetryOptions,
} from "./retry.js";
import type {
  AppendResponse,
  CancelReply,
  CancelThen,
  DeadLetterFilter,
  DeadLettersPage,
  DeadLettersQuery,
  DeliveriesPage,
  DeliveriesQuery,
  EnqueueOutcome,
  ErrorCode,
  HeadOutcome,
  IncomingMessage,
  JobSummary,
  JobsPage,
  JobsQuery,
  MessageId,
  PauseState,
  PurgeReport,
  QueueOverview,
  Readiness,
  Recall,
  RecallQuery,
  RetriedMany,
  RetriedOne,
  RetryDeliveriesQuery,
  RetryReport,
  RunsPage,
  RunsQuery,
  TurnContext,
  TurnOutcome,
  Usage,
  WaitMode,
  WorkersList,
  WorkstreamKey,
  WorkstreamStatus,
  WorkstreamsPage,
  WorkstreamsQuery,
} from "./types.js";

/** The package's version: the workspace's (a test keeps them equal). */
export const VERSION = "0.1.0";

/** The letters a bulk dead-letter report shows (the server's sample size). */
const BULK_SAMPLE = 10;

/** The longest `timeout_ms` one `/wait` request takes; longer waits are several. */
const WAIT_SLICE_MS = 60_000;
/** A `/wait` request's own bound: its `timeout_ms` plus this. */
const WAIT_MARGIN_MS = 10_000;
/** Statuses that say "nothing was done, try again later". */
const RETRYABLE_STATUSES = new Set([408, 429, 502, 503, 504]);

export interface CompactorOptions {
  /** Where a worker's admin API listens, e.g. `http://127.0.0.1:9464`. */
  baseUrl: string;
  /** The bearer token (`[admin] token_env` of the worker), when it needs one. */
  token?: string | undefined;
  /** Each try's bound in ms (default 30 000); `/wait` adds its own wait. */
  timeoutMs?: number | undefined;
  /** Retries of calls that are safe to repeat (see the README). */
  retry?: RetryOptions | undefined;
  /** Told before each retry's wait (logging, metrics). */
  onRetry?: ((event: RetryEvent) => void) | undefined;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch | undefined;
  /** Headers sent with every request (tracing, a gateway's own auth). */
  headers?: Record<string, string> | undefined;
}

/** What every call takes. */
export interface CallOptions {
  /** Aborts the call, retries and waits included; it rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** This call's bound per try, instead of the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
}

export interface AppendOptions extends CallOptions {
  /** Also end the turn: compaction is requested when the workstream is over its trigger. */
  finalize?: boolean | undefined;
  /** The message the first one continues (default: the head); another branch forks. */
  parentId?: MessageId | undefined;
  /** Token usage the provider reported for the last step (read with `finalize`). */
  usage?: Usage | undefined;
  /**
   * Names this append for retries: message `i` without a `client_id` is
   * stored once as `<key>#<i>` however often the request is sent. A random
   * key is made per call when none is given; pass your own to make a retry
   * of your own (after a crash, say) safe too.
   */
  idempotencyKey?: string | undefined;
}

export interface FinalizeOptions extends CallOptions {
  usage?: Usage | undefined;
}

export interface WaitOptions extends CallOptions {
  /** How long to wait in all, in ms (default 10 000); longer than 60 s takes several requests. */
  waitMs?: number | undefined;
  /** `requested` (default): the whole requested compaction; `running`: only one that runs. */
  mode?: WaitMode | undefined;
}

type Method = "GET" | "POST";
type QueryValue = string | number | boolean | null | undefined;

interface RequestSpec {
  operation: string;
  method: Method;
  path: string;
  query?: Record<string, QueryValue> | undefined;
  body?: unknown;
  headers?: Record<string, string>;
  /** Whether sending it twice is harmless (reads, idempotent writes). */
  retry: boolean;
  /** Extra bound on top of the per-try timeout (`/wait`'s own wait). */
  extraTimeoutMs?: number;
  options: CallOptions | undefined;
}

/**
 * The client of one compactor worker's HTTP API. The verbs mirror the Rust
 * client's: `appendMessages`, `finalizeTurn`, `waitUntilReady`,
 * `buildContext`, `compactNow`, `status`, `runs`, `recall`; then the queue's
 * and the dead letters' for operator scripts.
 *
 * Calls that are safe to repeat are retried on a lost connection, a
 * timeout, 408, 429, 502, 503 and 504, with jittered back-off or the
 * server's `Retry-After`. Appends are safe to repeat: each call carries an
 * `Idempotency-Key`. Operator actions that change the queue (cancel, retry
 * or purge dead letters, retry deliveries) are never repeated.
 */
export class Compactor {
  readonly #baseUrl: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  readonly #retry: ResolvedRetry;
  readonly #onRetry: ((event: RetryEvent) => void) | undefined;
  readonly #fetch: typeof fetch;

  constructor(options: CompactorOptions) {
    if (!/^https?:\/\//.test(options.baseUrl)) {
      throw new CompactorError("Compactor", `baseUrl must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
    }
    this.#baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#headers = { accept: "application/json", ...options.headers };
    if (options.token !== undefined && options.token !== "") {
      this.#headers["authorization"] = `Bearer ${options.token}`;
    }
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#retry = resolveRetry(options.retry);
    this.#onRetry = options.onRetry;
    const chosen = options.fetch ?? globalThis.fetch;
    if (typeof chosen !== "function") {
      throw new CompactorError("Compactor", "no fetch: pass `fetch` in the options on a runtime without a global one");
    }
    this.#fetch = chosen;
  }

  // ---- a chat turn -------------------------------------------------------

  /** Stores messages in order (the workstream is created on first use); with `finalize`, ends the turn. */
  appendMessages(key: WorkstreamKey, messages: IncomingMessage[], options?: AppendOptions): Promise<AppendResponse> {
    const body: Record<string, unknown> = { messages };
    if (options?.finalize) body["finalize"] = true;
    if (options?.parentId !== undefined) body["parent_id"] = options.parentId;
    if (options?.usage !== undefined) body["usage"] = options.usage;
    return this.#request<AppendResponse>({
      operation: "appendMessages",
      method: "POST",
      path: `${workstreamPath(key)}/messages`,
      body,
      headers: { "idempotency-key": options?.idempotencyKey ?? newIdempotencyKey() },
      retry: true,
      options,
    });
  }

  /**
   * Ends a turn that added nothing more: the workstream is measured against
   * its trigger and a compaction requested when it is over (an
   * `unknown_workstream` error for one that does not exist).
   */
  async finalizeTurn(key: WorkstreamKey, options?: FinalizeOptions): Promise<TurnOutcome> {
    const body: Record<string, unknown> = { messages: [], finalize: true };
    if (options?.usage !== undefined) body["usage"] = options.usage;
    const answer = await this.#request<AppendResponse>({
      operation: "finalizeTurn",
      method: "POST",
      path: `${workstreamPath(key)}/messages`,
      body,
      retry: true,
      options,
    });
    if (answer.turn === null || answer.turn === undefined) {
      throw new UnexpectedResponseError("finalizeTurn", 200, JSON.stringify(answer), "no `turn` in the answer");
    }
    return answer.turn;
  }

  /**
   * Waits at most `waitMs` until no compaction is pending for the workstream,
   * and says what it saw: `ready`, `compacted`, `timed_out` (proceed with the
   * context as it is) or `no_live_worker`.
   */
  async waitUntilReady(key: WorkstreamKey, options?: WaitOptions): Promise<Readiness> {
    const total = Math.max(0, options?.waitMs ?? 10_000);
    const started = Date.now();
    for (;;) {
      const left = Math.max(0, total - (Date.now() - started));
      const slice = Math.min(left, WAIT_SLICE_MS);
      const answer = await this.#request<Readiness>({
        operation: "waitUntilReady",
        method: "GET",
        path: `${workstreamPath(key)}/wait`,
        query: { timeout_ms: slice, mode: options?.mode },
        retry: true,
        extraTimeoutMs: slice + WAIT_MARGIN_MS,
        options,
      });
      const remaining = total - (Date.now() - started);
      if (answer.outcome !== "timed_out" || remaining <= 0) {
        return { ...answer, waited_ms: Date.now() - started };
      }
    }
  }

  /** The next model call's context: summary, carried state and the recent tail. */
  buildContext(key: WorkstreamKey, options?: CallOptions): Promise<TurnContext> {
    return this.#request({
      operation: "buildContext",
      method: "GET",
      path: `${workstreamPath(key)}/context`,
      retry: true,
      options,
    });
  }

  /** Requests a compaction now, whatever the size, with optional focus instructions. */
  compactNow(key: WorkstreamKey, options?: CallOptions & { instructions?: string | undefined }): Promise<EnqueueOutcome> {
    return this.#request({
      operation: "compactNow",
      method: "POST",
      path: `${workstreamPath(key)}/compact`,
      body: options?.instructions === undefined ? {} : { instructions: options.instructions },
      // A second request joins the job the first added (`coalesced`).
      retry: true,
      options,
    });
  }

  /** The workstream's counters, last run, breaker and pending compaction. */
  status(key: WorkstreamKey, options?: CallOptions): Promise<WorkstreamStatus> {
    return this.#request({
      operation: "status",
      method: "GET",
      path: `${workstreamPath(key)}/status`,
      retry: true,
      options,
    });
  }

  /** The workstream's compaction runs, newest first. */
  runs(key: WorkstreamKey, query?: RunsQuery, options?: CallOptions): Promise<RunsPage> {
    return this.#request({
      operation: "runs",
      method: "GET",
      path: `${workstreamPath(key)}/runs`,
      query,
      retry: true,
      options,
    });
  }

  /** Stored messages (compacted ones included) holding every term of `q`, newest first. */
  recall(key: WorkstreamKey, q: string, query?: RecallQuery, options?: CallOptions): Promise<Recall> {
    return this.#request({
      operation: "recall",
      method: "GET",
      path: `${workstreamPath(key)}/recall`,
      query: { ...query, q },
      retry: true,
      options,
    });
  }

  /** Moves the head to another message (the branch left is summarized). */
  moveHead(key: WorkstreamKey, messageId: MessageId, options?: CallOptions): Promise<HeadOutcome> {
    return this.#request({
      operation: "moveHead",
      method: "POST",
      path: `${workstreamPath(key)}/head`,
      body: { message_id: messageId },
      retry: true,
      options,
    });
  }

  /** Workstreams by state, domain or id prefix, a page at a time. */
  listWorkstreams(query?: WorkstreamsQuery, options?: CallOptions): Promise<WorkstreamsPage> {
    return this.#request({
      operation: "listWorkstreams",
      method: "GET",
      path: "/v1/workstreams",
      query,
      retry: true,
      options,
    });
  }

  // ---- the queue ----------------------------------------------------------

  /** Counts by state, pauses, and the oldest waiting job's age. */
  queueOverview(options?: CallOptions): Promise<QueueOverview> {
    return this.#request({ operation: "queueOverview", method: "GET", path: "/v1/queue", retry: true, options });
  }

  /** Pauses the whole queue, or one domain's jobs (running ones finish). */
  pauseQueue(target?: { domain?: string }, options?: CallOptions): Promise<PauseState> {
    return this.#request({
      operation: "pauseQueue",
      method: "POST",
      path: "/v1/queue/pause",
      body: { domain: target?.domain ?? null },
      retry: true,
      options,
    });
  }

  /** Resumes the whole queue, or one domain. */
  resumeQueue(target?: { domain?: string }, options?: CallOptions): Promise<PauseState> {
    return this.#request({
      operation: "resumeQueue",
      method: "POST",
      path: "/v1/queue/resume",
      body: { domain: target?.domain ?? null },
      retry: true,
      options,
    });
  }

  /** Jobs in one state, a page at a time. */
  listJobs(query: JobsQuery, options?: CallOptions): Promise<JobsPage> {
    return this.#request({ operation: "listJobs", method: "GET", path: "/v1/queue/jobs", query, retry: true, options });
  }

  /** One job by the id logs and events show. */
  getJob(id: number, options?: CallOptions): Promise<JobSummary> {
    return this.#request({ operation: "getJob", method: "GET", path: `/v1/queue/jobs/${id}`, retry: true, options });
  }

  /** Cancels a job: dead-lettered as `cancelled` (default) or back in line (`requeue`). Never retried. */
  cancelJob(id: number, request?: { then?: CancelThen }, options?: CallOptions): Promise<CancelReply> {
    return this.#request({
      operation: "cancelJob",
      method: "POST",
      path: `/v1/queue/jobs/${id}/cancel`,
      body: request ?? {},
      retry: false,
      options,
    });
  }

  /** The live workers and what they run. */
  listWorkers(options?: CallOptions): Promise<WorkersList> {
    return this.#request({ operation: "listWorkers", method: "GET", path: "/v1/queue/workers", retry: true, options });
  }

  /** Dead letters by reason, domain or age, a page at a time. */
  listDeadLetters(query?: DeadLettersQuery, options?: CallOptions): Promise<DeadLettersPage> {
    return this.#request({
      operation: "listDeadLetters",
      method: "GET",
      path: "/v1/queue/dead-letters",
      query,
      retry: true,
      options,
    });
  }

  /**
   * Puts dead letters back in line (`dryRun`: only count them). Each call is
   * sent once, never retried; a large set takes several (each answers within
   * the server's request timeout), added up here.
   */
  retryDeadLetters(filter: DeadLetterFilter, options?: CallOptions & { dryRun?: boolean | undefined }): Promise<RetryReport> {
    return this.#bulk<RetryReport>("retryDeadLetters", "/v1/queue/dead-letters/retry", filter, options, (total, part) => ({
      ...total,
      matched: total.matched + part.matched,
      retried: total.retried + part.retried,
      skipped: total.skipped + part.skipped,
    }));
  }

  /** Deletes dead letters (`dryRun`: only count them), as `retryDeadLetters` takes them. */
  purgeDeadLetters(filter: DeadLetterFilter, options?: CallOptions & { dryRun?: boolean | undefined }): Promise<PurgeReport> {
    return this.#bulk<PurgeReport>("purgeDeadLetters", "/v1/queue/dead-letters/purge", filter, options, (total, part) => ({
      ...total,
      matched: total.matched + part.matched,
      purged: total.purged + part.purged,
    }));
  }

  /**
   * One bulk dead-letter operation, as many calls as it takes: a call that
   * stops before the end says where (`next_cursor`), and the next goes on from
   * there. The reports add up with `add`; the sample is the first letters.
   */
  async #bulk<R extends { sample: unknown[]; next_cursor?: string | null | undefined }>(
    operation: string,
    path: string,
    filter: DeadLetterFilter,
    options: (CallOptions & { dryRun?: boolean | undefined }) | undefined,
    add: (total: R, part: R) => R,
  ): Promise<R> {
    let total: R | undefined;
    let after: string | undefined;
    for (;;) {
      const part: R = await this.#request<R>({
        operation,
        method: "POST",
        path,
        body: { ...filter, dry_run: options?.dryRun ?? false, ...(after === undefined ? {} : { after }) },
        retry: false,
        options,
      });
      total = total === undefined ? part : { ...add(total, part), sample: [...total.sample, ...part.sample].slice(0, BULK_SAMPLE) };
      if (part.next_cursor === undefined || part.next_cursor === null) {
        return { ...total, next_cursor: null };
      }
      after = part.next_cursor;
    }
  }

  // ---- event deliveries ---------------------------------------------------

  /** Webhook deliveries by state or endpoint. */
  listDeliveries(query?: DeliveriesQuery, options?: CallOptions): Promise<DeliveriesPage> {
    return this.#request({
      operation: "listDeliveries",
      method: "GET",
      path: "/v1/events/deliveries",
      query,
      retry: true,
      options,
    });
  }

  /** Sends failed deliveries again. Never retried. */
  retryDeliveries(query: RetryDeliveriesQuery, options?: CallOptions): Promise<RetriedMany> {
    return this.#request({
      operation: "retryDeliveries",
      method: "POST",
      path: "/v1/events/deliveries/retry",
      query,
      retry: false,
      options,
    });
  }

  /** Sends one delivery again. Never retried. */
  retryDelivery(id: number, options?: CallOptions): Promise<RetriedOne> {
    return this.#request({
      operation: "retryDelivery",
      method: "POST",
      path: `/v1/events/deliveries/${id}/retry`,
      retry: false,
      options,
    });
  }

  // ---- the one request path -------------------------------------------------

  async #request<T>(spec: RequestSpec): Promise<T> {
    const signal = spec.options?.signal;
    const timeoutMs = (spec.options?.timeoutMs ?? this.#timeoutMs) + (spec.extraTimeoutMs ?? 0);
    const url = this.#url(spec.path, spec.query);
    const headers: Record<string, string> = { ...this.#headers, ...spec.headers };
    let body: string | undefined;
    if (spec.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(spec.body);
    }
    const attempts = spec.retry ? this.#retry.attempts : 1;
    for (let attempt = 1; ; attempt++) {
      let error: CompactorError;
      let retryAfterMs: number | undefined;
      try {
        return await this.#attempt<T>(spec.operation, url, spec.method, headers, body, timeoutMs, signal);
      } catch (caught) {
        if (signal?.aborted) throw signal.reason;
        if (!(caught instanceof CompactorError)) throw caught;
        error = caught;
        if (caught instanceof ApiError) {
          if (!RETRYABLE_STATUSES.has(caught.status)) throw caught;
          retryAfterMs = caught.retryAfterMs;
        } else if (caught instanceof UnexpectedResponseError) {
          if (!RETRYABLE_STATUSES.has(caught.status)) throw caught;
        }
      }
      if (attempt >= attempts) throw error;
      if (retryAfterMs !== undefined && retryAfterMs > this.#retry.maxRetryAfterMs) throw error;
      const delayMs = retryAfterMs ?? backoffMs(attempt, this.#retry);
      this.#onRetry?.({
        operation: spec.operation,
        attempt,
        delayMs,
        fromRetryAfter: retryAfterMs !== undefined,
        error,
      });
      await sleep(delayMs, signal);
    }
  }

  async #attempt<T>(
    operation: string,
    url: string,
    method: Method,
    headers: Record<string, string>,
    body: string | undefined,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const onAbort = (): void => controller.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      let response: Response;
      let text: string;
      try {
        const init: RequestInit = { method, headers, signal: controller.signal };
        if (body !== undefined) init.body = body;
        response = await this.#fetch(url, init);
        text = await response.text();
      } catch (cause) {
        if (signal?.aborted) throw signal.reason;
        if (timedOut) throw new TimeoutError(operation, timeoutMs);
        throw new NetworkError(operation, cause);
      }
      return decode<T>(operation, response, text);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  #url(path: string, query: Record<string, QueryValue> | undefined): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null) params.set(name, String(value));
    }
    const search = params.toString();
    return `${this.#baseUrl}${path}${search === "" ? "" : `?${search}`}`;
  }
}

function decode<T>(operation: string, response: Response, text: string): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UnexpectedResponseError(operation, response.status, text, "not JSON");
  }
  if (response.ok) return parsed as T;
  const detail = (parsed as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (typeof detail?.code !== "string") {
    throw new UnexpectedResponseError(operation, response.status, text, "not an error body");
  }
  throw new ApiError(
    operation,
    response.status,
    detail.code as ErrorCode,
    typeof detail.message === "string" ? detail.message : "",
    parseRetryAfter(response.headers.get("retry-after")),
  );
}

/** `/v1/workstreams/{domain}/{entity}`, each segment escaped (the server says which is invalid). */
function workstreamPath(key: WorkstreamKey): string {
  return `/v1/workstreams/${encodeURIComponent(key.domain)}/${encodeURIComponent(key.entity)}`;
}

/** A random key: `crypto.randomUUID` where the runtime has it. */
function newIdempotencyKey(): string {
  const uuid = globalThis.crypto?.randomUUID?.();
  if (uuid !== undefined) return uuid;
  let key = "";
  for (let i = 0; i < 4; i++) key += Math.floor(Math.random() * 2 ** 32).toString(16).padStart(8, "0");
  return key;
}
