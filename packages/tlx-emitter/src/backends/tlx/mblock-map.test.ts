import { evaluateMap } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RANK_VAR } from "../../schedule/maps.js";
import { codeOf } from "../../testing/errors.js";
import { PythonWriter } from "../../core/writer/index.js";
import { MBLOCK_VAR, mblockArgs, mblockKernelArgs, mblockMap, writeMblockRead } from "./mblock-map.js";

/** Every rank's value of `map` at every m-block, the dynamic maps reading the rank's row of `table`. */
function values(map: ReturnType<typeof mblockMap>, ranks: number, length: number): number[][] {
  return Array.from({ length: ranks }, (_, r) => {
    const own = map.table === undefined ? {} : { [map.table.name]: map.table.values[r]! };
    return Array.from({ length }, (_, m) => evaluateMap(map.map, { [MBLOCK_VAR]: m, [RANK_VAR]: r }, own));
  });
}

describe("per-m-block maps of TLX kernels", () => {
  it("print a rank-rotated order and a chunk's slot inline, with the rank as the only argument", () => {
    const order = mblockMap(
      "mblock_order",
      [0, 1, 2, 3].map((r) => Array.from({ length: 16 }, (_, v) => (v + 4 * r + 4) % 16)),
    );
    const slot = mblockMap(
      "mblock_notify_slot",
      [0, 1, 2, 3].map(() => Array.from({ length: 16 }, (_, m) => 17 + Math.floor(m / 4))),
    );
    expect(order.table).toBeUndefined();
    expect(slot.table).toBeUndefined();
    expect(mblockArgs(order.map)).toEqual([RANK_VAR]);
    expect(mblockArgs(slot.map)).toEqual([]);
    expect(mblockKernelArgs([order, slot])).toEqual({ [RANK_VAR]: { kind: "rank" } });
    const w = new PythonWriter();
    writeMblockRead(w, "pid_m", order.map, "visit_m");
    writeMblockRead(w, "slot", slot.map, "pid_m");
    expect(w.toString()).toBe(
      ["ovl_m = visit_m", "pid_m = (ovl_m + 4 * ovl_rank + 4) % 16", "ovl_m = pid_m", "slot = ovl_m // 4 + 17", ""].join("\n"),
    );
  });

  it("print AllGather+GEMM's wait slots inline: none (-1) on the rank's own chunk", () => {
    const perRank = [
      [-1, -1, 0, 0],
      [0, 0, -1, -1],
    ];
    const slot = mblockMap("mblock_wait_slot", perRank);
    expect(slot.table).toBeUndefined();
    expect(mblockArgs(slot.map)).toEqual([RANK_VAR]);
    const w = new PythonWriter();
    writeMblockRead(w, "slot", slot.map, MBLOCK_VAR);
    expect(w.toString()).not.toContain("tl.load");
    expect(w.toString()).toMatch(/^slot = .*ovl_rank.*\n$/);
    expect(values(slot, 2, 4)).toEqual(perRank);
  });

  it("keep what no expression fits as the table of its name, read by a load", () => {
    // Wait slots that skip two windows of one rank: no one expression fits.
    const perRank = [
      [-1, 0, -1, 1],
      [0, 1, -1, -1],
    ];
    const slot = mblockMap("mblock_wait_slot", perRank);
    expect(slot.table).toEqual({ name: "mblock_wait_slot", dtype: "int32", values: perRank });
    expect(mblockArgs(slot.map)).toEqual(["mblock_wait_slot"]);
    expect(mblockKernelArgs([slot])).toEqual({ mblock_wait_slot: { kind: "table", name: "mblock_wait_slot" } });
    const w = new PythonWriter();
    writeMblockRead(w, "slot", slot.map, MBLOCK_VAR);
    expect(w.toString()).toBe("slot = tl.load(mblock_wait_slot + (ovl_m))\n");
    expect(codeOf(() => mblockMap("t", [[0, 1], [0]]))).toBe("bad-schedule");
    expect(codeOf(() => mblockMap("t", [[]]))).toBe("bad-schedule");
  });

  it("property: inline or a table, the map holds every rank's table", () => {
    const arb = fc.record({
      ranks: fc.integer({ min: 1, max: 8 }),
      blocks: fc.integer({ min: 1, max: 6 }),
      run: fc.integer({ min: 1, max: 4 }),
      shift: fc.integer({ min: 0, max: 5 }),
      base: fc.integer({ min: 0, max: 70 }),
      scramble: fc.boolean(),
    });
    fc.assert(
      fc.property(arb, ({ ranks, blocks, run, shift, base, scramble }) => {
        const length = blocks * run;
        const perRank = Array.from({ length: ranks }, (_, r) =>
          Array.from({ length }, (_, m) => base + ((Math.floor(m / run) + shift * r) % blocks)),
        );
        if (scramble) perRank[ranks - 1]!.reverse();
        const map = mblockMap("mblock_notify_slot", perRank);
        expect(values(map, ranks, length)).toEqual(perRank);
        // Two entries a run do not tell a rotation (mod) from a slope: those may stay tables.
        if (!scramble && blocks >= 3) expect(map.table).toBeUndefined();
      }),
    );
  });
});
