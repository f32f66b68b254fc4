// The converters: each round-trips tool calls both ways, keeps call ids and
// pairing, leaves reasoning out, and its output is the SDK's own type,
// accepted by the SDK's create call (sent to a fake provider on loopback).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam } from "@anthropic-ai/sdk/resources/messages/messages";
import { modelMessageSchema, type ModelMessage } from "ai";
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";

import {
  callToolNames,
  ConversionError,
  fromAnthropic,
  fromModelMessages,
  fromOpenAI,
  PRUNED_PLACEHOLDER,
  toAnthropic,
  toModelMessages,
  toOpenAI,
  type IncomingMessage,
} from "../src/index.js";
import { client, json, serve, workstream } from "./support.js";

/** A tool-using exchange in our shape, as a context would hold it. */
const ours: IncomingMessage[] = [
  { role: "system", parts: [{ type: "text", text: "Summary: the deploy of invoice-svc fails (E4012)." }] },
  { role: "user", parts: [{ type: "text", text: "Check the migration log and the disk." }] },
  {
    role: "assistant",
    parts: [
      { type: "reasoning", text: "two tools at once" },
      { type: "text", text: "Looking at both." },
      { type: "tool_call", call_id: "call_log", tool_name: "read_file", input: { path: "/var/log/migrate.log" } },
      { type: "tool_call", call_id: "call_df", tool_name: "shell", input: { cmd: "df -h /" } },
    ],
  },
  {
    role: "tool",
    parts: [
      { type: "tool_result", call_id: "call_log", tool_name: "read_file", output: "0042 timed out after 300 s" },
      { type: "tool_result", call_id: "call_df", tool_name: "shell", output: "df: permission denied", is_error: true },
    ],
  },
  { role: "assistant", parts: [{ type: "text", text: "Migration 0042 timed out; df was refused." }] },
];

/** Ours without what converters leave out: reasoning, and (`dropErrorFlag`) the error flag. */
function visible(messages: IncomingMessage[], dropErrorFlag = false): IncomingMessage[] {
  return messages.map((m) => ({
    ...m,
    parts: m.parts
      .filter((p) => p.type !== "reasoning")
      .map((p) => {
        if (p.type !== "tool_result" || !dropErrorFlag) return p;
        const copy = { ...p };
        delete copy.is_error;
        return copy;
      }),
  }));
}

describe("OpenAI Chat Completions", () => {
  it("round-trips tool calls, ids and pairing, both ways", () => {
    const theirs = toOpenAI(ours);
    assert.deepEqual(
      theirs.map((m) => m.role),
      ["system", "user", "assistant", "tool", "tool", "assistant"],
    );
    const call = theirs[2];
    assert.ok(call?.role === "assistant");
    assert.deepEqual(call.tool_calls, [
      { id: "call_log", type: "function", function: { name: "read_file", arguments: '{"path":"/var/log/migrate.log"}' } },
      { id: "call_df", type: "function", function: { name: "shell", arguments: '{"cmd":"df -h /"}' } },
    ]);
    assert.deepEqual(theirs[3], { role: "tool", tool_call_id: "call_log", content: "0042 timed out after 300 s" });
    // Chat Completions has no error flag on a tool message.
    assert.deepEqual(fromOpenAI(theirs), visible(ours, true));
    assert.deepEqual(toOpenAI(fromOpenAI(theirs)), theirs);
  });

  it("names a result by a call made earlier, and says clearly when no call made it", () => {
    const history = fromOpenAI(toOpenAI(ours.slice(0, 3)));
    const later = [{ role: "tool", tool_call_id: "call_log", content: "ok" }];
    assert.throws(() => fromOpenAI(later), (e: unknown) => e instanceof ConversionError && /call_log/.test(e.message));
    assert.deepEqual(fromOpenAI(later, { toolNames: callToolNames(history) }), [
      { role: "tool", parts: [{ type: "tool_result", call_id: "call_log", tool_name: "read_file", output: "ok" }] },
    ]);
  });

  it("shows a pruned result as the placeholder", () => {
    const pruned = toOpenAI([
      { role: "tool", parts: [{ type: "tool_result", call_id: "c", tool_name: "t", output: "long", pruned: true }] },
    ]);
    assert.deepEqual(pruned, [{ role: "tool", tool_call_id: "c", content: PRUNED_PLACEHOLDER }]);
  });

  it("is what the official SDK sends", async () => {
    const provider = await serve((_request, response) =>
      json(response, 200, {
        id: "chatcmpl-1",
        object: "chat.completion",
        created: 0,
        model: "fake",
        choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "ok", refusal: null } }],
      }),
    );
    try {
      const messages: ChatCompletionMessageParam[] = toOpenAI(ours);
      const sdk = new OpenAI({ baseURL: `${provider.url}/v1`, apiKey: "test", maxRetries: 0 });
      const answer = await sdk.chat.completions.create({ model: "fake", messages });
      assert.equal(answer.choices[0]?.message.content, "ok");
      const sent = JSON.parse(provider.requests[0]?.body ?? "{}") as { messages: unknown };
      assert.deepEqual(sent.messages, messages);
    } finally {
      await provider.close();
    }
  });
});

describe("Anthropic Messages", () => {
  it("round-trips tool_use and tool_result blocks, both ways", () => {
    const request = toAnthropic(ours);
    assert.equal(request.system, "Summary: the deploy of invoice-svc fails (E4012).");
    assert.deepEqual(
      request.messages.map((m) => m.role),
      ["user", "assistant", "user", "assistant"],
    );
    assert.deepEqual(request.messages[1]?.content, [
      { type: "text", text: "Looking at both." },
      { type: "tool_use", id: "call_log", name: "read_file", input: { path: "/var/log/migrate.log" } },
      { type: "tool_use", id: "call_df", name: "shell", input: { cmd: "df -h /" } },
    ]);
    assert.deepEqual(request.messages[2]?.content, [
      { type: "tool_result", tool_use_id: "call_log", content: "0042 timed out after 300 s" },
      { type: "tool_result", tool_use_id: "call_df", content: "df: permission denied", is_error: true },
    ]);
    const back = fromAnthropic(request.messages, request.system === undefined ? {} : { system: request.system });
    assert.deepEqual(back, visible(ours));
    assert.deepEqual(toAnthropic(back), request);
  });

  it("puts tool results first in the user turn and merges what must alternate", () => {
    const request = toAnthropic([
      { role: "assistant", parts: [{ type: "tool_call", call_id: "c1", tool_name: "t", input: {} }] },
      { role: "tool", parts: [{ type: "tool_result", call_id: "c1", tool_name: "t", output: "done" }] },
      { role: "user", parts: [{ type: "text", text: "thanks" }] },
    ]);
    assert.deepEqual(request.messages[1], {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "c1", content: "done" },
        { type: "text", text: "thanks" },
      ],
    });
  });

  it("leaves thinking out", () => {
    const thinking: MessageParam[] = [
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hmm", signature: "sig" },
          { type: "text", text: "Answer." },
        ],
      },
    ];
    const back = fromAnthropic(thinking);
    assert.deepEqual(back, [{ role: "assistant", parts: [{ type: "text", text: "Answer." }] }]);
  });

  it("is what the official SDK sends", async () => {
    const provider = await serve((_request, response) =>
      json(response, 200, {
        id: "msg_1",
        type: "message",
        role: "assistant",
        model: "fake",
        content: [{ type: "text", text: "ok" }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 1, output_tokens: 1 },
      }),
    );
    try {
      const request = toAnthropic(ours);
      const messages: MessageParam[] = request.messages;
      const sdk = new Anthropic({ baseURL: provider.url, apiKey: "test", maxRetries: 0 });
      const answer = await sdk.messages.create({ model: "fake", max_tokens: 64, ...request });
      assert.equal(answer.content[0]?.type, "text");
      const sent = JSON.parse(provider.requests[0]?.body ?? "{}") as { messages: unknown; system: unknown };
      assert.deepEqual(sent.messages, messages);
      assert.equal(sent.system, request.system);
    } finally {
      await provider.close();
    }
  });
});

describe("Vercel AI SDK ModelMessage", () => {
  it("round-trips tool-call and tool-result parts, both ways, and the SDK's schema accepts them", () => {
    const theirs: ModelMessage[] = toModelMessages(ours);
    assert.deepEqual(
      theirs.map((m) => m.role),
      ["system", "user", "assistant", "tool", "assistant"],
    );
    assert.deepEqual(theirs[3], {
      role: "tool",
      content: [
        { type: "tool-result", toolCallId: "call_log", toolName: "read_file", output: { type: "text", value: "0042 timed out after 300 s" } },
        { type: "tool-result", toolCallId: "call_df", toolName: "shell", output: { type: "error-text", value: "df: permission denied" } },
      ],
    });
    modelMessageSchema.array().parse(theirs);
    assert.deepEqual(fromModelMessages(theirs), visible(ours));
    assert.deepEqual(toModelMessages(fromModelMessages(theirs)), theirs);
  });

  it("stores a json output as its JSON text and a denied execution as an error", () => {
    const results: ModelMessage[] = [
      {
        role: "tool",
        content: [
          { type: "tool-result", toolCallId: "a", toolName: "t", output: { type: "json", value: { rows: 3 } } },
          { type: "tool-result", toolCallId: "b", toolName: "t", output: { type: "execution-denied", reason: "not allowed" } },
        ],
      },
    ];
    const back = fromModelMessages(results);
    assert.deepEqual(back, [
      {
        role: "tool",
        parts: [
          { type: "tool_result", call_id: "a", tool_name: "t", output: '{"rows":3}' },
          { type: "tool_result", call_id: "b", tool_name: "t", output: "not allowed", is_error: true },
        ],
      },
    ]);
  });
});

describe("through the worker", () => {
  it("a conversation appended from OpenAI messages comes back from the context as the same messages", async () => {
    const api = client();
    const key = workstream();
    const theirs = toOpenAI(ours.slice(1));
    await api.appendMessages(key, fromOpenAI(theirs));
    const context = await api.buildContext(key);
    assert.deepEqual(toOpenAI(context.messages), theirs);
    const anthropic = toAnthropic(context.messages);
    assert.deepEqual(fromAnthropic(anthropic.messages), visible(ours.slice(1), true), "no error flag: it went through OpenAI");
  });
});
