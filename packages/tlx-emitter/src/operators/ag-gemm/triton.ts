// AllGather + GEMM from a local kernel (AutoOverlap §5.2's consumer; TileLink's AG+GEMM):
// the shared consumer path (`consumer.ts`) with B [K, N] and the plain GEMM reference.
import type { TileSchedule } from "@ovl/chunk-plan";
import { agGemmReference } from "../../backends/triton/common.js";
import type { EmitResult } from "../../core/result.js";
import { resolveOptions } from "../../core/options.js";
import { compileConsumer } from "../../backends/triton/consumer.js";
import type { Operator } from "../../core/operator.js";

export { LOCAL_CONSUMER_KIND } from "../../backends/triton/consumer.js";

/**
 * Compile an AllGather+GEMM operator: `op.plan` gathers the rows of the body's gathered
 * operand (any AllGather template or hand-written plan the copy engine can realise), the body
 * computes `C = A @ B` over them.
 * @throws {EmitError} for a plan and body that do not fit together, slots with several
 *   writers, or bad options; {LocalKernelError} for a body that cannot be transformed.
 */
export async function compileAgGemm(op: Operator, schedule?: TileSchedule): Promise<EmitResult> {
  const { M, N, K } = op.problem;
  const dtype = resolveOptions(op.options ?? {}).dtype;
  return compileConsumer(
    op,
    {
      operator: "ag-gemm",
      title: "AllGather+GEMM",
      b: { name: "gemm_b", shape: [K, N], dtype, symmetric: false, init: "random" },
      c: { name: "gemm_c", shape: [M, N], dtype, symmetric: false, init: "poison" },
      reference: (a, world, tolerance) => agGemmReference(a, { M, N, K }, world, tolerance),
    },
    schedule,
  );
}
