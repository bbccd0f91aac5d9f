// Emits the one-GPU correctness set through compile(): AllGather+GEMM (built-in TMA body and
// a user's tutorial-style matmul), AllToAll+GEMM (built-in TMA body), GEMM+ReduceScatter (built-in producer body, copy engine
// and SM pushes), GEMM+AllReduce (built-in producer body: partitioned with copy-engine and
// SM pushes, and DistFuse's tile-wise one) and, at worlds 2 and 4, AllGather+grouped GEMM
// (built-in MoE body, 8 experts, uneven routing) at one moderate shape for several worlds, as manifests that
// `python -m ovl_runtime run --ranks-on-one-gpu` runs with every rank on one GPU:
//   tsx scripts/compute-tables/emit-onegpu.ts <out-dir> [--worlds 2,4,8] [--shape 4096,2048,1024] [--tlx]
// With --tlx, the TLX backend's AllGather+GEMM and GEMM+ReduceScatter (cooperative and
// ping-pong consumers; GEMM+RS with copy-engine and SM-push deliveries) instead, each with
// its expect.json: compile them with @ovl/tlx-emitter's scripts/tlx-aot-compile.py first.
// The shape is M,N,K of the whole operator (AG+GEMM: C[M,N] = gather(A)[M,K] @ B[K,N];
// GEMM+RS: each rank's A[M,K] @ B[K,N] summed and scattered by rows; GEMM+AR: the same sum,
// all of it on every rank; grouped: C[rows of
// m-block mb] = gather(A)[rows] @ B[expert(mb)], B [8, K, N]).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  allGatherHierarchical,
  allGatherRing,
  allGatherSwizzle,
  allReducePartitioned,
  allReduceTilewise,
  allToAll,
  planSignals,
  reduceScatterDirect,
} from "@ovl/chunk-plan";
import {
  builtinBody,
  compile,
  emitManifestJson,
  tlxBackend,
  tutorialMatmulBody,
  type EmitOptions,
  type EmitResult,
  type KernelBody,
} from "@ovl/tlx-emitter";

const TILE = { BM: 128, BN: 128, BK: 64 } as const;

function flag(name: string, fallback: string): number[] {
  const i = process.argv.indexOf(name);
  return (i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback).split(",").filter(Boolean).map(Number);
}

/**
 * An uneven MoE routing of `world` shards of `blocksPerRank` m-blocks over `experts`: each
 * rank's m-blocks grouped by expert (sorted), the counts uneven and some experts without any.
 */
export function moeRouting(world: number, blocksPerRank: number, experts: number): { experts: number; mblockExpert: number[] } {
  const mblockExpert = Array.from({ length: world }, (_, r) =>
    Array.from({ length: blocksPerRank }, (_, j) => (j * j * 7 + r * 5) % experts).sort((a, b) => a - b),
  ).flat();
  return { experts, mblockExpert };
}

/** Warm-ups, timed repetitions and checked epochs of every one-GPU case (a correctness run). */
const ONE_GPU_TIMING = { warmup: 2, reps: 5, checkRuns: 4 };

/** The AllGather of A's rows every one-GPU AG+GEMM case uses: swizzled pushes, two chunks per rank. */
function agPlan(world: number, M: number, K: number) {
  return planSignals(
    allGatherSwizzle({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split: 2, side: "push" }),
  );
}

/** The direct ReduceScatter of the partial product every one-GPU GEMM+RS case uses: two chunks per rank, after compute. */
function rsPlan(world: number, M: number, N: number) {
  return planSignals(
    reduceScatterDirect({
      tensor: { name: "C", shape: [M, N], dtype: "bf16" },
      src: "C_partial",
      axis: 0,
      mesh: [world],
      split: 2,
      afterCompute: true,
    }),
  );
}

/**
 * The cases of one world, all through compile(): AG+GEMM from ovl's built-in TMA body and
 * from a user's tutorial-style matmul, and — where M splits into whole m-blocks per rank —
 * GEMM+RS from the built-in producer body with copy-engine and SM-push deliveries and, at
 * worlds 2 and 4, AllGather+grouped GEMM from the built-in grouped body.
 */
export async function oneGpuCases(world: number, M: number, N: number, K: number): Promise<Record<string, EmitResult>> {
  const timing = ONE_GPU_TIMING;
  const tag = `w${world}`;
  const cases: Record<string, EmitResult> = {};
  const ag = agPlan(world, M, K);
  const agOp = (name: string, body: KernelBody) =>
    compile({ name, kind: "ag-gemm", plan: ag, body, problem: { M, N, K }, tile: TILE, groupM: 8, options: { timing } });
  cases[`${tag}_ag_gemm`] = await agOp(`${tag}_ag_gemm`, builtinBody("gemm_tma_persistent"));
  cases[`${tag}_ag_tutorial`] = await agOp(`${tag}_ag_tutorial`, tutorialMatmulBody());
  // AllToAll + GEMM (expert-parallel): every rank receives slab r of every rank's send buffer.
  if (M % world === 0) {
    const a2a = planSignals(allToAll({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split: 2 }));
    cases[`${tag}_a2a_gemm`] = await compile({
      name: `${tag}_a2a_gemm`,
      kind: "a2a-gemm",
      plan: a2a,
      body: builtinBody("gemm_tma_persistent"),
      problem: { M, N, K },
      tile: TILE,
      groupM: 8,
      options: { timing },
    });
  }
  // Plans the copy engine realises with waits on another rank's slot (pull ring) and a 2-level mesh.
  const A = { name: "A", shape: [M, K], dtype: "bf16" as const };
  const pull = planSignals(allGatherRing({ tensor: A, axis: 0, mesh: [world], split: 2, side: "pull" }));
  cases[`${tag}_ag_pull_ring`] = await compile({
    name: `${tag}_ag_pull_ring`,
    kind: "ag-gemm",
    plan: pull,
    body: builtinBody("gemm_tma_persistent"),
    problem: { M, N, K },
    tile: TILE,
    groupM: 8,
    options: { timing },
  });
  if (world % 2 === 0 && world >= 4) {
    const hier = planSignals(allGatherHierarchical({ tensor: A, axis: 0, mesh: [2, world / 2], split: 2 }));
    cases[`${tag}_ag_hierarchical`] = await compile({
      name: `${tag}_ag_hierarchical`,
      kind: "ag-gemm",
      plan: hier,
      body: builtinBody("gemm_tma_persistent"),
      problem: { M, N, K },
      tile: TILE,
      groupM: 8,
      options: { timing },
    });
  }
  if ((world === 2 || world === 4) && M % world === 0 && (M / world) % TILE.BM === 0) {
    const name = `${tag}_ag_grouped`;
    const groups = moeRouting(world, M / world / TILE.BM, 8);
    cases[name] = await compile({
      name,
      kind: "ag-grouped-gemm",
      plan: ag,
      body: builtinBody("grouped_gemm"),
      problem: { M, N, K },
      tile: TILE,
      groups,
      options: { timing },
    });
  }
  if (M % world === 0 && (M / world) % TILE.BM === 0) {
    const rs = rsPlan(world, M, N);
    const rsOp = (name: string, options: EmitOptions) =>
      compile({
        name,
        kind: "gemm-rs",
        plan: rs,
        body: builtinBody("gemm_producer"),
        problem: { M, N, K },
        tile: TILE,
        groupM: 8,
        options: { ...options, timing },
      });
    cases[`${tag}_gemm_rs_ce`] = await rsOp(`${tag}_gemm_rs_ce`, { backend: "copy-engine" });
    cases[`${tag}_gemm_rs_sm`] = await rsOp(`${tag}_gemm_rs_sm`, { backend: "sm", commSms: 8 });
  }
  Object.assign(cases, await gemmArCases(world, M, N, K, timing));
  return cases;
}

/**
 * GEMM+AllReduce from the built-in producer body: the partitioned AllReduce (direct
 * ReduceScatter after compute, then the reduced slabs gathered by copy-engine or SM pushes)
 * where M splits into whole m-blocks per rank, and the tile-wise one (per-tile flags, tiles
 * pushed to their rows' owner, reduced there and stored into every rank's output) at any M.
 */
export async function gemmArCases(
  world: number,
  M: number,
  N: number,
  K: number,
  timing: { warmup: number; reps: number; checkRuns: number },
): Promise<Record<string, EmitResult>> {
  const tag = `w${world}`;
  const cases: Record<string, EmitResult> = {};
  const C = { tensor: { name: "C", shape: [M, N], dtype: "bf16" as const }, src: "C_partial", mesh: [world] };
  const arOp = (name: string, plan: ReturnType<typeof planSignals>, options: EmitOptions) =>
    compile({
      name,
      kind: "gemm-ar",
      plan,
      body: builtinBody("gemm_producer"),
      problem: { M, N, K },
      tile: TILE,
      groupM: 8,
      options: { ...options, timing },
    });
  if (M % world === 0 && (M / world) % TILE.BM === 0) {
    const part = planSignals(
      allReducePartitioned({ ...C, axis: 0, split: 2, reduceScatter: "direct", allGather: "swizzle", afterCompute: true }),
    );
    cases[`${tag}_gemm_ar_ce`] = await arOp(`${tag}_gemm_ar_ce`, part, { backend: "copy-engine" });
    cases[`${tag}_gemm_ar_sm`] = await arOp(`${tag}_gemm_ar_sm`, part, { backend: "sm", commSms: 8 });
  }
  const tiles = planSignals(allReduceTilewise({ ...C, tile: [TILE.BM, TILE.BN] }));
  cases[`${tag}_gemm_ar_tilewise`] = await arOp(`${tag}_gemm_ar_tilewise`, tiles, { backend: "sm", commSms: 8 });
  return cases;
}

/**
 * The TLX backend's cases of one world: AllGather+GEMM (swizzled push plan, split 2) and
 * GEMM+RS (direct, split 2; copy engine and SM pushes; tile-done notifies from the consumers,
 * from the producer warp group and by TMA reduce-add, the cooperative ones then with four epilogue stores), each with cooperative (128×256×64
 * and 256×128×64, 4 stages, two epilogue stores; and 128×256×64 in 2×1 clusters sharing B by multicast, `mc`) and
 * ping-pong (128×128×64, 5 stages, two epilogue stores) consumers.
 */
export async function tlxOneGpuCases(world: number, M: number, N: number, K: number): Promise<Record<string, EmitResult>> {
  const timing = ONE_GPU_TIMING;
  const tag = `w${world}`;
  const cases: Record<string, EmitResult> = {};
  const consumers = {
    coop: { tile: { BM: 128, BN: 256, BK: 64 }, ws: { consumerSchedule: "cooperative" as const, stages: 4 } },
    pp: { tile: { BM: 128, BN: 128, BK: 64 }, ws: { consumerSchedule: "pingpong" as const, stages: 5, epilogueSplit: 2 } },
    coop256: { tile: { BM: 256, BN: 128, BK: 64 }, ws: { consumerSchedule: "cooperative" as const, stages: 4 } },
    // 2×1 clusters sharing B blocks by TMA multicast.
    mc: { tile: { BM: 128, BN: 256, BK: 64 }, ws: { consumerSchedule: "cooperative" as const, stages: 4, clusterM: 2 } },
  };
  const ag = agPlan(world, M, K);
  const rs = rsPlan(world, M, N);
  for (const [c, { tile, ws }] of Object.entries(consumers)) {
    const base = { problem: { M, N, K }, tile, groupM: 8, warpSpecialization: ws };
    const agName = `${tag}_tlx_ag_gemm_${c}`;
    cases[agName] = await compile(
      { ...base, name: agName, kind: "ag-gemm", plan: ag, body: builtinBody("gemm_tma_persistent"), options: { timing } },
      tlxBackend(),
    );
    if (M % world !== 0 || (M / world) % tile.BM !== 0) continue;
    for (const [b, options] of [
      ["ce", { backend: "copy-engine" }],
      ["sm", { backend: "sm", commSms: 8 }],
    ] as const) {
      // Tile-done notifies from the consumers (default), from the producer warp group (`pn`) and by TMA
      // reduce-add (`tn`; the cooperative consumers with four quarter-width epilogue stores).
      for (const notifier of ["consumers", "producer", "tma"] as const) {
        if (notifier === "producer" && c === "mc") continue; // counts tiles per program: refused with clusters
        const name = `${tag}_tlx_gemm_rs_${c}_${b}${{ consumers: "", producer: "_pn", tma: "_tn" }[notifier]}`;
        const split = notifier === "tma" && c !== "pp" ? { epilogueSplit: 4 } : {};
        cases[name] = await compile(
          {
            ...base,
            name,
            kind: "gemm-rs",
            plan: rs,
            body: builtinBody("gemm_producer"),
            warpSpecialization: { ...ws, ...split, notifier },
            options: { ...options, timing },
          },
          tlxBackend(),
        );
      }
    }
  }
  return cases;
}

const out = process.argv[2];
if (out === undefined || out.startsWith("--")) {
  console.error("usage: tsx scripts/compute-tables/emit-onegpu.ts <out-dir> [--worlds 2,4,8] [--shape M,N,K] [--tlx]");
  process.exit(2);
}
const [M = 4096, N = 2048, K = 1024] = flag("--shape", "4096,2048,1024");
const tlx = process.argv.includes("--tlx");
for (const world of flag("--worlds", "2,4,8")) {
  const cases = tlx ? await tlxOneGpuCases(world, M, N, K) : await oneGpuCases(world, M, N, K);
  for (const [name, result] of Object.entries(cases)) {
    const dir = join(out, name);
    mkdirSync(dir, { recursive: true });
    for (const f of result.files) writeFileSync(join(dir, f.path), f.text);
    writeFileSync(join(dir, "manifest.json"), emitManifestJson(result.manifest));
    if (result.expect !== undefined) writeFileSync(join(dir, "expect.json"), `${JSON.stringify(result.expect, null, 2)}\n`);
    console.log(`${dir} (world ${world})`);
  }
}
