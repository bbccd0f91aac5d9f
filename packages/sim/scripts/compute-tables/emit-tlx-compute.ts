// Adds TLX kernels (warp-specialised, sm_90a, launched from their cubins) to a compute
// benchmark directory that `emit-compute.ts bench` wrote, per shape of <dir>/compute.json and
// variant of `TLX_VARIANTS`: the plain TLX GEMM (role `tlx`; one kernel per variant in
// <dir>/tlx/<variant>/, since M, N and K are runtime arguments and every MLP shape is a
// multiple of 16) and the kernel the TLX backend compiles for the shape's operator (role
// `tlx-emitted`: AG+GEMM's consumer with its chunk waits, every signal already set, or
// GEMM+RS's producer with its tile-done notifies; one manifest per case under
// <dir>/emitted/). compute_bench.py times them beside the tuned Triton kernels and cuBLAS in
// one run. Compile every manifest with @ovl/tlx-emitter's scripts/tlx-aot-compile.py
// (fbtriton, no GPU) before carrying the directory to the GPU machine.
//   tsx scripts/compute-tables/emit-tlx-compute.ts <bench-dir> [--variants pp128x128s6,coop128x256s3] [--no-emitted]
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { compile, emitManifestJson, emitTlxGemm, tlxBackend, type TlxEmitOptions, type WarpSpecialization } from "@ovl/tlx-emitter";
import { emittedCase, shapeOperator } from "./compute-cases.js";
import { plainLaunch, type ComputeBenchFile, type ComputeCase } from "./emit-compute.js";

/** A TLX GEMM configuration of the benchmark: tile, L2 grouping and the emitter's warp-specialisation options. */
export interface TlxComputeVariant {
  readonly tile: { readonly BM: number; readonly BN: number; readonly BK: number };
  readonly groupM: number;
  readonly options: TlxEmitOptions & { readonly stages: number; readonly consumerSchedule: "cooperative" | "pingpong" };
  /**
   * GEMM+RS only: the warp groups that notify (`producer`: `producerTileNotifyComm`). A variant
   * with a notifier has no plain case (its GEMM is its base variant's) and no AG+GEMM case.
   */
  readonly notifier?: "consumers" | "producer" | "tma";
}

/**
 * The configurations measured, by name (`coop`: cooperative consumers, `pp`: ping-pong; `k`: BLOCK_K
 * where not 64; `s`: ring stages; `e1`: one epilogue store, not two half-width ones through one staging slice; `q`: four
 * quarter-width stores through two staging slices in turn; `pn`: GEMM+RS's tile-done notifies from the producer warp group —
 * with ping-pong consumers that lost 3–20% on an H100 (evidence: `results/runs/tlx-producer-notify-h100-2026-11-26`); `tn`: GEMM+RS's
 * tile-done notifies by TMA reduce-add; `mc`: cooperative consumers in 2×1 clusters sharing B blocks by TMA multicast — on
 * an H100 the best case per shape with them 0.3–0.6% faster than without by geometric mean over the MLP shapes
 * (evidence: `results/runs/multicast-h100-2026-11-28`); `g16`: GROUP_M 16).
 */
export const TLX_VARIANTS: Readonly<Record<string, TlxComputeVariant>> = {
  coop128x256s3e1: {
    tile: { BM: 128, BN: 256, BK: 64 },
    groupM: 8,
    options: { stages: 3, consumerSchedule: "cooperative", epilogueSplit: 1 },
  },
  coop128x256s3: { tile: { BM: 128, BN: 256, BK: 64 }, groupM: 8, options: { stages: 3, consumerSchedule: "cooperative" } },
  coop128x256s4: { tile: { BM: 128, BN: 256, BK: 64 }, groupM: 8, options: { stages: 4, consumerSchedule: "cooperative" } },
  // BLOCK_M 256: each consumer warp group takes 128 rows × 128 columns, where N (1376, 2752) wastes less of a
  // 128-wide tile than of a 256-wide one (three stages starve it: 0.89–0.90 of cuBLAS) (evidence: `results/runs/coop256-h100-2026-11-27`).
  coop256x128s4: { tile: { BM: 256, BN: 128, BK: 64 }, groupM: 8, options: { stages: 4, consumerSchedule: "cooperative" } },
  coop256x128s4qtn: {
    tile: { BM: 256, BN: 128, BK: 64 },
    groupM: 8,
    options: { stages: 4, consumerSchedule: "cooperative", epilogueSplit: 4 },
    notifier: "tma",
  },
  coop128x128s6: { tile: { BM: 128, BN: 128, BK: 64 }, groupM: 8, options: { stages: 6, consumerSchedule: "cooperative" } },
  pp128x128s6: { tile: { BM: 128, BN: 128, BK: 64 }, groupM: 8, options: { stages: 6, consumerSchedule: "pingpong", epilogueSplit: 2 } },
  pp128x128s5e1: {
    tile: { BM: 128, BN: 128, BK: 64 },
    groupM: 8,
    options: { stages: 5, consumerSchedule: "pingpong", epilogueSplit: 1 },
  },
  // BK 32: no half-empty last k-step where K is an odd multiple of 32 (rs_mlp1_w8's 1376).
  coop128x256k32s8pn: {
    tile: { BM: 128, BN: 256, BK: 32 },
    groupM: 8,
    options: { stages: 8, consumerSchedule: "cooperative" },
    notifier: "producer",
  },
  coop128x256s4pn: {
    tile: { BM: 128, BN: 256, BK: 64 },
    groupM: 8,
    options: { stages: 4, consumerSchedule: "cooperative" },
    notifier: "producer",
  },
  coop128x256s4q: {
    tile: { BM: 128, BN: 256, BK: 64 },
    groupM: 8,
    options: { stages: 4, consumerSchedule: "cooperative", epilogueSplit: 4 },
  },
  coop128x256s4qtn: {
    tile: { BM: 128, BN: 256, BK: 64 },
    groupM: 8,
    options: { stages: 4, consumerSchedule: "cooperative", epilogueSplit: 4 },
    notifier: "tma",
  },
  pp128x128s5e1tn: {
    tile: { BM: 128, BN: 128, BK: 64 },
    groupM: 8,
    options: { stages: 5, consumerSchedule: "pingpong", epilogueSplit: 1 },
    notifier: "tma",
  },
  mc128x256s4q: {
    tile: { BM: 128, BN: 256, BK: 64 },
    groupM: 8,
    options: { stages: 4, consumerSchedule: "cooperative", epilogueSplit: 4, clusterM: 2 },
  },
  mc128x256s4qg16: {
    tile: { BM: 128, BN: 256, BK: 64 },
    groupM: 16,
    options: { stages: 4, consumerSchedule: "cooperative", epilogueSplit: 4, clusterM: 2 },
  },
  mc128x256s4qtn: {
    tile: { BM: 128, BN: 256, BK: 64 },
    groupM: 8,
    options: { stages: 4, consumerSchedule: "cooperative", epilogueSplit: 4, clusterM: 2 },
    notifier: "tma",
  },
  mc128x256s4qg16tn: {
    tile: { BM: 128, BN: 256, BK: 64 },
    groupM: 16,
    options: { stages: 4, consumerSchedule: "cooperative", epilogueSplit: 4, clusterM: 2 },
    notifier: "tma",
  },
  mc256x128s4qtn: {
    tile: { BM: 256, BN: 128, BK: 64 },
    groupM: 8,
    options: { stages: 4, consumerSchedule: "cooperative", epilogueSplit: 4, clusterM: 2 },
    notifier: "tma",
  },
  coop128x256k32s8qtn: {
    tile: { BM: 128, BN: 256, BK: 32 },
    groupM: 8,
    options: { stages: 8, consumerSchedule: "cooperative", epilogueSplit: 4 },
    notifier: "tma",
  },
};

/** The cases of `variant` (emitted into `tlx/<name>/` of the bench directory) for one shape. */
export function tlxCase(name: string, v: TlxComputeVariant, s: { M: number; N: number; K: number }, entrySource: string): ComputeCase {
  const dir = `tlx/${name}`;
  const config = variantConfig(v);
  const { args, tiles } = plainLaunch(s, config);
  return {
    label: `tlx ${name}`,
    kind: "plain",
    role: "tlx",
    warpSpecialization: warpSpecializationOf(v),
    file: `${dir}/${entrySource}`,
    entry: "tlx_gemm",
    cubin: `${dir}/tlx_gemm.sm_90a.cubin`,
    metadata: `${dir}/tlx_gemm.sm_90a.json`,
    config,
    // The plain GEMM's arguments and tile count; its constexprs are compiled into the cubin.
    args,
    constexprs: {},
    tiles,
  };
}

/** The TLX backend's knobs of a variant (an operator's `warpSpecialization`). */
export function warpSpecializationOf(v: TlxComputeVariant): WarpSpecialization {
  return {
    consumerSchedule: v.options.consumerSchedule,
    stages: v.options.stages,
    ...(v.options.epilogueSplit === undefined ? {} : { epilogueSplit: v.options.epilogueSplit }),
    ...(v.notifier === undefined ? {} : { notifier: v.notifier }),
    ...(v.options.clusterM === undefined ? {} : { clusterM: v.options.clusterM }),
  };
}

/** The configuration record of a variant (as compute_bench.py reports it). */
function variantConfig(v: TlxComputeVariant): ComputeCase["config"] {
  return {
    body: `tlx-${v.options.consumerSchedule}${(v.options.clusterM ?? 1) > 1 ? "-multicast" : ""}`,
    BM: v.tile.BM,
    BN: v.tile.BN,
    BK: v.tile.BK,
    groupM: v.groupM,
    numWarps: 4,
    numStages: v.options.stages,
  };
}

async function main(argv: readonly string[]): Promise<void> {
  const dir = argv[0];
  if (dir === undefined || dir.startsWith("--")) {
    console.error("usage: tsx scripts/compute-tables/emit-tlx-compute.ts <bench-dir> [--variants NAME,...]");
    process.exit(2);
  }
  const i = argv.indexOf("--variants");
  const names = i < 0 ? Object.keys(TLX_VARIANTS) : (argv[i + 1] ?? "").split(",").filter((x) => x !== "");
  for (const n of names) {
    if (TLX_VARIANTS[n] === undefined) throw new Error(`unknown variant ${n}; known: ${Object.keys(TLX_VARIANTS).join(", ")}`);
  }
  const benchPath = join(dir, "compute.json");
  const bench = JSON.parse(readFileSync(benchPath, "utf8")) as ComputeBenchFile;
  const first = bench.shapes[0];
  if (first === undefined) throw new Error(`${benchPath} has no shapes`);
  const sources: Record<string, string> = {};
  const plainNames = names.filter((n) => TLX_VARIANTS[n]?.notifier === undefined);
  for (const n of plainNames) {
    const v = TLX_VARIANTS[n] as TlxComputeVariant;
    // The manifest's shape only sets the AOT signature (M, N, K multiples of 16); the cases pass their own.
    const r = emitTlxGemm({ M: first.M, N: first.N, K: first.K }, v.tile, { ...v.options, groupM: v.groupM, name: "tlx_gemm" });
    const out = join(dir, "tlx", n);
    mkdirSync(out, { recursive: true });
    for (const f of r.files) writeFileSync(join(out, f.path), f.text);
    writeFileSync(join(out, "manifest.json"), emitManifestJson(r.manifest));
    writeFileSync(join(out, "expect.json"), `${JSON.stringify(r.expect, null, 2)}\n`);
    sources[n] = r.files[0]?.path ?? "";
  }
  const withEmitted = !argv.includes("--no-emitted");
  const shapes = [];
  for (const s of bench.shapes) {
    for (const d of [s.M, s.N, s.K]) if (d % 16 !== 0) throw new Error(`${s.name}: ${d} is not a multiple of 16; the TLX cubins need it`);
    const emitted: ComputeCase[] = [];
    for (const n of withEmitted ? names : []) {
      const v = TLX_VARIANTS[n] as TlxComputeVariant;
      if (v.notifier !== undefined && s.op !== "gemm-rs") continue;
      const op = {
        ...shapeOperator(s),
        name: `${s.name}_tlx_${n}`,
        tile: v.tile,
        groupM: v.groupM,
        warpSpecialization: warpSpecializationOf(v),
      };
      const r = await compile(op, tlxBackend());
      emitted.push({
        ...emittedCase(r, dir, `tlx emitted ${n}`, variantConfig(v), "tlx-emitted", s),
        warpSpecialization: warpSpecializationOf(v),
      });
    }
    shapes.push({
      ...s,
      cases: [
        ...s.cases.filter((c) => c.role !== "tlx" && c.role !== "tlx-emitted"),
        ...plainNames.map((n) => tlxCase(n, TLX_VARIANTS[n] as TlxComputeVariant, s, sources[n] as string)),
        ...emitted,
      ],
    });
  }
  writeFileSync(benchPath, `${JSON.stringify({ ...bench, shapes }, null, 1)}\n`);
  console.error(
    `${names.length} TLX variants${withEmitted ? " (plain and emitted)" : ""} added to ${bench.shapes.length} shapes of ${benchPath}; compile ${dir}/tlx/*/manifest.json${withEmitted ? ` and ${dir}/emitted/*/manifest.json` : ""} next`,
  );
}

await main(process.argv.slice(2));
