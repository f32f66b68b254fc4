// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with its type
// declarations, from src/ with the runtime's DOM types only (no Node
// types: the package runs wherever `fetch` does).
import { execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(new URL("../dist", import.meta.url), { recursive: true, force: true });
for (const project of ["tsconfig.build.json", "tsconfig.cjs.json"]) {
  execFileSync(process.execPath, [tsc, "-p", project], { stdio: "inherit", cwd: new URL("..", import.meta.url) });
}
// Node reads dist/cjs's .js (and TypeScript its .d.ts) as CommonJS here,
// whatever the package's own "type".
writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), JSON.stringify({ type: "commonjs" }) + "\n");
console.log("built dist/esm and dist/cjs");
