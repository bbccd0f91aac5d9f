import { computeConfigs, type ComputeConfigTable } from "@ovl/tlx-emitter";
import { describe, expect, it } from "vitest";
import { entryConfig, type ComputeResults, type ResultCase } from "./compute-table.js";
import { checkTable, compareTables, poolChecks } from "./table-check.js";

const committed = computeConfigs("h200") as ComputeConfigTable;
// Two GEMM+RS entries of the committed table, their TLX kernels made unclustered with GROUP_M 8 (the
// cases below vary the grouping and the cluster), and the table the tests check, holding them.
const picked = committed.entries.filter((e) => e.op === "gemm-rs" && e.tlx !== undefined).slice(0, 2);
const entries = picked.map((e) => {
  const { clusterM: _cluster, ...tlx } = e.tlx!;
  return { ...e, tlx: { ...tlx, groupM: 8 } };
});
const table: ComputeConfigTable = {
  ...committed,
  entries: committed.entries.map((e) => {
    const i = picked.indexOf(e);
    return i < 0 ? e : entries[i]!;
  }),
};

function tlxCase(
  e: (typeof entries)[number],
  ms: number,
  change: Partial<NonNullable<ResultCase["warpSpecialization"]>> = {},
  relErr = 1e-3,
): ResultCase {
  const t = e.tlx!;
  return {
    label: `tlx ${ms}`,
    kind: "emitted",
    role: "tlx-emitted",
    entry: "tlx_gemm_rs",
    config: { body: `tlx-${t.consumerSchedule}`, BM: t.BM, BN: t.BN, BK: t.BK, groupM: t.groupM, numStages: t.stages, numWarps: 4 },
    warpSpecialization: {
      consumerSchedule: t.consumerSchedule,
      stages: t.stages,
      ...(t.epilogueSplit === undefined ? {} : { epilogueSplit: t.epilogueSplit }),
      ...(t.notifier === undefined ? {} : { notifier: t.notifier }),
      ...change,
    },
    ms,
    relErr,
    allWritten: true,
  };
}

function run(cases: (e: (typeof entries)[number]) => ResultCase[]): ComputeResults {
  return {
    schema: "ovl.compute-results/v1",
    mode: "bench",
    target: "h200",
    device: table.device.split(",")[0]!,
    sms: 132,
    torch: "2.11",
    triton: "3.6",
    cuda: "13.0",
    method: "test",
    skipped: [],
    shapes: entries.map((e, i) => ({
      name: `s${i}`,
      op: "gemm-rs",
      role: "producer",
      mlp: "MLP-1",
      world: 8,
      M: e.M,
      N: e.N,
      K: e.K,
      dtype: "bf16",
      flops: 1,
      cublas: { ms: 1, tflops: 1, relErr: 1e-3 },
      cases: cases(e),
    })),
  };
}

const tuned = (e: (typeof entries)[number], ms: number, relErr = 1e-3): ResultCase => ({
  label: "tuned",
  kind: "emitted",
  role: "tuned",
  entry: "k",
  config: entryConfig(e),
  ms,
  relErr,
  allWritten: true,
});

describe("checkTable", () => {
  it("takes the faster of the entry's tuned kernel and its TLX kernel, ignoring other and wrong cases", () => {
    expect(entries).toHaveLength(2);
    const r = checkTable(
      table,
      run((e) => [
        tuned(e, 1.25),
        tlxCase(e, 1.1),
        // Faster, but not the table's TLX configuration (another ring), or wrong: never counted.
        tlxCase(e, 0.5, { stages: 99 }),
        tlxCase(e, 0.4, {}, 0.5),
        // Nor another L2 grouping or cluster of the same tile and ring.
        { ...tlxCase(e, 0.3), config: { ...tlxCase(e, 0.3).config, groupM: e.tlx!.groupM * 2 } },
        tlxCase(e, 0.2, { clusterM: 2 }),
      ]),
    );
    expect(r.shapes.map((s) => [s.backend, Number(s.ratio.toFixed(4))])).toEqual([
      ["tlx", 0.9091],
      ["tlx", 0.9091],
    ]);
    expect(r.geomean).toBeCloseTo(1 / 1.1, 6);
    expect(r.min).toBeCloseTo(1 / 1.1, 6);
    expect(r.below95).toBe(2);
    expect(r.shapes.every((x) => !x.tlxMissing)).toBe(true);
    // The Triton kernel where it is faster; the geometric mean over both shapes.
    const mixed = checkTable(
      table,
      run((e) => (e === entries[0] ? [tuned(e, 0.8), tlxCase(e, 1)] : [tuned(e, 2), tlxCase(e, 1.25)])),
    );
    expect(mixed.shapes.map((s) => s.backend)).toEqual(["triton", "tlx"]);
    expect(mixed.geomean).toBeCloseTo(Math.sqrt(1.25 * 0.8), 6);
    expect(mixed.below95).toBe(1);
    expect(mixed.shapes.every((x) => x.simError === undefined)).toBe(true);
    // With a hardware model: the simulator's error on the faster kernel's time, per shape.
    const sim = checkTable(
      table,
      run((e) => [tuned(e, 0.8), tlxCase(e, 1)]),
      "H200_SXM",
    );
    for (const x of sim.shapes) {
      expect(x.ms).toBe(0.8);
      expect(Number.isFinite(x.simError)).toBe(true);
      expect(x.simError!).toBeGreaterThan(-1);
    }
  });

  it("compares two tables over the shapes where the run measured both tables' kernels", () => {
    // `after` picks a 16-row-group TLX kernel at the first shape, which the run measured; at the
    // second its pick (a clustered kernel) is missing from the run, so that shape is left out.
    const after: ComputeConfigTable = {
      ...table,
      entries: table.entries.map((e) =>
        e === entries[0] ? { ...e, tlx: { ...e.tlx!, groupM: 16 } } : e === entries[1] ? { ...e, tlx: { ...e.tlx!, clusterM: 2 } } : e,
      ),
    };
    const results = run((e) => [tuned(e, 2), tlxCase(e, 1.25), { ...tlxCase(e, 1), config: { ...tlxCase(e, 1).config, groupM: 16 } }]);
    const missing = checkTable(after, results).shapes.map((x) => x.tlxMissing);
    expect(missing).toEqual([false, true]);
    const c = compareTables(table, after, results);
    expect(c.shapes.map((x) => x.name)).toEqual(["s0"]);
    expect(c.before).toBeCloseTo(1 / 1.25, 6);
    expect(c.after).toBeCloseTo(1, 6);
    // A run that measured neither table's TLX kernels leaves no shape to compare.
    expect(() =>
      compareTables(
        table,
        after,
        run((e) => [tuned(e, 2)]),
      ),
    ).toThrow(/both tables/);
  });

  it("refuses a run whose tuned kernel is not the table's, or a shape where neither kernel is correct", () => {
    expect(() =>
      checkTable(
        table,
        run((e) => [{ ...tuned(e, 1), config: { ...entryConfig(e), BK: e.BK * 2 } }]),
      ),
    ).toThrow(/is not the h200 table's entry/);
    expect(() =>
      checkTable(
        table,
        run((e) => [tuned(e, 1, 0.5), tlxCase(e, 1, { notifier: undefined, stages: 1 })]),
      ),
    ).toThrow(/neither of the table's kernels/);
    expect(() => checkTable(table, { ...run(() => []), shapes: [] })).toThrow(/no shape/);
  });

  it("pools runs per shape by the geometric mean over the runs before judging the shapes", () => {
    // Shape s0: 1/0.9 and 1/1.1 across two runs (pooled 1/sqrt(0.99)); s1: 1/1.1 then 1/1.0.
    const a = checkTable(
      table,
      run((e) => [tuned(e, e === entries[0] ? 0.9 : 1.1)]),
    );
    const b = checkTable(
      table,
      run((e) => [tuned(e, e === entries[0] ? 1.1 : 1.0)]),
    );
    const p = poolChecks([a, b]);
    expect(p.shapes.map((x) => [x.name, x.runs])).toEqual([
      ["s0", 2],
      ["s1", 2],
    ]);
    expect(p.shapes[0]!.ratio).toBeCloseTo(1 / Math.sqrt(0.99), 6);
    expect(p.shapes[1]!.ratio).toBeCloseTo(1 / Math.sqrt(1.1), 6);
    expect(p.min).toBeCloseTo(1 / Math.sqrt(1.1), 6);
    expect(p.geomean).toBeCloseTo(1 / Math.sqrt(Math.sqrt(0.99 * 1.1)), 6);
    // s1's one run below 0.95 (0.909) is lifted by the other, so no pooled shape is below.
    expect(a.below95).toBe(1);
    expect(p.below95).toBe(0);
    expect(() => poolChecks([])).toThrow(/no run/);
  });
});
