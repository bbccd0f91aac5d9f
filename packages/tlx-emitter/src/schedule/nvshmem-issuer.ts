// Which rank issues a plan op as an NVSHMEM put, and whether what it puts is ready when it does.
//
// The `nvshmem` backend realises a pull as a push by the rank that holds the data: a pull on rank
// r from rank p of region X (the puller reads p's X once p has it) becomes p's put with signal of
// X to r, adding 1 to r's slot of X. This is the same transfer with the same readiness condition,
// seen from the other side. Why not NVSHMEM get: a get is issued by the puller, which would have
// to learn that p's copy of X is ready. NVSHMEM waits (`signal_wait_until`) read only local
// signals, so p would have to signal r first (a put of its own), or r would poll p's slot over
// the network; and a get adds no signal on completion, so r would then need a quiet and a local
// signal for its own consumer. The holder's put waits on its own slot (ovl's bounded, named
// `wait_slot`) and signals r's slot in the same operation, which r's consumer already waits on.
import { intersect, type ChunkPlan, type Op, type Region, type SignalSlot } from "@ovl/chunk-plan";
import { EmitError } from "../core/writer/index.js";
import type { PlanSignals } from "./host-ops.js";

/** Who issues a (non-collective) op as an NVSHMEM put and where it lands. */
export interface Issued {
  /** The rank whose `nvshmem-push` kernel puts it: the pusher, the holder a pull reads from, the copier. */
  readonly issuer: number;
  /** The PE the data and its signal land on. */
  readonly dstRank: number;
}

/** The issuer and destination of `op` listed on `rank` (a push from `rank`, a pull by `rank`, or a local copy). */
export function issuedAs(op: Exclude<Op, { kind: "collective" }>, rank: number): Issued {
  if (op.kind === "local-copy") return { issuer: rank, dstRank: rank };
  return op.side === "push" ? { issuer: rank, dstRank: op.peer } : { issuer: op.peer, dstRank: rank };
}

/** Chunk slots of `rank` (regions that arrive there) with their regions, tile-done slots excluded. */
function arrivingSlots(signals: PlanSignals, rank: number): { slot: number; region: Region }[] {
  return (signals.slots.find((e) => e.rank === rank)?.slots ?? []).flatMap((s: SignalSlot) =>
    s.purpose !== "tile-done" && s.region !== undefined ? [{ slot: s.slot, region: s.region }] : [],
  );
}

/**
 * Checks that a put of `src` issued by `issuer`, waiting on its slot `waitSlot` (plan numbering;
 * `undefined`: no wait), reads only data that is there when the put starts: every region that
 * arrives at the issuer and overlaps `src` must be the one the put waits for (the rest of `src` is
 * the issuer's own data). A stream orders a plan's ops, but an `nvshmem-push` row waits on one
 * slot and the rows run in parallel: a forward of a region assembled from several arrivals (the
 * intra-node-first hierarchical AllGather's node blocks) would read chunks still in flight.
 * @throws {EmitError} `unsupported-dependency`, naming `where`, the arrivals and `nearest`.
 */
export function checkSourceReady(
  plan: ChunkPlan,
  signals: PlanSignals,
  issuer: number,
  src: Region,
  waitSlot: number | undefined,
  where: string,
  nearest: string,
): void {
  const unwaited = arrivingSlots(signals, issuer).filter((s) => s.slot !== waitSlot && intersect(s.region, src) !== undefined);
  if (unwaited.length === 0) return;
  const decl = plan.tensors.find((t) => t.name === src.tensor);
  const rowsOf = (r: Region) => `rows ${r.offsets[0]}..${(r.offsets[0] ?? 0) + (r.sizes[0] ?? 0)}`;
  throw new EmitError(
    "unsupported-dependency",
    `${where} puts ${decl?.name ?? src.tensor} ${rowsOf(src)} from rank ${issuer}, which receives ${unwaited
      .map((s) => `${rowsOf(s.region)} (slot ${s.slot})`)
      .join(
        ", ",
      )} there ${waitSlot === undefined ? "without waiting" : `besides slot ${waitSlot} it waits on`}; an nvshmem put waits on one slot and the rows run in parallel, so it would read rows still in flight: ${nearest}`,
  );
}
