// The copy-engine backend of a chunk plan's transfers (AutoOverlap Table 2, "copy
// engine"): every P2P or local copy becomes `copy` host ops on the issuing rank's comm
// stream for that plan stream, the last one followed by a stream-written signal, and
// every cross-stream dependency a host `wait` on the local slot that signals it.
import type { ChunkPlan, Op, SignalRef, SignalSlot } from "@ovl/chunk-plan";
import type { HostOp, RankHostOps } from "../manifest/schema.js";
import { EmitError } from "../writer/index.js";
import { elementRuns, pairRuns } from "./segments.js";

/** The plan's signals: per rank its slots, per op the slot it notifies. */
export type PlanSignals = NonNullable<ChunkPlan["signals"]>;

/** Name of the host stream realising plan stream `s`. */
export function commStreamName(s: number): string {
  return `comm${s}`;
}

function slotOf(signals: PlanSignals, ref: SignalRef): SignalSlot {
  const slot = signals.slots.find((e) => e.rank === ref.rank)?.slots.find((x) => x.slot === ref.slot);
  if (slot === undefined) throw new EmitError("bad-plan", `signal (rank ${ref.rank}, slot ${ref.slot}) is not allocated in the plan's signals`);
  return slot;
}

/** The host ops realising one op of rank `rank`, stream `stream`, position `index`. */
function hostOpsOfOp(plan: ChunkPlan, signals: PlanSignals, op: Op, rank: number, stream: number, index: number): HostOp[] {
  const where = `rank ${rank} stream ${stream} op ${index}${op.label === undefined ? "" : ` (${op.label})`}`;
  if (op.kind === "collective") {
    throw new EmitError("unsupported-op", `${where} is a ${op.collective} collective; the copy-engine backend moves P2P and local copies only: expand it with a template`);
  }
  if (op.reduce !== undefined) {
    throw new EmitError("unsupported-op", `${where} reduces into its destination; a copy engine cannot add: use an SM backend or a plan without reduce`);
  }
  const ops: HostOp[] = [];
  for (const dep of op.deps) {
    if (dep.kind === "compute") {
      throw new EmitError("unsupported-dependency", `${where} waits on compute; AllGather+GEMM's copies depend only on other copies`);
    }
    if (dep.rank === rank && dep.stream === stream && dep.index < index) continue; // stream order
    const ref = signals.notify[dep.rank]?.[dep.stream]?.[dep.index];
    if (ref === null || ref === undefined || ref.rank !== rank) {
      throw new EmitError(
        "unsupported-dependency",
        `${where} depends on rank ${dep.rank} stream ${dep.stream} op ${dep.index}, whose completion is not signalled on rank ${rank}; a host stream waits only on its own rank's slots (use push, not pull, for chained transfers)`,
      );
    }
    ops.push({ kind: "wait", slot: ref.slot, arrivals: slotOf(signals, ref).arrivals });
  }
  const decl = (name: string) => {
    const d = plan.tensors.find((t) => t.name === name);
    if (d === undefined) throw new EmitError("bad-plan", `${where} names tensor ${name}, which the plan does not declare`);
    return d;
  };
  const [srcRank, dstRank] = op.kind === "local-copy" ? [rank, rank] : op.side === "push" ? [rank, op.peer] : [op.peer, rank];
  const pairs = pairRuns(elementRuns(op.src, decl(op.src.tensor)), elementRuns(op.dst, decl(op.dst.tensor)));
  const ref = signals.notify[rank]?.[stream]?.[index] ?? null;
  if (ref !== null && slotOf(signals, ref).arrivals !== 1) {
    throw new EmitError("unsupported-op", `${where} signals slot ${ref.slot} on rank ${ref.rank}, which has several writers; a stream write sets the epoch, so each slot needs exactly one`);
  }
  pairs.forEach((p, k) => {
    const last = k === pairs.length - 1;
    ops.push({
      kind: "copy",
      src: { buffer: op.src.tensor, rank: srcRank, offset: p.src.offset, length: p.src.length },
      dst: { buffer: op.dst.tensor, rank: dstRank, offset: p.dst.offset, length: p.dst.length },
      ...(last && ref !== null ? { signal: { rank: ref.rank, slot: ref.slot } } : {}),
    });
  });
  return ops;
}

/**
 * Host ops of every rank: plan stream `s` of rank `r` becomes host stream `comm<s>` of
 * rank `r`, op by op.
 * @throws {EmitError} `unsupported-op` (collectives, reductions, multi-writer slots) or
 *   `unsupported-dependency` (a dependency not signalled on the issuing rank).
 */
export function planHostOps(plan: ChunkPlan, signals: PlanSignals): RankHostOps[] {
  return plan.ranks.map((rp) => ({
    rank: rp.rank,
    streams: rp.streams.map((ops, s) => ({
      name: commStreamName(s),
      ops: ops.flatMap((op, i) => hostOpsOfOp(plan, signals, op, rp.rank, s, i)),
    })),
  }));
}
