import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeConfigs, DEFAULT_TILE, lookupComputeConfig, Manifest } from "@ovl/tlx-emitter";
import { UsageError } from "./errors.js";
import { parseTargetFlag, TARGET_NAMES } from "./target.js";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-target-"));

interface Emitted {
  manifest: string;
  compute: Record<string, unknown>;
}

function blockParams(manifestPath: string): number[] {
  const p = Manifest.parse(JSON.parse(readFileSync(manifestPath, "utf8"))).kernels[0]!.template.params;
  return [p.BLOCK_M, p.BLOCK_N, p.BLOCK_K].map(Number);
}

describe("parseTargetFlag", () => {
  it("takes every target name and refuses anything else with the list", () => {
    for (const t of TARGET_NAMES) expect(parseTargetFlag(t)).toBe(t);
    expect(parseTargetFlag(undefined)).toBeUndefined();
    fc.assert(
      fc.property(
        fc.string().filter((s) => !(TARGET_NAMES as string[]).includes(s)),
        (s) => {
          expect(() => parseTargetFlag(s)).toThrow(UsageError);
          expect(() => parseTargetFlag(s)).toThrow(/h100, h200, b200/);
        },
      ),
    );
  });
});

describe("ovl emit --target", () => {
  const e = lookupComputeConfig(computeConfigs("h100")!, { op: "ag-gemm", M: 8192, N: 1376, K: 4096, dtype: "bf16" })!.entry;
  const emit = (...extra: string[]) => ovl(["emit", "ag-gemm", "--shape", "MLP-1", "--world", "8", "--out", temp(), ...extra]);

  it("reports the table it read: each target's own, or none (the default tile)", async () => {
    const own = await emit("--target", "h100");
    expect(own.status, own.stderr).toBe(0);
    expect(own.stdout).toContain(`compute: tile ${e.BM}x${e.BN}x${e.BK}, group ${e.groupM}`);
    expect(own.stdout).toContain("(tuned h100 table, exact shape)");
    const h200 = await emit("--target", "h200", "--json");
    expect(h200.status, h200.stderr).toBe(0);
    const b = JSON.parse(h200.stdout) as Emitted;
    const f = lookupComputeConfig(computeConfigs("h200")!, { op: "ag-gemm", M: 8192, N: 1376, K: 4096, dtype: "bf16" })!.entry;
    expect(b.compute).toEqual({ BM: f.BM, BN: f.BN, BK: f.BK, groupM: f.groupM, source: "table", table: "h200", target: "h200" });
    expect(blockParams(b.manifest)).toEqual([f.BM, f.BN, f.BK]);
    expect((await emit("--target", "h200")).stdout).toContain("(tuned h200 table, exact shape)");
    const none = await emit("--target", "b200", "--json");
    expect(none.status, none.stderr).toBe(0);
    const n = JSON.parse(none.stdout) as Emitted;
    expect(n.compute).toMatchObject({ ...DEFAULT_TILE, source: "default" });
    expect(blockParams(n.manifest)).toEqual([DEFAULT_TILE.BM, DEFAULT_TILE.BN, DEFAULT_TILE.BK]);
    expect((await emit("--target", "b200")).stdout).toContain("(default: no tuned table for b200)");
  }, 60_000);

  it("is a usage error for an unknown target or an operator that reads no table", async () => {
    const bad = await emit("--target", "a100");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("--target must be one of h100, h200, b200, got 'a100'");
    const attention = await ovl(
      ["emit", "ag-attention", "--seq", "1024", "--heads", "4", "--head-dim", "64", "--world", "2"].concat([
        "--target",
        "h100",
        "--out",
        temp(),
      ]),
    );
    expect(attention.status).toBe(2);
    expect(attention.stderr).toContain("unknown option '--target'");
  }, 30_000);

  it("gives the MLP's down stage (GEMM+RS) the named target's table", async () => {
    const args = ["emit", "mlp", "--tokens", "4096", "--hidden", "4096", "--intermediate", "1376", "--world", "2", "--json"];
    const down = async (target: string) => {
      const r = await ovl([...args, "--out", temp(), "--target", target]);
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as { stages: { dir: string }[] };
      return blockParams(join(out.stages[1]!.dir, "manifest.json"));
    };
    const rs = lookupComputeConfig(computeConfigs("h100")!, { op: "gemm-rs", M: 4096, N: 4096, K: 1376, dtype: "bf16" })!.entry;
    // The table's tile is not the default one, so the two targets must emit different kernels.
    expect([rs.BM, rs.BN, rs.BK]).not.toEqual([DEFAULT_TILE.BM, DEFAULT_TILE.BN, DEFAULT_TILE.BK]);
    expect(await down("b200")).toEqual([DEFAULT_TILE.BM, DEFAULT_TILE.BN, DEFAULT_TILE.BK]);
    expect(await down("h100")).toEqual([rs.BM, rs.BN, rs.BK]);
  }, 30_000);
});
