// Worked examples of the compile path (what the tests, the AOT check and the runner's CPU
// emulation compile): AllGather+GEMM from the built-in TMA body and from a user's
// tutorial-style matmul, GEMM+ReduceScatter and GEMM+AllReduce (partitioned, copy engine,
// SM pushes and NVSHMEM puts, and tile-wise) from the built-in producer body, AllGather+grouped GEMM (MoE
// experts) from the built-in grouped body, and sequence-parallel attention (KV gathered) from
// the built-in flash-attention body, and AllGather + MoE with its routing computed on the device
// from the built-in gather + grouped GEMM body, and the MLP's AllGather + gate/up GEMM + SiLU-mul.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { allGatherSwizzle, allReducePartitioned, allReduceTilewise, planSignals } from "@ovl/chunk-plan";
import { rsPlan } from "./rs-plan.js";
import type { EmitResult } from "../core/result.js";
import type { ExampleShape } from "./templates.js";
import { compile } from "../compile/compile.js";
import { assetRoot } from "../core/assets.js";
import { builtinBody } from "../core/builtin.js";
import { attentionGemmView } from "../operators/ag-attention/triton.js";
import { gemmSiluMulBody, withSiluMulDefaults } from "../operators/ag-gemm-silu/triton.js";
import type { KernelBody, OperatorInput } from "../core/operator.js";

/** The user-kernel example shipped with the package (`examples/user-kernels/tutorial_matmul.py`). */
export function tutorialMatmulBody(): KernelBody {
  return {
    path: "tutorial_matmul.py",
    source: readFileSync(join(assetRoot(), "examples", "user-kernels", "tutorial_matmul.py"), "utf8"),
  };
}

/**
 * An uneven MoE routing of `mblocks` m-blocks over 4 experts, grouped contiguously: half the
 * m-blocks on expert 0, none on expert 1, the rest split between experts 2 and 3.
 */
export function exampleRouting(mblocks: number): { experts: number; mblockExpert: number[] } {
  return { experts: 4, mblockExpert: Array.from({ length: mblocks }, (_, i) => (2 * i < mblocks ? 0 : 4 * i < 3 * mblocks ? 2 : 3)) };
}

/**
 * Sequence-parallel attention over `S` positions (4 heads on 2 kv heads, causal; head dim 64,
 * or 128 at 128-row tiles) gathering kv with a swizzled AllGather.
 */
function attentionExample(world: number, S: number, split: number, BM: number): OperatorInput {
  const headDim = BM >= 128 ? 128 : 64;
  const attention = { S, heads: 4, kvHeads: 2, headDim, causal: true };
  const view = attentionGemmView(attention);
  const plan = planSignals(
    allGatherSwizzle({ tensor: { name: "kv", shape: [S, view.K], dtype: "bf16" }, axis: 0, mesh: [world], split, side: "push" }),
  );
  const tile = { BM: Math.min(BM, 128), BN: 64, BK: headDim };
  return { name: "local_ag_attention", kind: "ag-attention", plan, body: builtinBody("flash_attention"), problem: view, attention, tile };
}

const DEFAULT: ExampleShape = { world: 2, M: 512, N: 256, K: 128, split: 2 };

/** The compiled examples by name, for `shape` (default: 2 ranks, M=512, N=256, K=128, split 2). */
export async function compiledExamples(shape: ExampleShape = DEFAULT): Promise<Record<string, EmitResult>> {
  const { world, M, N, K, split } = shape;
  const tile = shape.tile ?? { BM: 128, BN: 128, BK: 64 };
  const ag = planSignals(
    allGatherSwizzle({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split, side: "push" }),
  );
  const rs = rsPlan(world, M, N, split);
  const C = { tensor: { name: "C", shape: [M, N], dtype: "bf16" as const }, src: "C_partial", mesh: [world] };
  const arPartitioned = planSignals(
    allReducePartitioned({ ...C, axis: 0, split, reduceScatter: "direct", allGather: "swizzle", afterCompute: true }),
  );
  const arTilewise = planSignals(allReduceTilewise({ ...C, tile: [tile.BM, tile.BN] }));
  const common = { problem: { M, N, K }, tile, groupM: 8 } as const;
  const producer = builtinBody("gemm_producer");
  const anyRows = { split: 1, max: 4 * M };
  return {
    local_ag_tma: await compile({ name: "local_ag_tma", kind: "ag-gemm", plan: ag, body: builtinBody("gemm_tma_persistent"), ...common }),
    local_ag_tutorial: await compile({ name: "local_ag_tutorial", kind: "ag-gemm", plan: ag, body: tutorialMatmulBody(), ...common }),
    local_gemm_rs: await compile({ name: "local_gemm_rs", kind: "gemm-rs", plan: rs, body: producer, ...common }),
    local_gemm_ar_ce: await compile({ name: "local_gemm_ar_ce", kind: "gemm-ar", plan: arPartitioned, body: producer, ...common }),
    local_gemm_ar_sm: await compile({
      name: "local_gemm_ar_sm",
      kind: "gemm-ar",
      plan: arPartitioned,
      body: producer,
      options: { backend: "sm" },
      ...common,
    }),
    // The partitioned GEMM+AllReduce over NVSHMEM: the slab puts, then puts of the reduced slabs.
    local_gemm_ar_nvshmem: await compile({
      name: "local_gemm_ar_nvshmem",
      kind: "gemm-ar",
      plan: arPartitioned,
      body: producer,
      options: { backend: "nvshmem" },
      ...common,
    }),
    local_gemm_ar_tilewise: await compile({ name: "local_gemm_ar_tilewise", kind: "gemm-ar", plan: arTilewise, body: producer, ...common }),
    // One operator for every row count up to 4·M (one chunk per slab: the small shape's slabs hold two m-blocks).
    local_gemm_rs_rows: await compile({ name: "local_gemm_rs_rows", kind: "gemm-rs", plan: rs, body: producer, rows: anyRows, ...common }),
    local_gemm_ar_rows: await compile({
      name: "local_gemm_ar_rows",
      kind: "gemm-ar",
      plan: arPartitioned,
      body: producer,
      rows: anyRows,
      ...common,
    }),
    local_ag_attention: await compile(attentionExample(world, M, split, tile.BM)),
    local_ag_grouped: await compile({
      name: "local_ag_grouped",
      kind: "ag-grouped-gemm",
      plan: ag,
      body: builtinBody("grouped_gemm"),
      groups: exampleRouting(M / tile.BM),
      ...common,
    }),
    local_ag_moe: await compile({
      name: "local_ag_moe",
      kind: "ag-moe",
      plan: ag,
      body: builtinBody("moe_gather_gemm"),
      moe: { experts: 8, topk: 2 },
      ...common,
    }),
    // ag-moe's default body: non-persistent, its block's slots read as one vector of acquire loads.
    local_ag_moe_blocks: await compile({
      name: "local_ag_moe_blocks",
      kind: "ag-moe",
      plan: ag,
      body: builtinBody("moe_gather_gemm_blocks"),
      moe: { experts: 8, topk: 2 },
      ...common,
    }),
    // Two accumulators a tile: its own default configuration, not the GEMMs' tile.
    local_ag_gemm_silu: await compile(
      withSiluMulDefaults({
        name: "local_ag_gemm_silu",
        kind: "ag-gemm-silu",
        plan: ag,
        body: gemmSiluMulBody(),
        problem: { M, N, K },
        groupM: 8,
      }),
    ),
  };
}
