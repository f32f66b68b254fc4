"""The drop-in proxy through the official Python SDKs, unmodified:
`openai` and `anthropic` pointed at it by their base URL, against the fake
provider of upstream.py. Run by tests/proxy/ci with the live worker of
tests/clients/run (COMPACTOR_PROXY_URL, COMPACTOR_PROXY_UPSTREAM,
COMPACTOR_TOKEN; an 8,000-token window)."""

import json
import os
import uuid
from typing import Any

import anthropic
import httpx
import openai
import pytest

PROXY = os.environ["COMPACTOR_PROXY_URL"]
UPSTREAM = os.environ["COMPACTOR_PROXY_UPSTREAM"]
TOKEN = os.environ["COMPACTOR_TOKEN"]
WINDOW = 8_000


def received(model: str) -> list[dict[str, Any]]:
    """What the provider received for requests of `model`."""
    records = httpx.get(f"{UPSTREAM}/requests").json()
    return [r for r in records if r["body"].get("model") == model]


def tokens(messages: list[dict[str, Any]]) -> int:
    """Estimated tokens of messages, as the worker estimates them
    (characters of text, tool calls and results, by 3)."""
    chars = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for b in content:
                chars += len(b.get("text") or "") + (len(b["content"]) if isinstance(b.get("content"), str) else 0)
                if b.get("type") == "tool_use":
                    chars += len(json.dumps(b["input"], separators=(",", ":")))
        for call in m.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    return chars // 3


def headers(workstream: str) -> dict[str, str]:
    return {"X-Compactor-Token": TOKEN, "X-Compactor-Workstream": workstream}


def user_turn(t: int) -> str:
    return (f"Turn {t}: order ORD-{10_000 + t * 7:05d} goes to dock {t % 9} and costs EUR {100 + t * 3}.{t % 100:02d}. "
            + "Keep the customs papers and the pallet count with it. " * 9)


def test_openai_sdk_a_300_turn_conversation_stays_in_the_window() -> None:
    model = f"fake-{uuid.uuid4().hex[:8]}"
    client = openai.OpenAI(base_url=f"{PROXY}/v1", api_key="sk-test-key",
                           default_headers=headers(f"py/{model}"), max_retries=0)
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]

    def ask(stream: bool) -> dict[str, Any]:
        if not stream:
            response = client.chat.completions.create(model=model, messages=history)  # type: ignore[arg-type]
            return response.choices[0].message.model_dump(exclude_none=True)
        text, calls = "", []
        for chunk in client.chat.completions.create(model=model, messages=history, stream=True):  # type: ignore[arg-type]
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            text += delta.content or ""
            for c in delta.tool_calls or []:
                if c.index == len(calls):
                    calls.append({"id": c.id, "type": "function",
                                  "function": {"name": c.function.name if c.function else "", "arguments": ""}})
                if c.function and c.function.arguments:
                    calls[c.index]["function"]["arguments"] += c.function.arguments
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        return message

    for t in range(300):
        if t % 10 == 5:
            history.append({"role": "user", "content": "What is the weather in Oslo?"})
            call = ask(t % 3 == 0)
            assert call["tool_calls"][0]["function"]["name"] == "get_weather"
            history.append(call)
            history.append({"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "-3 °C, clear"})
            history.append(ask(False))
        history.append({"role": "user", "content": user_turn(t)})
        answer = ask(t % 3 == 0)
        assert answer["content"].startswith("Answer to request with")
        history.append(answer)

    sent = received(model)
    assert len(sent) == 300 + 2 * 30
    largest = max(tokens(r["body"]["messages"]) for r in sent)
    assert largest <= WINDOW, largest
    assert tokens(history) > 3 * WINDOW
    last = sent[-1]
    assert last["headers"]["authorization"] == "Bearer sk-test-key"
    assert "x-compactor-token" not in last["headers"]
    messages = last["body"]["messages"]
    assert messages[0] == {"role": "system", "content": "You are terse."}
    assert messages[1]["role"] == "system" and "summary" in messages[1]["content"]
    assert messages[-1] == {"role": "user", "content": user_turn(299)}
    assert len(messages) < len(history) // 4


def test_openai_sdk_errors_pass_through_and_a_request_naming_no_workstream_goes_on_untouched() -> None:
    limited = openai.OpenAI(base_url=f"{PROXY}/v1", api_key="sk-test-key",
                            default_headers=headers("py/limited"), max_retries=0)
    with pytest.raises(openai.RateLimitError) as raised:
        limited.chat.completions.create(model="rate-limited", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.response.headers["retry-after"] == "7"
    assert raised.value.response.headers["x-ratelimit-remaining-requests"] == "0"

    model = f"fake-{uuid.uuid4().hex[:8]}"
    plain = openai.OpenAI(base_url=f"{PROXY}/v1", api_key="sk-test-key",
                          default_headers={"X-Compactor-Token": TOKEN}, max_retries=0)
    messages = [{"role": "user", "content": f"hello {i}"} for i in range(3)]
    answer = plain.chat.completions.create(model=model, messages=messages, temperature=0.2)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "Answer to request with 3 messages."
    [request] = received(model)
    assert request["body"] == {"model": model, "messages": messages, "temperature": 0.2}
    assert plain.models.list().data[0].id == "fake-model"


def test_anthropic_sdk_a_conversation_with_tools_stays_in_the_window() -> None:
    model = f"claude-{uuid.uuid4().hex[:8]}"
    client = anthropic.Anthropic(base_url=PROXY, api_key="sk-ant-test", default_headers=headers(f"py/{model}"),
                                 max_retries=0)
    history: list[dict[str, Any]] = []

    def ask(stream: bool) -> list[dict[str, Any]]:
        if stream:
            with client.messages.stream(model=model, max_tokens=256, system="You are terse.",
                                        messages=history) as s:  # type: ignore[arg-type]
                message = s.get_final_message()
        else:
            message = client.messages.create(model=model, max_tokens=256, system="You are terse.",
                                             messages=history)  # type: ignore[arg-type]
        return [b.model_dump(exclude_none=True) for b in message.content]

    for t in range(150):
        if t % 10 == 5:
            history.append({"role": "user", "content": "What is the weather in Oslo?"})
            content = ask(t % 2 == 0)
            history.append({"role": "assistant", "content": content})
            call = next(b for b in content if b["type"] == "tool_use")
            history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call["id"], "content": "-3 °C, clear"}]})
            history.append({"role": "assistant", "content": ask(False)})
        history.append({"role": "user", "content": user_turn(t)})
        history.append({"role": "assistant", "content": ask(t % 2 == 0)})

    sent = received(model)
    largest = max(tokens(r["body"]["messages"]) for r in sent)
    assert largest <= WINDOW, largest
    assert tokens(history) > 3 * WINDOW
    last = sent[-1]
    # The client's key goes on, in the header its SDK chose.
    assert "sk-ant-test" in (last["headers"].get("x-api-key") or last["headers"]["authorization"])
    system = last["body"]["system"]
    assert system[0] == {"type": "text", "text": "You are terse."}
    assert "summary" in system[1]["text"]
    assert last["body"]["messages"][0]["role"] == "user"
    assert last["body"]["messages"][-1] == {"role": "user", "content": user_turn(149)}


def admin_context(workstream: str) -> dict[str, Any]:
    """The context compactor would send next for `workstream`."""
    response = httpx.get(f"{os.environ['COMPACTOR_URL']}/v1/workstreams/{workstream}/context",
                         headers={"Authorization": f"Bearer {TOKEN}"})
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def test_openai_sdk_an_edited_earlier_message_starts_a_branch() -> None:
    model = f"fake-{uuid.uuid4().hex[:8]}"
    workstream = f"py/edit-{model}"
    client = openai.OpenAI(base_url=f"{PROXY}/v1", api_key="sk-test-key",
                           default_headers=headers(workstream), max_retries=0)
    history: list[dict[str, Any]] = []
    for t in range(4):
        history.append({"role": "user", "content": f"Question {t}"})
        answer = client.chat.completions.create(model=model, messages=history)  # type: ignore[arg-type]
        history.append(answer.choices[0].message.model_dump(exclude_none=True))
    # The user edits question 2 and asks again from there.
    edited = history[:4] + [{"role": "user", "content": "Question 2, rephrased"}]
    answer = client.chat.completions.create(model=model, messages=edited)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "Answer to request with 5 messages."
    sent = received(model)[-1]["body"]["messages"]
    assert sent[-1] == {"role": "user", "content": "Question 2, rephrased"}
    assert "Question 3" not in json.dumps(sent)
    # The workstream's head is the edited branch: the context's messages
    # are the edit and its answer, not the first branch's later turns
    # (those are summarized, as a branch left behind is).
    context = admin_context(workstream)
    kept = [m for m in context["messages"] if m.get("source")]
    texts = [p.get("text") for m in kept for p in m["parts"]]
    assert "Question 2, rephrased" in texts and "Question 3" not in texts


def test_openai_sdk_a_context_too_long_for_the_model_is_compacted_and_sent_once_more() -> None:
    model = f"small-window-{uuid.uuid4().hex[:8]}"
    client = openai.OpenAI(base_url=f"{PROXY}/v1", api_key="sk-test-key",
                           default_headers=headers(f"py/{model}"), max_retries=0)
    history: list[dict[str, Any]] = []
    # The history outgrows the model's 6,000 characters long before the
    # worker's trigger: every turn is still answered.
    for t in range(30):
        history.append({"role": "user", "content": f"Message {t}: " + "details of the plan " * 20})
        answer = client.chat.completions.create(model=model, messages=history)  # type: ignore[arg-type]
        assert answer.choices[0].message.content is not None
        history.append(answer.choices[0].message.model_dump(exclude_none=True))
    # A request refused as too long, then the same turn sent again with a
    # summary in place of the older messages, within the limit.
    sizes = [len(json.dumps(r["body"]["messages"])) for r in received(model)]
    retried = [i for i in range(1, len(sizes)) if sizes[i - 1] > 6000 and sizes[i] <= 6000]
    assert retried, sizes
    assert "summary" in received(model)[retried[0]]["body"]["messages"][0]["content"]
