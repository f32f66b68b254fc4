"""The converters: each round-trips tool calls both ways, keeps call ids and
pairing, leaves reasoning out, and its output is accepted by the SDK's
create call (the official clients, sent to a fake provider on loopback)."""

from __future__ import annotations

import copy
import json
from typing import Any

import anthropic
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from compactor_client import (
    PRUNED_PLACEHOLDER,
    Compactor,
    ConversionError,
    call_tool_names,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
)
from compactor_client.convert.langchain import from_langchain, to_langchain
from compactor_client.types import IncomingMessage

from .conftest import json_answer, serve, workstream

#: A tool-using exchange in our shape, as a context would hold it.
OURS: list[IncomingMessage] = [
    {"role": "system", "parts": [{"type": "text", "text": "Summary: the deploy of invoice-svc fails (E4012)."}]},
    {"role": "user", "parts": [{"type": "text", "text": "Check the migration log and the disk."}]},
    {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "two tools at once"},
            {"type": "text", "text": "Looking at both."},
            {"type": "tool_call", "call_id": "call_log", "tool_name": "read_file", "input": {"path": "/var/log/migrate.log"}},
            {"type": "tool_call", "call_id": "call_df", "tool_name": "shell", "input": {"cmd": "df -h /"}},
        ],
    },
    {
        "role": "tool",
        "parts": [
            {"type": "tool_result", "call_id": "call_log", "tool_name": "read_file", "output": "0042 timed out after 300 s"},
            {"type": "tool_result", "call_id": "call_df", "tool_name": "shell", "output": "df: permission denied", "is_error": True},
        ],
    },
    {"role": "assistant", "parts": [{"type": "text", "text": "Migration 0042 timed out; df was refused."}]},
]


def visible(messages: list[IncomingMessage], drop_error_flag: bool = False) -> list[dict[str, Any]]:
    """Ours without what converters leave out: reasoning, and (`drop_error_flag`) the error flag."""
    out: list[dict[str, Any]] = []
    for message in copy.deepcopy(messages):
        parts: list[dict[str, Any]] = [dict(p) for p in message["parts"] if p["type"] != "reasoning"]
        if drop_error_flag:
            for part in parts:
                part.pop("is_error", None)
        out.append({**message, "parts": parts})
    return out


def test_openai_round_trips_tool_calls_both_ways() -> None:
    theirs = to_openai(OURS)
    assert [m["role"] for m in theirs] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert theirs[2]["tool_calls"] == [
        {"id": "call_log", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"/var/log/migrate.log"}'}},
        {"id": "call_df", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":"df -h /"}'}},
    ]
    assert theirs[3] == {"role": "tool", "tool_call_id": "call_log", "content": "0042 timed out after 300 s"}
    # Chat Completions has no error flag on a tool message.
    assert from_openai(theirs) == visible(OURS, drop_error_flag=True)
    assert to_openai(from_openai(theirs)) == theirs


def test_openai_names_a_result_by_an_earlier_call_and_says_clearly_when_none_made_it() -> None:
    history = from_openai(to_openai(OURS[:3]))
    later = [{"role": "tool", "tool_call_id": "call_log", "content": "ok"}]
    with pytest.raises(ConversionError, match="call_log"):
        from_openai(later)
    assert from_openai(later, tool_names=call_tool_names(history)) == [
        {"role": "tool", "parts": [{"type": "tool_result", "call_id": "call_log", "tool_name": "read_file", "output": "ok"}]}
    ]


def test_a_pruned_result_is_shown_as_the_placeholder() -> None:
    pruned: list[IncomingMessage] = [
        {"role": "tool", "parts": [{"type": "tool_result", "call_id": "c", "tool_name": "t", "output": "long", "pruned": True}]}
    ]
    assert to_openai(pruned) == [{"role": "tool", "tool_call_id": "c", "content": PRUNED_PLACEHOLDER}]


def test_the_official_openai_client_sends_them_and_its_answer_converts_back() -> None:
    provider = serve(
        lambda _r: json_answer(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "fake",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":"uptime"}'}}],
                        },
                    }
                ],
            },
        )
    )
    try:
        messages = to_openai(OURS)
        sdk = openai.OpenAI(base_url=f"{provider.url}/v1", api_key="test", max_retries=0)
        answer = sdk.chat.completions.create(model="fake", messages=messages)
        assert json.loads(provider.requests[0].body)["messages"] == messages
        assert from_openai([answer.choices[0].message]) == [
            {"role": "assistant", "parts": [{"type": "tool_call", "call_id": "call_9", "tool_name": "shell", "input": {"cmd": "uptime"}}]}
        ]
    finally:
        provider.close()


def test_anthropic_round_trips_tool_use_and_tool_result_both_ways() -> None:
    request = to_anthropic(OURS)
    assert request.get("system") == "Summary: the deploy of invoice-svc fails (E4012)."
    assert [m["role"] for m in request["messages"]] == ["user", "assistant", "user", "assistant"]
    assert request["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_log", "content": "0042 timed out after 300 s"},
        {"type": "tool_result", "tool_use_id": "call_df", "content": "df: permission denied", "is_error": True},
    ]
    back = from_anthropic(request["messages"], system=request.get("system"))
    assert back == visible(OURS)
    assert to_anthropic(back) == request


def test_anthropic_puts_tool_results_first_and_leaves_thinking_out() -> None:
    request = to_anthropic(
        [
            {"role": "assistant", "parts": [{"type": "tool_call", "call_id": "c1", "tool_name": "t", "input": {}}]},
            {"role": "tool", "parts": [{"type": "tool_result", "call_id": "c1", "tool_name": "t", "output": "done"}]},
            {"role": "user", "parts": [{"type": "text", "text": "thanks"}]},
        ]
    )
    assert request["messages"][1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "done"}, {"type": "text", "text": "thanks"}],
    }
    thinking = [{"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "Answer."}]}]
    assert from_anthropic(thinking) == [{"role": "assistant", "parts": [{"type": "text", "text": "Answer."}]}]


def test_the_official_anthropic_client_sends_them() -> None:
    provider = serve(
        lambda _r: json_answer(
            200,
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "fake",
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )
    )
    try:
        request = to_anthropic(OURS)
        sdk = anthropic.Anthropic(base_url=provider.url, api_key="test", max_retries=0)
        answer = sdk.messages.create(model="fake", max_tokens=64, **request)
        assert answer.content[0].type == "text"
        sent = json.loads(provider.requests[0].body)
        assert sent["messages"] == request["messages"] and sent["system"] == request.get("system")
    finally:
        provider.close()


def test_langchain_round_trips_tool_calls_both_ways() -> None:
    theirs = to_langchain(OURS)
    assert [type(m) for m in theirs] == [SystemMessage, HumanMessage, AIMessage, ToolMessage, ToolMessage, AIMessage]
    call = theirs[2]
    assert isinstance(call, AIMessage)
    assert [(c["id"], c["name"], c["args"]) for c in call.tool_calls] == [
        ("call_log", "read_file", {"path": "/var/log/migrate.log"}),
        ("call_df", "shell", {"cmd": "df -h /"}),
    ]
    failed = theirs[4]
    assert isinstance(failed, ToolMessage) and failed.tool_call_id == "call_df" and failed.status == "error"
    assert from_langchain(theirs) == visible(OURS)
    again = to_langchain(from_langchain(theirs))
    assert [(type(m), m.content) for m in again] == [(type(m), m.content) for m in theirs]


def test_a_conversation_appended_from_openai_messages_comes_back_from_the_context(api: Compactor) -> None:
    key = workstream()
    theirs = to_openai(OURS[1:])
    api.append_messages(key, from_openai(theirs))
    context = api.build_context(key)
    assert to_openai(context["messages"]) == theirs
    assert from_anthropic(to_anthropic(context["messages"])["messages"]) == visible(OURS[1:], drop_error_flag=True)
    assert from_langchain(to_langchain(context["messages"])) == visible(OURS[1:], drop_error_flag=True)
