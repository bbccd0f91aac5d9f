// 2×1 clusters of the cooperative TLX GEMM: CTA pairs share B blocks by TMA multicast. The
// paired tile loop is executed by python3 (the emitted text itself, `tl` stubbed) over many
// grids, so the property checked is the one the kernel runs.
import { allGatherSwizzle, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { rsPlan } from "../../examples/rs-plan.js";
import { parseWithPython, runPython } from "../../testing/python.js";
import { codeOf } from "../../testing/errors.js";
import { PythonWriter } from "../../core/writer/index.js";
import { emitTlxAgGemm, emitTlxGemm, emitTlxGemmRs, groupedTiles, noComm, tlxExamples, tlxGemm, tlxKernel } from "../../index.js";

const TILE = { BM: 128, BN: 256, BK: 64 };
const MULTICAST = { clusterM: 2, epilogueSplit: 4 } as const;

/** Runs the paired tile loop of `groupedTiles({ groupM, clusterM: 2 })` for every program of each grid; returns its visits. */
function pairedVisits(cases: readonly { numPidM: number; numPidN: number; groupM: number; programs: number }[]): number[][][] {
  const loops = cases.map(({ groupM }) => {
    const w = new PythonWriter();
    groupedTiles({ groupM, clusterM: 2 }).writeTileLoop(w, (l) => l.line("seen.append([p, it, pid_m, pid_n])").line("it += 1"));
    return { GROUP_M: groupM, loop: w.toString() };
  });
  const script = `
import json, sys, types
data = json.load(sys.stdin)
out = []
for case, code in zip(data["cases"], data["loops"]):
    seen = []
    for p in range(case["programs"]):
        tl = types.SimpleNamespace(program_id=lambda axis, p=p: p, num_programs=lambda axis: case["programs"])
        env = {"tl": tl, "seen": seen, "p": p, "it": 0, "cta": p % 2, "GROUP_M": code["GROUP_M"],
               "num_pid_m": case["numPidM"], "num_pid_n": case["numPidN"]}
        exec(code["loop"], env)
    out.append(seen)
print(json.dumps(out))
`;
  return JSON.parse(runPython(script, JSON.stringify({ cases, loops }))) as number[][][];
}

describe("2×1 clusters sharing B by multicast", () => {
  it("property: the paired loop visits every tile once; the CTAs of a cluster take rows 2q and 2q + 1 of one n-block together", () => {
    const cases = fc.sample(
      fc.record({
        numPidM: fc.integer({ min: 1, max: 24 }).map((x) => 2 * x),
        numPidN: fc.integer({ min: 1, max: 12 }),
        groupM: fc.integer({ min: 1, max: 8 }).map((x) => 2 * x),
        programs: fc.integer({ min: 1, max: 20 }).map((x) => 2 * x),
      }),
      { numRuns: 60, seed: 20261128 },
    );
    const visits = pairedVisits(cases);
    cases.forEach((c, i) => {
      const seen = visits[i]!;
      const tiles = seen.map(([, , m, n]) => `${m},${n}`);
      // Every tile of the grid exactly once.
      expect(new Set(tiles).size).toBe(tiles.length);
      expect(tiles.length).toBe(c.numPidM * c.numPidN);
      for (const [, , m, n] of seen) {
        expect(m).toBeGreaterThanOrEqual(0);
        expect(m).toBeLessThan(c.numPidM);
        expect(n).toBeGreaterThanOrEqual(0);
        expect(n).toBeLessThan(c.numPidN);
      }
      // Step `it` of programs 2k and 2k + 1: the same n-block, rows 2q and 2q + 1 (so one B block serves both).
      const at = new Map(seen.map(([p, it, m, n]) => [`${p}/${it}`, [m!, n!]]));
      for (const [p, it, m, n] of seen) {
        if (p! % 2 !== 0) continue;
        const peer = at.get(`${p! + 1}/${it}`);
        expect(peer).toEqual([m! + 1, n]);
        expect(m! % 2).toBe(0);
      }
      // Both CTAs of a cluster run the same number of tiles (neither waits on a multicast the other never sends).
      for (let p = 0; p < c.programs; p += 2) {
        expect(seen.filter(([q]) => q === p).length).toBe(seen.filter(([q]) => q === p + 1).length);
      }
    });
  });

  it("writes the multicast B loads, the releases of both CTAs' stages and the producer's drain", () => {
    const src = emitTlxGemm({ M: 1024, N: 512, K: 256 }, TILE, MULTICAST).files[0]!.text;
    expect(src).toContain("b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, HALF_N])");
    expect(src).toContain("empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_CONSUMERS * CLUSTER_M)");
    expect(src).toContain("multicast_targets=[0, 1]");
    expect(src.match(/multicast_targets=\[0, 1\]/g)).toHaveLength(2);
    // Each release goes to this CTA's barrier and the peer's: inside the k-loop and after it.
    expect(src.match(/remote_cta_rank=peer/g)).toHaveLength(2);
    const producer = src.slice(src.indexOf('async_task("default")'), src.indexOf("replicate="));
    expect(producer).toContain("for _ in range(NUM_STAGES):");
    // The full barrier expects the whole stage: A (128 × 64) and both halves of B (64 × 256), 2 bytes each.
    expect(producer).toContain("tlx.barrier_expect_bytes(full, 49152)");
    expect(parseWithPython({ src }).src).toBe("ok");
  });

  it("marks the manifest's kernel for 2×1 clusters and asks the AOT check for multicast", () => {
    const ex = tlxExamples();
    for (const name of ["tlx_gemm_multicast", "tlx_ag_gemm_multicast", "tlx_gemm_rs_multicast_tn"]) {
      const r = ex[name]!;
      const k = r.manifest.kernels.find((x) => x.precompiled !== undefined)!;
      expect(k.precompiled?.cluster).toEqual([2, 1, 1]);
      expect(k.constexprs.CLUSTER_M).toBe(2);
      expect(r.expect[k.name]).toEqual(expect.arrayContaining(["\\.multicast::cluster", "mbarrier\\.arrive\\.shared::cluster"]));
    }
    // Without clusters nothing changes: no cluster, no CLUSTER_M.
    const plain = ex.tlx_gemm!.manifest.kernels[0]!;
    expect(plain.precompiled?.cluster).toBeUndefined();
    expect(plain.constexprs.CLUSTER_M).toBeUndefined();
  });

  it("refuses what pairs cannot run", () => {
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, clusterM: 3 }))).toBe("bad-param");
    // Halves of B must be whole 64-column swizzle atoms.
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 64, BLOCK_K: 64, clusterM: 2 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64, clusterM: 2 }))).toBeUndefined();
    expect(codeOf(() => groupedTiles({ groupM: 7, clusterM: 2 }))).toBe("bad-param");
    // Compute and schedule must agree on the cluster.
    const spec = { kind: "k", entry: "k", summary: "k", comm: noComm() };
    expect(
      codeOf(() =>
        tlxKernel({
          ...spec,
          compute: tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, clusterM: 2 }),
          schedule: groupedTiles({ groupM: 8 }),
        }),
      ),
    ).toBe("bad-param");
    expect(
      codeOf(() =>
        tlxKernel({
          ...spec,
          compute: tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64 }),
          schedule: groupedTiles({ groupM: 8, clusterM: 2 }),
        }),
      ),
    ).toBe("bad-param");
    // An odd number of m-blocks does not pair up (1152 / 128 = 9).
    expect(codeOf(() => emitTlxGemm({ M: 1152, N: 512, K: 256 }, TILE, MULTICAST))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm({ M: 1024, N: 512, K: 256 }, TILE, { ...MULTICAST, consumerSchedule: "pingpong" }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm({ M: 1024, N: 512, K: 256 }, TILE, { ...MULTICAST, target: "sm_100a" }))).toBe("bad-param");
    const a = { name: "A", shape: [1024, 256], dtype: "bf16" as const };
    const plan = planSignals(allGatherSwizzle({ tensor: a, axis: 0, mesh: [2], split: 2, side: "push" }));
    const schedule = lowerToTileSchedule(
      plan,
      { tensor: "A", problem: { M: 1024, N: 512, K: 256 }, tile: TILE, persistent: { numSms: 132 }, groupSizeM: 8 },
      { role: "consumer" },
    );
    expect(codeOf(() => emitTlxAgGemm(plan, schedule, { ...MULTICAST, comm: "comm-task" }))).toBe("bad-param");
    expect(codeOf(() => emitTlxAgGemm(plan, schedule, MULTICAST))).toBeUndefined();
    const rs = rsPlan(2, 1024, 512, 2);
    const rsSchedule = lowerToTileSchedule(
      rs,
      { tensor: "C_partial", problem: { M: 1024, N: 512, K: 256 }, tile: TILE, persistent: { numSms: 132 }, groupSizeM: 8 },
      { role: "producer" },
    );
    // The producer warp group's notifies count tiles per program: not with pairs.
    expect(codeOf(() => emitTlxGemmRs(rs, rsSchedule, { ...MULTICAST, notifier: "producer" }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemmRs(rs, rsSchedule, { ...MULTICAST, notifier: "tma" }))).toBeUndefined();
    // Pairs stride by num_programs / 2: a CTA's last two tiles are the last two pairs it takes, notified at once.
    const src = emitTlxGemmRs(rs, rsSchedule, { ...MULTICAST, notifier: "tma" }).files[0]!.text;
    const flush = src.indexOf("if pair_id + tl.num_programs(0) >= num_pid_p * num_pid_n:");
    expect(flush).toBeGreaterThan(src.indexOf("for pair_id in range("));
    expect(src.indexOf("tile_reduce_notify(", flush)).toBeGreaterThan(flush);
  });
});
