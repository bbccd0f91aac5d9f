// Communication parts of TLX kernels. `chunkWaitComm` (overlap variant a): the producer
// waits, bounded, on the chunk slot of the rows it is about to load. `pushCommTask`
// (variant b, TLX §6.2.2 "arrive remote, wait local"): a communication warp group in every
// CTA pushes this rank's chunks into the peers' buffers and arrives on the peers' slots;
// the receivers' producers only ever wait on their own slots.
import type { IndexMap } from "@ovl/mapping";
import { RANK_VAR } from "../../schedule/maps.js";
import { checkBlock, checkPositive } from "../triton/kernels/common.js";
import { EmitError, type PythonWriter } from "../../core/writer/index.js";
import { bulkStoreWait, MAX_STORE_GROUPS } from "./library.js";
import { mblockArgs, writeMblockRead } from "./mblock-map.js";
import type { EpilogueSync, TlxCommPart } from "./parts.js";

/** PTX of a bounded acquire wait. */
export const WAIT_PTX = "ld\\.global\\.acquire\\.sys";
/** PTX of a release add (a notify). */
export const NOTIFY_PTX =
  "atom\\.[a-z0-9.]*release[a-z0-9.]*add|atom\\.[a-z0-9.]*add[a-z0-9.]*release|red\\.[a-z0-9.]*release[a-z0-9.]*add";

/** PTX of a 16-byte vector load / store (copies that vectorise). */
export const VECTOR_LOAD_PTX = "ld\\.global(\\.[a-z0-9]+)*\\.v4\\.b32";
export const VECTOR_STORE_PTX = "st\\.global(\\.[a-z0-9]+)*\\.v4\\.b32";

/** No fused communication: a plain GEMM. */
export function noComm(): TlxCommPart {
  return { name: "none", args: [], constexprs: {}, expect: [] };
}

/**
 * Overlap variant (a): before a tile's loads the producer reads `slot = slot(pid_m)` (a map
 * over the m-block, `mblockMap`: inline where one expression fits every rank) and, when it is
 * a chunk slot (>= 0) it has not waited on yet in this launch, waits with
 * the device library's bounded `wait_slot` until `sig_ptr[slot]` reaches `target` = epoch ×
 * `arrivals` (`WAIT_ARRIVALS`), the epoch read on the device from this rank's epoch word
 * (`epoch_ptr`, the launch count: `load_epoch_target`, once per launch in the producer, as the
 * Triton consumers do), so a launch captured in a CUDA graph waits for each replay's epoch;
 * the token passes a proxy fence and is threaded into `offs_am`, so no TMA load
 * of those rows is issued before the wait returns (TileLink §4.2). A slot once reached
 * stays reached within the launch, so the producer remembers slots 0..31 it has waited on
 * (a bit mask) and skips their waits, and the round trip to the signal with them.
 * Consumers need no wait: they only read what the producer's loads completed.
 */
export function chunkWaitComm(slot: IndexMap, arrivals = 1): TlxCommPart {
  if (!Number.isSafeInteger(arrivals) || arrivals < 1)
    throw new EmitError("bad-param", `arrivals must be a positive integer, got ${String(arrivals)}`);
  return {
    name: "chunk-wait",
    args: [...mblockArgs(slot), "sig_ptr", "err_ptr", RANK_VAR, "epoch_ptr", "timeout_ns"],
    constexprs: { WAIT_ARRIVALS: arrivals },
    expect: [WAIT_PTX, "fence\\.proxy\\.async"],
    writeProducerInit(w) {
      w.comment("This launch's wait target: epoch x arrivals, the epoch read from this rank's epoch word.");
      w.line("target = load_epoch_target(epoch_ptr, WAIT_ARRIVALS)");
      w.comment("Bit s: slot s (< 32) was already waited on by this producer in this launch.");
      w.line("waited = 0");
    },
    writeBeforeLoads(w) {
      writeMblockRead(w, "slot", slot, "pid_m");
      w.line("bit = tl.where(slot < 32, tl.full([], 1, tl.int32) << (slot & 31), 0)");
      w.block("if (slot >= 0) & ((waited & bit) == 0)", (i) => {
        i.line(`tok = fence_proxy_async(wait_slot(sig_ptr, slot, target, err_ptr, ${RANK_VAR}, timeout_ns))`);
        i.line("offs_am = consume_token(offs_am, tok)");
        i.line("waited = waited | bit");
      });
    },
  };
}

/**
 * The GEMM+RS producer's tile-done notify (TileLink's producer_tile_notify), deferred by one
 * tile so that no consumer ever waits for its own stores to land: after a tile's epilogue
 * stores, each consumer waits until its bulk stores older than this tile's
 * (`sync.storeGroups` groups) are complete — the previous tile's, long done by then — syncs
 * the threads that stored that tile and, from the leading warp group, release-adds 1 to its
 * slot (`notify(pid_m)` of that tile, a map over the m-block, when >= 0) at `scope` (`gpu` only
 * when just this device's kernels wait on the slot); then this tile's slot is the pending one.
 * After its tile loop each consumer waits for all its stores and notifies the last pending slot.
 */
export function tileNotifyComm(notify: IndexMap, scope: "gpu" | "sys" = "sys"): TlxCommPart {
  if (scope !== "gpu" && scope !== "sys") throw new EmitError("bad-param", `notify scope must be "gpu" or "sys", got ${String(scope)}`);
  const call = (sync: EpilogueSync, pending: number | string) =>
    `tile_notify(sig_ptr, pending_slot, ${sync.barrier}, ${sync.threads}, ${sync.leader}, "${scope}", ${pending})`;
  return {
    name: "tile-notify",
    args: [...mblockArgs(notify), "sig_ptr"],
    constexprs: {},
    expect: [NOTIFY_PTX, "cp\\.async\\.bulk\\.wait_group\\s+0", "cp\\.async\\.bulk\\.wait_group\\s+[1-4]\\b"],
    writeConsumerInit(w) {
      w.line("pending_slot = -1");
    },
    writeAfterStores(w, sync) {
      checkStoreGroups(sync);
      w.comment("The previous tile's stores are older than this tile's: notify its slot now.");
      w.line(call(sync, sync.storeGroups));
      writeMblockRead(w, "pending_slot", notify, "pid_m");
      flushLastTiles(w, sync, (b) => b.line(call(sync, 0)));
    },
    writeConsumerExit(w, sync) {
      w.line(call(sync, 0));
    },
  };
}

/** Tiles the producer notifies at a time (`producerTileNotifyComm`): one system-scope fence per batch. */
export const NOTIFY_BATCH = 1;

/** The producer's lag behind the tiles it notifies, by consumer schedule (see `producerTileNotifyComm`). */
export function storedLag(consumerSchedule: "cooperative" | "pingpong"): number {
  return consumerSchedule === "pingpong" ? 5 : 3;
}

/** mbarriers in the ring through which consumers tell the producer a tile's stores are complete. */
export const STORED_DEPTH = 8;
/** First named barrier of the per-warp-group syncs of `producerTileNotifyComm` (one per consumer: this + cid). */
export const STORED_BARRIER = 13;

/**
 * The GEMM+RS tile-done notify issued by the producer warp group, so no consumer warp group
 * stalls on a release: after a tile's epilogue stores each consumer waits until its bulk
 * stores older than this tile's are complete (its previous tile's), syncs its own warp group
 * and arrives on that tile's mbarrier of a ring (`stored_bars`, `STORED_DEPTH` deep, one
 * arrival per warp group that stores the tile); the producer, once it has issued the loads
 * of a tile `lag` tiles later — by then the consumers have long arrived, so it does not wait,
 * and the ring is full, so the consumers do not wait for it — waits on that mbarrier and
 * release-adds 1 to the tile's slot (`notify(pid_m)`, kept in registers for `lag` tiles)
 * at `scope`. After their loops the consumers arrive for
 * their last tiles (all stores complete) and the producer notifies the tiles it still owes.
 * `lag` is 3 where every consumer stores every tile (cooperative) and 5 where the consumers
 * take tiles in turn (ping-pong: a consumer's previous tile is two back, and its epilogue
 * overlaps the other's wgmma chain): `storedLag`.
 */
export function producerTileNotifyComm(notify: IndexMap, scope: "gpu" | "sys" = "sys", lag = 3, batch = NOTIFY_BATCH): TlxCommPart {
  if (scope !== "gpu" && scope !== "sys") throw new EmitError("bad-param", `notify scope must be "gpu" or "sys", got ${String(scope)}`);
  if (!(Number.isInteger(batch) && batch >= 1 && batch <= 4))
    throw new EmitError("bad-param", `batch must be an integer in 1..4, got ${String(batch)}`);
  if (!(Number.isInteger(lag) && lag >= 1 && lag + batch <= STORED_DEPTH - 1))
    throw new EmitError("bad-param", `lag must be an integer in 1..${STORED_DEPTH - 1 - batch} (with batch ${batch}), got ${String(lag)}`);
  const kept = lag + batch - 1;
  const hist = (k: number) => `stored_slot_${k}`;
  // A consumer's report: its stores but the `pending` newest groups complete, its warp group
  // there, then an arrival for its previous tile.
  const reportStored = (w: PythonWriter, sync: EpilogueSync, pending: number) => {
    w.line(bulkStoreWait(pending));
    w.line(`tlx.named_barrier_wait(${sync.threads === 128 ? sync.barrier : `${STORED_BARRIER} + cid`}, 128)`);
    w.block("if stored_tile >= 0", (b) => b.line(`tlx.barrier_arrive(tlx.local_view(stored_bars, stored_tile % ${STORED_DEPTH}))`));
  };
  const notifyTile = (w: PythonWriter, tile: string, slot: string) => {
    w.line(`done_tile = ${tile}`);
    w.block("if done_tile >= 0", (b) => {
      b.line(`tlx.barrier_wait(tlx.local_view(stored_bars, done_tile % ${STORED_DEPTH}), (done_tile // ${STORED_DEPTH}) & 1)`);
      b.block(`if ${slot} >= 0`, (i) => i.line(`tl.atomic_add(sig_ptr + ${slot}, 1, sem="release", scope="${scope}")`));
    });
  };
  return {
    name: "producer-tile-notify",
    args: [...mblockArgs(notify), "sig_ptr"],
    constexprs: {},
    expect: [NOTIFY_PTX, "cp\\.async\\.bulk\\.wait_group\\s+0", "mbarrier\\.try_wait"],
    writeSetup(w, sync) {
      const storers = sync.threads / 128;
      if (!Number.isInteger(storers) || storers < 1)
        throw new EmitError("bad-param", `a tile is stored by ${sync.threads} threads, not whole warp groups`);
      w.comment(
        `Tile t's stores are complete once stored_bars[t % ${STORED_DEPTH}] completes its phase (one arrival per storing warp group).`,
      );
      w.line(`stored_bars = tlx.alloc_barriers(num_barriers=${STORED_DEPTH}, arrive_count=${storers})`);
    },
    writeProducerInit(w) {
      w.comment(
        `stored_slot_k: the slot of the tile k tiles back (-1: none); the producer notifies tiles ${lag} tiles after them, ${batch} at a time.`,
      );
      for (let k = 1; k <= kept; k++) w.line(`${hist(k)} = -1`);
    },
    // After the tile's loads: the producer would wait for a free ring slot next anyway, so the
    // wait on a long-completed mbarrier and the release add cost the consumers nothing.
    writeAfterLoads(w) {
      w.line("own_tile = (tile_id - tl.program_id(0)) // tl.num_programs(0)");
      // A batch's first release waits for the producer's memory operations; the ones after it find none.
      const notifyBatch = (b: PythonWriter) => {
        for (let k = kept; k >= lag; k--) notifyTile(b, `own_tile - ${k}`, hist(k));
      };
      if (batch === 1) notifyBatch(w);
      else w.block(`if (own_tile + 1) % ${batch} == 0`, notifyBatch);
      for (let k = kept; k > 1; k--) w.line(`${hist(k)} = ${hist(k - 1)}`);
      writeMblockRead(w, hist(1), notify, "pid_m");
    },
    writeProducerExit(w) {
      w.comment("The tiles still owed (from the first the loop did not notify), oldest first.");
      w.line("own_tiles = (num_tiles - tl.program_id(0) + tl.num_programs(0) - 1) // tl.num_programs(0)");
      w.line(`owed_from = (own_tiles // ${batch}) * ${batch} - ${lag}`);
      for (let k = kept; k >= 1; k--) {
        w.block(`if own_tiles - ${k} >= owed_from`, (b) => notifyTile(b, `own_tiles - ${k}`, hist(k)));
      }
    },
    writeConsumerInit(w) {
      w.line("stored_tile = -1");
    },
    writeAfterStores(w, sync) {
      checkStoreGroups(sync);
      w.comment("This warp group's previous tile's stores are older than this tile's: tell the producer they are complete.");
      reportStored(w, sync, sync.storeGroups);
      w.line("stored_tile = (tile_id - tl.program_id(0)) // tl.num_programs(0)");
    },
    writeConsumerExit(w, sync) {
      reportStored(w, sync, 0);
    },
  };
}

/** @throws {EmitError} `bad-param` for an epilogue that commits no or more than `MAX_STORE_GROUPS` bulk store groups per tile. */
function checkStoreGroups(sync: EpilogueSync): void {
  if (!Number.isInteger(sync.storeGroups) || sync.storeGroups < 1 || sync.storeGroups > MAX_STORE_GROUPS) {
    throw new EmitError("bad-param", `a tile's epilogue must commit 1..${MAX_STORE_GROUPS} bulk store groups, got ${sync.storeGroups}`);
  }
}

/**
 * At the program's last two tiles (`sync.lastTiles`), the tile's own notify at once (`notifyNow`: all of
 * this thread's stores complete, then the add), no longer deferred to the next tile: deferred, the chunks
 * of the last two waves would both wait for the kernel's end, and the transfers after it double (notifying
 * every tile a tile later cost the Triton GEMM+RS operator 0.6-5.3% end to end on two and four H200s; for
 * these kernels the flush measured within noise, and free in the kernel alone:
 * evidence: `results/runs/deferred-notify-h200-2026-11-28`).
 */
function flushLastTiles(w: PythonWriter, sync: EpilogueSync, notifyNow: (w: PythonWriter) => void): void {
  if (sync.lastTiles === undefined) return;
  w.block(`if ${sync.lastTiles}`, (b) => {
    b.comment("One of the program's last two tiles: notify it now, not with the next tile.");
    notifyNow(b);
    b.line("pending_slot = -1");
  });
}

/** PTX of a TMA reduce-add (`tmaTileNotifyComm`'s notify). */
export const TMA_REDUCE_PTX = "cp\\.reduce\\.async\\.bulk\\.tensor\\.1d\\.global\\.shared::cta\\.add";

/**
 * The GEMM+RS tile-done notify as a TMA reduce-add, so no thread executes a memory fence: after a
 * tile's epilogue stores, each consumer waits until its bulk stores older than this tile's
 * (`sync.storeGroups` groups: its previous tile's, long done by then) are complete — written
 * to global memory, not only read out of shared memory — the threads that stored that tile
 * sync, and the leading warp group adds 1 to its slot (`notify(pid_m)` of that tile, when
 * >= 0) with `tile_reduce_notify`: an asynchronous bulk reduction issued after the tile's
 * writes completed, which the waiters' acquire loads (or the host stream's wait) then observe
 * in the same coherent global memory. After its tile loop each consumer waits for all its
 * stores and the leader notifies the last pending slot and waits for its reduction to read
 * shared memory. `numSlots` (the highest notify slot + 1) bounds the 1-D descriptor.
 */
export function tmaTileNotifyComm(notify: IndexMap, numSlots: number): TlxCommPart {
  if (!Number.isInteger(numSlots) || numSlots < 1)
    throw new EmitError("bad-param", `numSlots must be a positive integer, got ${String(numSlots)}`);
  const notifyPending = (w: PythonWriter, sync: EpilogueSync, pending: number) => {
    w.line(bulkStoreWait(pending));
    w.line(`tlx.named_barrier_wait(${sync.barrier}, ${sync.threads})`);
    w.block(`if ${sync.leader}`, (l) =>
      l.block("if pending_slot >= 0", (i) => i.line("tile_reduce_notify(sig_desc, notify_rows, pending_slot)")),
    );
  };
  return {
    name: "tma-tile-notify",
    args: [...mblockArgs(notify), "sig_ptr"],
    constexprs: { NUM_SLOTS: numSlots },
    expect: [TMA_REDUCE_PTX, "cp\\.async\\.bulk\\.wait_group\\s+0", "cp\\.async\\.bulk\\.wait_group\\s+[1-4]\\b"],
    writeSetup(w) {
      w.comment("Four 128-byte rows of 32 int32, row j one-hot at j: the sources of the TMA reduce-add notifies.");
      w.line("notify_rows = tlx.local_view(tlx.local_alloc((128,), tl.int32, 1), 0)");
    },
    writeConsumerInit(w, sync) {
      w.line("sig_desc = tl.make_tensor_descriptor(sig_ptr, shape=[NUM_SLOTS], strides=[1], block_shape=[4])");
      w.line("pending_slot = -1");
      w.block(`if ${sync.leader}`, (l) => {
        l.line("tlx.local_store(notify_rows, (tl.arange(0, 128) % 33 == 0).to(tl.int32))");
        l.line("tlx.fence_async_shared()");
      });
    },
    writeAfterStores(w, sync) {
      checkStoreGroups(sync);
      w.comment("The previous tile's stores are older than this tile's: once written, notify its slot.");
      notifyPending(w, sync, sync.storeGroups);
      writeMblockRead(w, "pending_slot", notify, "pid_m");
      flushLastTiles(w, sync, (b) => notifyPending(b, sync, 0));
    },
    writeConsumerExit(w, sync) {
      notifyPending(w, sync, 0);
      w.block(`if ${sync.leader}`, (l) => l.line("tlx.async_descriptor_store_wait(0)"));
    },
  };
}

/** Fields of one row of the push table (int64), in order. */
export const PUSH_ROW_FIELDS = ["src_offset", "dst_rank", "dst_offset", "length", "notify_slot"] as const;

/** Options of `pushCommTask`. */
export interface PushCommTaskOptions {
  /** Elements moved per step (a power of two, 128..8192; default 2048). */
  readonly block?: number;
  /** Warps of the communication task (default 4). */
  readonly numWarps?: number;
  /** Registers per thread of the communication task (default 56). */
  readonly registers?: number;
  /** Named barrier the task syncs on before each notify (1..15; default 8). */
  readonly barrierId?: number;
}

/**
 * Overlap variant (b): a communication task in each CTA. Rows `pid, pid + programs, ...`
 * of the int64 push table (`PUSH_ROW_FIELDS`) are this CTA's: each copies `length`
 * elements of this rank's `src_ptr` at `src_offset` into `dst_rank`'s symmetric buffer
 * (`dst_ptrs`, a peer-pointers table) at `dst_offset`, then arrives remotely: a release
 * add on `dst_rank`'s slot `notify_slot` (through `sig_ptrs`). Every CTA of the
 * persistent grid is resident, so a producer's local wait never waits on a CTA that
 * cannot run.
 */
export function pushCommTask(o: PushCommTaskOptions = {}): TlxCommPart {
  const COMM_BLOCK = checkBlock(o.block ?? 2048, "block", 128, 8192);
  const numWarps = checkBlock(o.numWarps ?? 4, "numWarps", 1, 4);
  const registers = checkPositive(o.registers ?? 56, "registers");
  const barrierId = checkPositive(o.barrierId ?? 8, "barrierId");
  if (barrierId > 15) throw new EmitError("bad-param", `barrierId must be in 1..15 (0 is the CTA barrier), got ${barrierId}`);
  const threads = numWarps * 32;
  return {
    name: "push-comm-task",
    args: ["src_ptr", "dst_ptrs", "sig_ptrs", "push_ptr", "num_pushes"],
    constexprs: { COMM_BLOCK },
    expect: [NOTIFY_PTX, "bar\\.sync|barrier\\.sync", VECTOR_LOAD_PTX, VECTOR_STORE_PTX],
    task: {
      numWarps,
      registers,
      write(w) {
        w.comment("Communication: push this rank's chunks to peers, arrive on their slots (arrive remote, wait local).");
        w.line("offs = tl.arange(0, COMM_BLOCK)");
        w.block("for row in range(tl.program_id(0), num_pushes, tl.num_programs(0))", (r) => {
          PUSH_ROW_FIELDS.forEach((f, i) => r.line(`${f} = tl.load(push_ptr + row * ${PUSH_ROW_FIELDS.length} + ${i})`));
          // Whole steps with 16-byte aligned pointers (the rows start aligned: pushRows cuts
          // pieces at 16-byte units), so the copies vectorise; then one masked tail step.
          r.line("dst = peer_base(dst_ptrs, dst_rank, src_ptr) + dst_offset");
          r.line("whole = length - length % COMM_BLOCK");
          r.block("for start in range(0, whole, COMM_BLOCK)", (c) => {
            c.line("src = tl.multiple_of(src_ptr + src_offset + start, 16)");
            c.line("tl.store(tl.multiple_of(dst + start, 16) + offs, tl.load(src + offs))");
          });
          r.block("if whole < length", (c) => {
            c.line("mask = offs < length - whole");
            c.line("tl.store(dst + whole + offs, tl.load(src_ptr + src_offset + whole + offs, mask=mask), mask=mask)");
          });
          r.block("if notify_slot >= 0", (n) => n.line(`task_peer_notify(sig_ptrs, dst_rank, notify_slot, ${barrierId}, ${threads})`));
        });
      },
    },
  };
}
