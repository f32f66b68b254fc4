"""Every verb of both clients against a live worker (PostgreSQL, Redis, a
bearer token): tests/clients/run starts it. Each test works in a
workstream, and a domain, of its own."""

from __future__ import annotations

import json

import pytest

from compactor_client import (
    ApiError,
    AsyncCompactor,
    Compactor,
    NetworkError,
    RequestTimeout,
    Retry,
    RetryEvent,
    Workstream,
    is_api_error,
)
from compactor_client.types import IncomingMessage

from .conftest import Answer, Recorded, Worker, forward, json_answer, serve, unique, workstream

QUESTION = "Why does the deploy of invoice-svc fail with E4012?"
TURN: list[IncomingMessage] = [
    {"role": "user", "parts": [{"type": "text", "text": QUESTION}]},
    {"role": "assistant", "parts": [{"type": "text", "text": "Migration 0042 times out on the orders table."}]},
]


def session(turns: int) -> list[IncomingMessage]:
    """A long session (about 90 tokens an exchange, the first naming an error
    code), so that an 8,000-token window is over its trigger at 70 turns."""
    messages: list[IncomingMessage] = []
    for i in range(turns):
        filler = f"step {i}: we looked at shard {i * 7} of the orders table and its replication lag, the pool sizes, and the retry budget"
        asked = f"{QUESTION} First, {filler}." if i == 0 else f"What about {filler}?"
        messages.append({"role": "user", "parts": [{"type": "text", "text": asked}]})
        messages.append({"role": "assistant", "parts": [{"type": "text", "text": f"For {filler}, nothing unusual: latency stayed under {40 + i} ms."}]})
    return messages


def test_a_turn_finalized_over_the_trigger_is_compacted_and_recalled(api: Compactor) -> None:
    key = workstream()
    stored = api.append_messages(key, session(70))
    assert len(stored["ids"]) == 140 and stored["already_stored"] == 0
    assert "turn" not in stored or stored["turn"] is None

    ended = api.append_messages(key, TURN, finalize=True, usage={"input_tokens": 7200, "output_tokens": 30})
    assert ended.get("turn", {}) and ended["turn"]["outcome"] == "requested", ended  # type: ignore[index]
    ready = api.wait_until_ready(key, wait=30)
    assert ready["outcome"] == "compacted", ready

    context = api.build_context(key)
    assert context["truncated"] is False
    assert context["messages"][0]["role"] == "system", "the summary opens the context"
    assert len(context["messages"]) < 142
    assert "E4012" in str(context["messages"]), "the error code survives the compaction"

    assert api.status(key)["compactions"] == 1
    assert len(api.runs(key, limit=10)["runs"]) == 1
    recall = api.recall(key, "E4012", limit=5)
    assert [(m["id"], m["compacted"]) for m in recall["messages"]] == [(ended["ids"][0], False), (stored["ids"][0], True)]

    manual = api.compact_now(key, instructions="keep the error codes")
    assert manual["outcome"] == "added", manual
    assert api.wait_until_ready(key, wait=30)["outcome"] in ("compacted", "ready")
    assert api.finalize_turn(key)["outcome"] in ("not_due", "requested")
    assert [w["entity_id"] for w in api.list_workstreams(domain=key.domain)["workstreams"]] == [key.entity]


async def test_the_async_client_does_the_same(worker: Worker) -> None:
    key = workstream()
    async with AsyncCompactor(worker.url, token=worker.token) as api:
        await api.append_messages(key, session(70))
        ended = await api.append_messages(key, TURN, finalize=True)
        assert ended.get("turn") and ended["turn"]["outcome"] == "requested"  # type: ignore[index]
        assert (await api.wait_until_ready(key, wait=30))["outcome"] == "compacted"
        context = await api.build_context(key)
        assert context["messages"][0]["role"] == "system"
        assert (await api.status(key))["compactions"] == 1
        assert len((await api.recall(key, "E4012"))["messages"]) == 2
        with pytest.raises(ApiError) as refused:
            await api.status(workstream())
        assert refused.value.code == "unknown_workstream" and refused.value.status == 404


def test_moving_the_head_leaves_the_other_branch_out_of_the_context(api: Compactor) -> None:
    key = workstream()
    first = api.append_messages(key, TURN)
    second = api.append_messages(key, [{"role": "user", "parts": [{"type": "text", "text": "And the rollback?"}]}])
    moved = api.move_head(key, first["ids"][1])
    assert moved["head"] == first["ids"][1], moved
    assert all(m.get("source") != second["ids"][0] for m in api.build_context(key)["messages"])


def test_a_wait_that_times_out_says_so_and_a_later_wait_sees_the_compaction(api: Compactor) -> None:
    key = workstream()
    api.append_messages(key, session(70))
    api.pause_queue(domain=key.domain)
    try:
        job = api.compact_now(key)
        waited = api.wait_until_ready(key, wait=0.3)
        assert waited["outcome"] == "timed_out", waited
        assert waited["phase"] == "paused" and waited["job_id"] == job["job_id"], waited
    finally:
        api.resume_queue(domain=key.domain)
    assert api.wait_until_ready(key, wait=30)["outcome"] == "compacted"


def test_an_append_whose_answer_was_lost_is_retried_with_its_key_and_stored_once(api: Compactor, worker: Worker) -> None:
    dropped: list[str] = []

    def handle(request: Recorded) -> Answer:
        answer = forward(worker.url, request)
        if request.path.endswith("/messages") and not dropped:
            dropped.append(request.path)  # stored by the worker, never heard by the client
            return Answer(0, drop=True)
        return answer

    proxy = serve(handle)
    retries: list[str] = []
    try:
        with Compactor(proxy.url, token=worker.token, on_retry=lambda e: retries.append(type(e.error).__name__)) as through:
            key = workstream()
            stored = through.append_messages(key, TURN)
        assert retries == ["NetworkError"]
        assert stored["already_stored"] == 2, "the retry found both messages stored"
        keys = [r.headers.get("idempotency-key") for r in proxy.requests if r.path.endswith("/messages")]
        assert len(keys) == 2 and keys[0] and keys[0] == keys[1], "both tries carry the same Idempotency-Key"
        context = api.build_context(key)
        assert [m.get("source") for m in context["messages"]] == stored["ids"], "stored once"
    finally:
        proxy.close()


def test_the_same_idempotency_key_by_hand_stores_once(api: Compactor) -> None:
    key = workstream()
    first = api.append_messages(key, TURN, idempotency_key="turn-1")
    second = api.append_messages(key, TURN, idempotency_key="turn-1")
    assert second["ids"] == first["ids"] and second["already_stored"] == 2


def test_retry_after_is_honoured(worker: Worker) -> None:
    refused: list[int] = []

    def handle(request: Recorded) -> Answer:
        if not refused:
            refused.append(1)
            return json_answer(503, {"error": {"code": "overloaded", "message": "too many long polls"}}, {"retry-after": "1"})
        return forward(worker.url, request)

    proxy = serve(handle)
    events: list[RetryEvent] = []
    try:
        with Compactor(proxy.url, token=worker.token, on_retry=events.append) as through:
            overview = through.queue_overview()
        assert isinstance(overview["counts"], dict)
        assert [(e.delay, e.from_retry_after, e.attempt) for e in events] == [(1.0, True, 1)]
        assert len(proxy.requests) == 2
        assert [(r.body, "content-type" in r.headers) for r in proxy.requests] == [(b"", False)] * 2, "a GET sends no body"
    finally:
        proxy.close()


def test_an_operator_action_and_an_error_that_is_not_transient_are_sent_once(worker: Worker, api: Compactor) -> None:
    down = serve(lambda _r: json_answer(503, {"error": {"code": "redis_unavailable", "message": "down"}}))
    try:
        with Compactor(down.url, token=worker.token) as through, pytest.raises(ApiError) as failed:
            through.cancel_job(1)
        assert failed.value.code == "redis_unavailable" and len(down.requests) == 1
    finally:
        down.close()
    events: list[RetryEvent] = []
    with Compactor(worker.url, token=worker.token, on_retry=events.append) as strict, pytest.raises(ApiError) as unknown:
        strict.finalize_turn(workstream())
    assert unknown.value.code == "unknown_workstream" and unknown.value.status == 404 and events == []


@pytest.mark.parametrize("token", [None, "not-the-token"])
def test_401_without_the_token_and_with_a_wrong_one(worker: Worker, token: str | None) -> None:
    with Compactor(worker.url, token=token) as anonymous, pytest.raises(ApiError) as refused:
        anonymous.status(workstream())
    assert refused.value.status == 401 and refused.value.code == "unauthorized"


def test_a_400_carries_its_error_code(api: Compactor) -> None:
    from compactor_client import Workstream

    with pytest.raises(ApiError) as bad_key:
        api.append_messages(Workstream("Not A Domain", "x"), TURN)
    assert bad_key.value.status == 400 and bad_key.value.code == "invalid_key"
    with pytest.raises(ApiError) as bad_query:
        api.recall(workstream(), "!!!")
    assert is_api_error(bad_query.value, "invalid_query") and bad_query.value.status == 400


def test_a_try_that_outlasts_its_timeout_is_a_request_timeout_after_the_retries(worker: Worker) -> None:
    silent = serve(lambda _r: None)
    events: list[RetryEvent] = []
    try:
        with Compactor(silent.url, timeout=0.05, retry=Retry(attempts=2, base_delay=0.001), on_retry=events.append) as slow:
            with pytest.raises(RequestTimeout) as timed_out:
                slow.status(workstream())
        assert timed_out.value.timeout == pytest.approx(0.05)
        assert len(events) == 1 and len(silent.requests) == 2
    finally:
        silent.close()


def test_nothing_listening_is_a_network_error() -> None:
    gone = serve(lambda _r: None)
    gone.close()
    with Compactor(gone.url, retry=Retry(attempts=1)) as nowhere, pytest.raises(NetworkError):
        nowhere.status(workstream())


def test_a_bulk_retry_larger_than_one_call_is_sent_as_several_and_added_up(api: Compactor, worker: Worker) -> None:
    """The test worker's bulk calls take one batch of 200 letters each
    (`bulk_call_budget` in tests/clients/run): 230 letters take at least two
    calls, each after the first going on from where the last stopped."""
    domain = unique("bulk")
    api.pause_queue(domain=domain)
    proxy = serve(lambda request: forward(worker.url, request))
    try:
        for i in range(230):
            key = Workstream(domain, f"e{i}")
            api.append_messages(key, TURN)
            api.cancel_job(api.compact_now(key)["job_id"])
        with Compactor(proxy.url, token=worker.token) as through:
            dry = through.purge_dead_letters(domain=domain, dry_run=True)
            report = through.retry_dead_letters(domain=domain)
        assert (dry["matched"], dry["purged"], dry["next_cursor"]) == (230, 0, None), dry
        assert (report["matched"], report["retried"], report["skipped"]) == (230, 230, 0), report
        assert report["next_cursor"] is None and len(report["sample"]) == 10
        calls = [json.loads(r.body) for r in proxy.requests if r.path.endswith("/dead-letters/retry")]
        assert len(calls) >= 2, calls
        assert "after" not in calls[0] and all(c["after"] for c in calls[1:]), calls
        assert api.list_dead_letters(domain=domain)["dead_letters"] == []
    finally:
        proxy.close()
        api.resume_queue(domain=domain)


def test_the_queue_and_dead_letters(api: Compactor) -> None:
    assert len(api.list_workers()["workers"]) >= 1
    key = workstream()
    api.append_messages(key, session(70))
    api.pause_queue(domain=key.domain)
    try:
        job = api.compact_now(key)
        seen = api.get_job(job["job_id"])
        assert seen["job_id"] == job["job_id"] and seen["state"] == "waiting", seen
        cancelled = api.cancel_job(job["job_id"])
        assert cancelled["was"] == "waiting" and cancelled["then"] == "dead", cancelled
        letters = api.list_dead_letters(domain=key.domain)["dead_letters"]
        assert [letter["reason"] for letter in letters] == ["cancelled"]
        assert any(j["job_id"] == job["job_id"] for j in api.list_jobs("dead", limit=500)["jobs"])
        assert api.purge_dead_letters(domain=key.domain, dry_run=True)["matched"] == 1
        assert api.retry_dead_letters(domain=key.domain)["retried"] == 1
        assert api.list_dead_letters(domain=key.domain)["dead_letters"] == []
        assert any(d["domain"] == key.domain for d in api.queue_overview()["paused_domains"])
    finally:
        api.resume_queue(domain=key.domain)
    assert api.wait_until_ready(key, wait=30)["outcome"] == "compacted"
    assert isinstance(api.list_deliveries(limit=10)["deliveries"], list)
    assert api.retry_deliveries(endpoint=unique("nowhere-"))["requeued"] == 0
    with pytest.raises(ApiError) as unknown:
        api.retry_delivery(987654321)
    assert unknown.value.code == "unknown_delivery" and unknown.value.status == 404
