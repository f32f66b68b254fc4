// An OpenAI-compatible Chat Completions server on loopback, for the
// examples' tests: it answers every call with a short reply and counts each
// prompt's tokens with o200k_base (js-tiktoken, its ranks bundled), so a
// test can assert what the model was sent. `node server.mjs` listens on a
// free port and prints `{"url": …}` as its first line; GET /stats says how
// many calls came and the largest prompt, in tokens.
import { createServer } from "node:http";
import { Tiktoken } from "js-tiktoken/lite";
import o200k from "js-tiktoken/ranks/o200k_base";

const encoder = new Tiktoken(o200k);
const stats = { calls: 0, max_prompt_tokens: 0, last_prompt_tokens: 0, last_messages: 0 };

/** Tokens of a prompt as a model sees it: each message's text, and a few for its framing. */
export function promptTokens(messages) {
  let tokens = 3;
  for (const message of messages) {
    tokens += 4;
    const content = message.content;
    const text =
      typeof content === "string" ? content : Array.isArray(content) ? content.map((p) => p.text ?? "").join("") : "";
    tokens += encoder.encode(text).length;
    for (const call of message.tool_calls ?? []) tokens += encoder.encode(call.function?.arguments ?? "").length + 8;
  }
  return tokens;
}

export function startFakeOpenAI(port = 0) {
  const server = createServer((request, response) => {
    const chunks = [];
    request.on("data", (c) => chunks.push(c));
    request.on("end", () => {
      if (request.method === "GET" && request.url === "/stats") {
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify(stats));
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      const messages = body.messages ?? [];
      const tokens = promptTokens(messages);
      stats.calls += 1;
      stats.last_prompt_tokens = tokens;
      stats.last_messages = messages.length;
      stats.max_prompt_tokens = Math.max(stats.max_prompt_tokens, tokens);
      const asked = messages.at(-1)?.content ?? "";
      const reply = `Noted (${String(asked).slice(0, 40)}…): the replica lag stays under 200 ms, and the next step is checking pool size ${stats.calls}.`;
      response.writeHead(200, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          id: `chatcmpl-${stats.calls}`,
          object: "chat.completion",
          created: 0,
          model: body.model ?? "fake",
          choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: reply, refusal: null } }],
          usage: { prompt_tokens: tokens, completion_tokens: 30, total_tokens: tokens + 30 },
        }),
      );
    });
  });
  return new Promise((resolve) => {
    server.listen(port, "127.0.0.1", () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` }));
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { url } = await startFakeOpenAI();
  console.log(JSON.stringify({ url }));
}
