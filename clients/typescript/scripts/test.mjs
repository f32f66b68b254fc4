// Compiles src/ and test/ (strict, with Node's types) into build-test/ and
// runs the tests with node's own runner. The live tests need the worker
// tests/clients/run starts (COMPACTOR_URL, COMPACTOR_TOKEN).
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(new URL("../build-test", import.meta.url), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], { stdio: "inherit", cwd: root });
const dir = new URL("../build-test/test/", import.meta.url);
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".test.js"))
  .map((f) => fileURLToPath(new URL(f, dir)));
const run = spawnSync(process.execPath, ["--test", ...process.argv.slice(2), ...files], { stdio: "inherit", cwd: root });
process.exit(run.status ?? 1);
