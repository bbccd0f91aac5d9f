// Collective ops of a chunk plan (the "direct" path of AutoOverlap §5.1: `collectiveDirect`,
// or a frontend's `collective` op) decomposed into the P2P transfers they stand for, so the
// copy-engine backend can realise them op by op:
// - all-gather: every rank pushes its `src` into slab (its position) of every peer's `dst`;
// - all-to-all: slab j of a rank's `src` is pushed into slab (its position) of rank j's `dst`;
// - reduce-scatter: every rank copies its own slab of `src` into `dst`, then pulls the same
//   slab of every peer's `src`, reducing into `dst` (the direct ReduceScatter; with
//   `afterCompute`, each read waits for the compute tiles writing it, as
//   `reduceScatterDirect({ afterCompute: true })` does, which GEMM+ReduceScatter needs).
// All-reduce is refused: its decomposition would need a reduction and a second phase.
// A dependency on a collective on rank r becomes dependencies on every transfer that writes
// r's `dst` and on r's own last transfer; a transfer inherits the dependencies of the
// collective on both ranks it joins.
import {
  computeDep,
  localCopy,
  opRef,
  pull,
  push,
  type ChunkPlan,
  type CollectiveOp,
  type Dependency,
  type Op,
  type Region,
} from "@ovl/chunk-plan";
import { collectiveAlternative } from "./host-ops.js";
import { EmitError } from "../core/writer/index.js";

/** Options of {@link decomposeCollectives}. */
export interface DecomposeOptions {
  /**
   * Reduce-scatter reads wait for the compute tiles writing what they read (on the rank
   * holding it), as in `reduceScatterDirect({ afterCompute: true })`: the ReduceScatter of a
   * GEMM's output. Default false.
   */
  readonly afterCompute?: boolean;
}

/** Whether `plan` lists any collective op. */
export function hasCollectives(plan: ChunkPlan): boolean {
  return plan.ranks.some((r) => r.streams.some((s) => s.some((op) => op.kind === "collective")));
}

interface Entry {
  readonly op: Op;
  /** For a transfer into another rank's `dst` of the same collective: that rank. */
  readonly into?: number;
}

interface Pos {
  readonly rank: number;
  readonly stream: number;
  readonly index: number;
}

const key = (p: Pos): string => `${p.rank}/${p.stream}/${p.index}`;

/** Slab `j` of `n` along `axis` of `region`. */
function slab(region: Region, axis: number, n: number, j: number, where: string): Region {
  const size = region.sizes[axis];
  const off = region.offsets[axis];
  if (size === undefined || off === undefined)
    throw new EmitError("bad-plan", `${where}: axis ${axis} is outside region of ${region.tensor}`);
  if (size % n !== 0)
    throw new EmitError("bad-plan", `${where}: extent ${size} of ${region.tensor} along axis ${axis} is not ${n} equal slabs`);
  const s = size / n;
  return {
    tensor: region.tensor,
    offsets: region.offsets.map((o, d) => (d === axis ? o + j * s : o)),
    sizes: region.sizes.map((x, d) => (d === axis ? s : x)),
  };
}

function sameRegion(a: Region, b: Region): boolean {
  return (
    a.tensor === b.tensor &&
    a.offsets.every((o, d) => o === b.offsets[d]) &&
    a.sizes.every((x, d) => x === b.sizes[d]) &&
    a.offsets.length === b.offsets.length
  );
}

/**
 * `plan` with every collective op replaced, in place in its stream, by the P2P and local
 * copies it stands for (see the module comment); every dependency renumbered. The result
 * has no `signals` (call `planSignals`), and the same tensors, locals and claim: when the
 * input validates, so does the output, and its symbolic execution is the same collective.
 * @throws {EmitError} `unsupported-op` for an all-reduce (with the nearest plan that works),
 *   `bad-plan` for a collective whose ranks do not all list a matching one.
 */
export function decomposeCollectives(plan: ChunkPlan, options: DecomposeOptions = {}): ChunkPlan {
  if (!hasCollectives(plan)) return plan;
  const afterCompute = options.afterCompute ?? false;
  const byRank = new Map(plan.ranks.map((r) => [r.rank, r]));
  const opAt = (p: Pos): Op | undefined => byRank.get(p.rank)?.streams[p.stream]?.[p.index];

  // The k-th collective of one kind over one rank list on rank r matches the k-th on each peer.
  const groupKey = (c: CollectiveOp): string => `${c.collective}|${c.axis}|${c.ranks.join(",")}`;
  const ordinal = new Map<string, number>();
  const byOrdinal = new Map<string, Pos>();
  for (const rp of plan.ranks) {
    const seen = new Map<string, number>();
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        if (op.kind !== "collective") return;
        const g = groupKey(op);
        const k = seen.get(g) ?? 0;
        seen.set(g, k + 1);
        const pos = { rank: rp.rank, stream: s, index: i };
        ordinal.set(key(pos), k);
        byOrdinal.set(`${rp.rank}#${g}#${k}`, pos);
      }),
    );
  }
  /** The collective on `peer` matching the one at `at`. */
  const counterpart = (at: Pos, c: CollectiveOp, peer: number): { pos: Pos; op: CollectiveOp } => {
    const pos = byOrdinal.get(`${peer}#${groupKey(c)}#${ordinal.get(key(at))!}`);
    const op = pos === undefined ? undefined : opAt(pos);
    if (pos === undefined || op === undefined || op.kind !== "collective") {
      throw new EmitError(
        "bad-plan",
        `rank ${at.rank} stream ${at.stream} op ${at.index} is a ${c.collective} over ranks [${c.ranks.join(", ")}], but rank ${peer} lists no matching collective`,
      );
    }
    return { pos, op };
  };

  // Pass 1: the expansion of each collective (dependencies still in the input's numbering).
  const expansions = new Map<string, Entry[]>();
  for (const rp of plan.ranks) {
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        if (op.kind !== "collective") return;
        const at = { rank: rp.rank, stream: s, index: i };
        expansions.set(key(at), expand(at, op));
      }),
    );
  }

  function expand(at: Pos, c: CollectiveOp): Entry[] {
    const where = `rank ${at.rank} stream ${at.stream} op ${at.index}${c.label === undefined ? "" : ` (${c.label})`}`;
    const n = c.ranks.length;
    const p = c.ranks.indexOf(at.rank);
    if (p < 0)
      throw new EmitError(
        "bad-plan",
        `${where} is a ${c.collective} over ranks [${c.ranks.join(", ")}], which do not include rank ${at.rank}`,
      );
    const label = (what: string) => `${c.label ?? c.collective} ${what}`;
    const depsWith = (peer: ReturnType<typeof counterpart> | undefined, extra: Dependency[] = []): Dependency[] => [
      ...c.deps,
      ...(peer?.op.deps ?? []),
      ...extra,
    ];
    const out: Entry[] = [];
    switch (c.collective) {
      case "all-gather": {
        const own = slab(c.dst, c.axis, n, p, where);
        if (!sameRegion(c.src, own)) out.push({ op: localCopy(c.src, own, { deps: depsWith(undefined), label: label("own slab") }) });
        for (let t = 1; t < n; t++) {
          const q = c.ranks[(p - t + n) % n]!;
          const peer = counterpart(at, c, q);
          out.push({
            op: push(q, c.src, slab(peer.op.dst, c.axis, n, p, where), { deps: depsWith(peer), label: label(`to rank ${q}`) }),
            into: q,
          });
        }
        return out;
      }
      case "all-to-all": {
        const ownSrc = slab(c.src, c.axis, n, p, where);
        const ownDst = slab(c.dst, c.axis, n, p, where);
        if (!sameRegion(ownSrc, ownDst))
          out.push({ op: localCopy(ownSrc, ownDst, { deps: depsWith(undefined), label: label("own slab") }) });
        for (let t = 1; t < n; t++) {
          const j = (p - t + n) % n;
          const q = c.ranks[j]!;
          const peer = counterpart(at, c, q);
          out.push({
            op: push(q, slab(c.src, c.axis, n, j, where), slab(peer.op.dst, c.axis, n, p, where), {
              deps: depsWith(peer),
              label: label(`to rank ${q}`),
            }),
            into: q,
          });
        }
        return out;
      }
      case "reduce-scatter": {
        const reduce = c.reduce ?? "sum";
        const own = slab(c.src, c.axis, n, p, where);
        out.push({
          op: localCopy(own, c.dst, {
            deps: depsWith(undefined, afterCompute ? [computeDep(at.rank, own)] : []),
            label: label("own partial"),
          }),
        });
        for (let t = 1; t < n; t++) {
          const q = c.ranks[(p + t) % n]!;
          const peer = counterpart(at, c, q);
          const theirs = slab(peer.op.src, c.axis, n, p, where);
          out.push({
            op: pull(q, theirs, c.dst, {
              reduce,
              deps: depsWith(peer, afterCompute ? [computeDep(q, theirs)] : []),
              label: label(`from rank ${q}`),
            }),
          });
        }
        return out;
      }
      default:
        throw new EmitError(
          "unsupported-op",
          `${where} is an all-reduce collective, which has no P2P decomposition without a reduction and a second phase; ${collectiveAlternative("all-reduce")}`,
        );
    }
  }

  // Pass 2: new positions, then dependencies renumbered.
  const start = new Map<string, number>();
  for (const rp of plan.ranks) {
    rp.streams.forEach((ops, s) => {
      let next = 0;
      ops.forEach((op, i) => {
        const k = key({ rank: rp.rank, stream: s, index: i });
        start.set(k, next);
        next += op.kind === "collective" ? expansions.get(k)!.length : 1;
      });
    });
  }

  const memo = new Map<string, Dependency[]>();
  const remap = (d: Dependency): Dependency[] => {
    if (d.kind === "compute") return [d];
    const at = { rank: d.rank, stream: d.stream, index: d.index };
    const k = key(at);
    const hit = memo.get(k);
    if (hit !== undefined) return hit;
    const target = opAt(at);
    let refs: Dependency[];
    if (target === undefined || target.kind !== "collective") {
      refs = [opRef(d.rank, d.stream, start.get(k) ?? d.index)];
    } else {
      // Every transfer writing this rank's dst, and this rank's own last transfer.
      refs = [];
      const mine = expansions.get(k)!;
      if (mine.length > 0) refs.push(opRef(d.rank, d.stream, start.get(k)! + mine.length - 1));
      for (const q of target.ranks) {
        if (q === d.rank) continue;
        const peer = counterpart(at, target, q);
        const pk = key(peer.pos);
        expansions.get(pk)!.forEach((e, j) => {
          if (e.into === d.rank) refs.push(opRef(peer.pos.rank, peer.pos.stream, start.get(pk)! + j));
        });
      }
      if (refs.length === 0) refs = target.deps.flatMap(remap);
    }
    memo.set(k, refs);
    return refs;
  };
  const renumber = (deps: readonly Dependency[]): Dependency[] => {
    const out = new Map<string, Dependency>();
    for (const d of deps.flatMap(remap)) out.set(JSON.stringify(d), d);
    return [...out.values()];
  };

  const { signals: _signals, ...rest } = plan;
  return {
    ...rest,
    ranks: plan.ranks.map((rp) => ({
      ...rp,
      streams: rp.streams.map((ops, s) =>
        ops.flatMap((op, i) => {
          const entries = op.kind === "collective" ? expansions.get(key({ rank: rp.rank, stream: s, index: i }))! : [{ op }];
          return entries.map((e) => ({ ...e.op, deps: renumber(e.op.deps) }) as Op);
        }),
      ),
    })),
  };
}
