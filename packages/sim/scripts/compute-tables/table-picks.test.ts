import { computeConfigs, type ComputeConfigTable } from "@ovl/tlx-emitter";
import { describe, expect, it } from "vitest";
import { computeShapes } from "./compute-shapes.js";
import type { ComputeBenchFile, ComputeCase } from "./emit-compute.js";
import { tablePicks } from "./table-picks.js";

const table = computeConfigs("h200") as ComputeConfigTable;
// A GEMM+RS shape whose entry's TLX pick runs in 2×1 clusters.
const shape = computeShapes().find((s) => {
  const e = table.entries.find((x) => x.op === s.op && x.M === s.M && x.N === s.N && x.K === s.K);
  return s.op === "gemm-rs" && e?.tlx?.clusterM === 2;
})!;
const pick = table.entries.find((x) => x.op === shape.op && x.M === shape.M && x.N === shape.N && x.K === shape.K)!.tlx!;

function tlxCase(label: string, clusterM: number | undefined): ComputeCase {
  return {
    label,
    kind: "emitted",
    role: "tlx-emitted",
    file: `emitted/${label}/tlx_gemm_rs.py`,
    cubin: `emitted/${label}/tlx_gemm_rs.sm_90a.cubin`,
    entry: "tlx_gemm_rs",
    config: {
      body: `tlx-${pick.consumerSchedule}`,
      BM: pick.BM,
      BN: pick.BN,
      BK: pick.BK,
      groupM: pick.groupM,
      numStages: pick.stages,
      numWarps: 4,
    },
    warpSpecialization: {
      consumerSchedule: pick.consumerSchedule,
      stages: pick.stages,
      ...(pick.epilogueSplit === undefined ? {} : { epilogueSplit: pick.epilogueSplit }),
      ...(pick.notifier === undefined ? {} : { notifier: pick.notifier }),
      ...(clusterM === undefined ? {} : { clusterM }),
    },
    args: [],
    constexprs: {},
    tiles: 1,
  };
}

const triton = (label: string, role: ComputeCase["role"]): ComputeCase => ({
  label,
  kind: role === "tuned-plain" ? "plain" : "emitted",
  role,
  file: `emitted/${label}.py`,
  entry: "gemm_producer_tma_flat",
  config: { body: "gemm_producer_tma_flat", BM: 128, BN: 256, BK: 64, groupM: 8, numStages: 4, numWarps: 8 },
  args: [],
  constexprs: {},
  tiles: 1,
});

function bench(cases: ComputeCase[]): ComputeBenchFile {
  return { schema: "ovl.compute-bench/v1", mode: "bench", target: "h200", shapes: [{ ...shape, dtype: "bf16", cases }] };
}

describe("tablePicks", () => {
  it("keeps the tuned kernel, its plain body and the TLX kernel of the entry's configuration (as table-check matches it)", () => {
    const cases = [
      triton("tuned", "tuned"),
      triton("plain", "tuned-plain"),
      triton("previous", "previous"),
      tlxCase("unclustered", undefined),
      tlxCase("clustered", 2),
    ];
    expect(tablePicks(table, bench(cases)).shapes[0]!.cases.map((c) => c.label)).toEqual(["tuned", "plain", "clustered"]);
  });

  it("refuses a shape that holds no case of its entry's TLX configuration", () => {
    expect(() => tablePicks(table, bench([triton("tuned", "tuned"), tlxCase("unclustered", undefined)]))).toThrow(
      /no case of the h200 table's TLX configuration/,
    );
  });
});
