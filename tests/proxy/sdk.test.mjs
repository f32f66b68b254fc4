// The drop-in proxy through the official Node SDKs, unmodified: `openai`
// and `@anthropic-ai/sdk` (clients/typescript's pinned versions) pointed at
// it by their base URL, against the fake provider of upstream.py. Run by
// tests/proxy/ci with the live worker of tests/clients/run.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

const fromClients = createRequire(new URL("../../clients/typescript/package.json", import.meta.url));
const { default: OpenAI } = await import(pathToFileURL(fromClients.resolve("openai")).href);
const { default: Anthropic } = await import(pathToFileURL(fromClients.resolve("@anthropic-ai/sdk")).href);

const PROXY = process.env.COMPACTOR_PROXY_URL;
const UPSTREAM = process.env.COMPACTOR_PROXY_UPSTREAM;
const TOKEN = process.env.COMPACTOR_TOKEN;
const WINDOW = 8000;

async function received(model) {
  const records = await (await fetch(`${UPSTREAM}/requests`)).json();
  return records.filter((r) => r.body.model === model);
}

/** Estimated tokens of messages, as the worker estimates them. */
function tokens(messages) {
  let chars = 0;
  for (const m of messages) {
    if (typeof m.content === "string") chars += m.content.length;
    else if (Array.isArray(m.content))
      for (const b of m.content) {
        chars += (b.text ?? "").length + (typeof b.content === "string" ? b.content.length : 0);
        if (b.type === "tool_use") chars += JSON.stringify(b.input).length;
      }
    for (const c of m.tool_calls ?? []) chars += c.function.name.length + c.function.arguments.length;
  }
  return Math.floor(chars / 3);
}

const userTurn = (t) =>
  `Turn ${t}: shipment SHP-${String(30000 + t * 13).padStart(5, "0")} leaves gate ${t % 7} at ${t % 24}:15. ` +
  "Keep the seal numbers and the driver's name with it. ".repeat(9);

test("openai: a streamed conversation with tool calls stays in the window", async () => {
  const model = `fake-${randomUUID().slice(0, 8)}`;
  const client = new OpenAI({
    baseURL: `${PROXY}/v1`,
    apiKey: "sk-node-key",
    maxRetries: 0,
    defaultHeaders: { "X-Compactor-Token": TOKEN, "X-Compactor-Workstream": `node/${model}` },
  });
  const history = [{ role: "system", content: "You are terse." }];
  const ask = async () => {
    const stream = await client.chat.completions.create({ model, messages: history, stream: true });
    let content = "";
    const calls = [];
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta ?? {};
      content += delta.content ?? "";
      for (const c of delta.tool_calls ?? []) {
        if (c.index === calls.length) calls.push({ id: c.id, type: "function", function: { name: c.function?.name ?? "", arguments: "" } });
        calls[c.index].function.arguments += c.function?.arguments ?? "";
      }
    }
    return calls.length ? { role: "assistant", content: null, tool_calls: calls } : { role: "assistant", content };
  };
  for (let t = 0; t < 200; t++) {
    if (t % 10 === 5) {
      history.push({ role: "user", content: "What is the weather in Oslo?" });
      const call = await ask();
      assert.equal(call.tool_calls[0].function.name, "get_weather");
      history.push(call, { role: "tool", tool_call_id: call.tool_calls[0].id, content: "-3 °C, clear" });
      history.push(await ask());
    }
    history.push({ role: "user", content: userTurn(t) });
    history.push(await ask());
  }
  const sent = await received(model);
  const largest = Math.max(...sent.map((r) => tokens(r.body.messages)));
  assert.ok(largest <= WINDOW, `the provider got ${largest} tokens`);
  assert.ok(tokens(history) > 3 * WINDOW);
  const last = sent.at(-1);
  assert.equal(last.headers.authorization, "Bearer sk-node-key");
  assert.deepEqual(last.body.messages[0], { role: "system", content: "You are terse." });
  assert.match(last.body.messages[1].content, /summary/);
  assert.deepEqual(last.body.messages.at(-1), { role: "user", content: userTurn(199) });
});

test("anthropic: a conversation with tool use keeps the summary after the system prompt", async () => {
  const model = `claude-${randomUUID().slice(0, 8)}`;
  const client = new Anthropic({
    baseURL: PROXY,
    apiKey: "sk-ant-node",
    maxRetries: 0,
    defaultHeaders: { "X-Compactor-Token": TOKEN, "X-Compactor-Workstream": `node/${model}` },
  });
  const history = [];
  const ask = async (stream) => {
    const params = { model, max_tokens: 256, system: "You are terse.", messages: history };
    const message = stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
    return message.content;
  };
  for (let t = 0; t < 150; t++) {
    if (t % 10 === 5) {
      history.push({ role: "user", content: "What is the weather in Oslo?" });
      const content = await ask(t % 2 === 1);
      history.push({ role: "assistant", content });
      const call = content.find((b) => b.type === "tool_use");
      history.push({ role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "-3 °C, clear" }] });
      history.push({ role: "assistant", content: await ask(false) });
    }
    history.push({ role: "user", content: userTurn(t) });
    history.push({ role: "assistant", content: await ask(t % 2 === 0) });
  }
  const sent = await received(model);
  const largest = Math.max(...sent.map((r) => tokens(r.body.messages)));
  assert.ok(largest <= WINDOW, `the provider got ${largest} tokens`);
  assert.ok(tokens(history) > 3 * WINDOW);
  const last = sent.at(-1);
  // The client's key goes on, in the header its SDK chose.
  assert.match(last.headers["x-api-key"] ?? last.headers.authorization, /sk-ant-node/);
  assert.deepEqual(last.body.system[0], { type: "text", text: "You are terse." });
  assert.match(last.body.system[1].text, /summary/);
  assert.equal(last.body.messages[0].role, "user");
});
