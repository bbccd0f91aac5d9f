// The data movement of a hierarchical (two-level) ReduceScatter plan for GEMM+RS, per m-block:
// rank r = (n, g) of a [nodes, gpusPerNode] mesh sums, for every shard of its rail (same GPU
// index g, every node), its node peers' partial rows (stage 1, inside the node), then receives
// the other nodes' sums of its own shard over the rail (stage 2). The plan
// (`reduceScatterHierarchical`) says this with pulls that accumulate into the partial tensor;
// this module checks that a plan says exactly that and lays the m-blocks out: rank r's rail
// blocks in a compact list, the other nodes' shards first (what stage 2 sends) and its own last.
import type { ChunkPlan, Op, TileSchedule } from "@ovl/chunk-plan";
import { EmitError } from "../core/writer/index.js";

/** The nearest plan the hierarchical GEMM+RS realises, for refusals. */
export const HIERARCHICAL_RS = "reduceScatterHierarchical({ afterCompute: true }) over a [nodes, gpusPerNode] mesh";

/** The two-level layout of a hierarchical GEMM+RS: sizes in m-blocks of `BLOCK_M` rows. */
export interface HierarchicalRsLayout {
  readonly nodes: number;
  readonly gpus: number;
  readonly world: number;
  /** m-blocks of one rank's slab (its shard of the output). */
  readonly slabBlocks: number;
  /** m-blocks of a rank's rail: `nodes · slabBlocks`. */
  readonly railBlocks: number;
  /** `railBlock(r, i)`: the global m-block (of the partial tensor) at compact position `i` of rank r's rail list. */
  railBlock(rank: number, i: number): number;
  /** `railPosition(r, m)`: the first compact position of node m's shard in rank r's rail list. */
  railPosition(rank: number, node: number): number;
}

/** The layout of `nodes × gpus` ranks whose slabs are `slabBlocks` m-blocks. */
export function hierarchicalRsLayout(nodes: number, gpus: number, slabBlocks: number): HierarchicalRsLayout {
  const railPosition = (rank: number, node: number): number => {
    const t = (node - Math.floor(rank / gpus) + nodes) % nodes;
    return (t === 0 ? nodes - 1 : t - 1) * slabBlocks;
  };
  return {
    nodes,
    gpus,
    world: nodes * gpus,
    slabBlocks,
    railBlocks: nodes * slabBlocks,
    railPosition,
    railBlock(rank, i) {
      const n = Math.floor(rank / gpus);
      const pos = Math.floor(i / slabBlocks);
      // Position p holds node offset p + 1 (other nodes first), the last position the rank's own node.
      const node = pos === nodes - 1 ? n : (n + pos + 1) % nodes;
      return (node * gpus + (rank % gpus)) * slabBlocks + (i % slabBlocks);
    },
  };
}

/**
 * Whether `plan` sums partials inside the nodes of a two-level mesh: it accumulates into its
 * partial tensor (the hierarchical ReduceScatter's stage 1; a ring on one level also does, and is
 * refused as a ReduceScatter whose deliveries are not direct).
 */
export function sumsInsideNodes(plan: ChunkPlan): boolean {
  const src = plan.claim?.src;
  return (
    plan.mesh.shape.length === 2 &&
    src !== undefined &&
    plan.ranks.some((rp) =>
      rp.streams.some((ops) => ops.some((op) => op.kind !== "collective" && op.reduce !== undefined && op.dst.tensor === src)),
    )
  );
}

/**
 * Checks that `plan` is the hierarchical ReduceScatter of the schedule's partial tensor `src` into
 * slabs of `slabBlocks` m-blocks and returns its layout: every stage-1 op brings a node peer's partial
 * rows of a shard of the rank's rail into its own (accumulating), every stage-2 op brings another
 * node's partial rows of the rank's own shard from the same GPU index into the output, the local
 * copies bring the rank's own node sum; and every (peer, m-block) each stage needs is moved.
 * @throws {EmitError} `unsupported-op` for another op, `bad-plan` for a mesh, rows or a coverage that differs.
 */
export function checkHierarchicalRs(plan: ChunkPlan, schedule: TileSchedule, src: string, slabBlocks: number): HierarchicalRsLayout {
  const [nodes, gpus, ...more] = plan.mesh.shape;
  if (nodes === undefined || gpus === undefined || more.length > 0 || nodes < 2 || gpus < 2)
    throw new EmitError(
      "bad-plan",
      `a hierarchical GEMM+RS needs a mesh of 2 or more nodes of 2 or more GPUs, got [${plan.mesh.shape.join(", ")}]`,
    );
  const out = plan.claim?.tensor;
  const { BM } = schedule.tiling.tile;
  const { N } = schedule.tiling.problem;
  const L = hierarchicalRsLayout(nodes, gpus, slabBlocks);
  const slabRows = slabBlocks * BM;
  const nodeOf = (r: number) => Math.floor(r / gpus);
  const moved = new Set<string>();
  for (const rp of plan.ranks)
    rp.streams.forEach((ops, s) =>
      ops.forEach((op: Op, i) => {
        const where = `rank ${rp.rank} stream ${s} op ${i}${op.label === undefined ? "" : ` (${op.label})`}`;
        if (op.kind === "collective") throw new EmitError("unsupported-op", `${where} is a collective: use ${HIERARCHICAL_RS}`);
        const [r0 = 0, c0 = 0] = op.src.offsets;
        const [rows = 0, cols = 0] = op.src.sizes;
        if (op.src.tensor !== src || c0 !== 0 || cols !== N || r0 % BM !== 0 || rows % BM !== 0)
          throw new EmitError(
            "unsupported-op",
            `${where} reads ${op.src.tensor} rows ${r0}..${r0 + rows} columns ${c0}..${c0 + cols}; a hierarchical GEMM+RS moves whole m-blocks of ${BM} rows of ${src}: use ${HIERARCHICAL_RS}`,
          );
        const [from, to] = op.kind === "local-copy" ? [rp.rank, rp.rank] : op.side === "push" ? [rp.rank, op.peer] : [op.peer, rp.rank];
        const shard = Math.floor(r0 / slabRows);
        if (Math.floor((r0 + rows - 1) / slabRows) !== shard)
          throw new EmitError("bad-plan", `${where} moves rows ${r0}..${r0 + rows}, across two shards of ${slabRows} rows`);
        const stage1 = op.dst.tensor === src && from !== to && nodeOf(from) === nodeOf(to) && shard % gpus === to % gpus;
        const stage2 = op.dst.tensor === out && shard === to && from % gpus === to % gpus && nodeOf(from) !== nodeOf(to);
        const own = op.kind === "local-copy" && op.dst.tensor === out && shard === to;
        if (!stage1 && !stage2 && !own)
          throw new EmitError(
            "unsupported-op",
            `${where} moves rows ${r0}..${r0 + rows} of ${op.src.tensor} from rank ${from} into ${op.dst.tensor} on rank ${to}, which is neither a node peer's partial of a shard of rank ${to}'s rail nor a node sum of rank ${to}'s own shard from its rail: use ${HIERARCHICAL_RS}`,
          );
        if (own) return;
        for (let b = r0 / BM; b < (r0 + rows) / BM; b++) moved.add(`${stage1 ? 1 : 2}:${from}:${to}:${b}`);
      }),
    );
  for (let to = 0; to < L.world; to++) {
    const need: string[] = [];
    for (let from = 0; from < L.world; from++) {
      if (from !== to && nodeOf(from) === nodeOf(to))
        for (let i = 0; i < L.railBlocks; i++) need.push(`1:${from}:${to}:${L.railBlock(to, i)}`);
      if (from % gpus === to % gpus && nodeOf(from) !== nodeOf(to))
        for (let j = 0; j < slabBlocks; j++) need.push(`2:${from}:${to}:${to * slabBlocks + j}`);
    }
    const missing = need.find((k) => !moved.has(k));
    if (missing !== undefined) {
      const [stage, from, , b] = missing.split(":");
      throw new EmitError(
        "bad-plan",
        `plan "${plan.name}" does not bring rank ${from}'s ${stage === "1" ? "partial" : "node sum"} of m-block ${b} to rank ${to} (stage ${stage}): use ${HIERARCHICAL_RS}`,
      );
    }
  }
  return L;
}
