// Test helpers over an emitted manifest's `nvshmem-push` rows: the rows as records, the signal
// adds they make and the waits the receivers make, whether every row runs when a rank's
// programs take them in table order, and the rows read back as a chunk plan (one put per stream,
// ordered only by its wait), so the plan validator can prove what the kernel does.
import { type ChunkPlan, type Op, type OpRef, localCopy, opRef, push } from "@ovl/chunk-plan";
import type { Manifest } from "../core/manifest/schema.js";
import { NVSHMEM_PUSH_FIELDS } from "../backends/triton/kernels/index.js";

/** One `nvshmem-push` row as a record of its fields. */
export type NvshmemRow = Record<(typeof NVSHMEM_PUSH_FIELDS)[number], number>;

/** Every rank's `nvshmem-push` rows of segment table `name` (the first push kernel's by default), as field records. */
export function nvshmemRows(m: Manifest, name = "push_segments"): NvshmemRow[][] {
  const k = m.kernels.find((x) => x.template.kind === "nvshmem-push");
  if (k === undefined) throw new Error("no nvshmem-push kernel");
  const table = m.tables.find((t) => t.name === name);
  if (table === undefined) throw new Error(`no ${name} table`);
  const n = NVSHMEM_PUSH_FIELDS.length;
  return table.values.map(
    (flat) =>
      Array.from({ length: flat.length / n }, (_, r) =>
        Object.fromEntries(NVSHMEM_PUSH_FIELDS.map((f, i) => [f, flat[r * n + i]!])),
      ) as NvshmemRow[],
  );
}

/** Signal adds per launch, by `rank:slot`, of every rank's rows of segment table `name`. */
export function signalled(m: Manifest, name = "push_segments"): Map<string, number> {
  const out = new Map<string, number>();
  for (const rs of nvshmemRows(m, name))
    for (const r of rs) {
      if (r.notify_at < 0) continue;
      const key = `${r.dst_rank}:${r.notify_at}`;
      out.set(key, (out.get(key) ?? 0) + 1);
    }
  return out;
}

/** What the receiving kernels wait for per launch, by `rank:slot`: their arrivals (the consumer's table or rs-reduce's). */
export function waited(m: Manifest, table: "mblock_wait_slot" | "rs_arrival_slot"): Map<string, number> {
  const out = new Map<string, number>();
  m.tables
    .find((t) => t.name === table)!
    .values.forEach((slots, rank) => {
      for (const s of slots) if (s >= 0) out.set(`${rank}:${s}`, 1);
    });
  return out;
}

/**
 * Whether every row of every rank runs when each rank's `programs` programs take rows `p, p + programs, …`
 * in order and a row waits until its slot has `wait_arrivals` signals (one launch, slots from zero).
 */
export function completes(m: Manifest, programs: number): boolean {
  const tables = nvshmemRows(m);
  const slots = new Map<string, number>();
  const next = tables.map(() => Array.from({ length: programs }, (_, p) => p));
  let progress = true;
  while (progress) {
    progress = false;
    tables.forEach((rs, rank) =>
      next[rank]!.forEach((i, p) => {
        const r = rs[i];
        if (r === undefined) return;
        if (r.wait_at >= 0 && (slots.get(`${rank}:${r.wait_at}`) ?? 0) < r.wait_arrivals) return;
        if (r.notify_at >= 0) slots.set(`${r.dst_rank}:${r.notify_at}`, (slots.get(`${r.dst_rank}:${r.notify_at}`) ?? 0) + 1);
        next[rank]![p] = i + programs;
        progress = true;
      }),
    );
  }
  return next.every((ps, rank) => ps.every((i) => i >= tables[rank]!.length));
}

/**
 * The rows of an AllGather+GEMM manifest over the `[M, K]` rows of `plan`'s tensor as a chunk plan
 * with `plan`'s header (tensors, mesh, claim, shards): each row a push (a local copy when it lands
 * on its own rank) alone on a stream of its issuing rank, depending on exactly the rows that
 * signal the slot it waits on. Stream order orders nothing, as the kernel's parallel programs do
 * not: the plan validator then proves the rows gather the tensor with every read after its
 * writes, or names the row that reads too early.
 */
export function rowsAsPlan(m: Manifest, plan: ChunkPlan): ChunkPlan {
  const tensor = plan.tensors[0]!;
  const K = tensor.shape[1]!;
  const region = (offset: number, length: number) => {
    if (offset % K !== 0 || length % K !== 0) throw new Error(`a row moves elements ${offset}+${length}, not whole rows of ${K}`);
    return { tensor: tensor.name, offsets: [offset / K, 0], sizes: [length / K, K] };
  };
  const tables = nvshmemRows(m).map((rs) => rs.filter((r) => r.notify_at >= 0));
  const signallers = new Map<string, OpRef[]>();
  tables.forEach((rs, rank) =>
    rs.forEach((r, s) => {
      const key = `${r.dst_rank}:${r.notify_at}`;
      signallers.set(key, [...(signallers.get(key) ?? []), opRef(rank, s, 0)]);
    }),
  );
  const opOf = (r: (typeof tables)[number][number], rank: number): Op => {
    const deps = r.wait_at < 0 ? [] : (signallers.get(`${rank}:${r.wait_at}`) ?? []);
    const src = region(r.src_offset, r.length);
    const dst = region(r.dst_offset, r.length);
    return r.dst_rank === rank ? localCopy(src, dst, { deps }) : push(r.dst_rank, src, dst, { deps });
  };
  const { signals: _signals, ...header } = plan;
  return {
    ...header,
    name: `${plan.name}-nvshmem-rows`,
    ranks: plan.ranks.map((rp) => ({ ...rp, streams: (tables[rp.rank] ?? []).map((r) => [opOf(r, rp.rank)]) })),
  };
}
