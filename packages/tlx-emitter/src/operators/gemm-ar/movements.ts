// GEMM+AllReduce data movement read from an all-reduce plan of the GEMM's output: which of
// the two realisations it asks for, and, for the partitioned one, its ReduceScatter half
// (a plan of its own, realised by the GEMM+RS deliveries) and the AllGather chunks that carry
// each rank's reduced rows to every peer.
import type { ChunkPlan, Op, Region } from "@ovl/chunk-plan";
import { EmitError } from "../../core/writer/index.js";

/** The nearest plans that work, as refusals name them. */
export const AR_PLANS = {
  partitioned: "allReducePartitioned({ reduceScatter: 'direct', allGather: 'swizzle', afterCompute: true })",
  tilewise: "allReduceTilewise({ tile: [BLOCK_M, BLOCK_N] })",
} as const;

/** One chunk of reduced rows `row0 .. row0 + rows` of the output moving from their owner `from` to `to`. */
export interface Gather {
  readonly from: number;
  readonly to: number;
  readonly row0: number;
  readonly rows: number;
}

/** How a GEMM+AllReduce plan is realised. */
export type AllReduceForm =
  | {
      /** DistFuse's tile-wise AllReduce: all-reduce collectives over regions of the partial output. */
      readonly kind: "tilewise";
      readonly src: string;
      readonly out: string;
    }
  | {
      /** ReduceScatter (deliveries + reduction), then an AllGather of the reduced slabs. */
      readonly kind: "partitioned";
      readonly src: string;
      readonly out: string;
      /** The plan's ReduceScatter ops only (ops reading `src`), streams kept. */
      readonly reduceScatter: ChunkPlan;
      readonly gathers: readonly Gather[];
    };

function sameRegion(a: Region, b: Region): boolean {
  return a.offsets.length === b.offsets.length && a.offsets.every((o, d) => o === b.offsets[d] && a.sizes[d] === b.sizes[d]);
}

function where(rank: number, s: number, i: number, op: Op): string {
  return `rank ${rank} stream ${s} op ${i}${op.label === undefined ? "" : ` (${op.label})`}`;
}

/** The tensor the plan's compute dependencies name (the GEMM's partial output), if any. */
function computed(plan: ChunkPlan): string | undefined {
  for (const r of plan.ranks) {
    for (const ops of r.streams) {
      for (const op of ops) {
        const dep = op.deps.find((d) => d.kind === "compute");
        if (dep !== undefined && dep.kind === "compute") return dep.region.tensor;
      }
    }
  }
  return undefined;
}

/**
 * The realisation `plan` asks for, given the output's row count `M` and column count `N`:
 * - every op an `all-reduce` collective of a region of the partial tensor into the same
 *   region of the output, over all ranks → `tilewise` (a direct collective, without compute
 *   dependencies, too: the realisation waits on each tile's compute);
 * - P2P and local ops only → `partitioned`: ops reading the partial tensor are the
 *   ReduceScatter half (checked later by the GEMM+RS deliveries); every op reading the
 *   output must carry whole rows of one rank's slab (`M / W` rows) from that rank, the
 *   slab's owner, to a peer, at the same place, without reducing: a chunk of the AllGather.
 * @throws {EmitError} `bad-plan` (a claim of another collective, no compute dependency,
 *   regions that move), `unsupported-op` (collectives mixed with transfers or of another
 *   kind, a ring that forwards rows it received, no AllGather half); each names the nearest
 *   plan that works.
 */
export function allReduceForm(plan: ChunkPlan, M: number, N: number): AllReduceForm {
  const world = plan.mesh.shape.reduce((a, b) => a * b, 1);
  if (plan.claim !== undefined && plan.claim.collective !== "all-reduce") {
    throw new EmitError(
      "bad-plan",
      `plan "${plan.name}" claims a ${plan.claim.collective}; GEMM+AllReduce realises an all-reduce of the GEMM's output: use ${AR_PLANS.partitioned} or ${AR_PLANS.tilewise}`,
    );
  }
  const all = plan.ranks.flatMap((r) => r.streams.flatMap((ops, s) => ops.map((op, i) => ({ rank: r.rank, s, i, op }))));
  const collectives = all.filter((x) => x.op.kind === "collective");
  // An all-reduce collective reads the GEMM's output; its tile-wise realisation waits on each
  // tile's compute whether or not the plan says so (a direct collective does not).
  const src = computed(plan) ?? collectives[0]?.op.src.tensor;
  if (src === undefined) {
    throw new EmitError(
      "bad-plan",
      `plan "${plan.name}" never waits on compute; a GEMM+AllReduce plan reduces tiles as the GEMM finishes them: use ${AR_PLANS.partitioned} or ${AR_PLANS.tilewise}`,
    );
  }
  if (collectives.length > 0) {
    const out = plan.claim?.tensor ?? collectives[0]!.op.dst.tensor;
    for (const { rank, s, i, op } of all) {
      const at = where(rank, s, i, op);
      if (op.kind !== "collective" || op.collective !== "all-reduce") {
        throw new EmitError(
          "unsupported-op",
          `${at} is ${op.kind === "collective" ? `a ${op.collective} collective` : `a ${op.kind} transfer`} beside all-reduce collectives; a tile-wise GEMM+AllReduce is all-reduce collectives only (${AR_PLANS.tilewise}), a partitioned one transfers only (${AR_PLANS.partitioned})`,
        );
      }
      if (op.src.tensor !== src || op.dst.tensor !== out || !sameRegion(op.src, { ...op.dst, tensor: op.src.tensor })) {
        throw new EmitError(
          "bad-plan",
          `${at} all-reduces ${op.src.tensor}[${op.src.offsets.join(",")}] into ${op.dst.tensor}[${op.dst.offsets.join(",")}]; GEMM+AllReduce reduces each region of the partial output ${src} into the same region of ${out}: use ${AR_PLANS.tilewise}`,
        );
      }
      if (op.ranks.length !== world) {
        throw new EmitError(
          "unsupported-op",
          `${at} all-reduces over ranks [${op.ranks.join(", ")}], not all ${world}; GEMM+AllReduce reduces every tile over the whole world: use ${AR_PLANS.tilewise}`,
        );
      }
    }
    return { kind: "tilewise", src, out };
  }

  const rowsPerRank = M / world;
  const reads = all.filter((x) => x.op.src.tensor === src);
  const out = plan.claim?.tensor ?? reads[0]?.op.dst.tensor ?? src;
  const gathers: Gather[] = [];
  for (const { rank, s, i, op } of all) {
    if (op.src.tensor === src) continue;
    const at = where(rank, s, i, op);
    if (op.src.tensor !== out || op.dst.tensor !== out || op.kind !== "p2p" || op.reduce !== undefined) {
      throw new EmitError(
        "unsupported-op",
        `${at} ${op.kind === "p2p" ? (op.reduce !== undefined ? "reduces" : "moves") : "copies"} ${op.src.tensor} into ${op.dst.tensor}; after the ReduceScatter of ${src}, GEMM+AllReduce only sends reduced rows of ${out} from their owner to its peers: use ${AR_PLANS.partitioned}`,
      );
    }
    const [from, to] = op.side === "push" ? [rank, op.peer] : [op.peer, rank];
    const [r0 = 0, c0 = 0] = op.src.offsets;
    const [rows = 0, cols = 0] = op.src.sizes;
    if (!sameRegion(op.src, { ...op.dst, tensor: op.src.tensor }) || c0 !== 0 || cols !== N) {
      throw new EmitError(
        "unsupported-op",
        `${at} moves ${out}[${op.src.offsets.join(",")}; ${op.src.sizes.join("x")}] to [${op.dst.offsets.join(",")}]; the AllGather half moves whole rows to the same place: use ${AR_PLANS.partitioned}`,
      );
    }
    if (!Number.isInteger(rowsPerRank) || r0 < from * rowsPerRank || r0 + rows > (from + 1) * rowsPerRank) {
      throw new EmitError(
        "unsupported-op",
        `${at} sends rows ${r0}..${r0 + rows} of ${out} from rank ${from}, which does not own them (a ring forwards rows it received; the AllGather half pushes each rank's reduced rows from that rank as they are reduced): use ${AR_PLANS.partitioned}`,
      );
    }
    gathers.push({ from, to, row0: r0, rows });
  }
  if (gathers.length === 0 && world > 1) {
    throw new EmitError(
      "unsupported-op",
      `plan "${plan.name}" has no AllGather half: every rank reduces the whole output itself (a one-shot AllReduce reads every tile from every rank); GEMM+AllReduce reduces each tile once, at the rank owning its rows, and sends the sum on: use ${AR_PLANS.tilewise} or ${AR_PLANS.partitioned}`,
    );
  }
  checkGatherCoverage(gathers, world, rowsPerRank, out);
  // Signals are allocated anew for the half: the plan's numbered the AllGather's ops too.
  const { signals: _signals, ...rest } = plan;
  const reduceScatter: ChunkPlan = {
    ...rest,
    ranks: plan.ranks.map((r) => ({ ...r, streams: r.streams.map((ops) => ops.filter((op) => op.src.tensor === src)) })),
  };
  return { kind: "partitioned", src, out, reduceScatter, gathers };
}

/** Every rank receives every row of every peer's slab exactly once. */
function checkGatherCoverage(gathers: readonly Gather[], world: number, rowsPerRank: number, out: string): void {
  for (let to = 0; to < world; to++) {
    for (let from = 0; from < world; from++) {
      if (from === to) continue;
      const runs = gathers
        .filter((g) => g.from === from && g.to === to)
        .map((g) => [g.row0, g.row0 + g.rows] as const)
        .sort((a, b) => a[0] - b[0]);
      let at = from * rowsPerRank;
      for (const [lo, hi] of runs) {
        if (lo !== at) break;
        at = hi;
      }
      if (at !== (from + 1) * rowsPerRank) {
        throw new EmitError(
          "bad-plan",
          `rank ${to} does not receive rows ${at}..${(from + 1) * rowsPerRank} of ${out} from rank ${from} exactly once; the AllGather half must bring every reduced slab to every rank: use ${AR_PLANS.partitioned}`,
        );
      }
    }
  }
}
