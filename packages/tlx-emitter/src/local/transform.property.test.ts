import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { add, constant, dynamicMap, lookupTable, mod, mul, staticMap, variable, type IndexMap } from "@ovl/mapping";
import { beforeAll, describe, expect, it } from "vitest";
import { parseWithPython } from "../testing/python.js";
import { loadPythonParser, parseLocalKernelWith, transformLocalKernel, type LocalKernel, type TileProgram } from "./index.js";

const read = (rel: string): string => readFileSync(fileURLToPath(new URL(`../../${rel}`, import.meta.url)), "utf8");

let kernel: LocalKernel;
let producer: LocalKernel;
beforeAll(async () => {
  const parser = await loadPythonParser();
  kernel = parseLocalKernelWith(parser, read("examples/user-kernels/tutorial_matmul.py"), { file: "tutorial_matmul.py" });
  producer = parseLocalKernelWith(parser, read("kernels/gemm_producer_tma_flat.py"), { file: "gemm_producer_tma_flat.py" });
});

const M_BLOCKS = 16;
const m = variable("ovl_m", { min: 0, max: M_BLOCKS - 1 });

/** A static affine map a*m + b (mod n, sometimes), or a table of random length indexed by m. */
const indexMap = (tableName: string, v = m): fc.Arbitrary<{ map: IndexMap; table?: string }> =>
  fc.oneof(
    fc
      .record({ a: fc.integer({ min: -5, max: 5 }), b: fc.integer({ min: -40, max: 40 }), n: fc.option(fc.integer({ min: 1, max: 64 })) })
      .map(({ a, b, n }) => {
        // Triton's % truncates toward zero, so the printer accepts a mod of non-negative values only.
        const affine = n === null ? add(mul(constant(a), v), constant(b)) : add(mul(constant(Math.abs(a)), v), constant(Math.abs(b)));
        return { map: staticMap(n === null ? affine : mod(affine, constant(n))) };
      }),
    fc
      .integer({ min: M_BLOCKS, max: 4 * M_BLOCKS })
      .map((length) => ({ map: dynamicMap(lookupTable(tableName, length), v), table: tableName })),
  );

const program: fc.Arbitrary<TileProgram> = fc
  .record({
    order: indexMap("ovl_order"),
    columns: fc.integer({ min: 1, max: 4 }).chain((c) => fc.tuple(...Array.from({ length: c }, (_, j) => indexMap(`ovl_wait${j}`)))),
  })
  .map(({ order, columns }) => ({
    role: "consumer",
    order: order.map,
    slots: columns.map((c) => c.map),
    tables: [order, ...columns].flatMap((c) => (c.table === undefined ? [] : [c.table])),
  }));

const INSERTED_LOCALS = /^ovl_(m|mb|tok|target|waited|slot\d+|bit\d+)$/;

describe("transformLocalKernel, property", () => {
  it("any order and any number of slot columns: one wait per column, only inserted ovl_ names, valid Python", () => {
    const emitted: Record<string, string> = {};
    const programs: Record<string, TileProgram> = {};
    let i = 0;
    fc.assert(
      fc.property(program, (p) => {
        const out = transformLocalKernel(kernel, p);
        expect(out.source.split("wait_slot(ovl_sig_ptr").length - 1).toBe(p.slots.length);
        expect(out.source.split("consume_token(pid_m, ovl_tok)").length - 1).toBe(p.slots.length);
        // Remapped at both tile statements (the main loop's and the epilogue's).
        expect(out.source.split("ovl_m = pid_m\n").length - 1).toBe(2);
        // A persistent kernel: the launch's target once, before its tile loop; each column's wait skipped once its slot was seen.
        expect(out.source.split("ovl_target = load_epoch_target(ovl_epoch_ptr, 1)").length - 1).toBe(1);
        expect(out.source.indexOf("ovl_waited = 0")).toBeLessThan(out.source.indexOf("for tile_id"));
        expect(out.source.split("ovl_waited = ovl_waited | ovl_bit").length - 1).toBe(p.slots.length);
        const names = new Set(out.source.match(/\bovl_[A-Za-z0-9_]*/g) ?? []);
        for (const name of names) {
          expect(kernel.identifiers.has(name)).toBe(false);
          expect(out.insertedParams.includes(name) || INSERTED_LOCALS.test(name) || name === "ovl_runtime", name).toBe(true);
        }
        expect(out.params.slice(0, kernel.params.length)).toEqual(kernel.params.map((q) => q.name));
        emitted[`case${i}`] = out.source;
        programs[`case${i}`] = p;
        i += 1;
      }),
      { numRuns: 60 },
    );
    for (const [name, verdict] of Object.entries(parseWithPython(emitted))) {
      expect(verdict, JSON.stringify(programs[name])).toBe("ok");
    }
  });

  it('a persistent producer, notifyAt "next-tile", any number of slot columns: the runs of each column notified where due in the K loop, pending after the stores and once after the loop, valid Python', () => {
    const t = variable("ovl_t", { min: 0, max: M_BLOCKS - 1 });
    const producerProgram: fc.Arbitrary<TileProgram> = fc
      .integer({ min: 1, max: 4 })
      .chain((c) => fc.tuple(...Array.from({ length: c }, (_, j) => indexMap(`ovl_notify${j}`, t))))
      .map((columns) => ({
        role: "producer",
        order: staticMap(t),
        slots: columns.map((c) => c.map),
        numPidN: 4,
        notifyAt: "next-tile",
        tables: columns.flatMap((c) => (c.table === undefined ? [] : [c.table])),
      }));
    const emitted: Record<string, string> = {};
    let i = 0;
    fc.assert(
      fc.property(producerProgram, (p) => {
        const out = transformLocalKernel(producer, p).source;
        const lines = out.split("\n");
        const loop = lines.findIndex((l) => l.startsWith("    for tile_id in"));
        const kLoop = lines.findIndex((l) => l.includes("for ki in range(k_tiles):"));
        const kStep = lines.findIndex((l) => l.includes("offs_k = ki * BLOCK_K"));
        const lastStore = lines.findLastIndex((l) => l.includes("c_desc.store("));
        expect(lines[kLoop - 1]).toBe("        ovl_k = 0");
        expect(lines[kStep - 1]).toBe("            ovl_k += 1");
        p.slots.forEach((_, j) => {
          // The tile's slot before the K loop, once.
          const slot = lines.findIndex((l) => l.startsWith(`        ovl_slot${j} = `));
          expect(slot).toBeGreaterThan(loop);
          expect(slot).toBeLessThan(kLoop);
          expect(lines.filter((l) => l.startsWith(`        ovl_slot${j} = `)).length).toBe(1);
          // Due at K step 1, unless the tile is on the same slot: the notify of the run and its reset, before the step's loads.
          const due = lines.indexOf(`            notify_slot_if(ovl_sig_ptr, ovl_prev${j}, ovl_due${j}, ovl_cnt${j})`);
          expect(due).toBeGreaterThan(kLoop);
          expect(due).toBeLessThan(kStep);
          expect(lines[due - 1]).toBe(`            ovl_due${j} = (ovl_k == 1) & (ovl_prev${j} >= 0) & (ovl_prev${j} != ovl_slot${j})`);
          expect(lines.slice(due + 1, due + 3)).toEqual([
            `            ovl_prev${j} = tl.where(ovl_due${j}, -1, ovl_prev${j})`,
            `            ovl_cnt${j} = tl.where(ovl_due${j}, 0, ovl_cnt${j})`,
          ]);
          // After the stores: a pending run on another slot, then the tile joins its slot's run.
          const flush = lines.indexOf(`        notify_slot_if(ovl_sig_ptr, ovl_prev${j}, ovl_flush${j}, ovl_cnt${j})`);
          expect(flush).toBeGreaterThan(lastStore);
          expect(lines.slice(flush + 1, flush + 3)).toEqual([
            `        ovl_cnt${j} = tl.where(ovl_slot${j} >= 0, tl.where(ovl_prev${j} == ovl_slot${j}, ovl_cnt${j}, 0) + 1, 0)`,
            `        ovl_prev${j} = ovl_slot${j}`,
          ]);
          expect(lines).toContain(`    notify_slot_if(ovl_sig_ptr, ovl_prev${j}, ovl_prev${j} >= 0, ovl_cnt${j})`);
          expect(lines.indexOf(`    ovl_prev${j} = -1`)).toBeLessThan(loop);
          expect(lines.indexOf(`    ovl_cnt${j} = 0`)).toBeLessThan(loop);
        });
        expect(out).not.toMatch(/ovl_slot\d+ >= 0\)/);
        emitted[`case${i}`] = out;
        i += 1;
      }),
      { numRuns: 30 },
    );
    for (const verdict of Object.values(parseWithPython(emitted))) expect(verdict).toBe("ok");
  });
});
