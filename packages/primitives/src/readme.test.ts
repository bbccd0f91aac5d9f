import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

describe("README example", () => {
  it("runs against the sources and does what its comments say", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const code = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(code).toBeDefined();
    const entry = fileURLToPath(new URL("./index.ts", import.meta.url));
    const dir = mkdtempSync(join(tmpdir(), "ovl-primitives-readme-"));
    try {
      const file = join(dir, "example.ts");
      const probe =
        "console.log(JSON.stringify({ scopes: program.primitives.map((p) => p.scope), bad: bad.ok ? null : bad.issues.map((i) => i.code), wrapped: [reached(2, 0xffff_fffe), reached(0xffff_fffe, 2)] }));";
      writeFileSync(file, `${(code ?? "").replace('"@ovl/primitives"', JSON.stringify(entry))}\n${probe}\n`);
      const out = execFileSync(process.execPath, ["--import", "tsx", file], {
        encoding: "utf8",
        cwd: fileURLToPath(new URL("..", import.meta.url)),
      });
      expect(JSON.parse(out)).toEqual({ scopes: ["gpu", "gpu", "sys", "sys", "sys"], bad: ["release-on-wait"], wrapped: [true, false] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
