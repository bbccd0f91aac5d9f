// `ovl emit <operator> --dtype`: every operator takes bf16 or fp16, a bad value is refused with
// the allowed ones, and one operator of each family emitted in fp16 runs in CPU emulation,
// checked against its reference at fp16's tolerance.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_TOLERANCE, OPERATOR_REGISTRY } from "@ovl/tlx-emitter";
import { defaultPython } from "@ovl/runtime-py";
import { describe, expect, it } from "vitest";
import { runCli } from "./cli.js";
import { interpreterUnavailable } from "./commands/run.js";
import { emulationUnavailable } from "./demo.js";
import { parseDtypeFlag } from "./dtype.js";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-dtype-"));
const canEmulate = emulationUnavailable(defaultPython()) === undefined;
const canInterpret = canEmulate && interpreterUnavailable(defaultPython()) === undefined;

/** One small operator of each family, as `ovl emit` flags, and the engine that emulates it. */
const FAMILIES: readonly { readonly op: string; readonly args: readonly string[]; readonly engine: "numpy" | "interpret" }[] = [
  { op: "ag-gemm", args: ["--m", "256", "--n", "64", "--k", "64", "--world", "2", "--tile", "64x64x32"], engine: "numpy" },
  {
    op: "gemm-rs",
    args: ["--m", "256", "--n", "64", "--k", "64", "--world", "2", "--split", "1", "--tile", "64x64x32", "--backend", "sm"],
    engine: "numpy",
  },
  {
    op: "gemm-ar",
    args: ["--m", "256", "--n", "64", "--k", "64", "--world", "2", "--split", "1", "--tile", "64x64x32", "--backend", "sm"],
    engine: "numpy",
  },
  { op: "a2a-gemm", args: ["--m", "256", "--n", "64", "--k", "64", "--world", "2", "--tile", "64x64x32"], engine: "numpy" },
  {
    op: "ag-moe",
    args: [
      "--tokens",
      "128",
      "--hidden",
      "64",
      "--intermediate",
      "64",
      "--experts",
      "4",
      "--topk",
      "2",
      "--world",
      "2",
      "--tile",
      "32x32x32",
    ],
    engine: "numpy",
  },
  {
    op: "moe-rs",
    args: [
      "--tokens",
      "128",
      "--hidden",
      "64",
      "--intermediate",
      "64",
      "--experts",
      "4",
      "--topk",
      "2",
      "--world",
      "2",
      "--tile",
      "32x32x32",
    ],
    engine: "numpy",
  },
  {
    op: "ag-gemm-silu",
    args: ["--tokens", "256", "--hidden", "64", "--intermediate", "64", "--world", "2", "--tile", "32x32x32"],
    engine: "numpy",
  },
  // The numpy engine models GEMM bodies only: attention runs its emitted source under the interpreter.
  {
    op: "ag-attention",
    args: ["--seq", "128", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--causal", "--world", "2", "--tile", "32x32"],
    engine: "interpret",
  },
];

interface Report {
  readonly ok: boolean;
  readonly dtype: string;
  readonly checks: readonly { readonly maxRelError: number; readonly tolerance: number; readonly ok: boolean }[];
}

interface WrittenManifest {
  readonly dtype: string;
  readonly buffers: readonly { readonly name: string; readonly dtype: string }[];
  readonly reference: { readonly inputs: Record<string, string>; readonly output: string; readonly tolerance: number };
}

describe("--dtype", () => {
  it("parses bf16, fp16 and fp8e4m3 and refuses anything else, naming what it takes", () => {
    expect(parseDtypeFlag("bf16")).toBe("bf16");
    expect(parseDtypeFlag("fp16")).toBe("fp16");
    expect(parseDtypeFlag("fp8e4m3", "ag-gemm")).toBe("fp8e4m3");
    expect(() => parseDtypeFlag("fp32")).toThrow("unknown dtype 'fp32'; use one of: bf16, fp16, fp8e4m3");
    expect(() => parseDtypeFlag("fp8")).toThrow("use one of: bf16, fp16, fp8e4m3");
    expect(() => parseDtypeFlag("FP16")).toThrow("did you mean 'fp16'? (one of: bf16, fp16, fp8e4m3)");
    expect(() => parseDtypeFlag("float16'); import os #")).toThrow("use one of: bf16, fp16, fp8e4m3");
  });

  it("takes fp8e4m3 for ag-gemm only: every other operator refuses it, naming ag-gemm", () => {
    for (const d of OPERATOR_REGISTRY.filter((e) => e.cli !== undefined && e.name !== "ag-gemm"))
      expect(() => parseDtypeFlag("fp8e4m3", d.name), d.name).toThrow(
        `${d.name} does not take fp8e4m3: fp8 operands (per-tensor scales, bf16 output) are taken by ag-gemm; use one of: bf16, fp16`,
      );
  });

  it("is a flag of every ovl emit subcommand, and a bad value exits 2 before anything is written", async () => {
    for (const d of OPERATOR_REGISTRY.filter((e) => e.cli !== undefined)) {
      let out = "";
      const status = await runCli(["emit", d.name, "--help"], { out: (t) => (out += t), err: () => undefined, interactive: false });
      expect(status, d.name).toBe(0);
      const values =
        d.name === "ag-gemm" ? /bf16 \| fp16 \| fp8e4m3\s+\(default bf16; fp8e4m3: fp8 A and B/ : /bf16 \| fp16 \(default bf16\)/;
      expect(out, d.name).toMatch(new RegExp(`--dtype <type>\\s+element type of the tensors: ${values.source}`));
    }
    const dir = join(temp(), "out");
    const r = await ovl(["emit", "gemm-rs", "--m", "256", "--n", "64", "--k", "64", "--world", "2", "--dtype", "fp32", "--out", dir]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("unknown dtype 'fp32'; use one of: bf16, fp16, fp8e4m3");
    const fp8 = await ovl(["emit", "gemm-rs", "--m", "256", "--n", "64", "--k", "64", "--world", "2", "--dtype", "fp8e4m3", "--out", dir]);
    expect(fp8.status).toBe(2);
    expect(fp8.stderr).toContain("gemm-rs does not take fp8e4m3");
  }, 60_000);

  it("emits ag-gemm in fp8e4m3: fp8 A and Bt, fp32 scales, a bf16 C, the fp8 body, named so", async () => {
    const dir = temp();
    const args = ["--m", "256", "--n", "64", "--k", "128", "--world", "2", "--tile", "64x64x64", "--dtype", "fp8e4m3"];
    const r = await ovl(["emit", "ag-gemm", ...args, "--out", dir, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ name: "ag_gemm_m256n64k128_fp8e4m3_w2_s2", dtype: "fp8e4m3" });
    const m = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as WrittenManifest;
    expect(m.dtype).toBe("fp8e4m3");
    expect(m.reference.tolerance).toBe(DEFAULT_TOLERANCE.fp8e4m3);
    const dtypes = Object.fromEntries(m.buffers.map((b) => [b.name, b.dtype]));
    expect(m.reference.inputs).toEqual({ A: "A", B: "gemm_bt", scale_a: "scale_a", scale_b: "scale_b" });
    expect([dtypes.A, dtypes.gemm_bt, dtypes.scale_a, dtypes.scale_b, dtypes[m.reference.output]]).toEqual([
      "fp8e4m3",
      "fp8e4m3",
      "fp32",
      "fp32",
      "bf16",
    ]);
    const kernel = readFileSync(join(dir, "ag_gemm_m256n64k128_fp8e4m3_w2_s2.py"), "utf8");
    expect(kernel).toContain("(acc * scale).to(out_dtype)");
    const tlx = await ovl(["emit", "ag-gemm", ...args, "--tlx", "--out", temp()]);
    expect(tlx.status).not.toBe(0);
    expect(tlx.stderr).toMatch(/bf16 or fp16 operands, not fp8e4m3/);
  }, 60_000);

  it("writes fp16 buffers, reference and tolerance, and names the operator so", async () => {
    const dir = temp();
    const r = await ovl(["emit", "ag-gemm", ...FAMILIES[0]!.args, "--dtype", "fp16", "--out", dir, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { name: string; dtype: string };
    expect(out).toMatchObject({ name: "ag_gemm_m256n64k64_fp16_w2_s2", dtype: "fp16" });
    const m = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as WrittenManifest;
    expect(m.dtype).toBe("fp16");
    expect(m.reference.tolerance).toBe(DEFAULT_TOLERANCE.fp16);
    const named = new Set([...Object.values(m.reference.inputs), m.reference.output]);
    expect(m.buffers.filter((b) => named.has(b.name)).map((b) => b.dtype)).toEqual(["fp16", "fp16", "fp16"]);
    const plan = JSON.parse(readFileSync(join(dir, "plan.json"), "utf8")) as { tensors: { dtype: string }[] };
    expect(plan.tensors.map((t) => t.dtype)).toEqual(["fp16"]);
    // bf16 stays the default, its names unchanged.
    const bf16 = await ovl(["emit", "ag-gemm", ...FAMILIES[0]!.args, "--out", temp(), "--json"]);
    expect(JSON.parse(bf16.stdout)).toMatchObject({ name: "ag_gemm_m256n64k64_w2_s2", dtype: "bf16" });
  }, 60_000);

  it("writes the MLP chain in fp16, both stages", async () => {
    const dir = temp();
    const args = ["--tokens", "128", "--hidden", "64", "--intermediate", "32", "--world", "2", "--tile", "32x32x32", "--dtype", "fp16"];
    const r = await ovl(["emit", "mlp", ...args, "--out", dir, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const chain = JSON.parse(readFileSync(join(dir, "chain.json"), "utf8")) as { dtype: string; stages: { manifest: string }[] };
    expect(chain.dtype).toBe("fp16");
    for (const s of chain.stages) expect((JSON.parse(readFileSync(join(dir, s.manifest), "utf8")) as WrittenManifest).dtype).toBe("fp16");
  }, 60_000);

  for (const f of FAMILIES) {
    it.skipIf(!(f.engine === "numpy" ? canEmulate : canInterpret))(
      `${f.op} emitted in fp16 runs in CPU emulation (${f.engine}) within fp16's tolerance`,
      async () => {
        const dir = temp();
        const e = await ovl(["emit", f.op, ...f.args, "--dtype", "fp16", "--out", dir]);
        expect(e.status, e.stderr).toBe(0);
        const out = join(dir, "report.json");
        const r = await ovl(["run", join(dir, "manifest.json"), "--engine", f.engine, "--epochs", "1", "--out", out]);
        expect(r.status, r.stderr).toBe(0);
        const report = JSON.parse(readFileSync(out, "utf8")) as Report;
        expect(report.ok).toBe(true);
        expect(report.dtype).toBe("fp16");
        for (const c of report.checks) expect(c).toMatchObject({ ok: true, tolerance: DEFAULT_TOLERANCE.fp16 });
      },
      180_000,
    );
  }
});
