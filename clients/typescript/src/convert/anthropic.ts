// Anthropic Messages content blocks, both ways. The shapes are the parts
// of `MessageParam` (the `@anthropic-ai/sdk` package) these converters read
// and write, declared here so the package has no runtime dependency; a test
// compiles `toAnthropic`'s result as the SDK's own types.
import { ConversionError } from "../errors.js";
import type { IncomingMessage, MessageLike, Part } from "../types.js";
import { fileMention, isImage, resultText, splitDataUrl, ToolNames, visibleParts } from "./common.js";

export type AnthropicImageMediaType = "image/jpeg" | "image/png" | "image/gif" | "image/webp";
export type AnthropicBlock =
  | { type: "text"; text: string }
  | {
      type: "image";
      source: { type: "url"; url: string } | { type: "base64"; media_type: AnthropicImageMediaType; data: string };
    }
  | { type: "tool_use"; id: string; name: string; input: unknown }
  | { type: "tool_result"; tool_use_id: string; content: string; is_error?: boolean };
export interface AnthropicMessage {
  role: "user" | "assistant";
  content: AnthropicBlock[];
}
/** `toAnthropic`'s result: spread it into `client.messages.create({ model, max_tokens, ...it })`. */
export interface AnthropicRequest {
  /** The leading system messages' text (Anthropic takes the system prompt apart); absent when none. */
  system?: string;
  messages: AnthropicMessage[];
}

/** What `fromAnthropic` reads: the SDK's message params, loosely. */
export interface AnthropicMessageInput {
  role: string;
  content: string | ReadonlyArray<{ readonly type: string }>;
}

export interface FromAnthropicOptions {
  /** The request's `system`, stored as the first (system) message. */
  system?: string | ReadonlyArray<{ type: string | undefined; text?: string }>;
  /** Names of tool calls made before these messages, by call id (see `callToolNames`). */
  toolNames?: ReadonlyMap<string, string> | Record<string, string> | undefined;
}

const TO = "toAnthropic";
const FROM = "fromAnthropic";
const IMAGE_TYPES = new Set(["image/jpeg", "image/png", "image/gif", "image/webp"]);

/**
 * Our messages (a built context, say) as a Messages request: the leading
 * system messages become `system`; a later system message is user text.
 * Tool results (our `tool` messages) become `tool_result` blocks of a user
 * message, first in it as the API requires; consecutive messages of one
 * role are merged, since roles must alternate. Reasoning is left out, and
 * empty text too (the API refuses empty text blocks); a file that is not an
 * image is mentioned in text.
 */
export function toAnthropic(messages: readonly MessageLike[]): AnthropicRequest {
  const system: string[] = [];
  const out: AnthropicMessage[] = [];
  let leading = true;
  const push = (role: "user" | "assistant", blocks: AnthropicBlock[]): void => {
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last?.role === role) {
      last.content.push(...blocks);
      if (role === "user") last.content.sort(resultsFirst);
    } else {
      out.push({ role, content: role === "user" ? blocks.sort(resultsFirst) : blocks });
    }
  };
  for (const message of messages) {
    const parts = visibleParts(message.parts);
    if (message.role === "system" && leading) {
      for (const part of parts) {
        if (part.type === "text" && part.text !== "") system.push(part.text);
        else if (part.type === "file") system.push(fileMention(part));
      }
      continue;
    }
    leading = false;
    const results = parts.filter((p) => p.type === "tool_result");
    const rest = parts.filter((p) => p.type !== "tool_result");
    const role = message.role === "assistant" ? "assistant" : "user";
    if (role === "assistant") {
      push("assistant", rest.map(block).filter(nonEmpty));
      push("user", results.map(block));
    } else {
      push("user", [...results, ...rest].map(block).filter(nonEmpty));
    }
  }
  return system.length > 0 ? { system: system.join("\n\n"), messages: out } : { messages: out };
}

/**
 * Messages params as ours, for `appendMessages`. A user message's
 * `tool_result` blocks become a tool message (named by their call, earlier
 * in `messages` or in `options.toolNames`), its other blocks a user message
 * after it. `thinking` and `redacted_thinking` are left out, as compactor
 * leaves out reasoning.
 */
export function fromAnthropic(messages: readonly AnthropicMessageInput[], options?: FromAnthropicOptions): IncomingMessage[] {
  const names = new ToolNames(options?.toolNames);
  const out: IncomingMessage[] = [];
  if (options?.system !== undefined) {
    const text =
      typeof options.system === "string" ? options.system : options.system.map((b) => b.text ?? "").join("\n\n");
    if (text !== "") out.push({ role: "system", parts: [{ type: "text", text }] });
  }
  for (const message of messages) {
    if (message.role !== "user" && message.role !== "assistant") {
      throw new ConversionError(FROM, `role ${JSON.stringify(message.role)} is not converted (Anthropic takes \`system\` apart)`);
    }
    const blocks: ReadonlyArray<Record<string, unknown>> =
      typeof message.content === "string"
        ? [{ type: "text", text: message.content }]
        : (message.content as ReadonlyArray<Record<string, unknown>>);
    const results: Part[] = [];
    const parts: Part[] = [];
    for (const b of blocks) {
      switch (b["type"]) {
        case "text":
          if (typeof b["text"] === "string" && b["text"] !== "") parts.push({ type: "text", text: b["text"] });
          break;
        case "image":
        case "document":
          parts.push(sourcePart(b));
          break;
        case "tool_use":
        case "server_tool_use": {
          const id = String(b["id"]);
          const name = String(b["name"]);
          names.remember(id, name);
          parts.push({ type: "tool_call", call_id: id, tool_name: name, input: b["input"] ?? {} });
          break;
        }
        case "tool_result": {
          const id = String(b["tool_use_id"]);
          const part: Part = { type: "tool_result", call_id: id, tool_name: names.of(FROM, id), output: resultContent(b["content"]) };
          if (b["is_error"] === true) part.is_error = true;
          results.push(part);
          break;
        }
        case "thinking":
        case "redacted_thinking":
          break;
        default:
          throw new ConversionError(FROM, `content block type ${JSON.stringify(b["type"])} is not converted`);
      }
    }
    if (results.length > 0) out.push({ role: "tool", parts: results });
    if (parts.length > 0) out.push({ role: message.role, parts });
  }
  return out;
}

function block(part: Part): AnthropicBlock {
  switch (part.type) {
    case "text":
    case "reasoning":
      return { type: "text", text: part.text };
    case "tool_call":
      return { type: "tool_use", id: part.call_id, name: part.tool_name, input: part.input ?? {} };
    case "tool_result":
      return part.is_error
        ? { type: "tool_result", tool_use_id: part.call_id, content: resultText(part), is_error: true }
        : { type: "tool_result", tool_use_id: part.call_id, content: resultText(part) };
    case "file": {
      if (isImage(part)) {
        const data = splitDataUrl(part.uri);
        if (data === undefined) return { type: "image", source: { type: "url", url: part.uri } };
        if (IMAGE_TYPES.has(data.mediaType)) {
          return {
            type: "image",
            source: { type: "base64", media_type: data.mediaType as AnthropicImageMediaType, data: data.data },
          };
        }
      }
      return { type: "text", text: fileMention(part) };
    }
  }
}

function nonEmpty(b: AnthropicBlock): boolean {
  if (b.type === "tool_use" && b.id === "") throw new ConversionError(TO, "a tool call has an empty id");
  return b.type !== "text" || b.text !== "";
}

function resultsFirst(a: AnthropicBlock, b: AnthropicBlock): number {
  return Number(b.type === "tool_result") - Number(a.type === "tool_result");
}

function sourcePart(b: Record<string, unknown>): Part {
  const source = (b["source"] ?? {}) as Record<string, unknown>;
  switch (source["type"]) {
    case "url":
      return { type: "file", uri: String(source["url"]), media_type: null, name: null };
    case "base64": {
      const mediaType = String(source["media_type"]);
      return { type: "file", uri: `data:${mediaType};base64,${String(source["data"])}`, media_type: mediaType, name: null };
    }
    case "file":
      return { type: "file", uri: String(source["file_id"]), media_type: null, name: null };
    case "text":
      return { type: "text", text: String(source["data"] ?? "") };
    default:
      throw new ConversionError(FROM, `a ${String(b["type"])} block's source type ${JSON.stringify(source["type"])} is not converted`);
  }
}

function resultContent(content: unknown): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw new ConversionError(FROM, "a tool_result's content is neither a string nor blocks");
  return (content as Array<Record<string, unknown>>)
    // Our tool output is text: a block of another kind is named, not dropped.
    .map((b) => (b["type"] === "text" ? String(b["text"] ?? "") : `[${String(b["type"])}]`))
    .filter((t) => t !== "")
    .join("\n");
}
