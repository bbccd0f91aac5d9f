// Cost functions rank candidates. Any model plugs in as a function; `simulatorCost` is the
// built-in one: the discrete-event simulator for overlapped candidates and the NCCL +
// cuBLAS prediction for the non-overlapped path, both on one hardware model.
import type { HardwareModel } from "../simulate/hardware.js";
import { resolveHardware } from "../simulate/registry.js";
import { allReduceOptions, simulate } from "../simulate/simulate.js";
import { predictBaselines } from "../simulate/baselines.js";
import type { BuiltCandidate } from "./build.js";
import type { OverlappedCandidate, SequentialCandidate, TuneProblem } from "./space.js";

/** What a cost function is asked to price: the candidate and, when overlapped, its plan and schedule. */
export type CostInput =
  | { readonly problem: TuneProblem; readonly candidate: SequentialCandidate }
  | { readonly problem: TuneProblem; readonly candidate: OverlappedCandidate; readonly built: BuiltCandidate };

/** A cost function's answer: the predicted latency of the operator (slowest rank), ms. */
export interface CostEstimate {
  readonly latencyMs: number;
  /** Figures a report may show (bound, overlap ratio, …). */
  readonly detail?: Readonly<Record<string, number>>;
}

/** Prices a candidate; lower is better. Must be deterministic for a given input. */
export type CostFunction = (input: CostInput) => CostEstimate;

/**
 * The built-in cost function on `hardware`: overlapped candidates through `simulate`
 * (their backend and SM count; the fused GEMM priced as the emitted Triton kernel at the
 * candidate's tile when the model has a `tritonGemm` calibration, since that is what a
 * candidate runs), the sequential path through `predictBaselines` (the collective alone,
 * then the cuBLAS GEMM alone).
 */
export function simulatorCost(hardware: HardwareModel | string): CostFunction {
  const hw = resolveHardware(hardware);
  return (input): CostEstimate => {
    const { problem } = input;
    if (!("built" in input)) {
      const ag = problem.operator === "ag-gemm";
      const b = predictBaselines({
        hardware: hw,
        problem: { M: problem.M, N: problem.N, K: problem.K },
        collective: {
          kind: ag ? "all-gather" : problem.operator === "gemm-ar" ? "all-reduce" : "reduce-scatter",
          shape: ag ? [problem.M, problem.K] : [problem.M, problem.N],
          dtype: problem.dtype,
        },
        world: problem.world,
      });
      return { latencyMs: b.notOverlappedMs, detail: { gemmMs: b.gemmMs, collectiveMs: b.collectiveMs, boundMs: b.boundMs } };
    }
    const c = input.candidate;
    const sim = simulate(input.built.plan, input.built.schedule, {
      hardware: hw,
      backend: c.backend,
      commSms: c.commSms,
      ...(hw.tritonGemm !== undefined ? { computeKernel: { kind: "triton" as const } } : {}),
      ...(c.allReduce === undefined ? {} : allReduceOptions(c.allReduce, c.backend, c.commSms)),
    });
    return {
      latencyMs: sim.latencyMs,
      detail: {
        boundMs: sim.boundMs,
        nonOverlappedMs: sim.nonOverlappedMs,
        overlapRatio: sim.overlapRatio,
        computeAloneMs: sim.computeAloneMs,
        commAloneMs: sim.commAloneMs,
      },
    };
  };
}
