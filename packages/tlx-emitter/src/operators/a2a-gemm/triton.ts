// AllToAll + GEMM from a local kernel (AutoOverlap's A2A+GEMM, the expert-parallel shape):
// every rank sends slab j of its send buffer to rank j, and the GEMM over the received rows
// starts on each slab as its chunks land. The shared consumer path (`consumer.ts`): the
// received tensor is what the body's gathered operand reads, every row of it written by the
// plan's copies (the rank's own slab by a local copy), so it starts poisoned.
import type { TileSchedule } from "@ovl/chunk-plan";
import type { EmitResult } from "../../core/result.js";
import { resolveOptions } from "../../core/options.js";
import type { Reference } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import { compileConsumer } from "../../backends/triton/consumer.js";
import type { Operator } from "../../core/operator.js";

/**
 * The send buffer of an AllToAll plan over the rows of its received tensor: the plan must
 * claim `all-to-all` along axis 0 with a `src` (validation proves the claim), and every
 * transfer must read that buffer.
 * @throws {EmitError} `bad-plan` naming what is missing and the template that has it.
 */
export function allToAllSource(op: Operator): string {
  const claim = op.plan.claim;
  const hint = "build it with allToAll({ tensor, axis: 0, mesh, split }) from @ovl/chunk-plan";
  if (claim === undefined || claim.collective !== "all-to-all" || claim.axis !== 0 || claim.src === undefined) {
    const got = claim === undefined ? "claims no collective" : `claims ${claim.collective} along axis ${claim.axis}`;
    throw new EmitError(
      "bad-plan",
      `an a2a-gemm plan must claim an all-to-all of rows with a send buffer; plan "${op.plan.name}" ${got}: ${hint}`,
    );
  }
  const src = claim.src;
  for (const r of op.plan.ranks)
    for (const [s, stream] of r.streams.entries())
      for (const [i, x] of stream.entries()) {
        if (x.kind !== "p2p" && x.kind !== "local-copy") {
          throw new EmitError(
            "bad-plan",
            `rank ${r.rank} stream ${s} op ${i} is a ${x.kind} op; an a2a-gemm plan moves chunks only: ${hint}`,
          );
        }
        if (x.src.tensor !== src) {
          throw new EmitError(
            "bad-plan",
            `rank ${r.rank} stream ${s} op ${i} reads ${x.src.tensor}, not the send buffer ${src}; an AllToAll sends each slab once from its owner: ${hint}`,
          );
        }
      }
  return src;
}

/** The `a2a-gemm` reference at `problem`: inputs `A` (the send buffer `send`) and `B`, output `c`. */
export function a2aReference(
  problem: { readonly M: number; readonly N: number; readonly K: number },
  send: string,
  b: string,
  c: string,
  tolerance: number,
): Reference {
  return { operator: "a2a-gemm", ...problem, inputs: { A: send, B: b }, output: c, tolerance };
}

/**
 * Compile an AllToAll+GEMM operator: rank r receives slab r of every rank's send buffer
 * (`[M, K]`, `world` slabs of `M / world` rows) into its received tensor, slab q holding rank
 * q's, and the body computes `C[M, N] = received @ B` on every rank, each tile waiting on the
 * chunks its rows meet. The manifest's reference is `a2a-gemm` with inputs `A` (the send
 * buffer) and `B`.
 * @throws {EmitError} `bad-plan` for a plan that is not a row AllToAll (see `allToAllSource`),
 *   and as `compileAgGemm` does.
 */
export async function compileA2aGemm(op: Operator, schedule?: TileSchedule): Promise<EmitResult> {
  const { M, N, K } = op.problem;
  const src = allToAllSource(op);
  const dtype = resolveOptions(op.options ?? {}).dtype;
  return compileConsumer(
    op,
    {
      operator: "a2a-gemm",
      title: "AllToAll+GEMM",
      receivedInit: "poison",
      sources: () => [{ name: src, shape: [M, K], dtype, symmetric: true, init: "random" }],
      b: { name: "gemm_b", shape: [K, N], dtype, symmetric: false, init: "random" },
      c: { name: "gemm_c", shape: [M, N], dtype, symmetric: false, init: "poison" },
      reference: (_received, _world, tolerance): Reference => a2aReference({ M, N, K }, src, "gemm_b", "gemm_c", tolerance),
    },
    schedule,
  );
}
