// Emits the GPU benchmark suite: for each MLP shape (TileLink Table 4) and world size,
// AllGather+GEMM over a push-swizzled AllGather (copy engine) and GEMM+ReduceScatter over a
// direct ReduceScatter (copy engine and SM pushes), as manifests the runner executes:
//   tsx src/gpu/emit-suite.ts <out-dir> [--shapes MLP-1,MLP-2] [--worlds 2,4] [--splits 1,2] [--tlx]
//   torchrun --nproc_per_node=W -m ovl_runtime run <out-dir>/<case>/manifest.json --baselines
// With --tlx it also emits the TLX AllGather+GEMM cases (copy engine, and the in-kernel
// communication task), each with an expect.json for @ovl/tlx-emitter's
// scripts/tlx-aot-compile.py, which must compile them (fbtriton) before they run.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { allGatherSwizzle, lowerToTileSchedule, planSignals, reduceScatterDirect } from "@ovl/chunk-plan";
import {
  builtinBody,
  compile,
  emitManifestJson,
  emitTlxAgGemm,
  type EmitOptions,
  type EmitResult,
  type TlxEmitResult,
} from "@ovl/tlx-emitter";
import { MLP_SHAPES, type MlpShapeName } from "@ovl/sim";

const TILE = { BM: 128, BN: 256, BK: 64 } as const;

function flag(name: string, fallback: string): string[] {
  const i = process.argv.indexOf(name);
  return (i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback).split(",").filter(Boolean);
}

/** The suite's cases for one shape and world: name → emitted kernels and manifest (TLX cases carry their PTX expectations). */
export async function suiteCases(
  shapeName: MlpShapeName,
  world: number,
  splits: readonly number[],
  tlx = false,
): Promise<Record<string, EmitResult | TlxEmitResult>> {
  const { S, H, I } = MLP_SHAPES[shapeName];
  const n = I / world;
  if (!Number.isInteger(n) || S % world !== 0) throw new Error(`${shapeName} does not shard evenly over ${world} ranks`);
  const tag = `${shapeName.replace("-", "").toLowerCase()}_w${world}`;
  const timing = { warmup: 5, reps: 30, checkRuns: 10 };
  const cases: Record<string, EmitResult | TlxEmitResult> = {};
  for (const split of splits) {
    const ag = planSignals(
      allGatherSwizzle({ tensor: { name: "A", shape: [S, H], dtype: "bf16" }, axis: 0, mesh: [world], split, side: "push" }),
    );
    const schedule = lowerToTileSchedule(
      ag,
      { tensor: "A", problem: { M: S, N: n, K: H }, tile: TILE, persistent: { numSms: 132 }, groupSizeM: 8 },
      { role: "consumer" },
    );
    // Through the one compile path: ovl's built-in TMA body, transformed for this plan.
    cases[`${tag}_ag_gemm_s${split}`] = await compile({
      name: `${tag}_ag_gemm_s${split}`,
      kind: "ag-gemm",
      plan: ag,
      body: builtinBody("gemm_tma_persistent"),
      problem: { M: S, N: n, K: H },
      tile: TILE,
      groupM: 8,
      options: { timing },
    });
    if (tlx) {
      cases[`${tag}_tlx_ag_gemm_s${split}`] = emitTlxAgGemm(ag, schedule, {
        name: `${tag}_tlx_ag_gemm_s${split}`,
        comm: "copy-engine",
        timing,
      });
      // A fourth warp group caps every thread at 128 registers: half-width tiles.
      const narrow = lowerToTileSchedule(
        ag,
        { tensor: "A", problem: { M: S, N: n, K: H }, tile: { ...TILE, BN: 128 }, persistent: { numSms: 132 }, groupSizeM: 8 },
        { role: "consumer" },
      );
      cases[`${tag}_tlx_push_s${split}`] = emitTlxAgGemm(ag, narrow, { name: `${tag}_tlx_push_s${split}`, comm: "comm-task", timing });
    }
  }
  for (const split of splits) {
    const rs = planSignals(
      reduceScatterDirect({
        tensor: { name: "C", shape: [S, H], dtype: "bf16" },
        src: "C_partial",
        axis: 0,
        mesh: [world],
        split,
        afterCompute: true,
      }),
    );
    const rsOp = (name: string, options: EmitOptions) =>
      compile({
        name,
        kind: "gemm-rs",
        plan: rs,
        body: builtinBody("gemm_producer"),
        problem: { M: S, N: H, K: n },
        tile: TILE,
        groupM: 8,
        options,
      });
    const ce = `${tag}_gemm_rs_ce_s${split}`;
    cases[ce] = await rsOp(ce, { backend: "copy-engine", timing });
    // The SM backend moves every m-block itself (the split only changes the copy engine's
    // chunks): once, with 8 and with 16 communication SMs, and with 16 wide programs (8 warps
    // moving 8192 elements a step: more bytes in flight per SM).
    if (split !== splits[0]) continue;
    for (const [suffix, o] of [
      ["sm", { commSms: 8 }],
      ["sm16", { commSms: 16 }],
      ["sm16w", { commSms: 16, commWarps: 8, commBlock: 8192 }],
    ] as const) {
      const name = `${tag}_gemm_rs_${suffix}_s${split}`;
      cases[name] = await rsOp(name, { backend: "sm", ...o, timing });
    }
  }
  return cases;
}

const out = process.argv[2];
if (out === undefined || out.startsWith("--")) {
  console.error("usage: tsx src/gpu/emit-suite.ts <out-dir> [--shapes MLP-1,MLP-2] [--worlds 2,4] [--splits 1,2] [--tlx]");
  process.exit(2);
}
const shapes = flag("--shapes", "MLP-1,MLP-2") as MlpShapeName[];
for (const s of shapes) if (!(s in MLP_SHAPES)) throw new Error(`unknown shape ${s}; choose from ${Object.keys(MLP_SHAPES).join(", ")}`);
const worlds = flag("--worlds", "2").map(Number);
const splits = flag("--splits", "1,2").map(Number);
for (const shape of shapes) {
  for (const world of worlds) {
    for (const [name, result] of Object.entries(await suiteCases(shape, world, splits, process.argv.includes("--tlx")))) {
      const dir = join(out, name);
      mkdirSync(dir, { recursive: true });
      for (const f of result.files) writeFileSync(join(dir, f.path), f.text);
      writeFileSync(join(dir, "manifest.json"), emitManifestJson(result.manifest));
      if ("expect" in result) writeFileSync(join(dir, "expect.json"), `${JSON.stringify(result.expect, null, 2)}\n`);
      console.log(`${dir} (world ${world})`);
    }
  }
}
