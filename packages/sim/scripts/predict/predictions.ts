// The prediction suite: every operator over its paper suite at worlds 2/4/8 on H100 and
// H200, priced by @ovl/sim's operator models, as rows a report and a chart read.
import type { TargetName } from "@ovl/primitives";
import {
  type GemmOperator,
  MLP_SHAPES,
  type MoeProblem,
  type MoeTiling,
  type OperatorPrediction,
  predictAgAttention,
  predictAgMoe,
  predictGemmOperator,
  predictMoeRs,
} from "../../src/index.js";
import { candidateTables, lookupFirst } from "@ovl/tlx-emitter";
import { ATTENTION_SEQS, ATTENTION_SHAPES, MLP_NAMES, MOE_SHAPES, PREDICTION_HARDWARE, PREDICTION_WORLDS } from "./suites.js";

/** One predicted case: the suite shape it comes from and the model's answer. */
export interface PredictionRow extends OperatorPrediction {
  /** Shape name in its suite, e.g. `MLP-3`, `MoE-5`, `Attn-1 S=64k`. */
  readonly shape: string;
  /** The per-rank problem priced (GEMM sizes, sequence, experts …). */
  readonly problem: Readonly<Record<string, number | string | boolean>>;
}

/** The compiler's target of each hardware model of the suite. */
const TARGET_OF: Readonly<Record<string, TargetName>> = { H100_SXM: "h100", H200_SXM: "h200" };

/**
 * The tile and launch `ovl emit ag-moe --target <hardware's>` compiles for `p` (the tuned table's
 * nearest ag-moe entry, the same-die table's where the target's own has none), or undefined
 * (a hardware model of no target, or no entry: the sim's default, the compiler's untuned tile).
 */
export function agMoeTiling(hardware: string, p: MoeProblem): MoeTiling | undefined {
  const query = {
    op: "ag-moe" as const,
    M: p.tokens,
    N: p.intermediate / p.world,
    K: p.hidden,
    experts: p.experts,
    topk: p.topk,
    dtype: "bf16" as const,
  };
  const target = TARGET_OF[hardware];
  const e = target === undefined ? undefined : lookupFirst(candidateTables(target), query)?.match.entry;
  return e === undefined ? undefined : { BM: e.BM, BN: e.BN, BK: e.BK, stages: e.numStages, warps: e.numWarps };
}

/** The GEMM operators of the MLP suite, in report order. */
export const MLP_OPERATORS: readonly GemmOperator[] = ["ag-gemm", "gemm-rs", "gemm-ar", "gemm-ar-tilewise", "a2a-gemm"];

/**
 * The per-rank GEMM of an MLP operator: AllGather / AllToAll feed A[S × H] to B[H × I/W];
 * ReduceScatter / AllReduce follow A[S × I/W] · B[I/W × H].
 */
export function mlpProblem(operator: GemmOperator, shape: (typeof MLP_SHAPES)[keyof typeof MLP_SHAPES], world: number) {
  const gathers = operator === "ag-gemm" || operator === "a2a-gemm";
  return { operator, M: shape.S, N: gathers ? shape.I / world : shape.H, K: gathers ? shape.H : shape.I / world, world };
}

/** Every case of the suite, predicted; `hardware` and `worlds` narrow it (default: all). */
export function predictionRows(
  opts: { hardware?: readonly string[]; worlds?: readonly number[]; onRow?: (row: PredictionRow) => void } = {},
): PredictionRow[] {
  const rows: PredictionRow[] = [];
  const push = (row: PredictionRow): void => {
    rows.push(row);
    opts.onRow?.(row);
  };
  for (const hardware of opts.hardware ?? PREDICTION_HARDWARE) {
    for (const world of opts.worlds ?? PREDICTION_WORLDS) {
      for (const operator of MLP_OPERATORS) {
        for (const name of MLP_NAMES) {
          const problem = mlpProblem(operator, MLP_SHAPES[name], world);
          push({ ...predictGemmOperator(problem, { hardware }), shape: name, problem });
        }
      }
      for (const [name, s] of Object.entries(MOE_SHAPES)) {
        const problem = { tokens: s.S, hidden: s.H, intermediate: s.I, experts: s.E, topk: s.topk, world, routing: "random" as const };
        const tiling = agMoeTiling(hardware, problem);
        push({ ...predictAgMoe(problem, { hardware, ...(tiling === undefined ? {} : { tiling }) }), shape: name, problem });
        // MoE part 2 as ovl emits it by default: notified per launch, the TopK-sum local.
        push({ ...predictMoeRs(problem, { hardware }), shape: name, problem });
      }
      for (const [name, s] of Object.entries(ATTENTION_SHAPES)) {
        for (const seq of ATTENTION_SEQS) {
          for (const causal of [false, true]) {
            const problem = { seq, heads: s.heads, headDim: s.headDim, causal, world };
            push({ ...predictAgAttention(problem, { hardware }), shape: `${name} S=${seq / 1024}k`, problem });
          }
        }
      }
    }
  }
  return rows;
}
