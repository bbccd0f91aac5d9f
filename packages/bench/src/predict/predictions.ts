// The prediction suite: every operator over its paper suite at worlds 2/4/8 on H100 and
// H200, priced by @ovl/sim's operator models, as rows a report and a chart read.
import {
  type GemmOperator,
  MLP_SHAPES,
  type OperatorPrediction,
  predictAgAttention,
  predictAgMoe,
  predictGemmOperator,
  predictMoeRs,
} from "@ovl/sim";
import { ATTENTION_SEQS, ATTENTION_SHAPES, MLP_NAMES, MOE_SHAPES, PREDICTION_HARDWARE, PREDICTION_WORLDS } from "./suites.js";

/** One predicted case: the suite shape it comes from and the model's answer. */
export interface PredictionRow extends OperatorPrediction {
  /** Shape name in its suite, e.g. `MLP-3`, `MoE-5`, `Attn-1 S=64k`. */
  readonly shape: string;
  /** The per-rank problem priced (GEMM sizes, sequence, experts …). */
  readonly problem: Readonly<Record<string, number | string | boolean>>;
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
        push({ ...predictAgMoe(problem, { hardware }), shape: name, problem });
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
