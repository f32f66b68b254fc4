// What the converters share: the placeholder of pruned tool output, the
// tool name a result needs, and files as the URIs our parts hold.
import { ConversionError } from "../errors.js";
import type { FilePart, MessageLike, Part, ToolResultPart } from "../types.js";

/** What a model is shown for a tool result that tool-output pruning cleared. */
export const PRUNED_PLACEHOLDER = "[Old tool result content cleared]";

/** The text a model is shown for a tool result: its output, or the placeholder once pruned. */
export function resultText(part: ToolResultPart): string {
  return part.pruned ? PRUNED_PLACEHOLDER : (part.output ?? "");
}

/** How a file no SDK shape can carry is mentioned in text. */
export function fileMention(part: FilePart): string {
  return part.name ? `[file ${part.name}: ${part.uri}]` : `[file: ${part.uri}]`;
}

/** Whether a file part is an image a model can be sent by URL or data URL. */
export function isImage(part: FilePart): boolean {
  return (part.media_type ?? "").startsWith("image/") || /^data:image\//i.test(part.uri);
}

/** Whether a string is an absolute URI (`https:`, `data:`, `file:`…), not a path. */
export function isAbsoluteUri(text: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(text) && !/^[a-z]:[\\/]/i.test(text);
}

/** `data:<type>;base64,<data>` of bytes, without Node's Buffer. */
export function dataUrl(mediaType: string, bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return `data:${mediaType};base64,${btoa(binary)}`;
}

/** The media type and base64 data of a `data:…;base64,` URL, or undefined. */
export function splitDataUrl(uri: string): { mediaType: string; data: string } | undefined {
  const match = /^data:([^;,]+);base64,(.*)$/is.exec(uri);
  return match ? { mediaType: match[1] ?? "", data: match[2] ?? "" } : undefined;
}

/**
 * Tool names by call id: SDKs that name a result only by its call's id
 * (OpenAI, Anthropic) get the name from the call, earlier in the same
 * conversation or in `known` (calls converted earlier).
 */
export class ToolNames {
  readonly #names = new Map<string, string>();

  constructor(known?: ReadonlyMap<string, string> | Record<string, string>) {
    if (known instanceof Map) {
      for (const [id, name] of known) this.#names.set(id, name);
    } else if (known !== undefined) {
      for (const [id, name] of Object.entries(known)) this.#names.set(id, name);
    }
  }

  remember(callId: string, name: string): void {
    this.#names.set(callId, name);
  }

  /** The name of call `callId`; a clear error when no call of the conversation had that id. */
  of(operation: string, callId: string): string {
    const name = this.#names.get(callId);
    if (name === undefined) {
      throw new ConversionError(
        operation,
        `a tool result answers call ${JSON.stringify(callId)}, which no tool call of these messages made; ` +
          "pass the earlier calls' names as `toolNames` (callToolNames(history) collects them)",
      );
    }
    return name;
  }
}

/** Call id → tool name of every tool call in `messages` (ours): the `toolNames` a later conversion needs. */
export function callToolNames(messages: readonly MessageLike[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const message of messages) {
    for (const part of message.parts) {
      if (part.type === "tool_call") names.set(part.call_id, part.tool_name);
    }
  }
  return names;
}

/** Parts a model is sent: reasoning is left out (compactor does not carry it either). */
export function visibleParts(parts: readonly Part[]): Part[] {
  return parts.filter((part) => part.type !== "reasoning");
}
