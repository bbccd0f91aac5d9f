// `--backend nvshmem`: ag-gemm and gemm-rs emit an nvshmem-push kernel (the same plan, NVSHMEM puts with
// signal), every other operator and the simulator refuse it by name.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Manifest } from "@ovl/tlx-emitter";
import { describe, expect, it } from "vitest";
import { runCli } from "./cli.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-nvshmem-"));

async function run(args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const status = await runCli(args, { out: (t) => (out += t), err: (t) => (err += t), interactive: false });
  return { status, out, err };
}

const small = ["--m", "512", "--n", "256", "--k", "128", "--world", "2", "--tile", "128x128x64"];

describe("ovl emit --backend nvshmem", () => {
  it("emits AG+GEMM and GEMM+RS with an nvshmem-push kernel and no host copies", async () => {
    for (const op of ["ag-gemm", "gemm-rs"]) {
      const dir = temp();
      const r = await run(["emit", op, ...small, "--backend", "nvshmem", "--comm-sms", "4", "--out", dir]);
      expect(r.status, r.err).toBe(0);
      expect(r.out).toContain("kernel nvshmem_push (nvshmem-push) on the comm stream");
      const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
      expect(m.name).toBe(`${op.replace("-", "_")}_m512n256k128_w2_nvshmem_s2`);
      expect(m.hostOps).toEqual([]);
      const push = m.kernels.find((k) => k.name === "nvshmem_push")!;
      expect(push.requires).toEqual(["nvshmem"]);
      expect(push.grid).toEqual([{ kind: "num-sms", cap: Math.min(4, (m.tables.at(-1)!.values[0]!.length / 7) | 0) }]);
      expect(readFileSync(join(dir, "nvshmem_push.py"), "utf8")).toContain("put_signal_add(");
    }
  });

  it("is refused where it is not built, naming what works", async () => {
    const gemmAr = await run(["emit", "gemm-ar", ...small, "--backend", "nvshmem", "--out", temp()]);
    expect(gemmAr.status).toBe(2);
    expect(gemmAr.err).toContain("--backend nvshmem realises ag-gemm's chunk pushes and gemm-rs's slab pushes; gemm-ar takes");
    const rows = await run(["emit", "ag-gemm", "--shape", "MLP-1", "--world", "2", "--backend", "nvshmem", "--any-rows", "--out", temp()]);
    expect(rows.status).toBe(2);
    expect(rows.err).toContain("drop --backend nvshmem or --any-rows");
    const sim = await run(["simulate", "ag-gemm", "--shape", "MLP-1", "--world", "8", "--backend", "nvshmem"]);
    expect(sim.status).toBe(2);
    expect(sim.err).toContain("the simulator has no model of NVSHMEM puts");
    const ce = await run(["emit", "ag-gemm", ...small, "--comm-sms", "4", "--out", temp()]);
    expect(ce.status).toBe(2);
    expect(ce.err).toContain("add --backend sm or nvshmem");
  });
});
