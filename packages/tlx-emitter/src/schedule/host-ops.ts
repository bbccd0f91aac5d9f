// The copy-engine backend of a chunk plan's transfers (AutoOverlap Table 2, "copy
// engine"): every P2P or local copy becomes `copy` host ops on the issuing rank's comm
// stream for that plan stream, the last one followed by a stream-written signal, and
// every cross-stream dependency a host `wait` on the slot that signals it: the issuing
// rank's own, or a peer's (a pull that forwards what the peer pulled, as in a pull ring),
// which the stream reads through the peer's symmetric signal buffer.
import type { ChunkPlan, Op, SignalRef, SignalSlot } from "@ovl/chunk-plan";
import type { HostOp, RankHostOps } from "../core/manifest/schema.js";
import { EmitError } from "../core/writer/index.js";
import { elementRuns, pairRuns } from "./segments.js";

/** The plan's signals: per rank its slots, per op the slot it notifies. */
export type PlanSignals = NonNullable<ChunkPlan["signals"]>;

/** Name of the host stream realising plan stream `s`. */
export function commStreamName(s: number): string {
  return `comm${s}`;
}

function slotOf(signals: PlanSignals, ref: SignalRef): SignalSlot {
  const slot = signals.slots.find((e) => e.rank === ref.rank)?.slots.find((x) => x.slot === ref.slot);
  if (slot === undefined)
    throw new EmitError("bad-plan", `signal (rank ${ref.rank}, slot ${ref.slot}) is not allocated in the plan's signals`);
  return slot;
}

/** The host ops realising one op of rank `rank`, stream `stream`, position `index`. */
function hostOpsOfOp(plan: ChunkPlan, signals: PlanSignals, op: Op, rank: number, stream: number, index: number): HostOp[] {
  const where = `rank ${rank} stream ${stream} op ${index}${op.label === undefined ? "" : ` (${op.label})`}`;
  if (op.kind === "collective") {
    throw new EmitError(
      "unsupported-op",
      `${where} is a ${op.collective} collective, which reached the copy-engine backend undecomposed; ${collectiveAlternative(op.collective)}`,
    );
  }
  if (op.reduce !== undefined) {
    throw new EmitError(
      "unsupported-op",
      `${where} reduces (${op.reduce}) into its destination, and a copy engine cannot add: for GEMM+ReduceScatter compile kind "gemm-rs" with reduceScatterDirect({ afterCompute: true }) (deliveries, then the rs-reduce kernel); for AllGather+GEMM use allGatherSwizzle({ side: 'push' }) or allGatherRing({ side: 'push' })`,
    );
  }
  const ops: HostOp[] = [];
  for (const dep of op.deps) {
    if (dep.kind === "compute") {
      throw new EmitError(
        "unsupported-dependency",
        `${where} waits on compute, and AllGather+GEMM's copies depend only on other copies: gather an operand that exists before the GEMM (allGatherSwizzle({ side: 'push' })), or compile kind "gemm-rs" with reduceScatterDirect({ afterCompute: true }) to send tiles as the GEMM finishes them`,
      );
    }
    if (dep.rank === rank && dep.stream === stream && dep.index < index) continue; // stream order
    const ref = signals.notify[dep.rank]?.[dep.stream]?.[dep.index];
    if (ref === null || ref === undefined) {
      throw new EmitError(
        "unsupported-dependency",
        `${where} depends on rank ${dep.rank} stream ${dep.stream} op ${dep.index}, whose completion signals no slot, so no stream can wait on it: call planSignals(plan) before compiling, or use allGatherRing({ side: 'push' })`,
      );
    }
    // A peer's slot is waited on through its symmetric signal buffer (`rank` names it).
    ops.push({ kind: "wait", slot: ref.slot, arrivals: slotOf(signals, ref).arrivals, ...(ref.rank === rank ? {} : { rank: ref.rank }) });
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
    throw new EmitError(
      "unsupported-op",
      `${where} signals slot ${ref.slot} on rank ${ref.rank}, which has several writers, and a stream write sets the epoch, so each slot needs exactly one: write each destination chunk with one op, as allGatherSwizzle({ side: 'push' }) does`,
    );
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

/** The nearest plan that works for a collective the copy engine cannot realise. */
export function collectiveAlternative(kind: string): string {
  switch (kind) {
    case "all-gather":
      return "compile() decomposes it into P2P pushes (decomposeCollectives); or use allGatherSwizzle({ side: 'push' })";
    case "all-to-all":
      return "AllGather+GEMM gathers one operand: use allGatherSwizzle({ side: 'push' }), or collectiveDirect({ collective: 'all-gather' })";
    case "reduce-scatter":
      return 'a copy engine cannot reduce: compile kind "gemm-rs" (the ReduceScatter after compute goes through deliveries and the rs-reduce kernel), or use reduceScatterDirect({ afterCompute: true })';
    default:
      return "an all-reduce needs a reduction the copy engine cannot do: compile kind \"gemm-ar\" with allReducePartitioned({ reduceScatter: 'direct', allGather: 'swizzle', afterCompute: true }) or allReduceTilewise({ tile: [BLOCK_M, BLOCK_N] })";
  }
}

/**
 * Host ops of every rank: plan stream `s` of rank `r` becomes host stream `comm<s>` of
 * rank `r`, op by op.
 * A dependency on another rank's op becomes a `wait` on that rank's slot (`rank` set).
 * @throws {EmitError} `unsupported-op` (collectives, reductions, multi-writer slots) or
 *   `unsupported-dependency` (compute dependencies, an op that signals nothing); each
 *   message ends with the nearest plan that works.
 */
export function planHostOps(plan: ChunkPlan, signals: PlanSignals): RankHostOps[] {
  // Reductions first: their slots have several writers, which would otherwise be reported.
  for (const rp of plan.ranks) {
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        if (op.kind !== "collective" && op.reduce !== undefined) hostOpsOfOp(plan, signals, op, rp.rank, s, i);
      }),
    );
  }
  return plan.ranks.map((rp) => ({
    rank: rp.rank,
    streams: rp.streams.map((ops, s) => ({
      name: commStreamName(s),
      ops: ops.flatMap((op, i) => hostOpsOfOp(plan, signals, op, rp.rank, s, i)),
    })),
  }));
}
