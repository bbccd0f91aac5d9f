import { describe, expect, it } from "vitest";
import { parseWithPython } from "../../../testing/python.js";
import {
  AR_REDUCE,
  AR_REDUCE_BROADCAST,
  AR_TILE_REDUCE,
  arReduceBroadcastSource,
  arReduceSource,
  arTileReduceSource,
  checkTileCommParams,
  RS_REDUCE,
  rsReduceSource,
  SLOT_WAIT,
  slotWaitSource,
  TILE_PUSH,
  tilePushSource,
  tileStepRows,
} from "./index.js";
import { codeOf } from "../../../testing/errors.js";

const RS = { WORLD: 2, BLOCK_M: 128, BLOCK_N: 128, N: 256, rows_per_rank: 256 };
const TILE = { BLOCK_R: 16, BLOCK_C: 128, WORLD: 4 };

describe("GEMM+AllReduce kernel templates", () => {
  it("golden modules", async () => {
    await expect(arReduceSource(RS)).toMatchFileSnapshot("./__golden__/ar_reduce.py");
    await expect(tilePushSource(TILE)).toMatchFileSnapshot("./__golden__/tile_push.py");
    await expect(arTileReduceSource(TILE)).toMatchFileSnapshot("./__golden__/ar_tile_reduce.py");
    await expect(arReduceBroadcastSource(RS)).toMatchFileSnapshot("./__golden__/ar_reduce_broadcast.py");
    await expect(slotWaitSource()).toMatchFileSnapshot("./__golden__/slot_wait.py");
  });

  it("every signature lists the manifest's arguments in order, then the constexprs; Python parses each module", () => {
    const cases = [
      [AR_REDUCE, arReduceSource(RS, { dtype: "fp16" })],
      [TILE_PUSH, tilePushSource(TILE)],
      [AR_TILE_REDUCE, arTileReduceSource(TILE, { dtype: "fp32" })],
      [AR_REDUCE_BROADCAST, arReduceBroadcastSource(RS, { dtype: "fp16" })],
      [SLOT_WAIT, slotWaitSource()],
    ] as const;
    for (const [info, source] of cases) {
      const params = [...info.args, ...info.constexprs.map((c) => `${c}: tl.constexpr`)].join(", ");
      expect(source).toContain(`def ${info.entry}(${params}):`);
    }
    expect(parseWithPython(Object.fromEntries(cases.map(([info, source]) => [info.kind, source])))).toEqual({
      "ar-reduce": "ok",
      "tile-push": "ok",
      "ar-tile-reduce": "ok",
      "ar-reduce-broadcast": "ok",
      "slot-wait": "ok",
    });
  });

  it("ar_reduce is rs_reduce storing at the rank's rows and notifying per tile", () => {
    const rs = rsReduceSource(RS);
    const ar = arReduceSource(RS);
    // The waits and the sum are rs_reduce's, line for line.
    const loop = rs.slice(rs.indexOf("    blocks_per_slab"), rs.indexOf("        tl.store("));
    expect(ar).toContain(loop);
    expect(ar).toContain("out_base = out_ptr + rank * rows_per_rank * N");
    expect(ar).toContain("tl.store(out_base + off, acc.to(tl.bfloat16), mask=mask)\n        notify_slot(sig_ptr, done_base + mb)");
    expect(AR_REDUCE.args).toEqual([...RS_REDUCE.args, "done_base"]);
  });

  it("ar_reduce_broadcast is rs_reduce storing each tile into every rank's output, then notifying every peer once", () => {
    const rs = rsReduceSource(RS);
    const b = arReduceBroadcastSource(RS);
    expect(b).toContain(rs.slice(rs.indexOf("    blocks_per_slab"), rs.indexOf("        tl.store(")));
    const store = b.indexOf("tl.store(dst + off, total, mask=mask)");
    expect(b).toContain("dst = tl.multiple_of(peer_base(out_ptrs, p, own_ptr) + slab_rows, 16)");
    expect(store).toBeGreaterThan(b.indexOf("wait_slot("));
    // One release per program and peer, after its last tile: the count of tiles it stored.
    expect(b).toContain(
      "        stored += 1\n    for p in tl.static_range(WORLD):\n        if p != rank:\n            peer_notify(sig_ptrs, p, recv_base + rank, stored)",
    );
    expect(b.indexOf("peer_notify(")).toBeGreaterThan(store);
    expect(AR_REDUCE_BROADCAST.args.slice(-1)).toEqual(["recv_base"]);
  });

  it("slot_wait waits on every listed slot for this launch's target and skips padding rows", () => {
    const w = slotWaitSource();
    expect(w).toContain("if wait_at >= 0:\n            target = load_epoch_target(epoch_ptr, wait_arrivals)");
    expect(w).toContain("wait_slot(sig_ptr, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)");
    expect(w).not.toMatch(/tl\.store|notify/);
  });

  it("the tile kernels wait before loading (the token rides on the tile's base pointer) and notify after", () => {
    const push = tilePushSource(TILE);
    expect(push.indexOf("wait_slot(")).toBeLessThan(push.indexOf("tl.load(src + off"));
    expect(push).toContain("src = tl.multiple_of(src_ptr + src_offset + zero, 16)");
    expect(push.indexOf("tl.store(dst + off")).toBeLessThan(push.indexOf("peer_notify(sig_ptrs, dst_rank, notify_at)"));
    const reduce = arTileReduceSource(TILE);
    expect(reduce).toContain("own = tl.multiple_of(own_ptr + own_offset + zero, 16)");
    expect(reduce).toContain("if p != rank:");
    expect(reduce.indexOf("tl.store(dst + off, total")).toBeLessThan(reduce.indexOf("peer_notify(sig_ptrs, p, notify_at)"));
    expect(reduce).toContain("peer_notify(sig_ptrs, p, done_at)");
  });

  it("rejects parameters the kernels cannot run with", () => {
    expect(codeOf(() => tilePushSource({ BLOCK_R: 3, BLOCK_C: 128 }))).toBe("bad-param");
    expect(codeOf(() => tilePushSource({ BLOCK_R: 256, BLOCK_C: 256 }))).toBe("bad-param");
    expect(codeOf(() => arTileReduceSource({ BLOCK_R: 16, BLOCK_C: 128 }))).toBe("bad-param");
    expect(codeOf(() => checkTileCommParams({ BLOCK_R: 16, BLOCK_C: 8 }))).toBe("bad-param");
    expect(codeOf(() => arReduceSource({ ...RS, rows_per_rank: 100 }))).toBe("bad-param");
    expect(codeOf(() => arReduceBroadcastSource({ ...RS, BLOCK_N: 100 }))).toBe("bad-param");
  });

  it("steps move about the SM copy block: a power of two of rows, at most the tile's", () => {
    expect(tileStepRows(2048, 128, 128)).toBe(16);
    expect(tileStepRows(2048, 256, 128)).toBe(8);
    expect(tileStepRows(128, 256, 128)).toBe(1);
    expect(tileStepRows(1 << 20, 16, 32)).toBe(32);
  });
});
