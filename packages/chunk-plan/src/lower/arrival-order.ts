// The order in which chunks arrive on a rank (consumer) or are needed by the plan
// (producer), derived from stream order and op dependencies with a unit-time model:
// every op takes one step and starts when its stream predecessor and its deps are done.
import type { ChunkPlan, SignalSlot } from "../model/schema.js";
import { forEachOp, type OpRef } from "../signals/allocate.js";
import { formatRegion } from "../region/index.js";
import { regionKey } from "../signals/regions.js";
import { TileScheduleError } from "./errors.js";

type Signals = NonNullable<ChunkPlan["signals"]>;

/**
 * The completion step of every op (1 = first): `end(op) = 1 + max(end(stream
 * predecessor), end(op deps))`; compute dependencies count as ready at step 0, as the
 * kernel being scheduled is the one that will satisfy them. Keys are `rank/stream/index`.
 *
 * @throws {TileScheduleError} `unknown-dependency` or `dependency-cycle`.
 */
export function opEndSteps(plan: ChunkPlan): Map<string, number> {
  const streams = new Map(plan.ranks.map((r) => [r.rank, r.streams]));
  const end = new Map<string, number>();
  const onStack = new Set<string>();
  const opAt = (ref: OpRef) => streams.get(ref.rank)?.[ref.stream]?.[ref.index];

  const predecessors = (ref: OpRef, from: string): OpRef[] => {
    const op = opAt(ref);
    const preds: OpRef[] = ref.index > 0 ? [{ ...ref, index: ref.index - 1 }] : [];
    for (const dep of op?.deps ?? []) {
      if (dep.kind !== "op") continue;
      if (opAt(dep) === undefined) {
        throw new TileScheduleError(
          "unknown-dependency",
          `${from} depends on rank ${dep.rank} stream ${dep.stream} op ${dep.index}, which the plan does not have`,
        );
      }
      preds.push({ rank: dep.rank, stream: dep.stream, index: dep.index });
    }
    return preds;
  };

  forEachOp(plan, (_op, root) => {
    // Depth-first with an explicit stack: long streams would overflow recursion.
    const stack: OpRef[] = [root];
    while (stack.length > 0) {
      const ref = stack[stack.length - 1] as OpRef;
      const key = keyOf(ref);
      if (end.has(key)) {
        stack.pop();
        continue;
      }
      const preds = predecessors(ref, describe(ref));
      const pending = preds.filter((p) => !end.has(keyOf(p)));
      if (pending.length === 0) {
        end.set(key, 1 + Math.max(0, ...preds.map((p) => end.get(keyOf(p)) ?? 0)));
        onStack.delete(key);
        stack.pop();
        continue;
      }
      onStack.add(key);
      for (const p of pending) {
        if (onStack.has(keyOf(p))) {
          throw new TileScheduleError(
            "dependency-cycle",
            `${describe(p)} and ${describe(ref)} wait on each other (through stream order or deps): the plan would deadlock`,
          );
        }
        stack.push(p);
      }
    }
  });
  return end;
}

/** An op's key in {@link opEndSteps}. */
export function keyOf(ref: OpRef): string {
  return `${ref.rank}/${ref.stream}/${ref.index}`;
}

function describe(ref: OpRef): string {
  return `rank ${ref.rank} stream ${ref.stream} op ${ref.index}`;
}

function compareRefs(a: OpRef, b: OpRef): number {
  return a.rank - b.rank || a.stream - b.stream || a.index - b.index;
}

/**
 * The chunk slots (chunk-ready or transit) of `rank` on `tensor`, in arrival order: a
 * slot arrives when the last op notifying it completes; ties break by that op's
 * position, then by slot number.
 *
 * @throws {TileScheduleError} `unfilled-slot` when no op notifies a slot (a waiter would hang).
 */
export function chunkArrivalOrder(
  plan: ChunkPlan,
  signals: Signals,
  ends: ReadonlyMap<string, number>,
  rank: number,
  tensor: string,
): SignalSlot[] {
  const slots = (signals.slots.find((s) => s.rank === rank)?.slots ?? []).filter(
    (s) => s.purpose !== "tile-done" && s.region?.tensor === tensor,
  );
  const last = lastNotifiers(signals, ends).get(rank) ?? new Map<number, LastNotifier>();
  for (const slot of slots) {
    if (!last.has(slot.slot)) {
      throw new TileScheduleError(
        "unfilled-slot",
        `slot ${slot.slot} on rank ${rank} (${slot.purpose} ${slot.region ? formatRegion(slot.region) : ""}) is notified by no op of plan "${plan.name}": tiles waiting on it would hang`,
      );
    }
  }
  return [...slots].sort((a, b) => {
    const la = last.get(a.slot) as { step: number; ref: OpRef };
    const lb = last.get(b.slot) as { step: number; ref: OpRef };
    return la.step - lb.step || compareRefs(la.ref, lb.ref) || a.slot - b.slot;
  });
}

interface LastNotifier {
  step: number;
  ref: OpRef;
}

/** {@link lastNotifiers} per signals and end steps: lowering asks once per rank. */
const lastNotifierCache = new WeakMap<Signals, WeakMap<ReadonlyMap<string, number>, Map<number, Map<number, LastNotifier>>>>();

/**
 * Per rank and slot, the op that notifies it last (latest end step, then the later op by
 * position), from one pass over every notify entry: asking rank by rank would read all of
 * them once per rank (quadratic in the world size).
 */
function lastNotifiers(signals: Signals, ends: ReadonlyMap<string, number>): Map<number, Map<number, LastNotifier>> {
  let byEnds = lastNotifierCache.get(signals);
  if (byEnds === undefined) lastNotifierCache.set(signals, (byEnds = new WeakMap()));
  const hit = byEnds.get(ends);
  if (hit !== undefined) return hit;
  const byRank = new Map<number, Map<number, LastNotifier>>();
  signals.notify.forEach((streams, r) =>
    streams.forEach((ops, s) =>
      ops.forEach((target, i) => {
        if (target === null) return;
        let last = byRank.get(target.rank);
        if (last === undefined) byRank.set(target.rank, (last = new Map()));
        const ref = { rank: r, stream: s, index: i };
        const step = ends.get(keyOf(ref)) ?? 0;
        const prev = last.get(target.slot);
        if (prev === undefined || step > prev.step || (step === prev.step && compareRefs(ref, prev.ref) > 0)) {
          last.set(target.slot, { step, ref });
        }
      }),
    ),
  );
  byEnds.set(ends, byRank);
  return byRank;
}

/**
 * The tile-done slots of `rank` on `tensor`, in the order the plan needs them: by the
 * earliest start of an op that depends on the slot's compute region ("tiles of the
 * chunk that is sent first are computed first"); slots nothing depends on come last.
 */
export function tileDoneNeedOrder(
  plan: ChunkPlan,
  signals: Signals,
  ends: ReadonlyMap<string, number>,
  rank: number,
  tensor: string,
): SignalSlot[] {
  const slots = (signals.slots.find((s) => s.rank === rank)?.slots ?? []).filter(
    (s) => s.purpose === "tile-done" && s.region?.tensor === tensor,
  );
  const slotOfKey = new Map(slots.map((s) => [regionKey(s.region as NonNullable<SignalSlot["region"]>), s.slot]));
  const first = new Map<number, { step: number; ref: OpRef }>();
  forEachOp(plan, (op, ref) => {
    for (let k = 0; k < op.deps.length; k++) {
      const dep = op.deps[k]!;
      if (dep.kind !== "compute" || dep.rank !== rank) continue;
      const slot = slotOfKey.get(regionKey(dep.region));
      if (slot === undefined) continue;
      const step = (ends.get(keyOf(ref)) ?? 1) - 1;
      const prev = first.get(slot);
      if (prev === undefined || step < prev.step || (step === prev.step && compareRefs(ref, prev.ref) < 0)) {
        first.set(slot, { step, ref });
      }
    }
  });
  const never = { step: Number.POSITIVE_INFINITY, ref: { rank: 0, stream: 0, index: 0 } };
  return [...slots].sort((a, b) => {
    const fa = first.get(a.slot) ?? never;
    const fb = first.get(b.slot) ?? never;
    return fa.step - fb.step || compareRefs(fa.ref, fb.ref) || a.slot - b.slot;
  });
}
