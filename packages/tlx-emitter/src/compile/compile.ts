// compile(): the one entry the CLI, the tuner, the bench and users call. The plan is
// validated and its collectives decomposed, the backend chosen, the compute configuration
// resolved once (tuned table or default) and the operator realised by its registry entry.
import { planSignals, validatePlan, type ChunkPlan } from "@ovl/chunk-plan";
import { DEFAULT_TARGET, type TargetName } from "@ovl/primitives";
import type { Backend } from "../core/backend.js";
import type { Operator, OperatorInput } from "../core/operator.js";
import type { EmitResult } from "../core/result.js";
import { EmitError } from "../core/writer/index.js";
import { resolveCompute, type ComputeChoice } from "../compute/tuned.js";
import { decomposeCollectives, hasCollectives } from "../schedule/decompose.js";
import { collectiveAlternative } from "../schedule/host-ops.js";
import { realisableArPlan } from "../operators/gemm-ar/triton.js";
import { tritonBackend } from "./backends.js";
import { dtypeRefusal } from "../core/dtype.js";
import { operatorDefinition } from "../operators/index.js";
import { fp8Input } from "../operators/ag-gemm/fp8.js";

/**
 * `op`'s plan with its collective ops decomposed into P2P transfers (`decomposeCollectives`;
 * a ReduceScatter of a GEMM+RS operator waits on compute, as the deliveries need), signals
 * allocated anew; the plan itself when it has none.
 * @throws {EmitError} `unsupported-op` for a collective this operator cannot realise (a
 *   reduction under AllGather+GEMM, an all-reduce), naming the nearest plan that works.
 */
export function realisablePlan(op: OperatorInput): ChunkPlan {
  if (op.kind === "gemm-ar") return realisableArPlan(op.plan);
  if (!hasCollectives(op.plan)) return op.plan;
  for (const r of op.plan.ranks) {
    r.streams.forEach((ops, s) =>
      ops.forEach((x, i) => {
        if (x.kind !== "collective") return;
        const gathers = op.kind !== "gemm-rs";
        if (x.collective !== (gathers ? "all-gather" : "reduce-scatter")) {
          throw new EmitError(
            "unsupported-op",
            `rank ${r.rank} stream ${s} op ${i} is a ${x.collective} collective in a ${op.kind} operator, which ${gathers ? "gathers its operand" : "reduce-scatters its output"}; ${collectiveAlternative(x.collective)}`,
          );
        }
      }),
    );
  }
  const plan = planSignals(decomposeCollectives(op.plan, { afterCompute: op.kind === "gemm-rs" }));
  const report = validatePlan(plan);
  if (!report.ok) {
    const first = report.errors
      .slice(0, 3)
      .map((e) => `${e.code}: ${e.message}`)
      .join("; ");
    throw new EmitError(
      "bad-plan",
      `plan "${op.plan.name}" with its collectives decomposed into P2P transfers does not validate: ${first}`,
    );
  }
  return plan;
}

/** Options of {@link compile}. */
export interface CompileOptions {
  /** Target whose tuned table decides the compute configuration of an operator without a tile (default: the default target). */
  readonly target?: TargetName;
}

/**
 * Compile `op` with `backend` (default Triton): the plan is validated first (exactly-once
 * writes, resolvable dependencies, no deadlock, the claimed collective), its collective ops
 * decomposed into the P2P transfers they stand for, then the backend realises it (a backend
 * that selects another, `fastestBackend`, hands over first). An operator without a `tile`
 * takes the tuned configuration of its shape for the backend that realises it
 * (`resolveCompute`: the entry's own for Triton, its `tlx` one for TLX; other backends get
 * the default tile); an explicit tile wins. `options.target` picks
 * whose table that is (default: the default target; a target without its own table borrows
 * one of the same architecture and SM count, see `computeConfigs`).
 * @throws {EmitError} `bad-plan` with the validator's findings for a plan that does not
 *   validate, `unsupported-op` with the backend's reason for an operator it cannot realise.
 */
export async function compile(op: OperatorInput, backend: Backend = tritonBackend, options: CompileOptions = {}): Promise<EmitResult> {
  return (await compileOperator(op, backend, options)).result;
}

/** What {@link compileOperator} decided and emitted. */
export interface CompiledOperator {
  /** The kernel sources and manifest. */
  readonly result: EmitResult;
  /** The operator as realised: its plan's collectives decomposed, its tile, grouping, warps, stages and body decided. */
  readonly operator: Operator;
  /** How its compute configuration was decided: named by the operator, the tuned table's entry, or the default. */
  readonly compute: ComputeChoice;
  /** The backend that realised it (the one `fastestBackend` selected, say). */
  readonly backend: Backend;
}

/**
 * {@link compile}, also saying how: the operator as realised, how its compute configuration
 * was decided (the one place it is resolved: callers that report the configuration read it
 * here rather than resolving it again) and the backend that realised it.
 * @throws {EmitError} as {@link compile}.
 */
export async function compileOperator(
  op: OperatorInput,
  backend: Backend = tritonBackend,
  options: CompileOptions = {},
): Promise<CompiledOperator> {
  const report = validatePlan(op.plan);
  if (!report.ok) {
    const first = report.errors
      .slice(0, 3)
      .map((e) => `${e.code}: ${e.message}`)
      .join("; ");
    throw new EmitError(
      "bad-plan",
      `plan "${op.plan.name}" does not validate (${report.errors.length} finding${report.errors.length === 1 ? "" : "s"}): ${first}`,
    );
  }
  // fp8e4m3 is AllGather+GEMM's alone; there a built-in body is swapped for the fp8 one.
  const refused = dtypeRefusal(op.kind, op.options?.dtype ?? "bf16");
  if (refused !== undefined) throw new EmitError("unsupported-op", refused);
  const input = op.kind === "ag-gemm" ? fp8Input(op, operatorDefinition(op.kind).compute.bodies ?? []) : op;
  const plan = realisablePlan(input);
  const decomposed = plan === input.plan ? input : { ...input, plan };
  const chosen = backend.select?.(decomposed, options.target ?? DEFAULT_TARGET.name) ?? backend;
  const target = options.target === undefined ? {} : { target: options.target };
  const tuning = chosen === tritonBackend ? target : chosen.name === "tlx" ? { ...target, backend: "tlx" as const } : { table: null };
  const { op: realised, choice } = resolveCompute(decomposed, tuning);
  const why = chosen.refusal(realised);
  if (why !== undefined) throw new EmitError("unsupported-op", `backend ${chosen.name}: ${why}`);
  return { result: await chosen.realise(realised), operator: realised, compute: choice, backend: chosen };
}
