import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-mlp-"));

describe("ovl emit mlp", () => {
  it("writes both stages and a chain that links the up stage's output to the down stage's A", async () => {
    const dir = temp();
    const args = ["--tokens", "128", "--hidden", "64", "--intermediate", "32", "--world", "2", "--tile", "32x32x32"];
    const r = await ovl(["emit", "mlp", ...args, "--out", dir, "--json"]);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { stages: { operator: string }[]; chain: string };
    expect(out.stages.map((s) => s.operator)).toEqual(["ag-gemm-silu", "gemm-rs"]);
    const chain = JSON.parse(readFileSync(join(dir, "chain.json"), "utf8")) as {
      $schema: string;
      stages: { manifest: string }[];
      links: { from: { stage: number; buffer: string }; to: { stage: number; buffer: string } }[];
      reference: { operator: string; M: number; hidden: number; intermediate: number };
    };
    expect(chain.$schema).toBe("ovl.chain/v1");
    expect(chain.reference).toMatchObject({ operator: "mlp", M: 128, hidden: 64, intermediate: 32 });
    for (const s of chain.stages) expect(existsSync(join(dir, s.manifest))).toBe(true);
    const up = JSON.parse(readFileSync(join(dir, chain.stages[0]!.manifest), "utf8")) as { buffers: { name: string; shape: number[] }[] };
    const down = JSON.parse(readFileSync(join(dir, chain.stages[1]!.manifest), "utf8")) as { buffers: { name: string; shape: number[] }[] };
    const link = chain.links[0]!;
    expect(up.buffers.find((b) => b.name === link.from.buffer)?.shape).toEqual([128, 32]);
    expect(down.buffers.find((b) => b.name === link.to.buffer)?.shape).toEqual([128, 32]);
  }, 60_000);

  it("refuses a missing size and a mesh, writing nothing", async () => {
    const dir = join(temp(), "out");
    const missing = await ovl(["emit", "mlp", "--tokens", "128", "--hidden", "64", "--world", "2", "--out", dir]);
    expect(missing.status).not.toBe(0);
    expect(missing.stderr).toMatch(/--intermediate/);
    const mesh = await ovl(["emit", "mlp", "--tokens", "128", "--hidden", "64", "--intermediate", "32", "--mesh", "2x2", "--out", dir]);
    expect(mesh.status).not.toBe(0);
    expect(mesh.stderr).toMatch(/flat world/);
    expect(existsSync(dir)).toBe(false);
  }, 60_000);
});

describe("ovl emit ag-gemm-silu", () => {
  it("writes the first stage alone as the kernel library's flags name it", async () => {
    const dir = temp();
    const args = ["--m", "128", "--n", "32", "--k", "64", "--world", "2", "--split", "2", "--backend", "copy-engine", "--tile", "32x32x32"];
    const r = await ovl(["emit", "ag-gemm-silu", ...args, "--out", dir, "--json"]);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const m = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as {
      reference: { operator: string; M: number; N: number; K: number };
      buffers: { name: string; shape: number[] }[];
    };
    expect(m.reference).toMatchObject({ operator: "ag-gemm-silu", M: 128, N: 32, K: 64 });
    expect(m.buffers.find((b) => b.name === "gemm_b")?.shape).toEqual([64, 64]);
    const sm = await ovl(["emit", "ag-gemm-silu", ...args.slice(0, 10), "--backend", "sm", "--out", join(dir, "x")]);
    expect(sm.status).not.toBe(0);
    expect(sm.stderr).toMatch(/copy-engine/);
  }, 60_000);
});
