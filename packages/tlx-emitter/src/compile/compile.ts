// The backend contract (one value `compile()` takes): a backend realises an operator as
// kernel sources plus a manifest, or says why it cannot. Triton transforms the operator's
// local body; TLX assembles warp-specialised kernels from its own parts.
import { planSignals, validatePlan, type ChunkPlan } from "@ovl/chunk-plan";
import type { EmitResult } from "../core/result.js";
import { compileA2aGemm } from "../operators/a2a-gemm/triton.js";
import { emitTlxAgGemm, type TlxTarget } from "../backends/tlx/gemm.js";
import { EmitError } from "../core/writer/index.js";
import { compileAgAttention } from "../operators/ag-attention/triton.js";
import { compileAgGemm } from "../operators/ag-gemm/triton.js";
import { compileAgGemmSilu } from "../operators/ag-gemm-silu/triton.js";
import { decomposeCollectives, hasCollectives } from "../schedule/decompose.js";
import { collectiveAlternative } from "../schedule/host-ops.js";
import { compileAgGroupedGemm } from "../operators/ag-grouped-gemm/triton.js";
import { compileAgMoe } from "../operators/ag-moe/triton.js";
import { compileMoeRs } from "../operators/moe-rs/triton.js";
import { compileGemmAr, realisableArPlan } from "../operators/gemm-ar/triton.js";
import { compileGemmRs, partialTensor } from "../operators/gemm-rs/triton.js";
import { emitTlxGemmRs } from "../operators/gemm-rs/tlx.js";
import { type Operator, type OperatorInput, type OperatorKind } from "../core/operator.js";
import { operatorSchedule } from "../schedule/operator-schedule.js";
import { planTensor } from "../backends/triton/consumer.js";
import { builtinOf, resolveCompute } from "../compute/tuned.js";
import { DEFAULT_TARGET, type TargetName } from "@ovl/primitives";
import { computeConfigs, lookupComputeConfig } from "../compute/configs.js";

/** Version of the backend contract a backend implements. */
export const BACKEND_SPECIFICATION = "ovl.backend/v1" as const;

/** A way of turning an operator into kernels and a manifest. */
export interface Backend {
  readonly specificationVersion: typeof BACKEND_SPECIFICATION;
  /** Short name (`triton`, `tlx`), as `ovl emit --backend` takes it. */
  readonly name: string;
  /**
   * A backend that delegates: the backend to compile `op` with (tuned by that backend's
   * configuration), decided before the compute configuration is resolved. Absent: this one.
   */
  select?(op: OperatorInput, target: TargetName): Backend;
  /** Why this backend cannot realise `op` (checked before anything is emitted), or undefined. */
  refusal(op: Operator): string | undefined;
  /** The kernel sources and manifest of `op`. Called only when `refusal(op)` is undefined. */
  realise(op: Operator): Promise<EmitResult>;
}

/** How the Triton backend compiles each kind of operator. */
const TRITON_REALISE: Readonly<Record<OperatorKind, (op: Operator) => Promise<EmitResult>>> = {
  "ag-gemm": (op) => compileAgGemm(op),
  "ag-grouped-gemm": (op) => compileAgGroupedGemm(op),
  "ag-moe": (op) => compileAgMoe(op),
  "moe-rs": (op) => compileMoeRs(op),
  "ag-attention": (op) => compileAgAttention(op),
  "a2a-gemm": (op) => compileA2aGemm(op),
  "ag-gemm-silu": (op) => compileAgGemmSilu(op),
  "gemm-rs": (op) => compileGemmRs(op),
  "gemm-ar": (op) => compileGemmAr(op),
};

/** Triton: the operator's local body, transformed (any annotated Triton kernel). */
export const tritonBackend: Backend = {
  specificationVersion: BACKEND_SPECIFICATION,
  name: "triton",
  refusal: () => undefined,
  realise: (op) => TRITON_REALISE[op.kind](op),
};

/** Options of {@link tlxBackend}. */
export interface TlxBackendOptions {
  readonly target?: TlxTarget;
  /** AllGather+GEMM transport: host copies (`copy-engine`, default) or the in-kernel communication task. */
  readonly comm?: "copy-engine" | "comm-task";
}

/**
 * TLX: warp-specialised AllGather+GEMM and GEMM+ReduceScatter on Hopper (a TMA producer
 * warp group, two wgmma consumer warp groups, cooperative or ping-pong, with chunk waits
 * before a tile's loads or tile-done notifies after its stores), assembled from TLX parts.
 * The body must be one of ovl's built-in bodies of the operator's family (the GEMM is the
 * same), since a TLX kernel is not a transformation of a Triton body. The operator's
 * `warpSpecialization` (from the tuned table's TLX entry when it names no tile) picks the
 * consumer schedule and the ring.
 */
export function tlxBackend(options: TlxBackendOptions = {}): Backend {
  return {
    specificationVersion: BACKEND_SPECIFICATION,
    name: "tlx",
    refusal(op) {
      if (op.kind !== "ag-gemm" && op.kind !== "gemm-rs")
        return `the TLX backend builds AllGather+GEMM and GEMM+ReduceScatter only; compile ${op.kind} with the triton backend`;
      if (builtinOf(op) === undefined) {
        return `the TLX backend assembles its own warp-specialised GEMM and cannot transform ${op.body.path}; use the triton backend for a local body`;
      }
      if ((options.target ?? "sm_90a") !== "sm_90a")
        return 'TLX operators are emitted for sm_90a only: use tlxBackend({ target: "sm_90a" }), or the triton backend';
      if (op.kind === "gemm-rs" && options.comm !== undefined)
        return "the comm option is AllGather+GEMM's transport; GEMM+ReduceScatter takes options.backend (copy-engine or sm)";
      return undefined;
    },
    async realise(op) {
      const { backend: transfers, numWarps: _w, numStages: _s, ...rest } = op.options ?? {};
      const ws = op.warpSpecialization;
      const tlxKnobs = {
        ...(ws === undefined ? {} : { consumerSchedule: ws.consumerSchedule }),
        ...(ws?.stages === undefined ? {} : { stages: ws.stages }),
        ...(ws?.epilogueSplit === undefined ? {} : { epilogueSplit: ws.epilogueSplit }),
        ...(ws?.clusterM === undefined ? {} : { clusterM: ws.clusterM }),
      };
      if (ws?.notifier !== undefined && op.kind !== "gemm-rs")
        throw new EmitError("bad-param", `warpSpecialization.notifier applies to gemm-rs; ${op.kind} notifies nothing per tile`);
      if (op.kind === "gemm-rs") {
        const schedule = operatorSchedule(op, partialTensor(op), "producer", true);
        return emitTlxGemmRs(op.plan, schedule, {
          ...rest,
          ...(transfers === undefined ? {} : { backend: transfers }),
          ...tlxKnobs,
          ...(ws?.notifier === undefined ? {} : { notifier: ws.notifier }),
          name: op.name,
        });
      }
      const schedule = operatorSchedule(op, planTensor(op, "AllGather+GEMM"), "consumer", true);
      const r = emitTlxAgGemm(op.plan, schedule, {
        ...rest,
        ...tlxKnobs,
        name: op.name,
        ...(options.comm === undefined ? {} : { comm: options.comm }),
      });
      return { files: r.files, manifest: r.manifest, expect: r.expect };
    },
  };
}

/**
 * The faster measured backend per shape: TLX where the tuned table's entry of the operator's
 * own shape holds a TLX configuration that ran faster than the entry's Triton kernel in the
 * same run (`tlx.ms < ms`), the operator names no tile and the TLX backend can build it (a
 * built-in body of AllGather+GEMM or GEMM+ReduceScatter), except GEMM+ReduceScatter over SM
 * pushes; Triton otherwise. TLX kernels are precompiled: the result's `expect` and
 * scripts/tlx-aot-compile.py make their cubins. The choice is the faster kernel alone, on one
 * GPU; end to end on two H200s the two backends' operators over the copy engine measured within
 * a few percent of each other per MLP shape (packages/bench/results/gpu/h200x2-2026-11-28/),
 * but beside the SM push kernel the TLX GEMM+RS operator ran 3-14% slower than the Triton one
 * at every MLP shape on two and four H200s
 * (packages/bench/results/gpu/deferred-notify-h200-2026-11-28/).
 */
export function fastestBackend(options: TlxBackendOptions = {}): Backend {
  const tlx = tlxBackend(options);
  return {
    specificationVersion: BACKEND_SPECIFICATION,
    name: "fastest",
    select(op, target) {
      if (op.tile !== undefined || (op.kind !== "ag-gemm" && op.kind !== "gemm-rs") || builtinOf(op) === undefined) return tritonBackend;
      if (op.kind === "gemm-rs" && op.options?.backend === "sm") return tritonBackend;
      const table = computeConfigs(target);
      const found =
        table === null ? undefined : lookupComputeConfig(table, { op: op.kind, ...op.problem, dtype: op.options?.dtype ?? "bf16" });
      const e = found?.match === "exact" ? found.entry : undefined;
      return e?.tlx?.ms !== undefined && e.ms !== undefined && e.tlx.ms < e.ms ? tlx : tritonBackend;
    },
    refusal: () => "the fastest backend only selects another backend (compile() asks it through select)",
    realise: () => Promise.reject(new EmitError("unsupported-op", "the fastest backend only selects another backend")),
  };
}

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
  const plan = realisablePlan(op);
  const decomposed = plan === op.plan ? op : { ...op, plan };
  const chosen = backend.select?.(decomposed, options.target ?? DEFAULT_TARGET.name) ?? backend;
  const target = options.target === undefined ? {} : { target: options.target };
  const tuning = chosen === tritonBackend ? target : chosen.name === "tlx" ? { ...target, backend: "tlx" as const } : { table: null };
  const realised = resolveCompute(decomposed, tuning).op;
  const why = chosen.refusal(realised);
  if (why !== undefined) throw new EmitError("unsupported-op", `backend ${chosen.name}: ${why}`);
  return chosen.realise(realised);
}
