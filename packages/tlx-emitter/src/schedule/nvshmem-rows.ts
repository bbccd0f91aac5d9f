// The `nvshmem` backend of a gathering chunk plan's transfers: every push, and every pull turned
// into the holder's push (`nvshmem-issuer.ts` says why), becomes one row of the `nvshmem-push`
// kernel's segment table on the rank that issues it, a put-with-signal of one contiguous run
// that adds 1 to the destination's slot of the chunk. The rows of a rank run in parallel (the
// kernel's programs stride over them), so only what a row itself waits on orders it: a put that
// forwards a chunk (a push ring, a hierarchical plan's relay) waits on the issuing rank's own
// slot for it, and reads nothing else that arrives there.
import type { ChunkPlan, Op, SignalRef, SignalSlot } from "@ovl/chunk-plan";
import { NVSHMEM_PUSH_FIELDS, nvshmemSlot } from "../backends/triton/kernels/index.js";
import { EmitError } from "../core/writer/index.js";
import { collectiveAlternative, type PlanSignals } from "./host-ops.js";
import { checkSourceReady, issuedAs } from "./nvshmem-issuer.js";
import { elementRuns, pairRuns } from "./segments.js";

/** The nearest plans the `nvshmem` backend realises, for refusals. */
const NEAREST =
  "allGatherSwizzle({ side: 'push' }), allGatherRing({ side: 'push' }) or allGatherHierarchical({ order: 'inter-node-first' })";

/** Every rank's `nvshmem-push` rows (`NVSHMEM_PUSH_FIELDS` each) and the one source and destination buffer they move between. */
export interface NvshmemRows {
  readonly src: string;
  readonly dst: string;
  /** `rows[rank]`: the rows that rank issues (its pushes and copies, its peers' pulls from it), in depth order. */
  readonly rows: number[][][];
}

function slotOf(signals: PlanSignals, ref: SignalRef): SignalSlot {
  const slot = signals.slots.find((e) => e.rank === ref.rank)?.slots.find((x) => x.slot === ref.slot);
  if (slot === undefined)
    throw new EmitError("bad-plan", `signal (rank ${ref.rank}, slot ${ref.slot}) is not allocated in the plan's signals`);
  return slot;
}

/** The row of one op (`where` names it in errors) and the rank that issues it, its slots spread to NVSHMEM signal words (`nvshmemSlot`). */
function rowOfOp(
  plan: ChunkPlan,
  signals: PlanSignals,
  op: Op,
  rank: number,
  stream: number,
  index: number,
  where: string,
): { issuer: number; row: number[] } {
  if (op.kind === "collective")
    throw new EmitError(
      "unsupported-op",
      `${where} is a ${op.collective} collective, which the nvshmem backend cannot put; ${collectiveAlternative(op.collective)}`,
    );
  if (op.reduce !== undefined)
    throw new EmitError(
      "unsupported-op",
      `${where} reduces (${op.reduce}) into its destination, and an NVSHMEM put cannot add: use ${NEAREST}`,
    );
  // A pull by `rank` from its peer is the peer's put to `rank`: it waits on the peer's slots.
  const { issuer, dstRank } = issuedAs(op, rank);
  const waits = op.deps.map((dep) => {
    if (dep.kind === "compute")
      throw new EmitError(
        "unsupported-dependency",
        `${where} waits on compute, and AllGather+GEMM's puts depend only on other transfers: gather an operand that exists before the GEMM (${NEAREST})`,
      );
    if (op.kind === "p2p" && op.side === "push" && dep.rank === rank && dep.stream === stream)
      throw new EmitError(
        "unsupported-dependency",
        `${where} depends on op ${dep.index} of its own stream, and the nvshmem kernel's rows run in parallel (only a slot orders them): use ${NEAREST}`,
      );
    const ref = signals.notify[dep.rank]?.[dep.stream]?.[dep.index];
    if (ref === null || ref === undefined)
      throw new EmitError(
        "unsupported-dependency",
        `${where} depends on rank ${dep.rank} stream ${dep.stream} op ${dep.index}, whose completion signals no slot: call planSignals(plan) before compiling`,
      );
    if (ref.rank !== issuer)
      throw new EmitError(
        "unsupported-dependency",
        `${where} waits on a slot of rank ${ref.rank}, and its put is issued on rank ${issuer}, which waits on its own slots: use ${NEAREST}`,
      );
    return { planSlot: ref.slot, slot: nvshmemSlot(ref.slot), arrivals: slotOf(signals, ref).arrivals };
  });
  if (waits.length > 1)
    throw new EmitError(
      "unsupported-dependency",
      `${where} waits on ${waits.length} slots, and an nvshmem row waits on one: use ${NEAREST}`,
    );
  checkSourceReady(plan, signals, issuer, op.src, waits[0]?.planSlot, where, `use ${NEAREST}`);
  const decl = (name: string) => {
    const d = plan.tensors.find((t) => t.name === name);
    if (d === undefined) throw new EmitError("bad-plan", `${where} names tensor ${name}, which the plan does not declare`);
    return d;
  };
  const pairs = pairRuns(elementRuns(op.src, decl(op.src.tensor)), elementRuns(op.dst, decl(op.dst.tensor)));
  if (pairs.length !== 1)
    throw new EmitError(
      "unsupported-op",
      `${where} moves ${pairs.length} contiguous runs, and an NVSHMEM put with its one signal moves one: chunk the tensor by rows (${NEAREST})`,
    );
  const ref = signals.notify[rank]?.[stream]?.[index] ?? null;
  if (ref === null)
    throw new EmitError(
      "bad-plan",
      `${where} signals no slot, and every NVSHMEM put signals its arrival: call planSignals(plan) before compiling`,
    );
  if (ref.rank !== dstRank)
    throw new EmitError(
      "bad-plan",
      `${where} lands on rank ${dstRank} but signals a slot of rank ${ref.rank}; a put signals where its data lands`,
    );
  const p = pairs[0]!;
  const wait = waits[0] ?? { slot: -1, arrivals: 0 };
  return { issuer, row: [p.src.offset, dstRank, p.dst.offset, p.src.length, wait.slot, wait.arrivals, nvshmemSlot(ref.slot)] };
}

/**
 * The `nvshmem-push` rows of every rank of `plan` (pushes, pulls as the holder's pushes, and local
 * copies of one source and one destination tensor, each one contiguous run, each signalling the
 * slot of the rank it lands on, each waiting on at most one slot of the rank issuing it and
 * reading nothing else that arrives there), slots spread to NVSHMEM signal words.
 * @throws {EmitError} `unsupported-op` (collectives, reductions, strided runs) or
 *   `unsupported-dependency` (compute, own-stream, peer-slot or several waits, a source other
 *   arrivals still write), `bad-plan` for a plan without signals; each message names the
 *   nearest plan that works.
 */
export function nvshmemPlanRows(plan: ChunkPlan, signals: PlanSignals, world: number): NvshmemRows {
  const tensors = { src: new Set<string>(), dst: new Set<string>() };
  const rows: number[][][] = Array.from({ length: world }, () => []);
  for (const rp of [...plan.ranks].sort((x, y) => x.rank - y.rank))
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        const where = `rank ${rp.rank} stream ${s} op ${i}${op.label === undefined ? "" : ` (${op.label})`}`;
        const { issuer, row } = rowOfOp(plan, signals, op, rp.rank, s, i, where);
        if (op.kind !== "collective") {
          tensors.src.add(op.src.tensor);
          tensors.dst.add(op.dst.tensor);
        }
        const issued = rows[issuer];
        if (issued === undefined) throw new EmitError("bad-plan", `${where} is issued by rank ${issuer}, outside the world of ${world}`);
        issued.push(row);
      }),
    );
  const [src, ...moreSrc] = [...tensors.src];
  const [dst, ...moreDst] = [...tensors.dst];
  if (src === undefined || dst === undefined) throw new EmitError("bad-plan", `plan "${plan.name}" moves nothing`);
  if (moreSrc.length > 0 || moreDst.length > 0)
    throw new EmitError(
      "bad-plan",
      `plan "${plan.name}" moves between tensors ${[...tensors.src].join(", ")} and ${[...tensors.dst].join(", ")}; the nvshmem kernel puts from one tensor into one`,
    );
  return { src, dst, rows: byDepth(rows) };
}

/**
 * Each rank's rows stably sorted by their depth in the wait graph (0: waits on nothing; d: waits on a
 * slot signalled by rows of depth at most d − 1). A program of the kernel takes its rows in table
 * order, so a forward listed before the put it waits for could hold a program that a peer's put
 * needs: in depth order every table lists a row after the rows its wait depends on, and the
 * programs always move on (as long as every program of the launch runs, as the reserved SMs
 * ensure on a GPU).
 * @throws {EmitError} `unsupported-dependency` for a wait no put signals, or a cycle of waits.
 */
function byDepth(rows: number[][][]): number[][][] {
  const at = (f: (typeof NVSHMEM_PUSH_FIELDS)[number]) => NVSHMEM_PUSH_FIELDS.indexOf(f);
  // The rows (with the rank issuing each) that signal slot `rank:slot`.
  const producers = new Map<string, { rank: number; row: number[] }[]>();
  rows.forEach((rs, rank) => {
    for (const row of rs) {
      const key = `${row[at("dst_rank")]}:${row[at("notify_at")]}`;
      producers.set(key, [...(producers.get(key) ?? []), { rank, row }]);
    }
  });
  const depth = new Map<number[], number>();
  const visiting = new Set<number[]>();
  const depthOf = (rank: number, r: number[]): number => {
    const known = depth.get(r);
    if (known !== undefined) return known;
    const wait = r[at("wait_at")]!;
    if (wait < 0) return 0;
    if (visiting.has(r))
      throw new EmitError("unsupported-dependency", `rank ${rank}: the puts wait on each other in a cycle (slot ${wait})`);
    const from = producers.get(`${rank}:${wait}`);
    if (from === undefined)
      throw new EmitError("unsupported-dependency", `rank ${rank}: a put waits on slot ${wait}, which no put signals`);
    visiting.add(r);
    const d = 1 + Math.max(...from.map((p) => depthOf(p.rank, p.row)));
    visiting.delete(r);
    depth.set(r, d);
    return d;
  };
  return rows.map((rs, rank) =>
    rs
      .map((r, i) => ({ r, i, d: depthOf(rank, r) }))
      .sort((a, b) => a.d - b.d || a.i - b.i)
      .map((x) => x.r),
  );
}
