// AllGather + GEMM from a local kernel (AutoOverlap §5.2's consumer; TileLink's AG+GEMM):
// the shared consumer path (`consumer.ts`) with B [K, N] and the plain GEMM reference, or, for
// fp8e4m3 operands, Bt [N, K], the two scales and a bf16 C (`fp8.ts`).
import type { TileSchedule } from "@ovl/chunk-plan";
import { agGemmReference } from "../../backends/triton/common.js";
import type { EmitResult } from "../../core/result.js";
import { resolveOptions } from "../../core/options.js";
import { compileConsumer, type ConsumerSpec } from "../../backends/triton/consumer.js";
import type { Operator } from "../../core/operator.js";
import { isFp8 } from "../../core/dtype.js";
import { checkFp8, FP8_B_BUFFER, FP8_TEMPLATE_PARAMS, fp8Buffers, SCALE_A, SCALE_B, scaleBindings } from "./fp8.js";

export { LOCAL_CONSUMER_KIND } from "../../backends/triton/consumer.js";

/**
 * Compile an AllGather+GEMM operator: `op.plan` gathers the rows of the body's gathered
 * operand (any AllGather template or hand-written plan the copy engine can realise), the body
 * computes `C = A @ B` over them (fp8e4m3: `C = (A @ B) · scale_a · scale_b`, in bf16).
 * @throws {EmitError} for a plan and body that do not fit together, slots with several
 *   writers, or bad options; {LocalKernelError} for a body that cannot be transformed.
 */
export async function compileAgGemm(op: Operator, schedule?: TileSchedule): Promise<EmitResult> {
  const { M, N, K } = op.problem;
  const dtype = resolveOptions(op.options ?? {}).dtype;
  const base = { operator: "ag-gemm", title: "AllGather+GEMM" } as const;
  if (isFp8(dtype)) {
    checkFp8(op);
    const { b, c, scales } = fp8Buffers({ M, N, K }, dtype);
    const spec: ConsumerSpec = {
      ...base,
      b,
      c,
      inputs: scales,
      byName: scaleBindings(),
      params: FP8_TEMPLATE_PARAMS,
      reference: (a, world, tolerance) =>
        agGemmReference(a, { M, N, K }, world, tolerance, { B: FP8_B_BUFFER, scale_a: SCALE_A, scale_b: SCALE_B }),
    };
    return compileConsumer(op, spec, schedule);
  }
  return compileConsumer(
    op,
    {
      ...base,
      b: { name: "gemm_b", shape: [K, N], dtype, symmetric: false, init: "random" },
      c: { name: "gemm_c", shape: [M, N], dtype, symmetric: false, init: "poison" },
      reference: (a, world, tolerance) => agGemmReference(a, { M, N, K }, world, tolerance),
    },
    schedule,
  );
}
