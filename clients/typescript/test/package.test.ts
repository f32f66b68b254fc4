// The package itself: its version is the workspace's, and the retry
// arithmetic reads Retry-After as RFC 9110 writes it.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { VERSION } from "../src/index.js";
import { parseRetryAfter } from "../src/retry.js";

describe("the package", () => {
  it("takes the workspace's version", () => {
    const cargo = readFileSync(new URL("../../../../Cargo.toml", import.meta.url), "utf8");
    const workspace = /\[workspace\.package\][^[]*?\nversion = "([^"]+)"/.exec(cargo)?.[1];
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    assert.equal(pkg.version, workspace);
    assert.equal(VERSION, workspace);
  });
});

describe("the README", () => {
  it("shows the example that test/readme.example.ts type-checks", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const shown = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    const checked = readFileSync(new URL("../../test/readme.example.ts", import.meta.url), "utf8");
    assert.equal(shown, checked);
  });
});

describe("Retry-After", () => {
  it("reads delta-seconds and HTTP dates, and nothing else", () => {
    const now = Date.parse("Sun, 06 Dec 2026 08:00:00 GMT");
    assert.equal(parseRetryAfter("2", now), 2000);
    assert.equal(parseRetryAfter(" 0 ", now), 0);
    assert.equal(parseRetryAfter("Sun, 06 Dec 2026 08:00:05 GMT", now), 5000);
    assert.equal(parseRetryAfter("Sun, 06 Dec 2026 07:59:00 GMT", now), 0, "a date past is now");
    assert.equal(parseRetryAfter("soon", now), undefined);
    assert.equal(parseRetryAfter("-1", now), undefined);
    assert.equal(parseRetryAfter(null, now), undefined);
  });
});
