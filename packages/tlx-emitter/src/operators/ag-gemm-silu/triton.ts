// AllGather + gate/up GEMM + SiLU-and-multiply (an MLP's first half, TileLink's AG+GEMM with
// the activation fused into the epilogue): the shared consumer path (`consumer.ts`) with
// W [K, 2N] laid out as [gate | up] and Y [M, N] = silu(A @ W[:, :N]) * (A @ W[:, N:]).
import type { TileSchedule } from "@ovl/chunk-plan";
import { agGemmReference } from "../../backends/triton/common.js";
import type { EmitResult } from "../../core/result.js";
import { resolveOptions } from "../../core/options.js";
import { compileConsumer } from "../../backends/triton/consumer.js";
import { builtinBody } from "../../core/builtin.js";
import type { KernelBody, Operator, OperatorInput } from "../../core/operator.js";

/** File name of the built-in gate/up GEMM + SiLU-mul body in the package's `kernels/`. */
export const GEMM_SILU_MUL_BODY = "gemm_silu_mul.py";

/**
 * The compute configuration an ag-gemm-silu operator gets when it names no tile (the tuned
 * tables hold GEMMs only): two 128×128 fp32 accumulators per tile (128 registers a thread at 8
 * warps) and three stages of A plus both W tiles (48 KiB each) in shared memory.
 */
export const GEMM_SILU_MUL_DEFAULT = { tile: { BM: 128, BN: 128, BK: 64 }, numWarps: 8, numStages: 3 } as const;

/** `op` with ag-gemm-silu's default compute configuration where it names none (an explicit tile keeps the operator as written). */
export function withSiluMulDefaults(op: OperatorInput): OperatorInput {
  if (op.tile !== undefined) return op;
  const o = op.options ?? {};
  return {
    ...op,
    tile: { ...GEMM_SILU_MUL_DEFAULT.tile },
    options: { ...o, numWarps: o.numWarps ?? GEMM_SILU_MUL_DEFAULT.numWarps, numStages: o.numStages ?? GEMM_SILU_MUL_DEFAULT.numStages },
  };
}

/**
 * The built-in gate/up GEMM + SiLU-mul body (`kernels/gemm_silu_mul.py`): a persistent TMA
 * GEMM whose tiles compute the gate and up accumulators of the same n-tile, W being [K, 2N].
 */
export function gemmSiluMulBody(): KernelBody {
  return builtinBody("gemm_silu_mul");
}

/**
 * Compile an AllGather + gate/up GEMM + SiLU-mul operator: `op.plan` gathers A's rows, the
 * body (built-in `gemm_silu_mul`, or any consumer body with the same parameters) computes
 * `Y = silu(A @ W_gate) * (A @ W_up)`. `op.problem` is `{ M, N: intermediate I, K: hidden }`;
 * the weight buffer `gemm_b` is `[K, 2N]`, the output `gemm_c` `[M, N]`.
 * @throws {EmitError} for a plan and body that do not fit together or bad options;
 *   {LocalKernelError} for a body that cannot be transformed.
 */
export async function compileAgGemmSilu(op: Operator, schedule?: TileSchedule): Promise<EmitResult> {
  const { M, N, K } = op.problem;
  const dtype = resolveOptions(op.options ?? {}).dtype;
  return compileConsumer(
    op,
    {
      operator: "ag-gemm-silu",
      title: "AllGather+GEMM+SiLU-mul",
      b: { name: "gemm_b", shape: [K, 2 * N], dtype, symmetric: false, init: "random" },
      c: { name: "gemm_c", shape: [M, N], dtype, symmetric: false, init: "poison" },
      reference: (a, world, tolerance) => ({ ...agGemmReference(a, { M, N, K }, world, tolerance), operator: "ag-gemm-silu" }),
    },
    schedule,
  );
}
