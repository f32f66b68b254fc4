"""OpenAI Chat Completions messages (`ChatCompletionMessageParam` dicts), both ways."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence, cast

from ..errors import ConversionError
from ..types import IncomingMessage, Part
from ._common import ToolNames, file_mention, is_image, result_text, visible_parts

TO = "to_openai"
FROM = "from_openai"


def to_openai(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Our messages (a built context, say) as Chat Completions messages (the
    SDK's `ChatCompletionMessageParam` dicts, typed `Any` so they pass where
    the SDK asks for its own TypedDicts), for
    `client.chat.completions.create(messages=…)`. Tool calls keep their ids;
    each tool result becomes a `tool` message right after its call's
    message; reasoning is left out; a file that is not an image is mentioned
    in text."""
    out: list[dict[str, Any]] = []
    for message in messages:
        parts = visible_parts(message["parts"])
        results = [p for p in parts if p["type"] == "tool_result"]
        rest = [p for p in parts if p["type"] != "tool_result"]
        tool_messages = [{"role": "tool", "tool_call_id": p["call_id"], "content": result_text(cast(Any, p))} for p in results]
        role = message["role"]
        if role == "system":
            if rest:
                out.append({"role": "system", "content": _join_text(rest)})
            out.extend(tool_messages)
        elif role == "tool":
            if rest:
                raise ConversionError(TO, "a tool message holds parts other than tool results, which OpenAI cannot place")
            out.extend(tool_messages)
        elif role == "user":
            out.extend(tool_messages)
            content = _user_content(rest)
            if content is not None:
                out.append({"role": "user", "content": content})
        else:
            texts: list[dict[str, Any]] = []
            calls: list[dict[str, Any]] = []
            for part in rest:
                if part["type"] == "text":
                    texts.append({"type": "text", "text": part["text"]})
                elif part["type"] == "file":
                    texts.append({"type": "text", "text": file_mention(part)})
                elif part["type"] == "tool_call":
                    calls.append(
                        {
                            "id": part["call_id"],
                            "type": "function",
                            "function": {"name": part["tool_name"], "arguments": _arguments_of(part.get("input"))},
                        }
                    )
            if texts or calls:
                said: Any = None if not texts else texts[0]["text"] if len(texts) == 1 else texts
                assistant: dict[str, Any] = {"role": "assistant", "content": said}
                if calls:
                    assistant["tool_calls"] = calls
                out.append(assistant)
            out.extend(tool_messages)
    return out


def from_openai(messages: Sequence[Mapping[str, Any] | object], *, tool_names: Mapping[str, str] | None = None) -> list[IncomingMessage]:
    """Chat Completions messages (dicts, or the SDK's response message
    objects) as ours, for `append_messages`. `system` and `developer` become
    system messages; consecutive `tool` messages one tool message; a tool
    result is named by its call (earlier in `messages`, or in `tool_names`).
    Tool call arguments are parsed as JSON (kept as text when they are not)."""
    names = ToolNames(tool_names)
    out: list[IncomingMessage] = []
    for raw in messages:
        message = _as_dict(raw)
        role = message.get("role")
        if role in ("system", "developer", "user"):
            parts = _content_parts(message.get("content"))
            if parts:
                out.append({"role": "user" if role == "user" else "system", "parts": parts})
        elif role == "assistant":
            if message.get("function_call"):
                raise ConversionError(FROM, "a legacy `function_call` has no call id; send `tool_calls` instead")
            parts = _content_parts(message.get("content"))
            for call in message.get("tool_calls") or []:
                call = _as_dict(call)
                if call.get("function"):
                    fn = call["function"]
                    names.remember(call["id"], fn["name"])
                    parts.append({"type": "tool_call", "call_id": call["id"], "tool_name": fn["name"], "input": _input_of(fn["arguments"])})
                elif call.get("custom"):
                    custom = call["custom"]
                    names.remember(call["id"], custom["name"])
                    parts.append({"type": "tool_call", "call_id": call["id"], "tool_name": custom["name"], "input": custom["input"]})
                else:
                    raise ConversionError(FROM, f"tool call {call.get('id')!r} has neither `function` nor `custom`")
            if parts:
                out.append({"role": "assistant", "parts": parts})
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise ConversionError(FROM, "a tool message has no `tool_call_id`")
            output = "".join(p["text"] for p in _content_parts(message.get("content")) if p["type"] == "text")
            result: Part = {"type": "tool_result", "call_id": call_id, "tool_name": names.of(FROM, call_id), "output": output}
            if out and out[-1]["role"] == "tool":
                out[-1]["parts"].append(result)
            else:
                out.append({"role": "tool", "parts": [result]})
        else:
            raise ConversionError(FROM, f"role {role!r} is not converted (legacy `function` messages have no call id)")
    return out


def _as_dict(value: Any) -> dict[str, Any]:
    """A dict, or a pydantic model of the SDK's (its `model_dump`)."""
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return cast(dict[str, Any], dump(exclude_none=True))
    raise ConversionError(FROM, f"expected a message dict, got {type(value).__name__}")


def _join_text(parts: Sequence[Part]) -> str:
    texts = [p["text"] if p["type"] == "text" else file_mention(p) if p["type"] == "file" else "" for p in parts]
    return "\n\n".join(t for t in texts if t)


def _user_content(parts: Sequence[Part]) -> str | list[dict[str, Any]] | None:
    content: list[dict[str, Any]] = []
    for part in parts:
        if part["type"] == "text":
            content.append({"type": "text", "text": part["text"]})
        elif part["type"] == "file":
            if is_image(part):
                content.append({"type": "image_url", "image_url": {"url": part["uri"]}})
            else:
                content.append({"type": "text", "text": file_mention(part)})
        elif part["type"] == "tool_call":
            raise ConversionError(TO, f"a user message holds tool call {part['call_id']!r}; OpenAI takes calls from the assistant only")
    if not content:
        return None
    if len(content) == 1 and content[0]["type"] == "text":
        return cast(str, content[0]["text"])
    return content


def _content_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise ConversionError(FROM, "`content` is neither a string nor a list of parts")
    parts: list[Part] = []
    for item in content:
        item = _as_dict(item)
        kind = item.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(item.get("text", ""))})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(item.get("refusal", ""))})
        elif kind == "image_url":
            url = str((item.get("image_url") or {}).get("url", ""))
            match = re.match(r"^data:([^;,]+)", url, re.I)
            parts.append({"type": "file", "uri": url, "media_type": match.group(1) if match else None, "name": None})
        elif kind == "file":
            file = item.get("file") or {}
            uri = file.get("file_id") or file.get("file_data")
            if uri is None:
                raise ConversionError(FROM, "a file part has neither `file_id` nor `file_data`")
            parts.append({"type": "file", "uri": uri, "media_type": None, "name": file.get("filename")})
        else:
            raise ConversionError(FROM, f"content part type {kind!r} is not converted")
    return parts


def _arguments_of(value: Any) -> str:
    """Tool input as OpenAI's `arguments`: JSON text; a string input is taken as the arguments' text."""
    return value if isinstance(value, str) else json.dumps(value if value is not None else {}, separators=(",", ":"), ensure_ascii=False)


def _input_of(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
