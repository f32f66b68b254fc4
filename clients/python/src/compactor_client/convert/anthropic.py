"""Anthropic Messages content blocks (`MessageParam` dicts), both ways."""

from __future__ import annotations

from typing import Any, Mapping, Sequence, TypedDict

from ..errors import ConversionError
from ..types import IncomingMessage, Part, PartToolResult
from ._common import ToolNames, file_mention, is_image, result_text, split_data_url, visible_parts

TO = "to_anthropic"
FROM = "from_anthropic"
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


class AnthropicRequest(TypedDict, total=False):
    """`to_anthropic`'s result: `client.messages.create(model=…, max_tokens=…, **it)`."""

    system: str
    #: `MessageParam` dicts, typed `Any` so they pass where the SDK asks for its own TypedDicts.
    messages: list[Any]


def to_anthropic(messages: Sequence[Mapping[str, Any]]) -> AnthropicRequest:
    """Our messages (a built context, say) as a Messages request: the leading
    system messages become `system`, a later one user text. Tool results
    become `tool_result` blocks of a user message, first in it as the API
    requires; consecutive messages of one role are merged, since roles must
    alternate. Reasoning and empty text are left out; a file that is not an
    image is mentioned in text."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    leading = True

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
        if role == "user":
            out[-1]["content"].sort(key=lambda b: b["type"] != "tool_result")

    for message in messages:
        parts = visible_parts(message["parts"])
        if message["role"] == "system" and leading:
            for part in parts:
                if part["type"] == "text" and part["text"]:
                    system.append(part["text"])
                elif part["type"] == "file":
                    system.append(file_mention(part))
            continue
        leading = False
        results = [_block(p) for p in parts if p["type"] == "tool_result"]
        rest = [b for b in (_block(p) for p in parts if p["type"] != "tool_result") if not (b["type"] == "text" and not b["text"])]
        if message["role"] == "assistant":
            push("assistant", rest)
            push("user", results)
        else:
            push("user", results + rest)
    request: AnthropicRequest = {"messages": out}
    if system:
        request["system"] = "\n\n".join(system)
    return request


def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    tool_names: Mapping[str, str] | None = None,
) -> list[IncomingMessage]:
    """Messages params as ours, for `append_messages`. A user message's
    `tool_result` blocks become a tool message (named by their call, earlier
    in `messages` or in `tool_names`), its other blocks a user message after
    it. `thinking` and `redacted_thinking` are left out."""
    names = ToolNames(tool_names)
    out: list[IncomingMessage] = []
    if system is not None:
        text = system if isinstance(system, str) else "\n\n".join(str(b.get("text", "")) for b in system)
        if text:
            out.append({"role": "system", "parts": [{"type": "text", "text": text}]})
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ConversionError(FROM, f"role {role!r} is not converted (Anthropic takes `system` apart)")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        results: list[Part] = []
        parts: list[Part] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                if block.get("text"):
                    parts.append({"type": "text", "text": str(block["text"])})
            elif kind in ("image", "document"):
                parts.append(_source_part(block))
            elif kind in ("tool_use", "server_tool_use"):
                names.remember(str(block["id"]), str(block["name"]))
                parts.append({"type": "tool_call", "call_id": str(block["id"]), "tool_name": str(block["name"]), "input": block.get("input", {})})
            elif kind == "tool_result":
                call_id = str(block["tool_use_id"])
                result: PartToolResult = {
                    "type": "tool_result",
                    "call_id": call_id,
                    "tool_name": names.of(FROM, call_id),
                    "output": _result_content(block.get("content")),
                }
                if block.get("is_error") is True:
                    result["is_error"] = True
                results.append(result)
            elif kind in ("thinking", "redacted_thinking"):
                continue
            else:
                raise ConversionError(FROM, f"content block type {kind!r} is not converted")
        if results:
            out.append({"role": "tool", "parts": results})
        if parts:
            out.append({"role": "user" if role == "user" else "assistant", "parts": parts})
    return out


def _block(part: Part) -> dict[str, Any]:
    if part["type"] == "text" or part["type"] == "reasoning":
        return {"type": "text", "text": part["text"]}
    if part["type"] == "tool_call":
        return {"type": "tool_use", "id": part["call_id"], "name": part["tool_name"], "input": part.get("input", {})}
    if part["type"] == "tool_result":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part["call_id"], "content": result_text(part)}
        if part.get("is_error"):
            block["is_error"] = True
        return block
    if is_image(part):
        data = split_data_url(part["uri"])
        if data is None:
            return {"type": "image", "source": {"type": "url", "url": part["uri"]}}
        if data[0] in IMAGE_TYPES:
            return {"type": "image", "source": {"type": "base64", "media_type": data[0], "data": data[1]}}
    return {"type": "text", "text": file_mention(part)}


def _source_part(block: Mapping[str, Any]) -> Part:
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "url":
        return {"type": "file", "uri": str(source["url"]), "media_type": None, "name": None}
    if kind == "base64":
        media = str(source["media_type"])
        return {"type": "file", "uri": f"data:{media};base64,{source['data']}", "media_type": media, "name": None}
    if kind == "file":
        return {"type": "file", "uri": str(source["file_id"]), "media_type": None, "name": None}
    if kind == "text":
        return {"type": "text", "text": str(source.get("data", ""))}
    raise ConversionError(FROM, f"a {block.get('type')} block's source type {kind!r} is not converted")


def _result_content(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # Our tool output is text: a block of another kind is named, not dropped.
    texts = [str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')}]" for b in content]
    return "\n".join(t for t in texts if t)
