// The push table of the communication task (overlap variant b): a plan's copy-engine host
// ops re-read as device pushes. Each chunk (the copies up to and including its signalled
// one) is cut into `pieces` rows, every row notifying the chunk's slot on the receiver,
// so the receiver waits for epoch × pieces arrivals and several CTAs share one chunk.
import type { RankHostOps } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import { PUSH_ROW_FIELDS } from "./comm.js";

/** Per-rank push tables (flattened rows of `PUSH_ROW_FIELDS`) and the arrivals of every slot. */
export interface PushRows {
  /** `rows[rank]`: that rank's rows, flattened. */
  readonly rows: number[][];
  /** Notifies each signalled slot receives per launch (the wait target is epoch × arrivals). */
  readonly arrivals: number;
}

/**
 * Push rows from host ops (ranks with fewer rows are padded with rows of length 0 and no notify). Every copy must read the issuing rank's buffer (a push plan),
 * and a stream may not `wait` (the communication task runs rows in any order). Pieces are
 * cut at multiples of `unit` elements (16 bytes of the element type), so that every piece
 * of an aligned copy starts aligned and the task's copies vectorise.
 * @throws {EmitError} `unsupported-dependency` for waits, `bad-plan` for pulls, for a chunk
 *   without a signal, a chunk shorter than `pieces` elements, or slots receiving
 *   different numbers of arrivals.
 */
export function pushRows(hostOps: readonly RankHostOps[], world: number, pieces: number, unit = 1): PushRows {
  const rows: number[][] = Array.from({ length: world }, () => []);
  const perSlot = new Map<string, number>();
  for (const h of hostOps) {
    for (const s of h.streams) {
      let chunk: { src: number; dst: number; length: number; dstRank: number }[] = [];
      for (const op of s.ops) {
        if (op.kind === "wait") {
          throw new EmitError(
            "unsupported-dependency",
            `rank ${h.rank} stream ${s.name} waits on slot ${op.slot}; the communication task runs pushes without dependencies: use a push swizzle plan or the copy-engine backend`,
          );
        }
        if (op.src.rank !== h.rank) {
          throw new EmitError(
            "bad-plan",
            `rank ${h.rank} copies from rank ${op.src.rank}; the communication task pushes this rank's data: use a push-side plan`,
          );
        }
        chunk.push({ src: op.src.offset, dst: op.dst.offset, length: op.src.length, dstRank: op.dst.rank });
        if (op.signal === undefined) continue;
        const signal = op.signal;
        for (const c of chunk) {
          if (c.dstRank !== signal.rank)
            throw new EmitError("bad-plan", `rank ${h.rank}: a copy to rank ${c.dstRank} is signalled on rank ${signal.rank}`);
          if (c.length < pieces * unit)
            throw new EmitError(
              "bad-plan",
              `a copy of ${c.length} elements cannot be cut into ${pieces} pieces of whole 16-byte units; lower commPieces`,
            );
          const cut = (i: number): number => (i === pieces ? c.length : Math.floor((c.length * i) / pieces / unit) * unit);
          for (let i = 0; i < pieces; i++) {
            const a = cut(i);
            const b = cut(i + 1);
            rows[h.rank]!.push(c.src + a, c.dstRank, c.dst + a, b - a, signal.slot);
          }
          const key = `${signal.rank}:${signal.slot}`;
          perSlot.set(key, (perSlot.get(key) ?? 0) + pieces);
        }
        chunk = [];
      }
      if (chunk.length > 0) throw new EmitError("bad-plan", `rank ${h.rank} stream ${s.name} ends with copies no signal covers`);
    }
  }
  const counts = [...new Set(perSlot.values())];
  if (counts.length > 1) {
    throw new EmitError(
      "bad-plan",
      `slots receive different numbers of pushes (${counts.join(", ")}); the kernel waits for one epoch × arrivals target: cut every chunk into the same number of copies`,
    );
  }
  // Tables are uploaded as one [world, n] tensor: pad with rows that move nothing.
  const longest = Math.max(PUSH_ROW_FIELDS.length, ...rows.map((r) => r.length));
  rows.forEach((r, rank) => {
    while (r.length < longest) r.push(0, rank, 0, 0, -1);
  });
  return { rows, arrivals: counts[0] ?? 1 };
}

/** Number of rows in a flattened push table. */
export function pushRowCount(flat: readonly number[]): number {
  return flat.length / PUSH_ROW_FIELDS.length;
}
