// OpenAI Chat Completions messages, both ways. The shapes below are the
// parts of `ChatCompletionMessageParam` (the `openai` package) these
// converters read and write, declared here so the package has no runtime
// dependency; a test compiles `toOpenAI`'s result as the SDK's own type.
import { ConversionError } from "../errors.js";
import type { IncomingMessage, MessageLike, Part } from "../types.js";
import { fileMention, isImage, resultText, ToolNames, visibleParts } from "./common.js";

export interface OpenAITextContent {
  type: "text";
  text: string;
}
export interface OpenAIImageContent {
  type: "image_url";
  image_url: { url: string; detail?: "auto" | "low" | "high" };
}
export interface OpenAIToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}
export type OpenAIMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string | Array<OpenAITextContent | OpenAIImageContent> }
  | { role: "assistant"; content: string | null | OpenAITextContent[]; tool_calls?: OpenAIToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };

/** What `fromOpenAI` reads: the SDK's message params, loosely (extra fields are ignored). */
export interface OpenAIMessageInput {
  role: string;
  content?: unknown;
  tool_calls?: ReadonlyArray<{
    id: string;
    type?: string;
    function?: { name: string; arguments: string };
    custom?: { name: string; input: string };
  }> | null;
  tool_call_id?: string;
  function_call?: unknown;
}

export interface FromOpenAIOptions {
  /** Names of tool calls made before these messages, by call id (see `callToolNames`). */
  toolNames?: ReadonlyMap<string, string> | Record<string, string> | undefined;
}

const TO = "toOpenAI";
const FROM = "fromOpenAI";

/**
 * Our messages (a built context, say) as Chat Completions messages, ready
 * for `client.chat.completions.create({ messages })`. Tool calls keep their
 * ids; each tool result becomes a `tool` message right after its call's
 * message; reasoning is left out; a file that is not an image is mentioned
 * in text (Chat Completions takes files only from the user, as uploads).
 */
export function toOpenAI(messages: readonly MessageLike[]): OpenAIMessage[] {
  const out: OpenAIMessage[] = [];
  for (const message of messages) {
    const parts = visibleParts(message.parts);
    const results = parts.filter((p) => p.type === "tool_result");
    const rest = parts.filter((p) => p.type !== "tool_result");
    const toolMessages = results.map(
      (p): OpenAIMessage => ({ role: "tool", tool_call_id: p.call_id, content: resultText(p) }),
    );
    switch (message.role) {
      case "system":
        if (rest.length > 0) out.push({ role: "system", content: joinText(rest) });
        out.push(...toolMessages);
        break;
      case "tool":
        if (rest.length > 0) {
          throw new ConversionError(TO, "a tool message holds parts other than tool results, which OpenAI cannot place");
        }
        out.push(...toolMessages);
        break;
      case "user": {
        // Results answer the assistant's calls, which the user's words follow.
        out.push(...toolMessages);
        const content = userContent(rest);
        if (content !== undefined) out.push({ role: "user", content });
        break;
      }
      case "assistant": {
        const texts: OpenAITextContent[] = [];
        const calls: OpenAIToolCall[] = [];
        for (const part of rest) {
          if (part.type === "text") texts.push({ type: "text", text: part.text });
          else if (part.type === "file") texts.push({ type: "text", text: fileMention(part) });
          else if (part.type === "tool_call") {
            calls.push({
              id: part.call_id,
              type: "function",
              function: { name: part.tool_name, arguments: argumentsOf(part.input) },
            });
          }
        }
        if (texts.length > 0 || calls.length > 0) {
          const content = texts.length === 0 ? null : texts.length === 1 ? (texts[0]?.text ?? "") : texts;
          out.push(calls.length > 0 ? { role: "assistant", content, tool_calls: calls } : { role: "assistant", content });
        }
        out.push(...toolMessages);
        break;
      }
    }
  }
  return out;
}

/**
 * Chat Completions messages as ours, for `appendMessages`. `system` and
 * `developer` become system messages; consecutive `tool` messages become one
 * tool message; a tool result is named by its call (earlier in `messages`,
 * or in `options.toolNames`). Tool call arguments are parsed as JSON (kept
 * as the string when they are not JSON).
 */
export function fromOpenAI(messages: readonly OpenAIMessageInput[], options?: FromOpenAIOptions): IncomingMessage[] {
  const names = new ToolNames(options?.toolNames);
  const out: IncomingMessage[] = [];
  for (const message of messages) {
    switch (message.role) {
      case "system":
      case "developer": {
        const parts = contentParts(message.content);
        if (parts.length > 0) out.push({ role: "system", parts });
        break;
      }
      case "user": {
        const parts = contentParts(message.content);
        if (parts.length > 0) out.push({ role: "user", parts });
        break;
      }
      case "assistant": {
        if (message.function_call) {
          throw new ConversionError(FROM, "a legacy `function_call` has no call id; send `tool_calls` instead");
        }
        const parts = contentParts(message.content);
        for (const call of message.tool_calls ?? []) {
          if (call.function) {
            names.remember(call.id, call.function.name);
            parts.push({
              type: "tool_call",
              call_id: call.id,
              tool_name: call.function.name,
              input: inputOf(call.function.arguments),
            });
          } else if (call.custom) {
            names.remember(call.id, call.custom.name);
            parts.push({ type: "tool_call", call_id: call.id, tool_name: call.custom.name, input: call.custom.input });
          } else {
            throw new ConversionError(FROM, `tool call ${JSON.stringify(call.id)} has neither \`function\` nor \`custom\``);
          }
        }
        if (parts.length > 0) out.push({ role: "assistant", parts });
        break;
      }
      case "tool": {
        const callId = message.tool_call_id;
        if (typeof callId !== "string") throw new ConversionError(FROM, "a tool message has no `tool_call_id`");
        const part: Part = {
          type: "tool_result",
          call_id: callId,
          tool_name: names.of(FROM, callId),
          output: contentParts(message.content)
            .map((p) => (p.type === "text" ? p.text : ""))
            .join(""),
        };
        const last = out[out.length - 1];
        if (last?.role === "tool") last.parts.push(part);
        else out.push({ role: "tool", parts: [part] });
        break;
      }
      default:
        throw new ConversionError(FROM, `role ${JSON.stringify(message.role)} is not converted (legacy \`function\` messages have no call id)`);
    }
  }
  return out;
}

function joinText(parts: readonly Part[]): string {
  return parts
    .map((p) => (p.type === "text" ? p.text : p.type === "file" ? fileMention(p) : ""))
    .filter((t) => t !== "")
    .join("\n\n");
}

function userContent(parts: readonly Part[]): string | Array<OpenAITextContent | OpenAIImageContent> | undefined {
  const content: Array<OpenAITextContent | OpenAIImageContent> = [];
  for (const part of parts) {
    if (part.type === "text") content.push({ type: "text", text: part.text });
    else if (part.type === "file") {
      content.push(isImage(part) ? { type: "image_url", image_url: { url: part.uri } } : { type: "text", text: fileMention(part) });
    } else if (part.type === "tool_call") {
      throw new ConversionError(TO, `a user message holds tool call ${JSON.stringify(part.call_id)}; OpenAI takes calls from the assistant only`);
    }
  }
  if (content.length === 0) return undefined;
  const only = content[0];
  return content.length === 1 && only?.type === "text" ? only.text : content;
}

function contentParts(content: unknown): Part[] {
  if (content === undefined || content === null) return [];
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  if (!Array.isArray(content)) throw new ConversionError(FROM, "`content` is neither a string nor an array of parts");
  const parts: Part[] = [];
  for (const item of content as Array<Record<string, unknown>>) {
    switch (item["type"]) {
      case "text":
        parts.push({ type: "text", text: String(item["text"] ?? "") });
        break;
      case "refusal":
        parts.push({ type: "text", text: String(item["refusal"] ?? "") });
        break;
      case "image_url": {
        const url = String((item["image_url"] as { url?: unknown } | undefined)?.url ?? "");
        const mediaType = /^data:([^;,]+)/i.exec(url)?.[1] ?? null;
        parts.push({ type: "file", uri: url, media_type: mediaType, name: null });
        break;
      }
      case "file": {
        const file = (item["file"] ?? {}) as { file_id?: string; file_data?: string; filename?: string };
        const uri = file.file_id ?? file.file_data;
        if (uri === undefined) throw new ConversionError(FROM, "a file part has neither `file_id` nor `file_data`");
        parts.push({ type: "file", uri, media_type: null, name: file.filename ?? null });
        break;
      }
      case "input_audio": {
        const audio = (item["input_audio"] ?? {}) as { data?: string; format?: string };
        parts.push({ type: "file", uri: `data:audio/${audio.format ?? "wav"};base64,${audio.data ?? ""}`, media_type: `audio/${audio.format ?? "wav"}`, name: null });
        break;
      }
      default:
        throw new ConversionError(FROM, `content part type ${JSON.stringify(item["type"])} is not converted`);
    }
  }
  return parts;
}

/** Tool input as OpenAI's `arguments`: JSON text; a string input is taken as the arguments' text. */
function argumentsOf(input: unknown): string {
  if (typeof input === "string") return input;
  return JSON.stringify(input ?? {});
}

/** `arguments` as our input: parsed JSON, or the text itself when it is not JSON. */
function inputOf(args: string): unknown {
  try {
    return JSON.parse(args) as unknown;
  } catch {
    return args;
  }
}
