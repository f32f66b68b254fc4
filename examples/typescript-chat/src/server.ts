// A small chat backend on Node. `POST /conversations/{id}/messages` with
// `{"text": "…"}` answers `{"reply": "…"}`: the user's words are stored in
// compactor, the model is sent compactor's context for the conversation (a
// summary, carried state and the recent tail, never the whole history), and
// its answer is stored with the turn's end, after which compactor compacts
// in the background when the conversation is over its trigger.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

import { Compactor, fromOpenAI, isApiError, toOpenAI } from "@compactor/client";
import OpenAI from "openai";

export interface ChatOptions {
  compactor: Compactor;
  openai: OpenAI;
  model: string;
  /** compactor's domain for these conversations. */
  domain: string;
  /** The system prompt, sent first on every call. */
  system: string;
  /** How long a turn waits for a compaction under way (ms). */
  waitMs: number;
}

/** One turn: the reply, and what the model was sent. */
export async function turn(options: ChatOptions, conversation: string, text: string): Promise<{ reply: string; contextTokens: number }> {
  const key = { domain: options.domain, entity: conversation };
  await options.compactor.appendMessages(key, [{ role: "user", parts: [{ type: "text", text }] }]);
  await options.compactor.waitUntilReady(key, { waitMs: options.waitMs });
  const context = await options.compactor.buildContext(key);
  const answer = await options.openai.chat.completions.create({
    model: options.model,
    messages: [{ role: "system", content: options.system }, ...toOpenAI(context.messages)],
  });
  const message = answer.choices[0]?.message;
  if (message === undefined) throw new Error("the model answered no choice");
  await options.compactor.appendMessages(key, fromOpenAI([message]), {
    finalize: true,
    usage: { input_tokens: answer.usage?.prompt_tokens ?? 0, output_tokens: answer.usage?.completion_tokens ?? 0 },
  });
  return { reply: message.content ?? "", contextTokens: context.tokens };
}

export function createChatServer(options: ChatOptions): Server {
  return createServer((request, response) => {
    void handle(options, request, response).catch((error: unknown) => {
      const status = isApiError(error) && error.status < 500 ? 400 : 502;
      send(response, status, { error: error instanceof Error ? error.message : String(error) });
    });
  });
}

async function handle(options: ChatOptions, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const route = /^\/conversations\/([A-Za-z0-9][A-Za-z0-9_.-]{0,127})\/messages$/.exec(request.url ?? "");
  if (request.method !== "POST" || route?.[1] === undefined) {
    send(response, 404, { error: "POST /conversations/{id}/messages" });
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as { text?: unknown };
  if (typeof body.text !== "string" || body.text === "") {
    send(response, 400, { error: "the body is {\"text\": \"…\"}" });
    return;
  }
  const { reply, contextTokens } = await turn(options, route[1], body.text);
  send(response, 200, { reply, context_tokens: contextTokens });
}

function send(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(body));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = createChatServer({
    compactor: new Compactor({ baseUrl: process.env["COMPACTOR_URL"] ?? "http://127.0.0.1:9464", token: process.env["COMPACTOR_TOKEN"] }),
    openai: new OpenAI(),
    model: process.env["OPENAI_MODEL"] ?? "gpt-4.1-mini",
    domain: "chat",
    system: "You are a helpful assistant.",
    waitMs: 5_000,
  });
  const port = Number(process.env["PORT"] ?? 3000);
  server.listen(port, "127.0.0.1", () => console.log(`chat backend on http://127.0.0.1:${port}`));
}
