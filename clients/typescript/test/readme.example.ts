import OpenAI from "openai";
import { Compactor, fromOpenAI, toOpenAI } from "@compactor/client";

const compactor = new Compactor({ baseUrl: "http://127.0.0.1:9464", token: process.env.COMPACTOR_TOKEN });
const openai = new OpenAI();
const chat = { domain: "chat", entity: "conversation-42" };

export async function reply(userText: string): Promise<string> {
  await compactor.appendMessages(chat, [{ role: "user", parts: [{ type: "text", text: userText }] }]);
  await compactor.waitUntilReady(chat, { waitMs: 5_000 });        // a compaction under way, bounded
  const context = await compactor.buildContext(chat);              // summary + state + recent tail
  const answer = await openai.chat.completions.create({ model: "gpt-4.1-mini", messages: toOpenAI(context.messages) });
  const message = answer.choices[0]!.message;
  await compactor.appendMessages(chat, fromOpenAI([message]), { finalize: true, usage: { input_tokens: answer.usage?.prompt_tokens ?? 0 } });
  return message.content ?? "";
}
