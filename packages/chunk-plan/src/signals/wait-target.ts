// The epoch rule of DESIGN.md: slots are never reset, so launch k of an overlapped
// operator waits for `value >= k * arrivals`; this module computes that target safely.
import type { ChunkPlan, SignalSlot } from "../model/schema.js";
import { SignalError } from "./errors.js";

/**
 * The value a waiter on `slot` must observe during launch `epoch` (1 for the first
 * launch): `epoch × arrivals`. Every launch adds exactly `arrivals` to the slot, so the
 * counter is monotone and needs no reset kernel (the operator stays CUDA-graph capturable).
 *
 * @param counterBits width of the slot counter: 32 on one node, 64 across nodes.
 * @throws {SignalError} `bad-epoch` (not an integer ≥ 1) or `counter-overflow` (the target
 *   no longer fits the counter: widen it, or start a fresh slot buffer).
 */
export function waitTarget(epoch: number, slot: Pick<SignalSlot, "arrivals">, counterBits: 32 | 64 = 32): number {
  if (!Number.isSafeInteger(epoch) || epoch < 1) {
    throw new SignalError("bad-epoch", `epoch must be an integer ≥ 1 (launch 1 is the first), got ${epoch}`);
  }
  const target = epoch * slot.arrivals;
  const limit = counterBits === 32 ? 2 ** 32 - 1 : Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(target) || target > limit) {
    throw new SignalError(
      "counter-overflow",
      `launch ${epoch} × ${slot.arrivals} arrivals = ${target} exceeds a ${counterBits}-bit slot counter; ` +
        `use 64-bit slots or reallocate the signal buffer`,
    );
  }
  return target;
}

/** The slots of `rank` in a plan with signals (empty when the plan has none for it). */
export function slotsOfRank(plan: ChunkPlan, rank: number): readonly SignalSlot[] {
  return plan.signals?.slots.find((s) => s.rank === rank)?.slots ?? [];
}
