import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RunnerError } from "./errors.js";
import { ensurePythonEnv } from "./python-env.js";

describe("ensurePythonEnv", () => {
  it("refuses a base interpreter that cannot be started, naming it", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "ovl-env-")), "venv");
    await expect(ensurePythonEnv({ dir, basePython: "/nonexistent/python3" })).rejects.toSatisfy(
      (e: unknown) => e instanceof RunnerError && e.code === "python-missing" && e.message.includes("/nonexistent/python3"),
    );
  });

  it("creates a venv with numpy and jsonschema once and reuses it", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "ovl-env-")), "venv");
    const steps: string[] = [];
    const python = await ensurePythonEnv({ dir, onStep: (s) => steps.push(s) });
    expect(python).toBe(join(dir, "bin", "python"));
    expect(steps[0]).toContain("creating");
    const again: string[] = [];
    expect(await ensurePythonEnv({ dir, onStep: (s) => again.push(s) })).toBe(python);
    expect(again).toEqual([]);
  }, 180_000);
});
