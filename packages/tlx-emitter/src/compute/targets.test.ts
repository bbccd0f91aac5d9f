import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import {
  builtinBody,
  compile,
  COMPUTE_CONFIGS_SCHEMA,
  computeConfigs,
  computeConfigTargets,
  DEFAULT_TILE,
  describeTable,
  parseComputeConfigs,
  resolveCompute,
  tritonBackend,
  type ComputeConfigEntry,
  type ComputeConfigTable,
  type OperatorInput,
} from "../index.js";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A folder holding the given tables as `<target>.json`, as compute-table.ts writes them. */
function tableDir(...tables: ComputeConfigTable[]): string {
  const dir = mkdtempSync(join(tmpdir(), "ovl-configs-"));
  dirs.push(dir);
  for (const t of tables) writeFileSync(join(dir, `${t.target}.json`), `${JSON.stringify(t, null, 1)}\n`);
  return dir;
}

function table(target: ComputeConfigTable["target"], e: Partial<ComputeConfigEntry>): ComputeConfigTable {
  return parseComputeConfigs({
    $schema: COMPUTE_CONFIGS_SCHEMA,
    target,
    device: `${target} test`,
    measured: "2026-11-25",
    source: "test",
    entries: [
      {
        op: "ag-gemm",
        M: 4096,
        N: 2048,
        K: 1024,
        dtype: "bf16",
        body: "gemm_tma_persistent",
        BM: 128,
        BN: 128,
        BK: 64,
        groupM: 8,
        numStages: 4,
        numWarps: 8,
        ...e,
      },
    ],
  });
}

function agOp(M: number, N: number, K: number): OperatorInput {
  const plan = planSignals(
    allGatherSwizzle({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [4], split: 1, side: "push" }),
  );
  return { name: "ag", kind: "ag-gemm", plan, body: builtinBody("gemm_tma_persistent"), problem: { M, N, K } };
}

describe("tables per target", () => {
  it("the H200 borrows the H100's table until it has its own, which then wins", () => {
    const h100 = table("h100", { BN: 128, numStages: 4 });
    const h200 = table("h200", { BN: 256, numStages: 3, groupM: 4 });
    expect(computeConfigs("h200", tableDir(h100))).toEqual(h100);
    const both = tableDir(h100, h200);
    expect(computeConfigs("h200", both)).toEqual(h200);
    expect(computeConfigs("h100", both)).toEqual(h100);
    expect(computeConfigs("b200", both)).toBeNull();
  });

  it("refuses a file that holds another target's table", () => {
    const dir = tableDir(table("h100", {}));
    writeFileSync(join(dir, "h200.json"), JSON.stringify(table("h100", {})));
    expect(() => computeConfigs("h200", dir)).toThrow(/h200\.json: holds the h100 table, not h200's/);
  });

  it("property: a target's candidates start with itself and share its architecture", () => {
    fc.assert(
      fc.property(fc.constantFrom("h100", "h200", "b200") as fc.Arbitrary<"h100" | "h200" | "b200">, (t) => {
        const c = computeConfigTargets(t);
        expect(c[0]).toBe(t);
        expect(new Set(c).size).toBe(c.length);
      }),
    );
    expect(computeConfigTargets("h200")).toEqual(["h200", "h100"]);
    expect(computeConfigTargets("b200")).toEqual(["b200"]);
  });
});

describe("resolveCompute and compile() with a target", () => {
  it("names the table's target and the requested one, and says when it is borrowed", () => {
    const r = resolveCompute(agOp(4096, 2048, 1024), { target: "h200", table: table("h100", { BN: 128 }) });
    expect(r.choice).toMatchObject({ source: "table", target: "h100", requested: "h200", match: "exact" });
    if (r.choice.source !== "table") throw new Error("expected a table choice");
    expect(describeTable(r.choice)).toBe("h200: no own ag-gemm entries, using h100's");
    const own = resolveCompute(agOp(4096, 2048, 1024), { target: "h200", table: table("h200", { BN: 256 }) });
    if (own.choice.source !== "table") throw new Error("expected a table choice");
    expect(describeTable(own.choice)).toBe("h200 table");
    expect(own.op.tile).toEqual({ BM: 128, BN: 256, BK: 64 });
  });

  it("compile() reads the named target's table: h100 and h200 each their own tuned entry, b200 (no table) the default tile", async () => {
    const M = 2048 * (1 + Math.floor(Math.random() * 4));
    const op = agOp(M, 4096, 4096);
    for (const target of ["h100", "h200"] as const) {
      const { op: tuned, choice } = resolveCompute(op, { target });
      expect(choice).toMatchObject({ source: "table", target, requested: target });
      expect(await compile(op, tritonBackend, { target })).toEqual(await compile(tuned));
    }
    expect(resolveCompute(op, { target: "b200" }).choice).toEqual({ source: "default", reason: "no tuned table for b200" });
    expect(await compile(op, tritonBackend, { target: "b200" })).toEqual(await compile({ ...op, tile: DEFAULT_TILE }));
    // The two-argument form still resolves the default target's table.
    expect(await compile(op, tritonBackend)).toEqual(await compile(op, tritonBackend, { target: "h200" }));
  });
});
