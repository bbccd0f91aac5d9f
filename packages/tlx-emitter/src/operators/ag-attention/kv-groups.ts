// Arrival groups of a kv loop: the visit positions cut where a block first needs a chunk slot
// that no earlier position needed. Each group is waited for once, before an inner kv loop over
// its blocks, so no wait sits inside the loop Triton software-pipelines.
import { evaluateMap, type IndexMap } from "@ovl/mapping";
import type { KvGroups } from "../../local/kv-block.js";
import type { Table } from "../../core/manifest/schema.js";

/** Names of the three tables that describe a kv loop's arrival groups (kernel parameters). */
export const KV_GROUP_TABLES = { starts: "ovl_kv_group_start", waitAt: "ovl_kv_group_wait_at", waits: "ovl_kv_group_waits" } as const;

/** Name of the table of each group's first kv block (present when every rank's groups are block runs, {@link groupBlockRuns}). */
export const KV_GROUP_BLOCK_TABLE = "ovl_kv_group_block";

/** One rank's arrival groups: `starts[g]` the first visit position of group g, `waits[g]` the slots it waits for first. */
export interface RankGroups {
  starts: number[];
  waits: number[][];
}

/**
 * One rank's arrival groups over `blocks` visit positions: `blockOf(p)` the kv block visited
 * at position p, `slotsOf(b)` the chunk slots whose copies land block b's rows. A new group
 * starts at every position whose block needs a slot that no earlier position needed, and
 * waits for exactly those slots; position 0 always starts a group. Pure.
 */
export function rankGroups(blocks: number, blockOf: (p: number) => number, slotsOf: (b: number) => readonly number[]): RankGroups {
  const waited = new Set<number>();
  const out: RankGroups = { starts: [], waits: [] };
  for (let p = 0; p < blocks; p++) {
    const fresh = [...new Set(slotsOf(blockOf(p)))].filter((s) => s >= 0 && !waited.has(s));
    if (p > 0 && fresh.length === 0) continue;
    for (const s of fresh) waited.add(s);
    out.starts.push(p);
    out.waits.push(fresh);
  }
  return out;
}

/**
 * The arrival groups of every rank as tables (each rank's rows padded to one length: empty
 * groups at `blocks`, no waits) and the group count every rank loops over. `order` maps a
 * visit position (`ovl_m`) to a kv block, `slots[j]` a block to its j-th slot (-1 = none),
 * both over `ovl_rank`, reading `tables`. Pure.
 */
export function kvGroupTables(
  order: IndexMap,
  slots: readonly IndexMap[],
  tables: readonly Table[],
  world: number,
  blocks: number,
): { groups: KvGroups; tables: Table[] } {
  const per: RankGroups[] = [];
  const rankTables = (r: number) => Object.fromEntries(tables.map((x) => [x.name, x.values[r] as number[]]));
  const blockAt = (r: number, p: number) => evaluateMap(order, { ovl_m: p, ovl_rank: r }, rankTables(r));
  for (let r = 0; r < world; r++) {
    const t = rankTables(r);
    per.push(
      rankGroups(
        blocks,
        (p) => evaluateMap(order, { ovl_m: p, ovl_rank: r }, t),
        (b) => slots.map((s) => evaluateMap(s, { ovl_m: b, ovl_rank: r }, t)),
      ),
    );
  }
  const count = Math.max(...per.map((g) => g.starts.length));
  const waitLen = Math.max(1, ...per.map((g) => g.waits.flat().length));
  const starts = per.map((g) => [...g.starts, ...Array<number>(count + 1 - g.starts.length).fill(blocks)]);
  const waitAt = per.map((g) => {
    const at = [0];
    for (const w of g.waits) at.push((at[at.length - 1] as number) + w.length);
    return [...at, ...Array<number>(count + 1 - at.length).fill(at[at.length - 1] as number)];
  });
  const waits = per.map((g) => {
    const flat = g.waits.flat();
    return [...flat, ...Array<number>(waitLen - flat.length).fill(0)];
  });
  const table = (name: string, values: number[][]): Table => ({ name, dtype: "int32", values });
  const out = [table(KV_GROUP_TABLES.starts, starts), table(KV_GROUP_TABLES.waitAt, waitAt), table(KV_GROUP_TABLES.waits, waits)];
  // Each group's first block, when every group of every rank is a run of consecutive blocks:
  // then a kv loop's causal bound clips each group to a position range (no `if` in the loop).
  const firsts = starts.map((s, r) => groupBlockRuns(s.slice(0, count), blocks, (p) => blockAt(r, p)));
  if (firsts.every((f) => f !== undefined)) {
    out.push(
      table(
        KV_GROUP_BLOCK_TABLE,
        firsts.map((f) => [...(f as number[]), blocks]),
      ),
    );
    return { groups: { count, ...KV_GROUP_TABLES, firsts: KV_GROUP_BLOCK_TABLE }, tables: out };
  }
  return { groups: { count, ...KV_GROUP_TABLES }, tables: out };
}

/**
 * The kv block each of one rank's arrival groups starts at, when every group visits
 * consecutive blocks in increasing order (position `p` of a group starting at position
 * `starts[g]` reads block `firsts[g] + p - starts[g]`); `undefined` when some group does not.
 * Only then can a group's positions be clipped by a block range (a causal bound) with
 * {@link clipGroup}. `blocks` is the number of visit positions; empty groups get `blocks`. Pure.
 */
export function groupBlockRuns(starts: readonly number[], blocks: number, blockOf: (p: number) => number): number[] | undefined {
  const firsts: number[] = [];
  for (let g = 0; g < starts.length; g++) {
    const lo = starts[g] as number;
    const hi = Math.min(starts[g + 1] ?? blocks, blocks);
    if (lo >= hi) {
      firsts.push(blocks);
      continue;
    }
    const first = blockOf(lo);
    for (let p = lo + 1; p < hi; p++) if (blockOf(p) !== first + (p - lo)) return undefined;
    firsts.push(first);
  }
  return firsts;
}

/**
 * The visit positions `[lo, hi)` of a group whose blocks run consecutively from `first`,
 * clipped to the positions whose block lies in `[blockLo, blockHi)`: a half-open position
 * range, `lo === hi` when none does. The emitted kernel computes the same bounds with
 * `tl.maximum`/`tl.minimum`, so an off-diagonal loop and a diagonal loop of a causal body
 * each visit exactly their blocks of the group. Pure.
 */
export function clipGroup(lo: number, hi: number, first: number, blockLo: number, blockHi: number): [number, number] {
  const from = Math.max(lo, lo + blockLo - first);
  const to = Math.min(hi, lo + blockHi - first);
  return to > from ? [from, to] : [from, from];
}
