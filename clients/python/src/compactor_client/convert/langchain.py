"""LangChain messages (`langchain_core.messages`), both ways. Needs the
`langchain` extra (`langchain-core`)."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ..errors import ConversionError
from ..types import IncomingMessage, Part, PartToolResult, Role
from ._common import ToolNames, file_mention, is_image, result_text, visible_parts

FROM = "from_langchain"


def to_langchain(messages: Sequence[Mapping[str, Any]]) -> list[AnyMessage]:
    """Our messages (a built context, say) as LangChain messages, for
    `model.invoke(…)`. Tool calls keep their ids (`AIMessage.tool_calls`);
    each tool result becomes a `ToolMessage` (`status="error"` for an error
    result); reasoning is left out."""
    out: list[AnyMessage] = []
    for message in messages:
        parts = visible_parts(message["parts"])
        results = [p for p in parts if p["type"] == "tool_result"]
        rest = [p for p in parts if p["type"] != "tool_result"]
        tools: list[AnyMessage] = [
            ToolMessage(
                content=result_text(p),
                tool_call_id=p["call_id"],
                name=p["tool_name"],
                status="error" if p.get("is_error") else "success",
            )
            for p in results
            if p["type"] == "tool_result"
        ]
        role = message["role"]
        if role == "assistant":
            text = "\n\n".join(_text_of(p) for p in rest if p["type"] in ("text", "file"))
            calls = [
                {"name": p["tool_name"], "args": _args_of(p.get("input")), "id": p["call_id"], "type": "tool_call"}
                for p in rest
                if p["type"] == "tool_call"
            ]
            if text or calls:
                out.append(AIMessage(content=text, tool_calls=calls))
            out.extend(tools)
        elif role == "system":
            if rest:
                out.append(SystemMessage(content="\n\n".join(_text_of(p) for p in rest)))
            out.extend(tools)
        elif role == "user":
            out.extend(tools)
            content = _user_content(rest)
            if content:
                out.append(HumanMessage(content=content))
        else:
            out.extend(tools)
    return out


def from_langchain(
    messages: Sequence[BaseMessage], *, tool_names: Mapping[str, str] | None = None, client_ids: bool = False
) -> list[IncomingMessage]:
    """LangChain messages as ours, for `append_messages`: system, human, AI
    (its `tool_calls`) and tool messages; reasoning and thinking blocks are
    left out. A `ToolMessage` without a `name` is named by its call.
    Consecutive tool messages become one of ours, unless `client_ids`: then
    each message keeps its own, with its LangChain id as its `client_id`, so
    sending it again stores it once."""
    names = ToolNames(tool_names)
    out: list[IncomingMessage] = []
    for message in messages:
        before = len(out)
        _convert_one(message, names, out, merge=not client_ids)
        if client_ids and len(out) > before:
            if not message.id:
                raise ConversionError(FROM, f"a {type(message).__name__} has no id to store it once by")
            out[-1]["client_id"] = message.id
    return out


def _convert_one(message: BaseMessage, names: ToolNames, out: list[IncomingMessage], *, merge: bool) -> None:
    """Appends `message` as ours to `out` (nothing for a message with nothing to keep)."""
    if isinstance(message, ToolMessage):
        call_id = message.tool_call_id
        result: PartToolResult = {
            "type": "tool_result",
            "call_id": call_id,
            "tool_name": message.name or names.of(FROM, call_id),
            "output": _content_text(message.content),
        }
        if message.status == "error":
            result["is_error"] = True
        if merge and out and out[-1]["role"] == "tool":
            out[-1]["parts"].append(result)
        else:
            out.append({"role": "tool", "parts": [result]})
        return
    parts = _content_parts(message.content)
    role: Role
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            made = call.get("id")
            if not made:
                raise ConversionError(FROM, f"tool call {call['name']!r} has no id")
            names.remember(made, call["name"])
            parts.append({"type": "tool_call", "call_id": made, "tool_name": call["name"], "input": call["args"]})
        role = "assistant"
    elif isinstance(message, HumanMessage):
        role = "user"
    elif isinstance(message, SystemMessage):
        role = "system"
    else:
        raise ConversionError(FROM, f"{type(message).__name__} is not converted")
    if parts:
        out.append({"role": role, "parts": parts})


def _text_of(part: Part) -> str:
    if part["type"] == "text":
        return part["text"]
    if part["type"] == "file":
        return file_mention(part)
    return ""


def _user_content(parts: Sequence[Part]) -> str | list[str | dict[Any, Any]]:
    blocks: list[str | dict[Any, Any]] = []
    for part in parts:
        if part["type"] == "file" and is_image(part):
            blocks.append({"type": "image_url", "image_url": {"url": part["uri"]}})
        elif part["type"] in ("text", "file"):
            blocks.append({"type": "text", "text": _text_of(part)})
        elif part["type"] == "tool_call":
            raise ConversionError("to_langchain", f"a user message holds tool call {part['call_id']!r}; calls come from the AI")
    if len(blocks) == 1 and isinstance(blocks[0], dict) and blocks[0]["type"] == "text":
        return str(blocks[0]["text"])
    return blocks


def _args_of(value: Any) -> dict[str, Any]:
    """LangChain's `args` is a dict: other inputs are parsed from JSON text, or wrapped as `{"input": …}`."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {} if value is None else {"input": value}


def _content_text(content: str | list[str | dict[Any, Any]]) -> str:
    return "".join(p["text"] for p in _content_parts(content) if p["type"] == "text")


def _content_parts(content: str | list[str | dict[Any, Any]]) -> list[Part]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    parts: list[Part] = []
    for block in content:
        if isinstance(block, str):
            if block:
                parts.append({"type": "text", "text": block})
            continue
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                parts.append({"type": "text", "text": str(block["text"])})
        elif kind == "image_url":
            url = block.get("image_url")
            uri = url.get("url") if isinstance(url, dict) else url
            parts.append({"type": "file", "uri": str(uri), "media_type": None, "name": None})
        elif kind == "image" and block.get("url"):
            parts.append({"type": "file", "uri": str(block["url"]), "media_type": block.get("mime_type"), "name": None})
        elif kind in ("thinking", "reasoning", "redacted_thinking", "tool_use", "tool_call"):
            # Reasoning is left out; tool calls are read from `tool_calls`.
            continue
        else:
            raise ConversionError(FROM, f"content block type {kind!r} is not converted")
    return parts
