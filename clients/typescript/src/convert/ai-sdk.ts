// The Vercel AI SDK's `ModelMessage`, both ways. The shapes are the parts
// of `ModelMessage` (the `ai` package) these converters read and write,
// declared here so the package has no runtime dependency; a test compiles
// `toModelMessages`'s result as the SDK's own type.
import { ConversionError } from "../errors.js";
import type { IncomingMessage, MessageLike, Part } from "../types.js";
import { dataUrl, fileMention, isAbsoluteUri, resultText, visibleParts } from "./common.js";

export interface AiTextPart {
  type: "text";
  text: string;
}
export interface AiFilePart {
  type: "file";
  data: URL;
  mediaType: string;
  filename?: string;
}
export interface AiToolCallPart {
  type: "tool-call";
  toolCallId: string;
  toolName: string;
  input: unknown;
}
export interface AiToolResultPart {
  type: "tool-result";
  toolCallId: string;
  toolName: string;
  output: { type: "text"; value: string } | { type: "error-text"; value: string };
}
export type AiModelMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: Array<AiTextPart | AiFilePart> }
  | { role: "assistant"; content: Array<AiTextPart | AiFilePart | AiToolCallPart> }
  | { role: "tool"; content: AiToolResultPart[] };

/** What `fromModelMessages` reads: `ModelMessage`s, loosely. */
export interface AiModelMessageInput {
  role: string;
  content: string | ReadonlyArray<{ readonly type: string }>;
}

const TO = "toModelMessages";
const FROM = "fromModelMessages";

/**
 * Our messages (a built context, say) as `ModelMessage`s, for
 * `generateText({ model, messages })`. Tool results become `tool` messages
 * (an error result an `error-text` output); reasoning is left out; a file
 * whose URI is a path, not a URL, is mentioned in text.
 */
export function toModelMessages(messages: readonly MessageLike[]): AiModelMessage[] {
  const out: AiModelMessage[] = [];
  for (const message of messages) {
    const parts = visibleParts(message.parts);
    const results: AiToolResultPart[] = [];
    const content: Array<AiTextPart | AiFilePart | AiToolCallPart> = [];
    for (const part of parts) {
      switch (part.type) {
        case "text":
          content.push({ type: "text", text: part.text });
          break;
        case "file":
          content.push(filePart(part));
          break;
        case "tool_call":
          if (message.role !== "assistant") {
            throw new ConversionError(TO, `a ${message.role} message holds tool call ${JSON.stringify(part.call_id)}; calls come from the assistant`);
          }
          content.push({ type: "tool-call", toolCallId: part.call_id, toolName: part.tool_name, input: part.input ?? {} });
          break;
        case "tool_result":
          results.push({
            type: "tool-result",
            toolCallId: part.call_id,
            toolName: part.tool_name,
            output: { type: part.is_error ? "error-text" : "text", value: resultText(part) },
          });
          break;
        case "reasoning":
          break;
      }
    }
    const pushResults = (): void => {
      if (results.length > 0) out.push({ role: "tool", content: results });
    };
    switch (message.role) {
      case "system": {
        const text = content.map((p) => (p.type === "text" ? p.text : "")).filter((t) => t !== "").join("\n\n");
        if (text !== "") out.push({ role: "system", content: text });
        pushResults();
        break;
      }
      case "user":
        pushResults();
        if (content.length > 0) {
          out.push({ role: "user", content: content.filter((p): p is AiTextPart | AiFilePart => p.type !== "tool-call") });
        }
        break;
      case "assistant":
        if (content.length > 0) out.push({ role: "assistant", content });
        pushResults();
        break;
      case "tool":
        if (content.length > 0) throw new ConversionError(TO, "a tool message holds parts other than tool results");
        pushResults();
        break;
    }
  }
  return out;
}

/**
 * `ModelMessage`s as ours, for `appendMessages`. Tool results keep their
 * call's id and name; a `json` output is stored as its JSON text, and
 * `error-text`, `error-json` and `execution-denied` as an error result.
 * Reasoning and tool approval requests and responses are left out.
 */
export function fromModelMessages(messages: readonly AiModelMessageInput[]): IncomingMessage[] {
  const out: IncomingMessage[] = [];
  for (const message of messages) {
    const role = message.role;
    if (role !== "system" && role !== "user" && role !== "assistant" && role !== "tool") {
      throw new ConversionError(FROM, `role ${JSON.stringify(role)} is not converted`);
    }
    const items: ReadonlyArray<Record<string, unknown>> =
      typeof message.content === "string"
        ? [{ type: "text", text: message.content }]
        : (message.content as ReadonlyArray<Record<string, unknown>>);
    const parts: Part[] = [];
    const results: Part[] = [];
    for (const item of items) {
      switch (item["type"]) {
        case "text":
          if (typeof item["text"] === "string" && item["text"] !== "") parts.push({ type: "text", text: item["text"] });
          break;
        case "image":
          parts.push(fromFile(item["image"], item["mediaType"], undefined));
          break;
        case "file":
          parts.push(fromFile(item["data"], item["mediaType"], item["filename"]));
          break;
        case "tool-call":
          parts.push({
            type: "tool_call",
            call_id: String(item["toolCallId"]),
            tool_name: String(item["toolName"]),
            input: item["input"] ?? {},
          });
          break;
        case "tool-result":
          results.push(fromResult(item));
          break;
        case "reasoning":
        case "reasoning-file":
        case "tool-approval-request":
        case "tool-approval-response":
          break;
        default:
          throw new ConversionError(FROM, `content part type ${JSON.stringify(item["type"])} is not converted`);
      }
    }
    if (role === "tool") {
      if (results.length > 0) out.push({ role: "tool", parts: results });
      continue;
    }
    if (parts.length > 0) out.push({ role, parts });
    // An assistant's provider-executed tool results follow its calls.
    if (results.length > 0) out.push({ role: "tool", parts: results });
  }
  return out;
}

function filePart(part: Extract<Part, { type: "file" }>): AiTextPart | AiFilePart {
  if (!isAbsoluteUri(part.uri)) return { type: "text", text: fileMention(part) };
  let url: URL;
  try {
    url = new URL(part.uri);
  } catch {
    return { type: "text", text: fileMention(part) };
  }
  const mediaType = part.media_type ?? /^data:([^;,]+)/i.exec(part.uri)?.[1] ?? "application/octet-stream";
  const file: AiFilePart = { type: "file", data: url, mediaType };
  if (part.name) file.filename = part.name;
  return file;
}

function fromFile(data: unknown, mediaType: unknown, filename: unknown): Part {
  const type = typeof mediaType === "string" && mediaType !== "" ? mediaType : null;
  const name = typeof filename === "string" ? filename : null;
  let uri: string;
  if (data instanceof URL) uri = data.href;
  else if (typeof data === "string") uri = isAbsoluteUri(data) ? data : `data:${type ?? "application/octet-stream"};base64,${data}`;
  else if (data instanceof Uint8Array) uri = dataUrl(type ?? "application/octet-stream", data);
  else if (data instanceof ArrayBuffer) uri = dataUrl(type ?? "application/octet-stream", new Uint8Array(data));
  else if (data !== null && typeof data === "object" && (data as { type?: unknown }).type === "url") {
    uri = String((data as { url: unknown }).url);
  } else {
    throw new ConversionError(FROM, "a file part's data is neither a URL, a string nor bytes");
  }
  return { type: "file", uri, media_type: type, name };
}

function fromResult(item: Record<string, unknown>): Part {
  const output = (item["output"] ?? {}) as { type?: string; value?: unknown; reason?: string };
  const part: Part = {
    type: "tool_result",
    call_id: String(item["toolCallId"]),
    tool_name: String(item["toolName"]),
    output: "",
  };
  switch (output.type) {
    case "text":
    case "error-text":
      part.output = String(output.value ?? "");
      break;
    case "json":
    case "error-json":
      part.output = JSON.stringify(output.value ?? null);
      break;
    case "execution-denied":
      part.output = output.reason ?? "execution denied";
      break;
    case "content":
      part.output = (Array.isArray(output.value) ? (output.value as Array<Record<string, unknown>>) : [])
        .map((c) => (c["type"] === "text" ? String(c["text"] ?? "") : `[${String(c["type"])}]`))
        .join("\n");
      break;
    default:
      throw new ConversionError(FROM, `tool result output type ${JSON.stringify(output.type)} is not converted`);
  }
  if (output.type === "error-text" || output.type === "error-json" || output.type === "execution-denied") {
    part.is_error = true;
  }
  return part;
}
