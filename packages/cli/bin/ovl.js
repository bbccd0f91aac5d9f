#!/usr/bin/env node
// The `ovl` command: a committed launcher for the built CLI (dist/bin.js), so that package
// managers link the binary at install time, before the workspace is built.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const built = new URL("../dist/bin.js", import.meta.url);
if (!existsSync(fileURLToPath(built))) {
  process.stderr.write("ovl: the CLI is not built yet; run `pnpm demo` or `pnpm build` at the repository root first\n");
  process.exit(1);
}
await import(built.href);
