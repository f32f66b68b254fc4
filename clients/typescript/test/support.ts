// What the tests share: the live worker they talk to, unique names, and
// small HTTP servers on loopback (a fake model provider, a proxy in front
// of the worker that misbehaves on purpose).
import { once } from "node:events";
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";

import { Compactor, type CompactorOptions, type WorkstreamKey } from "../src/index.js";

/**
 * The live worker (tests/clients/run starts it, on PostgreSQL and Redis,
 * with a bearer token). Without it the live tests fail: they are not
 * skipped.
 */
export function worker(): { url: string; token: string } {
  const url = process.env["COMPACTOR_URL"];
  const token = process.env["COMPACTOR_TOKEN"];
  if (!url || !token) {
    throw new Error("COMPACTOR_URL and COMPACTOR_TOKEN name the live worker: run the tests with tests/clients/run");
  }
  return { url, token };
}

export function client(options?: Partial<CompactorOptions>): Compactor {
  const { url, token } = worker();
  return new Compactor({ baseUrl: url, token, retry: { baseDelayMs: 20 }, ...options });
}

/** A name no other test or run uses (a domain: a letter, then `a-z 0-9`). */
export function unique(prefix: string): string {
  return `${prefix}${randomBytes(6).toString("hex")}`;
}

export function workstream(): WorkstreamKey {
  return { domain: unique("ts"), entity: unique("conv-") };
}

export interface Recorded {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

/** An HTTP server on a free loopback port; `handle` answers each request after its body is read. */
export async function serve(
  handle: (request: Recorded, response: ServerResponse, raw: IncomingMessage) => void | Promise<void>,
): Promise<{ url: string; requests: Recorded[]; close: () => Promise<void> }> {
  const requests: Recorded[] = [];
  const server: Server = createServer((raw, response) => {
    const chunks: Buffer[] = [];
    raw.on("data", (c: Buffer) => chunks.push(c));
    raw.on("end", () => {
      const recorded: Recorded = {
        method: raw.method ?? "",
        url: raw.url ?? "",
        headers: raw.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      requests.push(recorded);
      void Promise.resolve(handle(recorded, response, raw)).catch((error: unknown) => {
        response.destroy(error instanceof Error ? error : new Error(String(error)));
      });
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Sends a recorded request on to `target` and resolves with its answer. */
export function forward(target: string, request: Recorded): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const headers = { ...request.headers };
    delete headers["host"];
    const out = httpRequest(new URL(request.url, target), { method: request.method, headers }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on("data", (c: Buffer) => chunks.push(c));
      answer.on("end", () => {
        const flat: Record<string, string> = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (typeof value === "string") flat[name] = value;
        }
        resolve({ status: answer.statusCode ?? 0, headers: flat, body: Buffer.concat(chunks).toString("utf8") });
      });
      answer.on("error", reject);
    });
    out.on("error", reject);
    out.end(request.body);
  });
}

export function json(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}
