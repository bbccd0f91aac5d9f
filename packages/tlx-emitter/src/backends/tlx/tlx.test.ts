import { allGatherRing, allGatherSwizzle, type ChunkPlan, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import { evaluateMap } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { emitAgGemm } from "../../index.js";
import { Manifest } from "../../core/manifest/schema.js";
import { parseWithPython } from "../../testing/python.js";
import { checkSegmentAlignment } from "../triton/kernels/index.js";
import {
  chunkWaitComm,
  clcTiles,
  defaultStages,
  emitTlxAgGemm,
  emitTlxGemm,
  groupedTiles,
  MAX_DEFAULT_STAGES,
  mergeParams,
  noComm,
  PUSH_ROW_FIELDS,
  pushCommTask,
  pushRows,
  type TlxSchedulePart,
  tlxBlackwellExamples,
  tlxBlackwellKernel,
  tlxExamples,
  SM90_MAX_SHARED_BYTES,
  tlxGemm,
  tlxGemmBlackwell,
  tlxGemmBlackwellSharedBytes,
  tlxGemmSharedBytes,
  tlxKernel,
} from "../../index.js";
import { powerOfTwo } from "../../testing/arbitraries.js";
import { codeOf } from "../../testing/errors.js";
import { tableMap } from "../../testing/mblock-maps.js";
import { PythonWriter } from "../../core/writer/index.js";

const TILE = { BM: 128, BN: 128, BK: 64 };

/** Rank `rank`'s visit order or wait slot per m-block, from the tile program of `m`'s first kernel. */
function programValues(m: Manifest, which: "order" | "slot", rank: number): number[] {
  const program = m.kernels[0]!.tileProgram!;
  const map = which === "order" ? program.order : program.slots[0]!;
  const own = Object.fromEntries(m.tables.map((t) => [t.name, t.values[rank]!]));
  return Array.from({ length: program.numPidM }, (_, i) => evaluateMap(map, { ovl_m: i, ovl_rank: rank }, own));
}

function agPlan(kind: "swizzle-push" | "swizzle-pull" | "ring-push", world: number, M: number, K: number, split: number): ChunkPlan {
  const o = { tensor: { name: "A", shape: [M, K], dtype: "bf16" as const }, axis: 0, mesh: [world], split };
  const [algo, side] = kind.split("-") as ["swizzle" | "ring", "push" | "pull"];
  return planSignals(algo === "swizzle" ? allGatherSwizzle({ ...o, side }) : allGatherRing({ ...o, side }));
}

function schedule(plan: ChunkPlan, M: number, N: number, K: number, tile = TILE) {
  return lowerToTileSchedule(
    plan,
    { tensor: "A", problem: { M, N, K }, tile, persistent: { numSms: 8 }, groupSizeM: 2 },
    { role: "consumer" },
  );
}

describe("TLX kernels", () => {
  it("golden modules of the examples", async () => {
    const ex = tlxExamples();
    await expect(ex.tlx_gemm!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_gemm.py");
    await expect(ex.tlx_ag_gemm!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_ag_gemm.py");
    await expect(ex.tlx_ag_gemm_push!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_ag_gemm_push.py");
    await expect(ex.tlx_gemm_pingpong!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_gemm_pingpong.py");
    await expect(ex.tlx_gemm_rs!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_gemm_rs.py");
    await expect(ex.tlx_gemm_rs_pingpong_sm!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_gemm_rs_pingpong.py");
    await expect(ex.tlx_gemm_rs_pn_sm!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_gemm_rs_pn.py");
    await expect(ex.tlx_gemm_rs_tn!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_gemm_rs_tn.py");
  });

  it("no TLX kernel takes the epoch from the host: the waiting ones read this rank's epoch word", () => {
    for (const [name, r] of Object.entries(tlxExamples())) {
      for (const k of r.manifest.kernels) {
        const kinds = k.args.map((a) => a.value.kind);
        expect(kinds, `${name}/${k.name}`).not.toContain("epoch");
        expect(kinds, `${name}/${k.name}`).not.toContain("epoch-target");
        const waits = r.files.some((f) => f.path === k.source && f.text.includes("wait_slot("));
        if (k.precompiled !== undefined && waits) expect(kinds, `${name}/${k.name}`).toContain("epoch-word");
      }
    }
  });

  it("python3 ast.parse accepts every emitted TLX module", () => {
    const files: Record<string, string> = {};
    for (const [name, r] of Object.entries(tlxExamples())) for (const f of r.files) files[`${name}/${f.path}`] = f.text;
    const emitted = Object.keys(files).length;
    for (const dtype of ["bf16", "fp16"] as const) {
      for (const stages of [2, 4]) {
        files[`${dtype}/${stages}.py`] = emitTlxGemm({ M: 256, N: 128, K: 64 }, { BM: 64, BN: 64, BK: 32 }, { dtype, stages, consumers: 1 })
          .files[0]!.text;
      }
    }
    files["control/broken.py"] = "with tlx.async_tasks()\n    pass\n";
    const result = parseWithPython(files);
    expect(result["control/broken.py"]).toMatch(/line 1/);
    delete result["control/broken.py"];
    expect(Object.keys(result)).toHaveLength(emitted + 4);
    expect(Object.entries(result).filter(([, v]) => v !== "ok")).toEqual([]);
  });

  it("fp16 changes a TLX GEMM's text only where bf16 names its element type: the shared rings and the epilogue stores", () => {
    const variants = {
      cooperative: {},
      pingpong: { consumerSchedule: "pingpong" },
      sm100: { target: "sm_100a" },
    } as const;
    const changed: string[] = [];
    for (const [name, options] of Object.entries(variants)) {
      const text = (dtype: "bf16" | "fp16") =>
        emitTlxGemm({ M: 512, N: 256, K: 128 }, TILE, { ...options, dtype }).files[0]!.text.split("\n");
      const [bf16, fp16] = [text("bf16"), text("fp16")];
      expect(fp16.length, name).toBe(bf16.length);
      fp16.forEach((line, i) => {
        if (line !== bf16[i]) changed.push(`${name}: ${line.trim()}`);
      });
    }
    expect(changed).toMatchInlineSnapshot(`
      [
        "cooperative: a_ring = tlx.local_alloc((SPLIT_M, BLOCK_K), tl.float16, NUM_STAGES * NUM_CONSUMERS)",
        "cooperative: b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.float16, NUM_STAGES)",
        "cooperative: c_desc.store([offs_am + cid * SPLIT_M, offs_bn], acc0.to(tl.float16))",
        "cooperative: c_desc.store([offs_am + cid * SPLIT_M, offs_bn + EPI_N], acc1.to(tl.float16))",
        "pingpong: a_ring = tlx.local_alloc((BLOCK_M, BLOCK_K), tl.float16, NUM_STAGES)",
        "pingpong: b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.float16, NUM_STAGES)",
        "pingpong: c_desc.store([offs_am, offs_bn], acc0.to(tl.float16))",
        "pingpong: c_desc.store([offs_am, offs_bn + EPI_N], acc1.to(tl.float16))",
        "sm100: a_ring = tlx.local_alloc((BLOCK_M, BLOCK_K), tl.float16, NUM_STAGES)",
        "sm100: b_ring = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.float16, NUM_STAGES)",
        "sm100: c_desc.store([offs_am, offs_bn + e * EPILOGUE_N], part.to(tl.float16))",
      ]
    `);
  });

  it("writes the MIMW structure: producer, replicated consumers with a register budget, a communication task", () => {
    const src = tlxExamples().tlx_ag_gemm_push!.files[0]!.text;
    const lines = src.split("\n").map((l) => l.trim());
    expect(lines).toContain("with tlx.async_tasks():");
    expect(lines).toContain('with tlx.async_task("default"):');
    expect(lines).toContain("with tlx.async_task(num_warps=4, replicate=2, registers=208):");
    expect(lines).toContain("with tlx.async_task(num_warps=4, registers=56):");
    // The wait comes before the loads of the tile, in the producer, and its token feeds the rows.
    const producer = src.slice(src.indexOf('async_task("default")'), src.indexOf("replicate="));
    expect(producer.indexOf("wait_slot(")).toBeGreaterThan(0);
    expect(producer.indexOf("wait_slot(")).toBeLessThan(producer.indexOf("async_descriptor_load"));
    expect(producer).toContain("offs_am = consume_token(offs_am, tok)");
  });

  it("a user replaces a part: their schedule drives every task", () => {
    const diagonal: TlxSchedulePart = {
      name: "diagonal",
      args: [],
      constexprs: { GROUP_M: 1 },
      expect: [],
      writeTileLoop(w, body) {
        w.block("for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0))", (l) => {
          l.line("pid_m = tile_id % num_pid_m");
          l.line("pid_n = (tile_id + pid_m) % num_pid_n");
          body(l);
        });
      },
    };
    const k = tlxKernel({
      kind: "my-gemm",
      entry: "my_gemm",
      summary: "mine",
      compute: tlxGemm({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64 }),
      comm: noComm(),
      schedule: diagonal,
    });
    expect(k.source.match(/pid_n = \(tile_id \+ pid_m\) % num_pid_n/g)).toHaveLength(2);
    expect(k.info.args).toEqual(["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"]);
    expect(k.totalWarps).toBe(12);
    expect(parseWithPython({ k: k.source }).k).toBe("ok");
  });

  it("mergeParams: arguments keep first-occurrence order, constexprs must agree", () => {
    const name = fc.constantFrom("a", "b", "c", "d", "e");
    fc.assert(
      fc.property(fc.array(fc.array(name, { maxLength: 4 }), { maxLength: 4 }), (lists) => {
        const merged = mergeParams(lists.map((args) => ({ args, constexprs: {}, expect: [] })));
        const flat = lists.flat();
        expect(merged.args).toEqual(flat.filter((a, i) => flat.indexOf(a) === i));
      }),
      { numRuns: 50 },
    );
    expect(
      codeOf(() =>
        mergeParams([
          { args: [], constexprs: { X: 1 }, expect: [] },
          { args: [], constexprs: { X: 2 }, expect: [] },
        ]),
      ),
    ).toBe("bad-param");
    expect(
      mergeParams([
        { args: [], constexprs: { X: 1 }, expect: [] },
        { args: [], constexprs: { X: 1 }, expect: [] },
      ]).constexprs,
    ).toEqual({ X: 1 });
    expect(
      codeOf(() =>
        mergeParams([
          { args: ["X"], constexprs: {}, expect: [] },
          { args: [], constexprs: { X: 1 }, expect: [] },
        ]),
      ),
    ).toBe("bad-param");
  });

  it("refuses what cannot compile or run", () => {
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64, dtype: "fp32" }))).toBe("bad-param");
    expect(codeOf(() => tlxGemm({ BLOCK_M: 96, BLOCK_N: 128, BLOCK_K: 64 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemm({ BLOCK_M: 64, BLOCK_N: 128, BLOCK_K: 64, consumers: 2 }))).toBe("bad-param");
    // 128x256x64: a fourth stage fits only beside the half-width staging slice of the split epilogue (the default).
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, stages: 4, epilogueSplit: 1 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, stages: 4 }))).toBeUndefined();
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, stages: 5 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, stages: 3, epilogueSplit: 1 }))).toBeUndefined();
    // Four quarter slices take two staging slices per consumer: the shared memory of the half split, four stages still fit.
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, stages: 4, epilogueSplit: 4 }))).toBeUndefined();
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, epilogueSplit: 3 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemm({ BLOCK_M: 128, BLOCK_N: 16, BLOCK_K: 64, epilogueSplit: 4 }))).toBe("bad-param");
    const wide = tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, consumerRegisters: 208 });
    const spec = { kind: "k", entry: "k", summary: "k", schedule: groupedTiles({ groupM: 8, order: tableMap("mblock_order") }) };
    // 16 warps cap ptxas at 128 registers; a 64x256 fp32 accumulator alone needs 128.
    expect(codeOf(() => tlxKernel({ ...spec, compute: wide, comm: [chunkWaitComm(tableMap("mblock_wait_slot")), pushCommTask()] }))).toBe(
      "bad-param",
    );
    expect(codeOf(() => tlxKernel({ ...spec, compute: wide, comm: [chunkWaitComm(tableMap("mblock_wait_slot"))] }))).toBeUndefined();
    // Budgets that starve the producer.
    expect(
      codeOf(() =>
        tlxKernel({ ...spec, compute: tlxGemm({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64 }), comm: pushCommTask({ registers: 120 }) }),
      ),
    ).toBe("bad-param");
    expect(
      codeOf(() => tlxKernel({ ...spec, compute: tlxGemm({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64, consumerRegisters: 230 }) })),
    ).toBe("bad-param");
    expect(codeOf(() => pushCommTask({ barrierId: 16 }))).toBe("bad-param");
  });

  it("property: the cooperative GEMM is refused exactly when its ring and staging slices exceed shared memory; its epilogue stores EPILOGUE_SPLIT slices", () => {
    fc.assert(
      fc.property(
        fc.record({
          BM: powerOfTwo(128, 256),
          BN: powerOfTwo(16, 256),
          BK: powerOfTwo(16, 128),
          stages: fc.integer({ min: 1, max: 8 }),
          split: fc.constantFrom(1, 2, 4),
        }),
        ({ BM, BN, BK, stages, split }) => {
          const p = { BLOCK_M: BM, BLOCK_N: BN, BLOCK_K: BK, stages, epilogueSplit: split };
          const fits = tlxGemmSharedBytes(p) <= SM90_MAX_SHARED_BYTES && BN / split >= 8;
          expect(codeOf(() => tlxGemm(p))).toBe(fits ? undefined : "bad-param");
          if (!fits) return;
          const part = tlxGemm(p);
          expect(part.constexprs.EPILOGUE_SPLIT).toBe(split);
          expect(part.epilogueSync.storeGroups).toBe(split);
          const w = new PythonWriter();
          part.writeConsumerTile(w);
          const tile = w.toString();
          if (split < 4) {
            expect(tile.match(/c_desc\.store\(/g)).toHaveLength(split);
            expect(part.writeConsumerExit).toBeUndefined();
            return;
          }
          // Quarters: each through one of the consumer's two slices in turn, each write after the store two back has left it.
          expect(tile).not.toContain("c_desc.store(");
          const stores = [
            ...tile.matchAll(
              /tlx\.async_descriptor_store\(c_desc, tlx\.local_view\(c_stage, cid \* 2 \+ (\d)\), \[[^\]]*offs_bn \+ (\d) \* EPI_N\]\)/g,
            ),
          ];
          expect(stores.map((m) => [Number(m[1]), Number(m[2])])).toEqual([
            [0, 0],
            [1, 1],
            [0, 2],
            [1, 3],
          ]);
          expect(tile.match(/tlx\.async_descriptor_store_wait\(1\)\n\s*tlx\.local_store\(/g)).toHaveLength(4);
          const exit = new PythonWriter();
          part.writeConsumerExit?.(exit);
          expect(exit.toString()).toContain("tlx.async_descriptor_store_wait(0)");
        },
      ),
      { numRuns: 200 },
    );
    // The split halves the staging: 128x256x64 at four stages fits with it, not without; the default ring is the deepest up to 4 that fits.
    expect(defaultStages({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64 })).toBe(4);
    expect(defaultStages({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, epilogueSplit: 1 })).toBe(3);
    expect(defaultStages({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 128 })).toBe(2);
    expect(defaultStages({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64 })).toBe(MAX_DEFAULT_STAGES);
    expect(tlxGemmSharedBytes({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, stages: 4 })).toBeLessThanOrEqual(SM90_MAX_SHARED_BYTES);
    expect(tlxGemmSharedBytes({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, stages: 4, epilogueSplit: 1 })).toBeGreaterThan(
      SM90_MAX_SHARED_BYTES,
    );
  });
});

describe("emitTlxAgGemm", () => {
  it("uses the plain path's tile schedule tables and host ops (copy engine), marked precompiled", () => {
    const plan = agPlan("swizzle-push", 2, 1024, 64, 2);
    const s = schedule(plan, 1024, 256, 64);
    const plain = emitAgGemm(plan, s);
    const tlx = emitTlxAgGemm(plan, s);
    expect(Manifest.safeParse(tlx.manifest).success).toBe(true);
    // The plain path's order and wait-slot tables, as maps of the tile program, both inline: the rank-rotated order
    // and the wait slots (none on the rank's own chunk, the others' chunks numbered in order).
    for (const [name, which] of [
      ["mblock_order", "order"],
      ["mblock_wait_slot", "slot"],
    ] as const) {
      const table = plain.manifest.tables.find((t) => t.name === name)!.values;
      table.forEach((values, rank) => expect(programValues(tlx.manifest, which, rank)).toEqual(values));
    }
    expect(tlx.manifest.tables).toEqual([]);
    expect(tlx.files[0]!.text).toContain("pid_m = (ovl_m + 4 * ovl_rank) % 8");
    expect(tlx.files[0]!.text).not.toContain("tl.load(");
    expect(tlx.manifest.hostOps).toEqual(plain.manifest.hostOps);
    const k = tlx.manifest.kernels[0]!;
    expect(k.precompiled).toEqual({ target: "sm_90a", cubin: "tlx_ag_gemm.sm_90a.cubin", metadata: "tlx_ag_gemm.sm_90a.json" });
    expect(k.template.kind).toBe("tlx-ag-gemm");
    // The epoch is read on the device (the rank's epoch word), never passed from the host.
    expect(k.args.find((a) => a.name === "epoch_ptr")!.value).toEqual({ kind: "epoch-word" });
    expect(k.args.some((a) => a.value.kind === "epoch" || a.value.kind === "epoch-target")).toBe(false);
    expect(k.constexprs.WAIT_ARRIVALS).toBe(1);
    expect(tlx.files[0]!.text).toContain("target = load_epoch_target(epoch_ptr, WAIT_ARRIVALS)");
    expect(tlx.expect.tlx_ag_gemm).toEqual(
      expect.arrayContaining(["wgmma\\.mma_async", "cp\\.async\\.bulk\\.tensor", "ld\\.global\\.acquire\\.sys"]),
    );
    expect(tlx.manifest.buffers.find((b) => b.name === "signals")!.dtype).toBe("uint32");
  });

  it("comm task: the pushes gather A on every rank and every waited slot gets exactly `arrivals` notifies after its rows", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(1, 2),
        fc.constantFrom(1, 2),
        fc.constantFrom(1, 2, 3),
        (world, split, blocks, pieces) => {
          const M = world * split * blocks * TILE.BM;
          const K = 8;
          const plan = agPlan("swizzle-push", world, M, K, split);
          const r = emitTlxAgGemm(plan, schedule(plan, M, 128, K), { comm: "comm-task", commPieces: pieces });
          const m = r.manifest;
          expect(Manifest.safeParse(m).success).toBe(true);
          expect(m.hostOps).toEqual([]);
          const rows = m.tables.find((t) => t.name === "push_rows")!.values;
          expect(m.kernels[0]!.args.find((a) => a.name === "epoch_ptr")!.value).toEqual({ kind: "epoch-word" });
          const arrivals = m.kernels[0]!.constexprs.WAIT_ARRIVALS as number;
          const numPushes = (m.kernels[0]!.args.find((a) => a.name === "num_pushes")!.value as { value: number }).value;
          const rowsPerRank = M / world;
          const A = Array.from({ length: world }, (_, r) =>
            Array.from({ length: M * K }, (_, i) =>
              Math.floor(i / K) >= r * rowsPerRank && Math.floor(i / K) < (r + 1) * rowsPerRank ? i : -1,
            ),
          );
          const notifies = new Map<string, number>();
          const F = PUSH_ROW_FIELDS.length;
          rows.forEach((flat, rank) => {
            expect(flat.length).toBe(numPushes * F);
            for (let row = 0; row < numPushes; row++) {
              const [src, dst, dstOff, len, slot] = flat.slice(row * F, row * F + F) as [number, number, number, number, number];
              // Pieces start on 16-byte units (8 bf16 elements): the task's copies vectorise.
              expect(src % 8, `row ${row} of rank ${rank} starts unaligned`).toBe(0);
              expect(dstOff % 8).toBe(0);
              for (let i = 0; i < len; i++) {
                const v = A[rank]![src + i]!;
                expect(v, `rank ${rank} pushes element ${src + i}, which it does not own`).toBeGreaterThanOrEqual(0);
                A[dst]![dstOff + i] = v;
              }
              if (slot >= 0) notifies.set(`${dst}:${slot}`, (notifies.get(`${dst}:${slot}`) ?? 0) + 1);
            }
          });
          for (const a of A) expect(a).toEqual(Array.from({ length: M * K }, (_, i) => i));
          for (let r = 0; r < world; r++) {
            for (const s of programValues(m, "slot", r)) if (s >= 0) expect(notifies.get(`${r}:${s}`)).toBe(arrivals);
          }
          expect([...notifies.values()].every((n) => n === arrivals)).toBe(true);
          if (world > 1) expect(arrivals).toBe(pieces);
          expect(m.buffers.find((b) => b.name === "signals")!.dtype).toBe("int32");
        },
      ),
      { numRuns: 20 },
    );
  });

  it("the comm task refuses pull and chained plans; bad options are errors", () => {
    const pull = agPlan("swizzle-pull", 2, 512, 64, 1);
    expect(codeOf(() => emitTlxAgGemm(pull, schedule(pull, 512, 128, 64), { comm: "comm-task" }))).toBe("bad-plan");
    const ring = agPlan("ring-push", 4, 512, 64, 1);
    expect(codeOf(() => emitTlxAgGemm(ring, schedule(ring, 512, 128, 64), { comm: "comm-task" }))).toBe("unsupported-dependency");
    expect(codeOf(() => emitTlxAgGemm(ring, schedule(ring, 512, 128, 64)))).toBeUndefined();
    const plan = agPlan("swizzle-push", 2, 512, 64, 1);
    expect(codeOf(() => emitTlxAgGemm(plan, schedule(plan, 512, 128, 64), { comm: "bogus" as "comm-task" }))).toBe("bad-param");
    expect(codeOf(() => emitTlxAgGemm(plan, schedule(plan, 512, 128, 64), { comm: "comm-task", commPieces: 1_000_000 }))).toBe("bad-plan");
  });
});

describe("emitTlxGemm", () => {
  it("is a one-rank manifest checked against A @ B, launched on at most one program per tile", () => {
    const r = emitTlxGemm({ M: 8192, N: 8192, K: 8192 });
    const m = r.manifest;
    expect(m.world).toBe(1);
    expect(m.reference).toMatchObject({ operator: "ag-gemm", M: 8192, N: 8192, K: 8192, rowsPerRank: 8192, output: "gemm_c" });
    expect(m.kernels[0]!.grid).toEqual([{ kind: "num-sms", cap: 64 * 32 }]);
    expect(m.kernels[0]!.constexprs).toMatchObject({
      BLOCK_M: 128,
      BLOCK_N: 256,
      BLOCK_K: 64,
      // The deepest ring up to 4 that fits beside the split epilogue's staging slice.
      NUM_STAGES: 4,
      NUM_CONSUMERS: 2,
      EPILOGUE_SPLIT: 2,
      GROUP_M: 8,
    });
    expect(r.expect.tlx_gemm).not.toContain("ld\\.global\\.acquire\\.sys");
    expect(codeOf(() => emitTlxGemm({ M: 64, N: 60, K: 64 }))).toBe("bad-param");
  });
});

describe("pushRows", () => {
  it("cuts each chunk into pieces that start on 16-byte units and cover it exactly once", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ start: fc.nat(64), length: fc.integer({ min: 32, max: 4000 }) }), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(4, 8),
        (copies, pieces, unit) => {
          const ops = copies.map((c, i) => ({
            kind: "copy" as const,
            src: { buffer: "A", rank: 0, offset: c.start * unit, length: c.length },
            dst: { buffer: "A", rank: 1, offset: (c.start + 100) * unit, length: c.length },
            signal: { rank: 1, slot: i },
          }));
          const { rows, arrivals } = pushRows([{ rank: 0, streams: [{ name: "comm0", ops }] }], 2, pieces, unit);
          expect(arrivals).toBe(pieces);
          const F = PUSH_ROW_FIELDS.length;
          const flat = rows[0]!;
          copies.forEach((c, i) => {
            const mine = Array.from({ length: flat.length / F }, (_, r) => flat.slice(r * F, r * F + F)).filter((r) => r[4] === i);
            expect(mine).toHaveLength(pieces);
            let next = c.start * unit;
            for (const [src, , dst, len] of mine as [number, number, number, number, number][]) {
              expect(src).toBe(next);
              expect(src % unit).toBe(0);
              expect(dst - src).toBe(100 * unit);
              next = src + len;
            }
            expect(next).toBe(c.start * unit + c.length);
          });
          expect(() =>
            checkSegmentAlignment(flat, PUSH_ROW_FIELDS, ["src_offset", "dst_offset"], unit === 8 ? "bf16" : "fp32"),
          ).not.toThrow();
        },
      ),
      { numRuns: 50 },
    );
  });

  it("refuses chunks too short for whole-unit pieces", () => {
    const op = {
      kind: "copy" as const,
      src: { buffer: "A", rank: 0, offset: 0, length: 20 },
      dst: { buffer: "A", rank: 1, offset: 0, length: 20 },
      signal: { rank: 1, slot: 0 },
    };
    expect(codeOf(() => pushRows([{ rank: 0, streams: [{ name: "comm0", ops: [op] }] }], 2, 3, 8))).toBe("bad-plan");
    expect(codeOf(() => pushRows([{ rank: 0, streams: [{ name: "comm0", ops: [op] }] }], 2, 2, 8))).toBeUndefined();
  });
});

describe("emitTlxGemm for sm_100a", () => {
  it("golden modules of the Blackwell examples", async () => {
    const ex = tlxBlackwellExamples();
    await expect(ex.tlx_gemm_sm100!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_gemm_sm100.py");
    await expect(ex.tlx_gemm_sm100_clc!.files[0]!.text).toMatchFileSnapshot("./__golden__/tlx_gemm_sm100_clc.py");
  });

  it("python3 ast.parse accepts the Blackwell modules", () => {
    const files: Record<string, string> = {};
    for (const [name, r] of Object.entries(tlxBlackwellExamples())) files[name] = r.files[0]!.text;
    for (const dtype of ["bf16", "fp16"] as const) {
      files[`${dtype}/narrow.py`] = emitTlxGemm(
        { M: 256, N: 128, K: 64 },
        { BM: 128, BN: 64, BK: 32 },
        { target: "sm_100a", dtype, stages: 2, accBuffers: 3, epilogueN: 32 },
      ).files[0]!.text;
    }
    const result = parseWithPython(files);
    expect(Object.keys(result)).toHaveLength(4);
    expect(Object.entries(result).filter(([, v]) => v !== "ok")).toEqual([]);
  });

  it("writes three tasks: the TMEM epilogue (default), a one-warp MMA task, a one-warp load task", () => {
    const src = tlxBlackwellExamples().tlx_gemm_sm100!.files[0]!.text;
    const lines = src.split("\n").map((l) => l.trim());
    expect(lines).toContain("acc_tmem = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float32, NUM_ACC, tlx.storage_kind.tmem)");
    expect(lines.filter((l) => l === "with tlx.async_task(num_warps=1, registers=48):")).toHaveLength(2);
    const epilogue = src.slice(src.indexOf('async_task("default")'), src.indexOf("num_warps=1"));
    expect(epilogue).toContain("tlx.local_load(tlx.subslice(acc, e * EPILOGUE_N, EPILOGUE_N))");
    expect(epilogue).toContain("tlx.barrier_arrive(tlx.local_view(acc_empty_bars, buf))");
    expect(src).toContain("mBarriers=[tlx.local_view(empty_bars, stage)]");
    expect(src).toContain("tlx.tcgen05_commit(tlx.local_view(acc_full_bars, buf))");
    expect(src).not.toContain("clc");
    // CLC: one issuer (the epilogue), three readers of every response.
    const clc = tlxBlackwellExamples().tlx_gemm_sm100_clc!.files[0]!.text;
    expect(clc).toContain("clc = tlx.clc_create_context(num_consumers=3)");
    expect(clc.match(/tlx\.clc_producer\(/g)).toHaveLength(1);
    expect(clc.match(/tlx\.clc_consumer\(/g)).toHaveLength(3);
    expect(clc.indexOf("tlx.clc_producer(")).toBeGreaterThan(clc.indexOf('async_task("default")'));
    expect(clc.indexOf("tlx.clc_producer(")).toBeLessThan(clc.indexOf("num_warps=1"));
  });

  it("keeps the kind, arguments and constexprs the runner emulates; manifest marked sm_100a; grid per scheduler", () => {
    for (const [name, r] of Object.entries(tlxBlackwellExamples({ M: 8192, N: 8192, K: 8192 }))) {
      const m = r.manifest;
      expect(Manifest.safeParse(m).success).toBe(true);
      const k = m.kernels[0]!;
      expect(k.template.kind).toBe("tlx-gemm");
      expect(k.args.map((a) => a.name)).toEqual(["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"]);
      expect(k.constexprs).toMatchObject({
        BLOCK_M: 128,
        BLOCK_N: 256,
        BLOCK_K: 64,
        NUM_STAGES: 4,
        NUM_ACC: 2,
        EPILOGUE_N: 64,
        GROUP_M: 8,
      });
      expect(k.precompiled).toEqual({ target: "sm_100a", cubin: "tlx_gemm.sm_100a.cubin", metadata: "tlx_gemm.sm_100a.json" });
      expect(m.reference).toMatchObject({ operator: "ag-gemm", M: 8192, N: 8192, K: 8192 });
      expect(r.expect.tlx_gemm).toEqual(
        expect.arrayContaining(["tcgen05\\.mma\\.cta_group::1\\.kind::f16", "tcgen05\\.ld\\.sync", "mbarrier\\.try_wait"]),
      );
      expect(r.expect.tlx_gemm).not.toContain("wgmma\\.mma_async");
      if (name.endsWith("_clc")) {
        expect(k.grid).toEqual([64 * 32]);
        expect(r.expect.tlx_gemm).toContain("clusterlaunchcontrol\\.try_cancel");
      } else {
        expect(k.grid).toEqual([{ kind: "num-sms", cap: 64 * 32 }]);
      }
    }
    // The default stays sm_90a.
    expect(emitTlxGemm({ M: 256, N: 256, K: 64 }).manifest.kernels[0]!.precompiled!.target).toBe("sm_90a");
    expect(tlxGemmBlackwellSharedBytes({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64 })).toBe(212992);
  });

  it("refuses what the sm_100a kernel cannot be, and options of the other target", () => {
    const plan = agPlan("swizzle-push", 2, 512, 64, 1);
    expect(codeOf(() => emitTlxAgGemm(plan, schedule(plan, 512, 128, 64), { target: "sm_100a" }))).toBe("bad-param");
    const p = { M: 512, N: 512, K: 256 };
    expect(codeOf(() => emitTlxGemm(p, undefined, { target: "sm_100a", consumers: 2 }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm(p, undefined, { target: "sm_100a", consumerRegisters: 200 }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm(p, undefined, { scheduler: "clc" }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm(p, undefined, { accBuffers: 2 }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm(p, undefined, { target: "sm_80" as "sm_90a" }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm(p, undefined, { target: "sm_100a", scheduler: "dynamic" as "clc" }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm(p, undefined, { target: "sm_100a", scheduler: "clc" }))).toBeUndefined();
    const ok = { BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64 };
    expect(codeOf(() => tlxGemmBlackwell(ok))).toBeUndefined();
    expect(codeOf(() => tlxGemmBlackwell({ ...ok, BLOCK_M: 64 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemmBlackwell({ ...ok, dtype: "fp32" }))).toBe("bad-param");
    expect(codeOf(() => tlxGemmBlackwell({ ...ok, accBuffers: 3 }))).toBe("bad-param"); // 768 TMEM columns
    expect(codeOf(() => tlxGemmBlackwell({ ...ok, BLOCK_N: 128, accBuffers: 4 }))).toBeUndefined();
    expect(codeOf(() => tlxGemmBlackwell({ ...ok, stages: 5 }))).toBe("bad-param"); // shared memory
    expect(codeOf(() => tlxGemmBlackwell({ ...ok, epilogueN: 512 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemmBlackwell({ ...ok, taskRegisters: 20 }))).toBe("bad-param");
    // Cluster launch control is sm_100a only: the Hopper assembler refuses it.
    const hopper = { kind: "k", entry: "k", summary: "k", compute: tlxGemm({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64 }) };
    expect(codeOf(() => tlxKernel({ ...hopper, schedule: clcTiles({ groupM: 8 }) }))).toBe("bad-param");
    const k = tlxBlackwellKernel({
      kind: "k",
      entry: "k",
      summary: "k",
      compute: tlxGemmBlackwell(ok),
      schedule: groupedTiles({ groupM: 4 }),
    });
    expect(k.totalWarps).toBe(8);
    expect(k.numWarps).toBe(4);
  });
});
