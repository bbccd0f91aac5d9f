// Predictions past one node: AllGather+GEMM, GEMM+ReduceScatter, the MLP layer and the MoE
// layer on multi-node models, overlapped (the best two-level plan the tuner ranks) against not
// overlapped (the GEMM, then the NCCL-like collective on the same two-level fabric).
import { DTYPE_BYTES } from "@ovl/chunk-plan";
import { MOE_SHAPES, MLP_SHAPES, type MlpShapeName, type MoeShapeName } from "../shapes.js";
import type { HardwareModel } from "../simulate/hardware.js";
import { resolveHardware } from "../simulate/registry.js";
import { fabricCollective } from "../simulate/collective-fabric.js";
import { SimulateError } from "../simulate/errors.js";
import { simulatorCost } from "../tune/cost.js";
import { HOPPER_SHARED_BYTES } from "../tune/memory.js";
import { TUNE_PLANS, type TuneSpace } from "../tune/space.js";
import { rankCandidates, type RankedCandidate } from "../tune/tune.js";
import { predictAgMoe } from "../operators/moe.js";
import { predictMoeRs } from "../operators/moe-rs.js";
import type { CommBackend } from "../simulate/comm.js";

/** One predicted case (ms; the slowest rank). */
export interface MultiNodeRow {
  /** The hardware model, e.g. `H200_SXM_2x8`. */
  readonly hardware: string;
  readonly nodes: number;
  readonly gpusPerNode: number;
  readonly world: number;
  /** `ag-gemm`, `gemm-rs`, `mlp` (AG+GEMM then GEMM+RS), `ag-moe`, `moe-rs` or `moe` (both). */
  readonly operator: "ag-gemm" | "gemm-rs" | "mlp" | "ag-moe" | "moe-rs" | "moe";
  /** Suite shape, e.g. `MLP-1`, `MoE-4`. */
  readonly shape: string;
  /** The best overlapped candidate's prediction. */
  readonly overlappedMs: number;
  /** Not overlapped: the compute alone (cuBLAS-class GEMM, or the MoE body), then the NCCL-like collective on the fabric. */
  readonly notOverlappedMs: number;
  /** `notOverlappedMs / overlappedMs`: above 1 when overlapping is predicted to win. */
  readonly speedup: number;
  /** What the tuner would run: per operator the faster of the two paths (a layer: the sum of its operators'). */
  readonly tunedMs: number;
  /** What the overlapped figure ran: the tuner's candidate key(s), or the MoE model's gather and backend. */
  readonly overlapped: string;
  /** The NCCL-like collective's algorithm(s) on the fabric (`ring` / `hierarchical`, `+`-joined for a layer). */
  readonly collective: string;
  /** AG+GEMM and GEMM+RS: the best overlapped prediction of each plan shape the tuner could build (ms). */
  readonly byPlan?: Readonly<Record<string, number>>;
}

/** Options of {@link predictMultiNode}. */
export interface PredictMultiNodeOptions {
  /** Multi-node models (default the built-ins `H200_SXM_2x8` and `H200_SXM_4x8`). */
  readonly hardware?: readonly (HardwareModel | string)[];
  /** MLP shapes (default MLP-1 … MLP-6). */
  readonly mlp?: readonly MlpShapeName[];
  /** MoE shapes (default MoE-1 … MoE-6). */
  readonly moe?: readonly MoeShapeName[];
  /** The tuner's space (default {@link MULTI_NODE_TUNE_SPACE}). */
  readonly space?: TuneSpace;
  readonly onRow?: (row: MultiNodeRow) => void;
}

/**
 * The multi-node search: every plan shape (flat, and the two-level ones in either stage order
 * and schedule) × splits 1/2/4 × copy engine or 8/16 copy SMs × three tiles, at the measured-best
 * L2 grouping (8: the model does not price the grouping, so other values only tie).
 */
export const MULTI_NODE_TUNE_SPACE: TuneSpace = {
  splits: [1, 2, 4],
  backends: ["copy-engine", "sm"],
  commSms: [8, 16],
  tiles: [
    { BM: 128, BN: 256, BK: 64 },
    { BM: 128, BN: 128, BK: 64 },
    { BM: 256, BN: 128, BK: 64 },
  ],
  groupSizesM: [8],
  sequential: true,
  plans: TUNE_PLANS,
};

function row(base: Omit<MultiNodeRow, "speedup" | "tunedMs">, tunedMs?: number): MultiNodeRow {
  return {
    ...base,
    speedup: base.notOverlappedMs / base.overlappedMs,
    tunedMs: tunedMs ?? Math.min(base.overlappedMs, base.notOverlappedMs),
  };
}
const tuned = (ms: { overlappedMs: number; notOverlappedMs: number }): number => Math.min(ms.overlappedMs, ms.notOverlappedMs);

/** The tuner's best overlapped candidate and its sequential path for one GEMM operator. */
function tuneGemm(
  hw: HardwareModel,
  operator: "ag-gemm" | "gemm-rs",
  shape: (typeof MLP_SHAPES)[MlpShapeName],
  space: TuneSpace,
): { best: RankedCandidate; sequential: RankedCandidate; algorithm: string; byPlan: Record<string, number> } {
  const t = hw.topology!;
  const world = t.nodes * t.gpusPerNode;
  const gathers = operator === "ag-gemm";
  const problem = {
    operator,
    M: shape.S,
    N: gathers ? shape.I / world : shape.H,
    K: gathers ? shape.H : shape.I / world,
    world,
    gpusPerNode: t.gpusPerNode,
  };
  if (!Number.isInteger(problem.N) || !Number.isInteger(problem.K)) {
    throw new SimulateError("bad-problem", `${operator}: I = ${shape.I} is not a multiple of world ${world}`);
  }
  const { ranked, pruned } = rankCandidates(problem, {
    cost: simulatorCost(hw),
    memory: { globalBytes: hw.memoryBytes, sharedBytesPerBlock: HOPPER_SHARED_BYTES },
    space,
    numSms: hw.smCount,
  });
  const best = ranked.find((r) => r.candidate.path === "overlapped");
  const sequential = ranked.find((r) => r.candidate.path === "sequential");
  if (best === undefined || sequential === undefined) {
    const why = [...new Set(pruned.map((p) => p.reason))].slice(0, 2).join("; ");
    throw new SimulateError("bad-problem", `${operator} on ${hw.name}: no overlapped candidate and sequential path both priced (${why})`);
  }
  // The gathered A and the reduce-scattered C are both S × H.
  const bytes = shape.S * shape.H * DTYPE_BYTES.bf16;
  const ranks = Array.from({ length: world }, (_, r) => r);
  const algorithm = fabricCollective(hw, gathers ? "all-gather" : "reduce-scatter", bytes, ranks).algorithm;
  const byPlan: Record<string, number> = {};
  for (const r of ranked) {
    if (r.candidate.path !== "overlapped") continue;
    const shape = r.candidate.plan ?? "flat";
    byPlan[shape] = Math.min(byPlan[shape] ?? Number.POSITIVE_INFINITY, r.predictedMs);
  }
  return { best, sequential, algorithm, byPlan };
}

/** The MoE model's best of both gathers (flat, hierarchical) and both backends for AG + Gather + GroupGEMM. */
function bestAgMoe(hw: HardwareModel, problem: Parameters<typeof predictAgMoe>[0]): { ms: number; computeMs: number; label: string } {
  let best: { ms: number; computeMs: number; label: string } | undefined;
  for (const gather of ["hierarchical", "flat"] as const) {
    for (const backend of ["copy-engine", "sm"] as CommBackend[]) {
      const p = predictAgMoe(problem, { hardware: hw, backend, gather });
      if (best === undefined || p.overlappedMs < best.ms)
        best = { ms: p.overlappedMs, computeMs: p.computeMs, label: `gather=${gather} ${backend}` };
    }
  }
  return best!;
}

/**
 * Predict, on each multi-node model, AllGather+GEMM and GEMM+ReduceScatter of every MLP shape
 * (per-rank GEMMs from S, H, I over `world = nodes · gpusPerNode`: A[S/W × H] gathered times
 * B[H × I/W]; A[S × I/W] times B[I/W × H] reduce-scattered), the MLP layer (their sum), and the
 * MoE layer of every MoE shape (AG + Gather + GroupGEMM, GroupGEMM + Scatter + TopK-reduce +
 * ReduceScatter, and their sum). Overlapped: the tuner's best overlapped candidate
 * (`rankCandidates` with `simulatorCost`) over {@link MULTI_NODE_TUNE_SPACE}; for MoE, the operator
 * models' best gather and backend (part 2 is the flat pull-reduce, the only one modelled).
 * Not overlapped: the cuBLAS-class GEMM (or the MoE body alone) then the NCCL-like collective on
 * the two-level fabric (`fabricCollective`: ring or hierarchical, whichever is faster). Every
 * figure is a model prediction; none is measured.
 */
export function predictMultiNode(options: PredictMultiNodeOptions = {}): MultiNodeRow[] {
  const rows: MultiNodeRow[] = [];
  const push = (r: MultiNodeRow): void => {
    rows.push(r);
    options.onRow?.(r);
  };
  const space = options.space ?? MULTI_NODE_TUNE_SPACE;
  for (const input of options.hardware ?? ["H200_SXM_2x8", "H200_SXM_4x8"]) {
    const hw = resolveHardware(input);
    const t = hw.topology;
    if (t === undefined || t.nodes < 2) {
      throw new SimulateError("bad-hardware", `predictMultiNode needs a multi-node model (multiNode(...)); ${hw.name} is one node`);
    }
    const world = t.nodes * t.gpusPerNode;
    const where = { hardware: hw.name, nodes: t.nodes, gpusPerNode: t.gpusPerNode, world };
    for (const name of options.mlp ?? (Object.keys(MLP_SHAPES) as MlpShapeName[])) {
      const shape = MLP_SHAPES[name];
      const ag = tuneGemm(hw, "ag-gemm", shape, space);
      const rs = tuneGemm(hw, "gemm-rs", shape, space);
      for (const [operator, r] of [
        ["ag-gemm", ag],
        ["gemm-rs", rs],
      ] as const) {
        push(
          row({
            ...where,
            operator,
            shape: name,
            overlappedMs: r.best.predictedMs,
            notOverlappedMs: r.sequential.predictedMs,
            overlapped: r.best.key,
            collective: r.algorithm,
            byPlan: r.byPlan,
          }),
        );
      }
      push(
        row(
          {
            ...where,
            operator: "mlp",
            shape: name,
            overlappedMs: ag.best.predictedMs + rs.best.predictedMs,
            notOverlappedMs: ag.sequential.predictedMs + rs.sequential.predictedMs,
            overlapped: `${ag.best.key} ; ${rs.best.key}`,
            collective: `${ag.algorithm}+${rs.algorithm}`,
          },
          rows[rows.length - 2]!.tunedMs + rows[rows.length - 1]!.tunedMs,
        ),
      );
    }
    const ranks = Array.from({ length: world }, (_, r) => r);
    for (const name of options.moe ?? (Object.keys(MOE_SHAPES) as MoeShapeName[])) {
      const s = MOE_SHAPES[name];
      const problem = { tokens: s.S, hidden: s.H, intermediate: s.I, experts: s.E, topk: s.topk, world, routing: "random" as const };
      const bytes = s.S * s.H * DTYPE_BYTES.bf16;
      const agColl = fabricCollective(hw, "all-gather", bytes, ranks);
      const rsColl = fabricCollective(hw, "reduce-scatter", bytes, ranks);
      const ag = bestAgMoe(hw, problem);
      const rs = predictMoeRs(problem, { hardware: hw });
      const agNot = ag.computeMs + agColl.ms;
      const rsNot = rs.computeMs + rsColl.ms;
      push(
        row({
          ...where,
          operator: "ag-moe",
          shape: name,
          overlappedMs: ag.ms,
          notOverlappedMs: agNot,
          overlapped: ag.label,
          collective: agColl.algorithm,
        }),
      );
      push(
        row({
          ...where,
          operator: "moe-rs",
          shape: name,
          overlappedMs: rs.overlappedMs,
          notOverlappedMs: rsNot,
          overlapped: "notifies=launch flat pull-reduce",
          collective: rsColl.algorithm,
        }),
      );
      push(
        row(
          {
            ...where,
            operator: "moe",
            shape: name,
            overlappedMs: ag.ms + rs.overlappedMs,
            notOverlappedMs: agNot + rsNot,
            overlapped: `${ag.label} ; moe-rs`,
            collective: `${agColl.algorithm}+${rsColl.algorithm}`,
          },
          tuned({ overlappedMs: ag.ms, notOverlappedMs: agNot }) + tuned({ overlappedMs: rs.overlappedMs, notOverlappedMs: rsNot }),
        ),
      );
    }
  }
  return rows;
}
