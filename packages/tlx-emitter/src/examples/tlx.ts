// Worked TLX examples (used by the tests, the AOT check and the GPU runs): the plain TLX
// GEMM (cooperative and ping-pong consumers), AllGather+GEMM over a push-swizzled AllGather
// with copy-engine transfers (variant a) and with the in-kernel communication task
// (variant b), GEMM+ReduceScatter (cooperative with copy-engine deliveries, ping-pong with
// SM pushes), each of the three also in 2×1 clusters sharing B by multicast; and the sm_100a
// GEMM (compiled ahead of time only).
import { allGatherSwizzle, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import { rsPlan } from "./rs-plan.js";
import type { ExampleShape } from "./templates.js";
import { emitTlxGemm, type TlxEmitResult } from "../backends/tlx/gemm.js";
import { emitTlxAgGemm } from "../operators/ag-gemm/tlx.js";
import { emitTlxGemmRs } from "../operators/gemm-rs/tlx.js";

/** Problem sizes of the TLX examples: those of the plain examples (default tile 128 × 256 × 64 here, the H200 configuration). */
export type TlxExampleShape = ExampleShape;

const DEFAULT: TlxExampleShape = { world: 2, M: 1024, N: 512, K: 256, split: 2 };

/** The TLX example manifests by name (default: 2 ranks, M=1024, N=512, K=256, split 2). */
export function tlxExamples(shape: TlxExampleShape = DEFAULT): Record<string, TlxEmitResult> {
  const { world, M, N, K, split } = shape;
  const tile = shape.tile ?? { BM: 128, BN: 256, BK: 64 };
  const a = { name: "A", shape: [M, K], dtype: "bf16" as const };
  const plan = planSignals(allGatherSwizzle({ tensor: a, axis: 0, mesh: [world], split, side: "push" }));
  const schedule = lowerToTileSchedule(
    plan,
    { tensor: "A", problem: { M, N, K }, tile, persistent: { numSms: 132 }, groupSizeM: 8 },
    { role: "consumer" },
  );
  const narrow = lowerToTileSchedule(
    plan,
    { tensor: "A", problem: { M, N, K }, tile: { ...tile, BN: Math.min(tile.BN, 128) }, persistent: { numSms: 132 }, groupSizeM: 8 },
    { role: "consumer" },
  );
  // GEMM+RS: the partial product's rows reduce-scattered after compute, chunks of split m-block runs.
  const rs = rsPlan(world, M, N, split);
  const rsSchedule = (t: { BM: number; BN: number; BK: number }) =>
    lowerToTileSchedule(
      rs,
      { tensor: "C_partial", problem: { M, N, K }, tile: t, persistent: { numSms: 132 }, groupSizeM: 8 },
      { role: "producer" },
    );
  const pingpongTile = { ...tile, BN: Math.min(tile.BN, 128) };
  const pingpong = { consumerSchedule: "pingpong", stages: 5, epilogueSplit: 2 } as const;
  const multicast = { clusterM: 2, epilogueSplit: 4, groupM: 16 } as const;
  return {
    tlx_gemm: emitTlxGemm({ M, N, K }, tile, { name: "tlx_gemm" }),
    // Ping-pong consumers hold a whole tile each: at most 128 fp32 accumulator registers a thread.
    tlx_gemm_pingpong: emitTlxGemm({ M, N, K }, pingpongTile, { name: "tlx_gemm_pingpong", ...pingpong }),
    tlx_ag_gemm: emitTlxAgGemm(plan, schedule, { name: "tlx_ag_gemm", comm: "copy-engine" }),
    // A fourth warp group caps every thread at 128 registers when ptxas compiles: half-width tiles.
    tlx_ag_gemm_push: emitTlxAgGemm(plan, narrow, { name: "tlx_ag_gemm_push", comm: "comm-task" }),
    tlx_gemm_rs: emitTlxGemmRs(rs, rsSchedule(tile), { name: "tlx_gemm_rs" }),
    tlx_gemm_rs_pingpong_sm: emitTlxGemmRs(rs, rsSchedule(pingpongTile), {
      name: "tlx_gemm_rs_pingpong_sm",
      backend: "sm",
      commSms: 8,
      ...pingpong,
    }),
    // The tile-done notifies from the producer warp group (cooperative consumers, SM pushes: gpu scope).
    tlx_gemm_rs_pn_sm: emitTlxGemmRs(rs, rsSchedule(tile), { name: "tlx_gemm_rs_pn_sm", backend: "sm", commSms: 8, notifier: "producer" }),
    // The tile-done notifies by TMA reduce-add, the cooperative consumers' epilogue in four quarter slices (copy engine).
    tlx_gemm_rs_tn: emitTlxGemmRs(rs, rsSchedule(tile), { name: "tlx_gemm_rs_tn", notifier: "tma", epilogueSplit: 4 }),
    // 2×1 clusters: CTA pairs take two m-blocks of one n-block and share its B blocks by TMA multicast.
    tlx_gemm_multicast: emitTlxGemm({ M, N, K }, tile, { name: "tlx_gemm_multicast", ...multicast }),
    tlx_ag_gemm_multicast: emitTlxAgGemm(plan, schedule, { name: "tlx_ag_gemm_multicast", comm: "copy-engine", ...multicast }),
    tlx_gemm_rs_multicast_tn: emitTlxGemmRs(rs, rsSchedule(tile), { name: "tlx_gemm_rs_multicast_tn", notifier: "tma", ...multicast }),
  };
}

/**
 * The sm_100a GEMM examples (compiled ahead of time, not run): `tlx_gemm_sm100` (persistent
 * grouped tiles) and `tlx_gemm_sm100_clc` (tiles by cluster launch control), 128 × 256 × 64
 * tiles, 4 stages, 2 TMEM accumulators (default problem: M=1024, N=512, K=256).
 */
export function tlxBlackwellExamples(
  problem: { readonly M: number; readonly N: number; readonly K: number } = { M: 1024, N: 512, K: 256 },
): Record<string, TlxEmitResult> {
  const tile = { BM: 128, BN: 256, BK: 64 };
  return {
    tlx_gemm_sm100: emitTlxGemm(problem, tile, { name: "tlx_gemm_sm100", target: "sm_100a" }),
    tlx_gemm_sm100_clc: emitTlxGemm(problem, tile, { name: "tlx_gemm_sm100_clc", target: "sm_100a", scheduler: "clc" }),
  };
}
