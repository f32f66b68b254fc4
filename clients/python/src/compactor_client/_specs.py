"""The requests of every verb, built once for the sync and the async client
alike: what to send, and whether sending it twice is harmless."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Mapping, Sequence, TypeVar, cast
from urllib.parse import quote

from ._generated.models import BulkRequest1, IncomingMessage
from .types import Usage, Workstream

T = TypeVar("T")

QueryValue = str | int | bool | None


#: A request without a body (reads, and POSTs that take none).
NO_BODY: Any = object()


@dataclass(frozen=True)
class Spec(Generic[T]):
    operation: str
    method: Literal["GET", "POST"]
    path: str
    query: Mapping[str, QueryValue] = field(default_factory=dict)
    #: The JSON body, or `NO_BODY`.
    body: Any = NO_BODY
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Whether sending it twice is harmless (reads, idempotent writes).
    retry: bool = True
    #: A bound on top of the per-try timeout (`/wait`'s own wait), in seconds.
    extra_timeout: float = 0.0


#: The longest `timeout_ms` one `/wait` request takes; longer waits are several.
WAIT_SLICE = 60.0
#: A `/wait` request's own bound: its wait plus this.
WAIT_MARGIN = 10.0


def workstream_path(key: Workstream) -> str:
    """`/v1/workstreams/{domain}/{entity}`, each segment escaped (the server says which is invalid)."""
    return f"/v1/workstreams/{quote(key.domain, safe='')}/{quote(key.entity, safe='')}"


def append(
    key: Workstream,
    messages: Sequence[IncomingMessage],
    *,
    finalize: bool,
    parent_id: int | None,
    usage: Usage | None,
    idempotency_key: str | None,
    operation: str = "append_messages",
) -> Spec[Any]:
    body: dict[str, Any] = {"messages": list(messages)}
    if finalize:
        body["finalize"] = True
    if parent_id is not None:
        body["parent_id"] = parent_id
    if usage is not None:
        body["usage"] = usage
    return Spec(
        operation,
        "POST",
        f"{workstream_path(key)}/messages",
        body=body,
        headers={"idempotency-key": idempotency_key or uuid.uuid4().hex},
    )


def wait(key: Workstream, slice_seconds: float, mode: str | None) -> Spec[Any]:
    return Spec(
        "wait_until_ready",
        "GET",
        f"{workstream_path(key)}/wait",
        query={"timeout_ms": int(slice_seconds * 1000), "mode": mode},
        extra_timeout=slice_seconds + WAIT_MARGIN,
    )


def get(operation: str, path: str, query: Mapping[str, QueryValue] | None = None) -> Spec[Any]:
    return Spec(operation, "GET", path, query=dict(query or {}))


def post(operation: str, path: str, body: Any = NO_BODY, *, retry: bool = True, query: Mapping[str, QueryValue] | None = None) -> Spec[Any]:
    return Spec(operation, "POST", path, query=dict(query or {}), body=body, retry=retry)


def bulk(filter: Mapping[str, Any], dry_run: bool, after: str | None = None) -> BulkRequest1:
    """A dead-letter filter with its `dry_run` (the server requires it), and
    where the previous call of the same operation stopped."""
    body: dict[str, Any] = {**filter, "dry_run": dry_run}
    if after is not None:
        body["after"] = after
    return cast(BulkRequest1, body)


#: The letters a bulk report shows (the server's sample size).
BULK_SAMPLE = 10


class Bulk:
    """One bulk dead-letter operation, as many calls as it takes: a call
    answers within the server's request timeout and says where it stopped
    (`next_cursor`) when letters are left; the next call goes on from
    there. `report` adds the calls' reports up (counts summed, the first
    letters as the sample). Sent once each: never retried."""

    def __init__(self, operation: str, path: str, filter: Mapping[str, Any], dry_run: bool, counts: Sequence[str]) -> None:
        self._operation, self._path, self._filter, self._dry_run = operation, path, dict(filter), dry_run
        self._counts = tuple(counts)
        self._after: str | None = None
        self.report: dict[str, Any] = {}

    def spec(self) -> Spec[Any]:
        return post(self._operation, self._path, bulk(self._filter, self._dry_run, self._after), retry=False)

    def add(self, part: Mapping[str, Any]) -> bool:
        """Adds one call's report; whether another call is needed."""
        if not self.report:
            self.report = dict(part)
        else:
            for count in self._counts:
                self.report[count] += part[count]
            self.report["sample"] = (list(self.report["sample"]) + list(part["sample"]))[:BULK_SAMPLE]
        self._after = part.get("next_cursor")
        self.report["next_cursor"] = None
        return self._after is not None
