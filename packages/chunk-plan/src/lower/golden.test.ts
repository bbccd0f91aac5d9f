import { mapToPython } from "@ovl/mapping";
import { describe, expect, it } from "vitest";
import { lowerToTileSchedule, type TileSchedule } from "./index.js";
import { allGatherPullSwizzled } from "./testing/plans.js";

/** One line per visit, then each map as Python: the whole schedule at a glance. */
function render(schedule: TileSchedule): string {
  const lines: string[] = [];
  for (const rs of schedule.ranks) {
    const slots = rs.slots.map((s) => `${s.slot}:${s.purpose}[${s.region?.offsets[0]},+${s.region?.sizes[0]})x${s.arrivals}`);
    lines.push(`rank ${rs.rank} order=[${rs.slotOrder.join(",")}] slots ${slots.join(" ")}`);
    rs.tables.tile.forEach((t, v) => {
      const waits = rs.tables.waitSlot.map((c, j) => [c[v] ?? -1, rs.tables.waitArrivals[j]?.[v] ?? 0]).filter(([s]) => (s ?? -1) >= 0);
      const w = waits.length === 0 ? "-" : waits.map(([s, a]) => `slot ${s} >= epoch*${a}`).join(", ");
      lines.push(`  v${v} tile ${t} (m${rs.tables.pidM[v]}, n${rs.tables.pidN[v]}) wave ${rs.tables.wave[v]} wait ${w}`);
    });
    const maps = rs.maps;
    lines.push(`  pid_m = ${mapToPython(maps.pidM)}; pid_n = ${mapToPython(maps.pidN)}; wave = ${mapToPython(maps.wave)}`);
    maps.waitSlot.forEach((m, j) =>
      lines.push(`  wait_slot${j} = ${mapToPython(m)}; arrivals = ${mapToPython(maps.waitArrivals[j] ?? m)}`),
    );
  }
  return lines.join("\n");
}

describe("tile schedule golden: AllGather + GEMM, world 2, M = 256, BM = 64", () => {
  const plan = allGatherPullSwizzled({ world: 2, M: 256, K: 64 });

  it("one tile column: rank-rotated rows, static maps", () => {
    const schedule = lowerToTileSchedule(plan, { tensor: "A", problem: { M: 256, N: 64, K: 64 }, tile: { BM: 64, BN: 64, BK: 32 } });
    expect(render(schedule)).toMatchInlineSnapshot(`
      "rank 0 order=[0] slots 0:chunk-ready[128,+128)x1
        v0 tile 0 (m0, n0) wave 0 wait -
        v1 tile 1 (m1, n0) wave 0 wait -
        v2 tile 2 (m2, n0) wave 1 wait slot 0 >= epoch*1
        v3 tile 3 (m3, n0) wave 1 wait slot 0 >= epoch*1
        pid_m = v; pid_n = 0; wave = r0_wave[v]
        wait_slot0 = r0_wait_slot0[v]; arrivals = r0_wait_arrivals0[v]
      rank 1 order=[0] slots 0:chunk-ready[0,+128)x1
        v0 tile 2 (m2, n0) wave 0 wait -
        v1 tile 3 (m3, n0) wave 0 wait -
        v2 tile 0 (m0, n0) wave 1 wait slot 0 >= epoch*1
        v3 tile 1 (m1, n0) wave 1 wait slot 0 >= epoch*1
        pid_m = (v + 2) % 4; pid_n = 0; wave = r1_wave[v]
        wait_slot0 = r1_wait_slot0[v]; arrivals = r1_wait_arrivals0[v]"
    `);
  });

  it("two tile columns, groupSizeM 2: grouped order inside each wave, tables", () => {
    const schedule = lowerToTileSchedule(plan, {
      tensor: "A",
      problem: { M: 256, N: 128, K: 64 },
      tile: { BM: 64, BN: 64, BK: 32 },
      persistent: { numSms: 4 },
      groupSizeM: 2,
    });
    expect(schedule.grid).toEqual({ numPidM: 4, numPidN: 2, numTiles: 8, programs: 4, rounds: 2 });
    expect(render(schedule)).toMatchInlineSnapshot(`
      "rank 0 order=[0] slots 0:chunk-ready[128,+128)x1
        v0 tile 0 (m0, n0) wave 0 wait -
        v1 tile 2 (m1, n0) wave 0 wait -
        v2 tile 1 (m0, n1) wave 0 wait -
        v3 tile 3 (m1, n1) wave 0 wait -
        v4 tile 4 (m2, n0) wave 1 wait slot 0 >= epoch*1
        v5 tile 6 (m3, n0) wave 1 wait slot 0 >= epoch*1
        v6 tile 5 (m2, n1) wave 1 wait slot 0 >= epoch*1
        v7 tile 7 (m3, n1) wave 1 wait slot 0 >= epoch*1
        pid_m = r0_pid_m[v]; pid_n = r0_pid_n[v]; wave = r0_wave[v]
        wait_slot0 = r0_wait_slot0[v]; arrivals = r0_wait_arrivals0[v]
      rank 1 order=[0] slots 0:chunk-ready[0,+128)x1
        v0 tile 4 (m2, n0) wave 0 wait -
        v1 tile 6 (m3, n0) wave 0 wait -
        v2 tile 5 (m2, n1) wave 0 wait -
        v3 tile 7 (m3, n1) wave 0 wait -
        v4 tile 0 (m0, n0) wave 1 wait slot 0 >= epoch*1
        v5 tile 2 (m1, n0) wave 1 wait slot 0 >= epoch*1
        v6 tile 1 (m0, n1) wave 1 wait slot 0 >= epoch*1
        v7 tile 3 (m1, n1) wave 1 wait slot 0 >= epoch*1
        pid_m = r1_pid_m[v]; pid_n = r1_pid_n[v]; wave = r1_wave[v]
        wait_slot0 = r1_wait_slot0[v]; arrivals = r1_wait_arrivals0[v]"
    `);
  });
});
