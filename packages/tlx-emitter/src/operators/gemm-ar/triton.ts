// GEMM + AllReduce from a local kernel: the producer body (as for GEMM+RS) and an all-reduce
// plan of its output, realised either partitioned (the GEMM+RS stages, `ar-reduce`, then an
// AllGather of the reduced rows) or tile-wise (DistFuse: per-tile flags, pushes to the tile's
// owner, reduction there and a broadcast of the sum), as the plan says.
import { planSignals, type ChunkPlan } from "@ovl/chunk-plan";
import type { EmitResult } from "../../core/result.js";
import { allReduceForm } from "./movements.js";
import { emitGemmArPartitioned } from "./partitioned.js";
import { emitGemmArTilewise } from "./tilewise.js";
import { parseLocalKernel } from "../../local/index.js";
import { EmitError } from "../../core/writer/index.js";
import { decomposeCollectives, hasCollectives } from "../../schedule/decompose.js";
import { producerKernel } from "../gemm-rs/triton.js";
import { DEFAULT_GROUP_M, type Operator } from "../../core/operator.js";
import { operatorSchedule } from "../../schedule/operator-schedule.js";

/**
 * Compile a GEMM+AllReduce operator: `op.plan` is an all-reduce of the body's output after
 * compute — `allReducePartitioned({ reduceScatter: "direct", allGather: "swizzle",
 * afterCompute: true })` (or any plan whose ReduceScatter half is direct and whose AllGather
 * half sends each slab from its owner), or `allReduceTilewise({ tile })` (all-reduce
 * collectives per region) — and the body computes each rank's partial `A @ B`. Every rank
 * ends with the full sum, `ar_out` `[M, N]`.
 * @throws {EmitError} for a body that is not a producer, a plan neither realisation takes
 *   (each refusal names the nearest plan that works), or what the emitters refuse;
 *   {LocalKernelError} for a body that cannot be transformed.
 */
export async function compileGemmAr(op: Operator): Promise<EmitResult> {
  const kernel = await parseLocalKernel(op.body.source, op.body.path, op.body.entry);
  if (kernel.role !== "producer") {
    throw new EmitError(
      "bad-param",
      `${op.body.path}: GEMM+AllReduce needs a producer body (# ovl: producer scatter=<param>); ${kernel.entry} is a ${kernel.role}`,
    );
  }
  const form = allReduceForm(op.plan, op.problem.M, op.problem.N);
  const options = { ...op.options, name: op.name };
  const factory = (ctx: Parameters<typeof producerKernel>[2]) => producerKernel(op, kernel, ctx);
  if (form.kind === "tilewise") {
    const gemm = { src: form.src, problem: op.problem, tile: op.tile, groupM: op.groupM ?? DEFAULT_GROUP_M };
    return emitGemmArTilewise(op.plan, gemm, options, factory);
  }
  const reduceScatter = planSignals(form.reduceScatter);
  const schedule = operatorSchedule({ ...op, plan: reduceScatter }, form.src, "producer", kernel.persistent);
  return emitGemmArPartitioned(reduceScatter, schedule, form.gathers, options, factory);
}

/**
 * A GEMM+AllReduce plan as `compile()` hands it on: all-reduce collectives stay (the
 * tile-wise realisation reads them); otherwise reduce-scatter and all-gather collectives
 * are decomposed into the direct ReduceScatter after compute and the pushes of an
 * AllGather (`decomposeCollectives`), which the partitioned realisation takes.
 */
export function realisableArPlan(plan: ChunkPlan): ChunkPlan {
  if (!hasCollectives(plan)) return plan;
  const allReduce = plan.ranks.some((r) =>
    r.streams.some((ops) => ops.some((x) => x.kind === "collective" && x.collective === "all-reduce")),
  );
  return allReduce ? plan : planSignals(decomposeCollectives(plan, { afterCompute: true }));
}
