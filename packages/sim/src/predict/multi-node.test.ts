// predictMultiNode on a narrowed space: every operator row present, figures consistent with the
// tuner's candidates (overlapped = the best two-level candidate, not overlapped = GEMM + fabric
// collective), and the report's table and chart render.
import { describe, expect, it } from "vitest";
import { H200_SXM } from "../simulate/hardware.js";
import { H200_SXM_2x8 } from "../simulate/multi-node.js";
import { candidateKey, enumerateCandidates, TUNE_PLANS, type TuneSpace } from "../tune/space.js";
import { multiNodeChart, multiNodeMarkdown } from "./report.js";
import { type MultiNodeRow, predictMultiNode } from "./multi-node.js";

const SMALL: TuneSpace = {
  splits: [1],
  backends: ["copy-engine", "sm"],
  commSms: [16],
  tiles: [{ BM: 128, BN: 128, BK: 64 }],
  groupSizesM: [8],
  plans: TUNE_PLANS,
};

describe("predictMultiNode", () => {
  it("predicts AG+GEMM, GEMM+RS, the MLP layer and the MoE layer on 2×8, overlapped vs not, as sums per layer", async () => {
    const rows = predictMultiNode({ hardware: [H200_SXM_2x8], mlp: ["MLP-1"], moe: ["MoE-4"], space: SMALL });
    expect(rows.map((r) => r.operator)).toEqual(["ag-gemm", "gemm-rs", "mlp", "ag-moe", "moe-rs", "moe"]);
    for (const r of rows) {
      expect(r).toMatchObject({ hardware: "H200_SXM_2x8", nodes: 2, gpusPerNode: 8, world: 16 });
      expect(r.overlappedMs).toBeGreaterThan(0);
      expect(r.speedup).toBeCloseTo(r.notOverlappedMs / r.overlappedMs, 12);
      expect(r.tunedMs).toBeLessThanOrEqual(Math.min(r.overlappedMs, r.notOverlappedMs) + 1e-12);
    }
    const [ag, rs, mlp, agMoe, moeRs, moe] = rows.map((r) => r!) as [
      MultiNodeRow,
      MultiNodeRow,
      MultiNodeRow,
      MultiNodeRow,
      MultiNodeRow,
      MultiNodeRow,
    ];
    expect(mlp.overlappedMs).toBeCloseTo(ag.overlappedMs + rs.overlappedMs, 12);
    expect(mlp.notOverlappedMs).toBeCloseTo(ag.notOverlappedMs + rs.notOverlappedMs, 12);
    expect(mlp.tunedMs).toBeCloseTo(ag.tunedMs + rs.tunedMs, 12);
    expect(moe.overlappedMs).toBeCloseTo(agMoe.overlappedMs + moeRs.overlappedMs, 12);
    // Across nodes the AllGather's best plan is a two-level one: the flat one sends every shard over the network.
    expect(ag.overlapped).toMatch(/plan=(inter|intra)-node-first/);
    expect(rs.overlapped).toMatch(/plan=intra-node-first/);
    // Each buildable plan shape's best is reported: AG+GEMM all five, GEMM+RS flat and intra-node first.
    expect(Object.keys(ag.byPlan ?? {}).sort()).toEqual([...TUNE_PLANS].sort());
    expect(Object.keys(rs.byPlan ?? {}).sort()).toEqual(["flat", "intra-node-first/pipelined", "intra-node-first/staged"]);
    expect(Math.min(...Object.values(ag.byPlan ?? {}))).toBe(ag.overlappedMs);
    const md = multiNodeMarkdown(rows);
    expect(md).toContain("predicted, not measured");
    // One row in the main table, one in the per-plan-shape table.
    expect(md.split("\n").filter((l) => l.startsWith("| ag-gemm | MLP-1 |"))).toHaveLength(2);
    expect(md).toContain("Best overlapped prediction per plan shape");
    expect(await multiNodeChart(rows)).toMatch(/^<svg/);
  });

  it("refuses a single-node model", () => {
    expect(() => predictMultiNode({ hardware: [H200_SXM], mlp: [], moe: [] })).toThrow(expect.objectContaining({ code: "bad-hardware" }));
  });

  it("leaves the one-node tuner's candidate keys as they were; plan shapes add a key suffix", () => {
    const base = { ...SMALL, plans: undefined };
    const keys = enumerateCandidates(base).map(candidateKey);
    expect(keys.every((k) => !k.includes("plan="))).toBe(true);
    const hier = enumerateCandidates({ ...SMALL, plans: ["flat", "inter-node-first/pipelined"] }).map(candidateKey);
    expect(hier.filter((k) => k.endsWith(" plan=inter-node-first/pipelined"))).toHaveLength(2);
    expect(hier.filter((k) => k.startsWith("overlapped") && !k.includes("plan="))).toHaveLength(2);
    expect(() => enumerateCandidates({ ...SMALL, plans: ["diagonal" as never] })).toThrow(expect.objectContaining({ code: "bad-space" }));
  });
});
