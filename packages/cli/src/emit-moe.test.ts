import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-moe-"));

describe("ovl emit ag-moe", () => {
  it("compiles the built-in gather + grouped GEMM body against a ring AllGather of ragged token shards", async () => {
    const dir = temp();
    const args = ["--tokens", "100", "--hidden", "32", "--intermediate", "64", "--experts", "4", "--topk", "2", "--choices", "0,2,3"];
    const r = await ovl(["emit", "ag-moe", ...args, "--world", "3", "--template", "ring", "--tile", "16x32x32", "--out", dir, "--json"]);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { world: number; kernels: { template: string }[] };
    expect(out.world).toBe(3);
    expect(out.kernels.map((k) => k.template)).toEqual(["moe-align-count", "moe-align-scatter", "local-consumer"]);
    const m = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as {
      reference: { operator: string; M: number; N: number; K: number; rowCounts: number[] };
      buffers: { name: string; routing?: unknown }[];
    };
    expect(m.reference).toMatchObject({ operator: "ag-moe", M: 100, N: 64, K: 32, rowCounts: [34, 33, 33] });
    expect(m.buffers.find((b) => b.routing !== undefined)?.routing).toEqual({ experts: 4, choices: [0, 2, 3] });
  }, 60_000);

  it("takes the tuned configuration of MoE-2 without --tile (the H100's entry, borrowed by the default H200) and keeps --tile's", async () => {
    const moe2 = ["--tokens", "8192", "--hidden", "2048", "--intermediate", "192", "--experts", "32", "--topk", "2", "--world", "8"];
    const body = (dir: string) =>
      (
        JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as {
          kernels: { constexprs: Record<string, number>; numWarps: number; numStages: number; grid: unknown[] }[];
        }
      ).kernels[2]!;
    const tuned = temp();
    const r = await ovl(["emit", "ag-moe", ...moe2, "--out", tuned]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(
      /tile 64x64x32, group 8, 4 warps, 3 stages, body moe_gather_gemm_blocks\.py \(tuned h200: no own ag-moe entries, using h100's, exact shape\)/,
    );
    expect(body(tuned)).toMatchObject({ constexprs: { BLOCK_M: 64, BLOCK_N: 64, BLOCK_K: 32, GROUP_M: 8 }, numWarps: 4, numStages: 3 });
    // Non-persistent: one program per (block, n-block) tile of the worst-case routing.
    expect(body(tuned).grid).toEqual([Math.ceil((8192 * 2 + 32 * 63) / 64) * 3]);
    const h100 = await ovl(["emit", "ag-moe", ...moe2, "--target", "h100", "--out", temp()]);
    expect(h100.stdout).toMatch(/\(tuned h100 table, exact shape\)/);
    const own = temp();
    const t = await ovl(["emit", "ag-moe", ...moe2, "--tile", "128x128x64", "--out", own]);
    expect(t.stdout).toMatch(/tile 128x128x64, .*\(named by --tile\)/);
    expect(body(own).constexprs).toMatchObject({ BLOCK_M: 128, BLOCK_N: 128 });
  }, 60_000);

  it("takes the GEMM flags as the same sizes, and refuses a bad routing or missing sizes, writing nothing", async () => {
    const dir = join(temp(), "out");
    const gemm = await ovl([
      "emit",
      "ag-moe",
      "--m",
      "64",
      "--n",
      "32",
      "--k",
      "32",
      "--experts",
      "2",
      "--topk",
      "1",
      "--world",
      "2",
      "--out",
      dir,
    ]);
    expect(gemm.status).toBe(0);
    const bad = join(temp(), "bad");
    const topk = await ovl(["emit", "ag-moe", "--m", "64", "--n", "32", "--k", "32", "--experts", "2", "--topk", "3", "--out", bad]);
    expect(topk.status).not.toBe(0);
    expect(topk.stderr).toMatch(/--topk 3 exceeds --experts 2/);
    const choices = await ovl([
      "emit",
      "ag-moe",
      "--m",
      "64",
      "--n",
      "32",
      "--k",
      "32",
      "--experts",
      "2",
      "--topk",
      "1",
      "--choices",
      "0,5",
      "--out",
      bad,
    ]);
    expect(choices.stderr).toMatch(/'5' is not an expert of \[0, 2\)/);
    const missing = await ovl(["emit", "ag-moe", "--hidden", "32", "--intermediate", "32", "--experts", "2", "--topk", "1", "--out", bad]);
    expect(missing.stderr).toMatch(/needs --tokens \(or --m\)/);
    expect(existsSync(bad)).toBe(false);
  }, 60_000);
});
