import type { ErrorCode } from "./types.js";

/** The base of every error this package throws (an abort rethrows the caller's reason instead). */
export class CompactorError extends Error {
  /** The client call that failed (`appendMessages`, `status`, …). */
  readonly operation: string;

  constructor(operation: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "CompactorError";
    this.operation = operation;
  }
}

/**
 * The API answered with an error body: `code` is its `ErrorCode`, typed, so
 * a `switch` over it is checked by the compiler (see `isApiError`).
 */
export class ApiError<C extends ErrorCode = ErrorCode> extends CompactorError {
  readonly status: number;
  readonly code: C;
  /** The server's `Retry-After`, in milliseconds, when it sent one. */
  readonly retryAfterMs: number | undefined;

  constructor(operation: string, status: number, code: C, message: string, retryAfterMs?: number) {
    super(operation, `${operation}: ${status} ${code}: ${message}`);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.retryAfterMs = retryAfterMs;
  }
}

/** An answer that is not the API's (a proxy's error page, a truncated body). */
export class UnexpectedResponseError extends CompactorError {
  readonly status: number;
  /** The first 500 characters of the body. */
  readonly body: string;

  constructor(operation: string, status: number, body: string, reason: string) {
    super(operation, `${operation}: unexpected ${status} answer (${reason}): ${body.slice(0, 200)}`);
    this.name = "UnexpectedResponseError";
    this.status = status;
    this.body = body.slice(0, 500);
  }
}

/** The request did not get an answer: connection refused or reset, DNS, TLS. */
export class NetworkError extends CompactorError {
  constructor(operation: string, cause: unknown) {
    super(operation, `${operation}: no answer from compactor (${describe(cause)})`, { cause });
    this.name = "NetworkError";
  }
}

/** An attempt outlasted the call's `timeoutMs`. */
export class TimeoutError extends CompactorError {
  readonly timeoutMs: number;

  constructor(operation: string, timeoutMs: number) {
    super(operation, `${operation}: no answer within ${timeoutMs} ms`);
    this.name = "TimeoutError";
    this.timeoutMs = timeoutMs;
  }
}

/** A message could not be converted to or from another SDK's shape. */
export class ConversionError extends CompactorError {
  constructor(operation: string, message: string) {
    super(operation, `${operation}: ${message}`);
    this.name = "ConversionError";
  }
}

/**
 * Whether `error` is an `ApiError`, optionally with one of `codes`; narrows
 * its `code` to them.
 */
export function isApiError<C extends ErrorCode>(error: unknown, ...codes: C[]): error is ApiError<C> {
  return error instanceof ApiError && (codes.length === 0 || codes.includes(error.code as C));
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = (cause as { cause?: unknown }).cause;
    const code = inner && typeof inner === "object" && "code" in inner ? ` ${String(inner.code)}` : "";
    return `${cause.message}${code}`;
  }
  return String(cause);
}
