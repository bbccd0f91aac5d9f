import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Report, codeOfExit, runnerArgs } from "./index.js";

const minimal = {
  $schema: "ovl.report/v1",
  manifest: "m",
  mode: "emulate",
  device: "cpu-emulation",
  world: 2,
  dtype: "fp32",
  shapes: { operator: "ag-gemm", M: 64, N: 32, K: 16, rowsPerRank: 32, buffers: { A: [64, 16] } },
  backends: {
    symmetricMemory: "emulated",
    hostOps: "copy-engine",
    kernels: [{ name: "k", template: "ag-gemm-consumer", stream: "compute" }],
  },
  epochs: 1,
  checks: [{ run: 0, epoch: 1, relErrors: [1e-7, null], maxRelError: null, tolerance: 1e-4, ok: false }],
  times: null,
  baselines: [
    { name: "torch-gemm", ms: 0.5 },
    { name: "torch-async-tp", ms: null, error: "RuntimeError" },
  ],
  failures: [{ code: "wait-timeout", message: "rank 1 ...", rank: 1, slot: 2, seen: 0, expected: 1 }],
  ok: false,
};

describe("Report", () => {
  it("accepts the runner's format and rejects another version", () => {
    expect(Report.parse(minimal).failures[0]?.slot).toBe(2);
    expect(Report.safeParse({ ...minimal, $schema: "ovl.report/v2" }).success).toBe(false);
    expect(Report.safeParse({ ...minimal, mode: "tpu" }).success).toBe(false);
    expect(Report.parse({ ...minimal, mode: "one-gpu", extra: { note: "times are not performance figures" } }).mode).toBe("one-gpu");
    expect(Report.safeParse({ ...minimal, checks: [{ ...minimal.checks[0], epoch: 0 }] }).success).toBe(false);
  });
});

describe("codeOfExit", () => {
  it("maps the runner's exit codes", () => {
    expect(codeOfExit(1, undefined)).toBe("check-failed");
    expect(codeOfExit(1, "check-failed")).toBe("check-failed");
    expect(codeOfExit(1, "device-error")).toBe("runner-failed");
    expect(codeOfExit(2, "bad-manifest")).toBe("bad-manifest");
    expect(codeOfExit(3, "wait-timeout")).toBe("wait-timeout");
    fc.assert(
      fc.property(fc.integer({ min: 4, max: 255 }), (c) => codeOfExit(c, undefined) === "runner-failed"),
      { numRuns: 50 },
    );
  });
});

describe("runnerArgs", () => {
  it("builds the runner's command line", () => {
    expect(runnerArgs("m.json", "r.json", { emulate: true, epochs: 2, timeoutS: 0.5 })).toEqual([
      "-m",
      "ovl_runtime",
      "run",
      "m.json",
      "--out",
      "r.json",
      "--emulate",
      "--epochs",
      "2",
      "--timeout-s",
      "0.5",
    ]);
    expect(runnerArgs("m.json", "r.json", { emulate: true, engine: "interpret" }).slice(-3)).toEqual([
      "--emulate",
      "--engine",
      "interpret",
    ]);
    expect(runnerArgs("m.json", "r.json", { nproc: 4, baselines: true, symmBackend: "nvshmem" })).toEqual([
      "-m",
      "torch.distributed.run",
      "--nproc_per_node=4",
      "-m",
      "ovl_runtime",
      "run",
      "m.json",
      "--out",
      "r.json",
      "--baselines",
      "--symm-backend",
      "nvshmem",
    ]);
  });

  it("runs every rank in one process for ranksOnOneGpu, never under torchrun", () => {
    expect(runnerArgs("m.json", "r.json", { ranksOnOneGpu: true, nproc: 8, epochs: 3 })).toEqual([
      "-m",
      "ovl_runtime",
      "run",
      "m.json",
      "--out",
      "r.json",
      "--epochs",
      "3",
      "--ranks-on-one-gpu",
    ]);
  });
});
