"""The clients of one compactor worker's HTTP API: `Compactor` (sync) and
`AsyncCompactor` (asyncio), with the same verbs. Each verb's request is
built once (`_specs`); the two classes only send it."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable, Mapping, Sequence, TypeVar, cast

import httpx

from . import _specs
from ._retry import RETRYABLE_STATUSES, Retry, RetryEvent, parse_retry_after
from ._specs import NO_BODY, Spec
from ._generated.models import IncomingMessage
from .errors import ApiError, CompactorError, NetworkError, RequestTimeout, UnexpectedResponseError
from .types import (
    AppendResponse,
    CancelReply,
    CancelThen,
    DeadLettersPage,
    DeliveriesPage,
    EnqueueOutcome,
    HeadOutcome,
    JobSummary,
    JobsPage,
    PauseState,
    PurgeReport,
    QueueOverview,
    Readiness,
    Recall,
    RetriedMany,
    RetriedOne,
    RetryReport,
    RunsPage,
    TurnContext,
    TurnOutcome,
    Usage,
    WorkersList,
    Workstream,
    WorkstreamsPage,
    WorkstreamStatus,
)

__all__ = ["AsyncCompactor", "Compactor", "VERSION"]

#: The package's version: the workspace's (a test keeps them equal).
VERSION = "0.1.0"

T = TypeVar("T")


class _Base:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        retry: Retry | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise CompactorError("Compactor", f"base_url must be an http(s) URL, got {base_url!r}")
        self._base_url = base_url.rstrip("/")
        self._headers = {"accept": "application/json", "user-agent": f"compactor-client-python/{VERSION}", **(headers or {})}
        if token:
            self._headers["authorization"] = f"Bearer {token}"
        self._timeout = timeout
        self._retry = retry or Retry()
        self._on_retry = on_retry

    def _request(self, spec: Spec[Any], timeout: float | None) -> tuple[str, dict[str, str], bytes | None, float, dict[str, str]]:
        headers = {**self._headers, **spec.headers}
        content: bytes | None = None
        if spec.body is not NO_BODY:
            headers["content-type"] = "application/json"
            content = json.dumps(spec.body).encode("utf-8")
        query = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in spec.query.items() if v is not None}
        bound = (self._timeout if timeout is None else timeout) + spec.extra_timeout
        return f"{self._base_url}{spec.path}", headers, content, bound, query

    @staticmethod
    def _decode(spec: Spec[T], response: httpx.Response) -> T:
        text = response.text
        try:
            parsed = json.loads(text)
        except ValueError:
            raise UnexpectedResponseError(spec.operation, response.status_code, text, "not JSON") from None
        if response.is_success:
            return cast(T, parsed)
        detail = parsed.get("error") if isinstance(parsed, dict) else None
        code = detail.get("code") if isinstance(detail, dict) else None
        if not isinstance(code, str):
            raise UnexpectedResponseError(spec.operation, response.status_code, text, "not an error body")
        message = detail.get("message") if isinstance(detail, dict) else ""
        raise ApiError(
            spec.operation,
            response.status_code,
            cast(Any, code),
            message if isinstance(message, str) else "",
            parse_retry_after(response.headers.get("retry-after")),
        )

    def _delay(self, spec: Spec[Any], attempt: int, error: CompactorError) -> float | None:
        """How long to wait before the next try, or None to raise `error`."""
        if not spec.retry or attempt >= self._retry.attempts:
            return None
        retry_after: float | None = None
        if isinstance(error, (ApiError, UnexpectedResponseError)):
            if error.status not in RETRYABLE_STATUSES:
                return None
            retry_after = error.retry_after if isinstance(error, ApiError) else None
        if retry_after is not None and retry_after > self._retry.max_retry_after:
            return None
        delay = retry_after if retry_after is not None else self._retry.backoff(attempt)
        if self._on_retry is not None:
            self._on_retry(RetryEvent(spec.operation, attempt, delay, retry_after is not None, error))
        return delay


def _transport_error(spec: Spec[Any], error: httpx.HTTPError, bound: float) -> CompactorError:
    if isinstance(error, httpx.TimeoutException):
        return RequestTimeout(spec.operation, bound)
    return NetworkError(spec.operation, f"no answer from compactor ({type(error).__name__}: {error})")


class Compactor(_Base):
    """A synchronous client (one `httpx.Client`; close it, or use `with`).

    Calls that are safe to repeat are retried after a lost connection, a
    timeout, 408, 429, 502, 503 and 504, with jittered back-off or the
    server's `Retry-After`. Appends are safe to repeat: each carries an
    `Idempotency-Key`. Operator actions that change the queue are sent once.
    """

    def __init__(self, base_url: str, *, http_client: httpx.Client | None = None, **options: Any) -> None:
        super().__init__(base_url, **options)
        self._http = http_client or httpx.Client()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Compactor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, spec: Spec[T], timeout: float | None = None) -> T:
        url, headers, content, bound, query = self._request(spec, timeout)
        attempt = 1
        while True:
            try:
                try:
                    response = self._http.request(spec.method, url, params=query, headers=headers, content=content, timeout=bound)
                except httpx.HTTPError as error:
                    raise _transport_error(spec, error, bound) from error
                return self._decode(spec, response)
            except CompactorError as error:
                delay = self._delay(spec, attempt, error)
                if delay is None:
                    raise
            time.sleep(delay)
            attempt += 1

    # ---- a chat turn ------------------------------------------------------

    def append_messages(
        self,
        key: Workstream,
        messages: Sequence[IncomingMessage],
        *,
        finalize: bool = False,
        parent_id: int | None = None,
        usage: Usage | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> AppendResponse:
        """Stores messages in order (the workstream is created on first use);
        with `finalize`, ends the turn. Safe to retry: a random
        `Idempotency-Key` is sent unless `idempotency_key` names one."""
        spec = _specs.append(key, messages, finalize=finalize, parent_id=parent_id, usage=usage, idempotency_key=idempotency_key)
        return cast(AppendResponse, self._send(spec, timeout))

    def finalize_turn(self, key: Workstream, *, usage: Usage | None = None, timeout: float | None = None) -> TurnOutcome:
        """Ends a turn that added nothing more: measured, and a compaction
        requested when over the trigger (`unknown_workstream` if none)."""
        spec = _specs.append(key, [], finalize=True, parent_id=None, usage=usage, idempotency_key=None, operation="finalize_turn")
        return _turn_of(cast(AppendResponse, self._send(spec, timeout)))

    def wait_until_ready(self, key: Workstream, *, wait: float = 10.0, mode: str | None = None, timeout: float | None = None) -> Readiness:
        """Waits at most `wait` seconds until no compaction is pending, and says
        what it saw: `ready`, `compacted`, `timed_out` or `no_live_worker`."""
        started = time.monotonic()
        while True:
            left = max(0.0, wait - (time.monotonic() - started))
            answer = cast(Readiness, self._send(_specs.wait(key, min(left, _specs.WAIT_SLICE), mode), timeout))
            if answer["outcome"] != "timed_out" or time.monotonic() - started >= wait:
                return _waited(answer, started)

    def build_context(self, key: Workstream, *, timeout: float | None = None) -> TurnContext:
        """The next model call's context: summary, carried state, recent tail."""
        return cast(TurnContext, self._send(_specs.get("build_context", f"{_specs.workstream_path(key)}/context"), timeout))

    def compact_now(self, key: Workstream, *, instructions: str | None = None, timeout: float | None = None) -> EnqueueOutcome:
        """Requests a compaction now, whatever the size (a second request joins the first)."""
        body = {} if instructions is None else {"instructions": instructions}
        spec = _specs.post("compact_now", f"{_specs.workstream_path(key)}/compact", body)
        return cast(EnqueueOutcome, self._send(spec, timeout))

    def status(self, key: Workstream, *, timeout: float | None = None) -> WorkstreamStatus:
        return cast(WorkstreamStatus, self._send(_specs.get("status", f"{_specs.workstream_path(key)}/status"), timeout))

    def runs(self, key: Workstream, *, before: int | None = None, limit: int | None = None, timeout: float | None = None) -> RunsPage:
        spec = _specs.get("runs", f"{_specs.workstream_path(key)}/runs", {"before": before, "limit": limit})
        return cast(RunsPage, self._send(spec, timeout))

    def recall(self, key: Workstream, q: str, *, limit: int | None = None, timeout: float | None = None) -> Recall:
        spec = _specs.get("recall", f"{_specs.workstream_path(key)}/recall", {"q": q, "limit": limit})
        return cast(Recall, self._send(spec, timeout))

    def move_head(self, key: Workstream, message_id: int, *, timeout: float | None = None) -> HeadOutcome:
        spec = _specs.post("move_head", f"{_specs.workstream_path(key)}/head", {"message_id": message_id})
        return cast(HeadOutcome, self._send(spec, timeout))

    def list_workstreams(self, *, timeout: float | None = None, **query: _specs.QueryValue) -> WorkstreamsPage:
        """Workstreams by `state`, `domain` or id prefix `q`, a page (`limit`, `cursor`) at a time."""
        return cast(WorkstreamsPage, self._send(_specs.get("list_workstreams", "/v1/workstreams", query), timeout))

    # ---- the queue ---------------------------------------------------------

    def queue_overview(self, *, timeout: float | None = None) -> QueueOverview:
        return cast(QueueOverview, self._send(_specs.get("queue_overview", "/v1/queue"), timeout))

    def pause_queue(self, *, domain: str | None = None, timeout: float | None = None) -> PauseState:
        return cast(PauseState, self._send(_specs.post("pause_queue", "/v1/queue/pause", {"domain": domain}), timeout))

    def resume_queue(self, *, domain: str | None = None, timeout: float | None = None) -> PauseState:
        return cast(PauseState, self._send(_specs.post("resume_queue", "/v1/queue/resume", {"domain": domain}), timeout))

    def list_jobs(self, state: str, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> JobsPage:
        spec = _specs.get("list_jobs", "/v1/queue/jobs", {"state": state, "limit": limit, "cursor": cursor})
        return cast(JobsPage, self._send(spec, timeout))

    def get_job(self, job_id: int, *, timeout: float | None = None) -> JobSummary:
        return cast(JobSummary, self._send(_specs.get("get_job", f"/v1/queue/jobs/{int(job_id)}"), timeout))

    def cancel_job(self, job_id: int, *, then: CancelThen | None = None, timeout: float | None = None) -> CancelReply:
        """Dead-letters a job as `cancelled` (or `then="requeue"`). Sent once."""
        body = {} if then is None else {"then": then}
        spec = _specs.post("cancel_job", f"/v1/queue/jobs/{int(job_id)}/cancel", body, retry=False)
        return cast(CancelReply, self._send(spec, timeout))

    def list_workers(self, *, timeout: float | None = None) -> WorkersList:
        return cast(WorkersList, self._send(_specs.get("list_workers", "/v1/queue/workers"), timeout))

    def list_dead_letters(self, *, timeout: float | None = None, **query: _specs.QueryValue) -> DeadLettersPage:
        """Dead letters by `reason`, `domain`, `older_than_secs`, a page (`limit`, `cursor`) at a time."""
        return cast(DeadLettersPage, self._send(_specs.get("list_dead_letters", "/v1/queue/dead-letters", query), timeout))

    def retry_dead_letters(self, *, dry_run: bool = False, timeout: float | None = None, **filter: Any) -> RetryReport:
        """Puts the letters a filter (`reason`, `domain`, `older_than_secs`, `entry`, or `all=True`) takes back in line.
        Each call is sent once; a large set takes several (each within the server's request timeout), added up here."""
        bulk = _specs.Bulk("retry_dead_letters", "/v1/queue/dead-letters/retry", filter, dry_run, ("matched", "retried", "skipped"))
        while bulk.add(self._send(bulk.spec(), timeout)):
            pass
        return cast(RetryReport, bulk.report)

    def purge_dead_letters(self, *, dry_run: bool = False, timeout: float | None = None, **filter: Any) -> PurgeReport:
        """Deletes the letters a filter takes (see `retry_dead_letters`)."""
        bulk = _specs.Bulk("purge_dead_letters", "/v1/queue/dead-letters/purge", filter, dry_run, ("matched", "purged"))
        while bulk.add(self._send(bulk.spec(), timeout)):
            pass
        return cast(PurgeReport, bulk.report)

    # ---- event deliveries --------------------------------------------------

    def list_deliveries(self, *, timeout: float | None = None, **query: _specs.QueryValue) -> DeliveriesPage:
        return cast(DeliveriesPage, self._send(_specs.get("list_deliveries", "/v1/events/deliveries", query), timeout))

    def retry_deliveries(self, *, endpoint: str | None = None, timeout: float | None = None) -> RetriedMany:
        """Sends failed deliveries again. Sent once."""
        spec = _specs.post("retry_deliveries", "/v1/events/deliveries/retry", retry=False, query={"state": "failed", "endpoint": endpoint})
        return cast(RetriedMany, self._send(spec, timeout))

    def retry_delivery(self, delivery_id: int, *, timeout: float | None = None) -> RetriedOne:
        """Sends one delivery again. Sent once."""
        spec = _specs.post("retry_delivery", f"/v1/events/deliveries/{int(delivery_id)}/retry", retry=False)
        return cast(RetriedOne, self._send(spec, timeout))


class AsyncCompactor(_Base):
    """The asyncio client: `Compactor`'s verbs, awaited (one `httpx.AsyncClient`;
    `await aclose()`, or use `async with`). Cancelling the task cancels the
    call, its retries and waits."""

    def __init__(self, base_url: str, *, http_client: httpx.AsyncClient | None = None, **options: Any) -> None:
        super().__init__(base_url, **options)
        self._http = http_client or httpx.AsyncClient()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncCompactor:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _send(self, spec: Spec[T], timeout: float | None = None) -> T:
        url, headers, content, bound, query = self._request(spec, timeout)
        attempt = 1
        while True:
            try:
                try:
                    response = await self._http.request(spec.method, url, params=query, headers=headers, content=content, timeout=bound)
                except httpx.HTTPError as error:
                    raise _transport_error(spec, error, bound) from error
                return self._decode(spec, response)
            except CompactorError as error:
                delay = self._delay(spec, attempt, error)
                if delay is None:
                    raise
            await asyncio.sleep(delay)
            attempt += 1

    async def append_messages(
        self,
        key: Workstream,
        messages: Sequence[IncomingMessage],
        *,
        finalize: bool = False,
        parent_id: int | None = None,
        usage: Usage | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> AppendResponse:
        spec = _specs.append(key, messages, finalize=finalize, parent_id=parent_id, usage=usage, idempotency_key=idempotency_key)
        return cast(AppendResponse, await self._send(spec, timeout))

    async def finalize_turn(self, key: Workstream, *, usage: Usage | None = None, timeout: float | None = None) -> TurnOutcome:
        spec = _specs.append(key, [], finalize=True, parent_id=None, usage=usage, idempotency_key=None, operation="finalize_turn")
        return _turn_of(cast(AppendResponse, await self._send(spec, timeout)))

    async def wait_until_ready(self, key: Workstream, *, wait: float = 10.0, mode: str | None = None, timeout: float | None = None) -> Readiness:
        started = time.monotonic()
        while True:
            left = max(0.0, wait - (time.monotonic() - started))
            answer = cast(Readiness, await self._send(_specs.wait(key, min(left, _specs.WAIT_SLICE), mode), timeout))
            if answer["outcome"] != "timed_out" or time.monotonic() - started >= wait:
                return _waited(answer, started)

    async def build_context(self, key: Workstream, *, timeout: float | None = None) -> TurnContext:
        return cast(TurnContext, await self._send(_specs.get("build_context", f"{_specs.workstream_path(key)}/context"), timeout))

    async def compact_now(self, key: Workstream, *, instructions: str | None = None, timeout: float | None = None) -> EnqueueOutcome:
        body = {} if instructions is None else {"instructions": instructions}
        spec = _specs.post("compact_now", f"{_specs.workstream_path(key)}/compact", body)
        return cast(EnqueueOutcome, await self._send(spec, timeout))

    async def status(self, key: Workstream, *, timeout: float | None = None) -> WorkstreamStatus:
        return cast(WorkstreamStatus, await self._send(_specs.get("status", f"{_specs.workstream_path(key)}/status"), timeout))

    async def runs(self, key: Workstream, *, before: int | None = None, limit: int | None = None, timeout: float | None = None) -> RunsPage:
        spec = _specs.get("runs", f"{_specs.workstream_path(key)}/runs", {"before": before, "limit": limit})
        return cast(RunsPage, await self._send(spec, timeout))

    async def recall(self, key: Workstream, q: str, *, limit: int | None = None, timeout: float | None = None) -> Recall:
        spec = _specs.get("recall", f"{_specs.workstream_path(key)}/recall", {"q": q, "limit": limit})
        return cast(Recall, await self._send(spec, timeout))

    async def move_head(self, key: Workstream, message_id: int, *, timeout: float | None = None) -> HeadOutcome:
        spec = _specs.post("move_head", f"{_specs.workstream_path(key)}/head", {"message_id": message_id})
        return cast(HeadOutcome, await self._send(spec, timeout))

    async def list_workstreams(self, *, timeout: float | None = None, **query: _specs.QueryValue) -> WorkstreamsPage:
        return cast(WorkstreamsPage, await self._send(_specs.get("list_workstreams", "/v1/workstreams", query), timeout))

    async def queue_overview(self, *, timeout: float | None = None) -> QueueOverview:
        return cast(QueueOverview, await self._send(_specs.get("queue_overview", "/v1/queue"), timeout))

    async def pause_queue(self, *, domain: str | None = None, timeout: float | None = None) -> PauseState:
        return cast(PauseState, await self._send(_specs.post("pause_queue", "/v1/queue/pause", {"domain": domain}), timeout))

    async def resume_queue(self, *, domain: str | None = None, timeout: float | None = None) -> PauseState:
        return cast(PauseState, await self._send(_specs.post("resume_queue", "/v1/queue/resume", {"domain": domain}), timeout))

    async def list_jobs(self, state: str, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> JobsPage:
        spec = _specs.get("list_jobs", "/v1/queue/jobs", {"state": state, "limit": limit, "cursor": cursor})
        return cast(JobsPage, await self._send(spec, timeout))

    async def get_job(self, job_id: int, *, timeout: float | None = None) -> JobSummary:
        return cast(JobSummary, await self._send(_specs.get("get_job", f"/v1/queue/jobs/{int(job_id)}"), timeout))

    async def cancel_job(self, job_id: int, *, then: CancelThen | None = None, timeout: float | None = None) -> CancelReply:
        body = {} if then is None else {"then": then}
        spec = _specs.post("cancel_job", f"/v1/queue/jobs/{int(job_id)}/cancel", body, retry=False)
        return cast(CancelReply, await self._send(spec, timeout))

    async def list_workers(self, *, timeout: float | None = None) -> WorkersList:
        return cast(WorkersList, await self._send(_specs.get("list_workers", "/v1/queue/workers"), timeout))

    async def list_dead_letters(self, *, timeout: float | None = None, **query: _specs.QueryValue) -> DeadLettersPage:
        return cast(DeadLettersPage, await self._send(_specs.get("list_dead_letters", "/v1/queue/dead-letters", query), timeout))

    async def retry_dead_letters(self, *, dry_run: bool = False, timeout: float | None = None, **filter: Any) -> RetryReport:
        bulk = _specs.Bulk("retry_dead_letters", "/v1/queue/dead-letters/retry", filter, dry_run, ("matched", "retried", "skipped"))
        while bulk.add(await self._send(bulk.spec(), timeout)):
            pass
        return cast(RetryReport, bulk.report)

    async def purge_dead_letters(self, *, dry_run: bool = False, timeout: float | None = None, **filter: Any) -> PurgeReport:
        bulk = _specs.Bulk("purge_dead_letters", "/v1/queue/dead-letters/purge", filter, dry_run, ("matched", "purged"))
        while bulk.add(await self._send(bulk.spec(), timeout)):
            pass
        return cast(PurgeReport, bulk.report)

    async def list_deliveries(self, *, timeout: float | None = None, **query: _specs.QueryValue) -> DeliveriesPage:
        return cast(DeliveriesPage, await self._send(_specs.get("list_deliveries", "/v1/events/deliveries", query), timeout))

    async def retry_deliveries(self, *, endpoint: str | None = None, timeout: float | None = None) -> RetriedMany:
        spec = _specs.post("retry_deliveries", "/v1/events/deliveries/retry", retry=False, query={"state": "failed", "endpoint": endpoint})
        return cast(RetriedMany, await self._send(spec, timeout))

    async def retry_delivery(self, delivery_id: int, *, timeout: float | None = None) -> RetriedOne:
        spec = _specs.post("retry_delivery", f"/v1/events/deliveries/{int(delivery_id)}/retry", retry=False)
        return cast(RetriedOne, await self._send(spec, timeout))


def _turn_of(answer: AppendResponse) -> TurnOutcome:
    turn = answer.get("turn")
    if turn is None:
        raise UnexpectedResponseError("finalize_turn", 200, json.dumps(answer), "no `turn` in the answer")
    return turn


def _waited(answer: Readiness, started: float) -> Readiness:
    """The answer of the last `/wait`, with the whole wait's length."""
    whole = dict(answer)
    whole["waited_ms"] = int((time.monotonic() - started) * 1000)
    return cast(Readiness, whole)
