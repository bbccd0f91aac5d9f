// `ovl run --engine`: the CPU emulation engine is a choice the output states, and the
// interpreter engine fails with what to do where its torch and triton are missing.
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultPython } from "@ovl/runtime-py";
import { describe, expect, it } from "vitest";
import { interpreterUnavailable, parseEngine } from "./commands/run.js";
import { emulationUnavailable } from "./demo.js";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-run-engine-"));
const canEmulate = emulationUnavailable(defaultPython()) === undefined;

/** A stand-in `python` whose probe for torch and triton finds neither. */
function pythonWithoutTorch(dir: string): string {
  const path = join(dir, "python-no-torch");
  writeFileSync(path, "#!/bin/sh\necho torch triton\n");
  chmodSync(path, 0o755);
  return path;
}

describe("ovl run --engine", () => {
  it("parses the engine: auto by default, a usage error for another name or with --gpus", () => {
    expect(parseEngine({})).toBe("auto");
    expect(parseEngine({ engine: "numpy" })).toBe("numpy");
    expect(() => parseEngine({ engine: "cuda" })).toThrow(/--engine must be one of numpy, interpret, auto/);
    expect(() => parseEngine({ engine: "numpy", gpus: 2 })).toThrow(/drop it to run on GPUs/);
    expect(interpreterUnavailable(pythonWithoutTorch(temp()))).toMatch(/has no torch and triton/);
  });

  it("refuses the interpreter where torch and triton are missing, before starting the runner", async () => {
    const dir = temp();
    expect(
      (await ovl(["emit", "ag-gemm", "--m", "256", "--n", "64", "--k", "64", "--world", "2", "--tile", "64x64x32", "--out", dir])).status,
    ).toBe(0);
    const r = await ovl(["run", join(dir, "manifest.json"), "--engine", "interpret", "--python", pythonWithoutTorch(dir)]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("--engine interpret runs the kernels under Triton's CPU interpreter, which needs torch and triton");
    expect(r.stderr).toContain("or use --engine numpy");
    const bad = await ovl(["run", join(dir, "manifest.json"), "--engine", "gpu"]);
    expect(bad.status).toBe(2);
  }, 60_000);

  it.skipIf(!canEmulate)(
    "says which engine ran",
    async () => {
      const dir = temp();
      expect(
        (
          await ovl([
            "emit",
            "gemm-rs",
            "--m",
            "256",
            "--n",
            "64",
            "--k",
            "64",
            "--world",
            "2",
            "--split",
            "1",
            "--tile",
            "64x64x32",
            "--out",
            dir,
          ])
        ).status,
      ).toBe(0);
      const numpy = await ovl(["run", join(dir, "manifest.json"), "--engine", "numpy", "--epochs", "1"]);
      expect(numpy.status, numpy.stderr).toBe(0);
      expect(numpy.stdout).toContain("engine: numpy\n");
      const auto = await ovl(["run", join(dir, "manifest.json"), "--epochs", "1"]);
      expect(auto.status, auto.stderr).toBe(0);
      expect(auto.stdout).toMatch(/engine: (numpy|interpret) \(auto: /);
    },
    120_000,
  );
});
