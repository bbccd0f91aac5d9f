// `ovl emit gemm-rs --backend sm`: how many SMs the push kernel gets (`--comm-sms`, else the
// simulator's choice for the target's hardware model).
import { DEFAULT_TARGET, type TargetName } from "@ovl/primitives";
import { chooseCommSms, type CommSmsChoice, H100_SXM, H200_SXM, type HardwareModel } from "@ovl/sim";
import { UsageError } from "./errors.js";
import type { Problem } from "./problem.js";

/** The hardware model of a target the simulator has one for. */
/** The simulator's model of each target with one (what `ovl emit` prices its choices on). */
export const MODELS: Partial<Record<TargetName, HardwareModel>> = { h100: H100_SXM, h200: H200_SXM };

/** The push kernel's SMs and why, or undefined where the emitter's default stands. */
export interface CommSmsDecision {
  readonly commSms: number;
  readonly why: string;
}

/**
 * `--comm-sms` when given (only with `--backend sm` or `nvshmem`), else for GEMM+RS and the partitioned GEMM+AllReduce
 * over SM pushes the simulator's choice on the target's model (`chooseCommSms`: the fewest of 4, 8, 16
 * that move a rank's partial rows while its GEMM runs); otherwise undefined (the emitter's default, 16).
 * @throws {UsageError} `--comm-sms` with the copy engine.
 */
export function decideCommSms(p: Problem, given: number | undefined, target: TargetName | undefined): CommSmsDecision | undefined {
  if (given !== undefined) {
    if (p.backend === "copy-engine")
      throw new UsageError("usage", `--comm-sms sets the push kernel's programs; add --backend sm or nvshmem (got --backend ${p.backend})`);
    return { commSms: given, why: "named by --comm-sms" };
  }
  const hw = MODELS[target ?? DEFAULT_TARGET.name];
  const c = hw === undefined ? undefined : modelCommSms(p, hw);
  if (hw === undefined || c === undefined) return undefined;
  return {
    commSms: c.commSms,
    why: `the simulator's choice on ${hw.name}: ${(c.bytes / 1e6).toFixed(1)} MB of partial rows within ${c.windowMs.toFixed(2)} ms need ${c.neededSms.toFixed(1)} SMs at ${hw.smCopy.bandwidthPerSmGBps} GB/s each`,
  };
}

/**
 * The push SMs GEMM+RS over SM pushes gets on hardware model `hw` (`chooseCommSms`, bf16 partials), and
 * the partitioned GEMM+AllReduce, whose pushes carry the same ReduceScatter half (its AllGather is the
 * reduction's stores, after the GEMM); undefined for other operators and backends, which keep the
 * emitter's default. `ovl emit` and
 * `ovl simulate` both ask this, so the simulator prices what is emitted.
 */
export function modelCommSms(p: Problem, hw: HardwareModel): CommSmsChoice | undefined {
  const partitioned = p.operator === "gemm-rs" || (p.operator === "gemm-ar" && p.template !== "tilewise");
  if (!partitioned || p.backend !== "sm") return undefined;
  return chooseCommSms(hw, { M: p.M, N: p.N, K: p.K, world: p.world, elementBytes: 2 });
}
