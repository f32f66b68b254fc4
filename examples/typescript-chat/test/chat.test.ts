// A scripted 300-turn conversation through the chat backend, with compactor
// live (tests/clients/run's worker, an 8,000-token window) and a fake
// OpenAI-compatible model on loopback that counts every prompt in
// o200k_base tokens: the model is never sent more than the window, and the
// conversation is compacted along the way.
import assert from "node:assert/strict";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { it } from "node:test";

import { Compactor } from "@compactor/client";
import OpenAI from "openai";
// @ts-expect-error: plain JavaScript, no declarations
import { startFakeOpenAI } from "compactor-example-fake-openai/server.mjs";

import { createChatServer } from "../src/server.js";

const WINDOW = 8000;
const TURNS = 300;

it("300 turns never send the model more than the window", async (t) => {
  const url = process.env["COMPACTOR_URL"];
  const token = process.env["COMPACTOR_TOKEN"];
  assert.ok(url && token, "COMPACTOR_URL and COMPACTOR_TOKEN name the live worker (tests/clients/run)");
  const model = (await startFakeOpenAI()) as { server: import("node:http").Server; url: string };
  const compactor = new Compactor({ baseUrl: url, token });
  const domain = `tschat${randomBytes(4).toString("hex")}`;
  const chat = createChatServer({
    compactor,
    openai: new OpenAI({ baseURL: `${model.url}/v1`, apiKey: "test", maxRetries: 0 }),
    model: "fake",
    domain,
    system: "You are the on-call assistant of the payments team.",
    waitMs: 10_000,
  });
  chat.listen(0, "127.0.0.1");
  await once(chat, "listening");
  const base = `http://127.0.0.1:${(chat.address() as AddressInfo).port}`;
  try {
    for (let i = 0; i < TURNS; i++) {
      const answer = await fetch(`${base}/conversations/c1/messages`, {
        method: "POST",
        body: JSON.stringify({ text: `Turn ${i}: payment batch B-${1000 + i} failed with code E${500 + (i % 40)}; the retry queue holds ${i * 3} items. What next?` }),
      });
      assert.equal(answer.status, 200, await answer.clone().text());
      const body = (await answer.json()) as { reply: string };
      assert.match(body.reply, /Noted/);
    }
    const stats = (await (await fetch(`${model.url}/stats`)).json()) as { calls: number; max_prompt_tokens: number };
    t.diagnostic(`calls ${stats.calls}, largest prompt ${stats.max_prompt_tokens} tokens (o200k_base), window ${WINDOW}`);
    assert.equal(stats.calls, TURNS);
    assert.ok(stats.max_prompt_tokens <= WINDOW, `the largest prompt was ${stats.max_prompt_tokens} tokens`);
    const status = await compactor.status({ domain, entity: "c1" });
    assert.ok(status.compactions >= 1, JSON.stringify(status));
    const first = await compactor.recall({ domain, entity: "c1" }, "B-1000");
    assert.deepEqual(
      first.messages.map((m) => m.role).sort(),
      ["assistant", "user"],
      "the first turn is stored once (the reply quotes the question)",
    );
  } finally {
    chat.close();
    model.server.close();
  }
});
