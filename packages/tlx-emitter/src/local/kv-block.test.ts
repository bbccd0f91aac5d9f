import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { add, constant, dynamicMap, lookupTable, mod, mul, staticMap, variable, type IndexMap } from "@ovl/mapping";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { parseWithPython } from "../testing/python.js";
import {
  LocalKernelError,
  loadPythonParser,
  parseLocalKernelWith,
  transformLocalKernel,
  type LocalKernel,
  type LocalKernelErrorCode,
  type PythonParser,
  type TileProgram,
} from "./index.js";

const FLASH = readFileSync(fileURLToPath(new URL("../../kernels/flash_attention.py", import.meta.url)), "utf8");

let parser: PythonParser;
let flash: LocalKernel;
beforeAll(async () => {
  parser = await loadPythonParser();
  flash = parseLocalKernelWith(parser, FLASH, { file: "flash_attention.py" });
});

/** A small kv-loop consumer; line numbers count from 1. */
const GOOD = [
  "import triton",
  "import triton.language as tl",
  "",
  "",
  "# ovl: consumer gather=kv_ptr", // 5
  "@triton.jit",
  "def k(kv_ptr, o_ptr, n, BLOCK: tl.constexpr):", // 7
  "    acc = tl.zeros([BLOCK], dtype=tl.float32)",
  "    for it in range(0, n):", // 9
  "        blk = it  # ovl: tile kv=blk", // 10
  "        if blk < n:", // 11
  "            acc += tl.load(kv_ptr + blk * BLOCK + tl.arange(0, BLOCK))", // 12
  "    tl.store(o_ptr + tl.arange(0, BLOCK), acc)", // 13
  "",
];

function edit(line: number, ...text: string[]): string {
  const lines = [...GOOD];
  lines.splice(line - 1, 1, ...text);
  return lines.join("\n");
}

const m = variable("ovl_m", { min: 0, max: 15 });
const rank = variable("ovl_rank", { min: 0, max: 3 });
const ORDER = staticMap(mod(add(m, mul(constant(4), rank)), constant(16)));
const program = (slots: IndexMap[], tables: string[] = []): TileProgram => ({ role: "consumer", order: ORDER, slots, tables });

describe("kv-loop consumers (# ovl: tile kv=)", () => {
  it("waits inside the if that guards the block, after the remap; the target is read once before the loop", () => {
    const k = parseLocalKernelWith(parser, GOOD.join("\n"), { file: "k.py" });
    expect(k.waitsPer).toBe("kv-block");
    const out = transformLocalKernel(k, program([dynamicMap(lookupTable("ovl_wait0", 16), m)], ["ovl_wait0"]));
    expect(out.source).toContain(
      [
        "    ovl_target = load_epoch_target(ovl_epoch_ptr, 1)",
        "    for it in range(0, n):",
        "        blk = it  # ovl: tile kv=blk",
        "        ovl_m = blk",
        "        blk = (ovl_m + 4 * ovl_rank) % 16",
        "        if blk < n:",
        "            ovl_mb = blk",
        "            ovl_slot0 = tl.load(ovl_wait0 + (ovl_mb))",
        "            if ovl_slot0 >= 0:",
        "                ovl_tok = wait_slot(ovl_sig_ptr, ovl_slot0, ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)",
        "                blk = consume_token(blk, ovl_tok)",
        "            acc += tl.load(kv_ptr + blk * BLOCK + tl.arange(0, BLOCK))",
      ].join("\n"),
    );
  });

  it("without a guard, waits right after the remap", () => {
    const src = edit(11, "        acc += tl.load(kv_ptr + blk * BLOCK + tl.arange(0, BLOCK))").replace(
      "            acc += tl.load(kv_ptr + blk * BLOCK + tl.arange(0, BLOCK))\n",
      "",
    );
    const out = transformLocalKernel(parseLocalKernelWith(parser, src, { file: "k.py" }), program([staticMap(mul(constant(2), m))]));
    expect(out.source).toContain("        blk = (ovl_m + 4 * ovl_rank) % 16\n        ovl_mb = blk\n        ovl_slot0 = 2 * ovl_mb\n");
  });

  it("a persistent kernel: its kv loop inside the tile loop waits per block there; the built-in body is persistent", () => {
    const src = [
      ...GOOD.slice(0, 7),
      "    for w in tl.range(tl.program_id(0), n, tl.num_programs(0), flatten=False):  # ovl: tile-loop",
      ...GOOD.slice(7, 12).map((l) => `    ${l}`),
      ...GOOD.slice(12),
    ].join("\n");
    const k = parseLocalKernelWith(parser, src, { file: "k.py" });
    expect([k.persistent, k.waitsPer]).toEqual([true, "kv-block"]);
    const out = transformLocalKernel(k, program([staticMap(m)]));
    expect(out.source).toContain(
      "        ovl_target = load_epoch_target(ovl_epoch_ptr, 1)\n        for it in range(0, n):\n            blk = it  # ovl: tile kv=blk\n",
    );
    expect(out.source).toContain("            if blk < n:\n                ovl_mb = blk\n");
    expect(parseWithPython({ k: out.source }).k).toBe("ok");
    expect([flash.persistent, flash.waitsPer]).toEqual([true, "kv-block"]);
  });

  const GROUPS = { count: 3, starts: "ovl_gs", waitAt: "ovl_ga", waits: "ovl_gw" };
  const groupTables = ["ovl_gs", "ovl_ga", "ovl_gw"];

  it("with arrival groups: an outer loop waits once per group, the kv loop runs over the group's positions, no wait in it", () => {
    const k = parseLocalKernelWith(parser, GOOD.join("\n"), { file: "k.py" });
    const out = transformLocalKernel(k, program([staticMap(m)], groupTables), { kvGroups: GROUPS });
    expect(out.source).toContain(
      [
        "    acc = tl.zeros([BLOCK], dtype=tl.float32)",
        "    ovl_target = load_epoch_target(ovl_epoch_ptr, 1)",
        "    for ovl_g in tl.range(0, 3):",
        "        ovl_lo = tl.load(ovl_gs + ovl_g)",
        "        ovl_hi = tl.load(ovl_gs + ovl_g + 1)",
        "        for ovl_w in tl.range(tl.load(ovl_ga + ovl_g), tl.load(ovl_ga + ovl_g + 1)):",
        "            ovl_tok = wait_slot(ovl_sig_ptr, tl.load(ovl_gw + ovl_w), ovl_target, ovl_err_ptr, ovl_rank, ovl_timeout_ns)",
        "            ovl_lo = consume_token(ovl_lo, ovl_tok)",
        "        for it in tl.range(ovl_lo, tl.minimum(ovl_hi, n)):",
        "            blk = it  # ovl: tile kv=blk",
        "            ovl_m = blk",
        "            blk = (ovl_m + 4 * ovl_rank) % 16",
        "            if blk < n:",
        "                acc += tl.load(kv_ptr + blk * BLOCK + tl.arange(0, BLOCK))",
        "    tl.store(o_ptr + tl.arange(0, BLOCK), acc)",
      ].join("\n"),
    );
    expect(out.source.match(/wait_slot\(/g)?.length).toBe(1);
    expect(parseWithPython({ k: out.source }).k).toBe("ok");
  });

  it("with arrival groups that are block runs: a causal guard clips each group's positions and holds statically", () => {
    const k = parseLocalKernelWith(parser, GOOD.join("\n"), { file: "k.py" });
    const out = transformLocalKernel(k, program([staticMap(m)], [...groupTables, "ovl_gb"]), { kvGroups: { ...GROUPS, firsts: "ovl_gb" } });
    expect(out.source).toContain(
      [
        "        for it in tl.range(ovl_lo, tl.minimum(tl.minimum(ovl_hi, n), ovl_lo + n - tl.load(ovl_gb + ovl_g))):",
        "            blk = it  # ovl: tile kv=blk",
        "            ovl_m = blk",
        "            blk = (ovl_m + 4 * ovl_rank) % 16",
        "            if True:",
        "                acc += tl.load(kv_ptr + blk * BLOCK + tl.arange(0, BLOCK))",
      ].join("\n"),
    );
    expect(parseWithPython({ k: out.source }).k).toBe("ok");
    const diag = transformLocalKernel(
      parseLocalKernelWith(parser, edit(11, "        if 2 <= blk and blk < n:"), { file: "k.py" }),
      program([staticMap(m)], [...groupTables, "ovl_gb"]),
      { kvGroups: { ...GROUPS, firsts: "ovl_gb" } },
    );
    expect(diag.source).toContain(
      "        for it in tl.range(tl.maximum(ovl_lo, ovl_lo + 2 - tl.load(ovl_gb + ovl_g)), tl.minimum(tl.minimum(ovl_hi, n), ovl_lo + n - tl.load(ovl_gb + ovl_g))):",
    );
    expect(diag.source).toContain("            if True:\n");
    expect(parseWithPython({ k: diag.source }).k).toBe("ok");
    // Any other guard keeps its if and the group's whole range.
    for (const cond of [
      "blk <= n",
      "n > blk",
      "blk < n + 1",
      "it < n",
      "2 < blk and blk < n",
      "2 <= blk or blk < n",
      "2 <= it and blk < n",
    ]) {
      const src = edit(11, `        if ${cond}:`);
      const other = transformLocalKernel(
        parseLocalKernelWith(parser, src, { file: "k.py" }),
        program([staticMap(m)], [...groupTables, "ovl_gb"]),
        {
          kvGroups: { ...GROUPS, firsts: "ovl_gb" },
        },
      );
      expect(other.source, cond).toContain(`if ${cond}:`);
      expect(other.source, cond).toContain("for it in tl.range(ovl_lo, tl.minimum(ovl_hi, n)):");
    }
  });

  it("golden: the built-in persistent flash-attention body with arrival groups", async () => {
    const slots = [dynamicMap(lookupTable("ovl_wait0", 16), m)];
    const out = transformLocalKernel(flash, program(slots, ["ovl_wait0", ...groupTables]), { kvGroups: GROUPS });
    await expect(out.source).toMatchFileSnapshot("./__golden__/flash_attention.groups.py");
    const runs = transformLocalKernel(flash, program(slots, ["ovl_wait0", ...groupTables, "ovl_gb"]), {
      kvGroups: { ...GROUPS, firsts: "ovl_gb" },
    });
    await expect(runs.source).toMatchFileSnapshot("./__golden__/flash_attention.group-runs.py");
  });

  it("with arrival groups, a kv loop not of the grouped form keeps its per-block waits", () => {
    for (const src of [
      edit(10, "        blk = 2 * it  # ovl: tile kv=blk"),
      edit(9, "    for it in range(1, n):"),
      edit(9, "    for it in range(0, n + 1):"),
      edit(9, "    for it in range(0,", "                    n):"),
    ]) {
      const out = transformLocalKernel(parseLocalKernelWith(parser, src, { file: "k.py" }), program([staticMap(m)], groupTables), {
        kvGroups: GROUPS,
      });
      expect(out.source, src).not.toContain("for ovl_g in");
      expect(out.source, src).toContain("            ovl_slot0 = ovl_mb\n");
      expect(parseWithPython({ k: out.source }).k).toBe("ok");
    }
  });

  it("a statement between the kv statement and the if: no guard, the waits follow the remap", () => {
    const src = edit(11, "        acc += tl.load(kv_ptr + blk)", "        if blk < n:");
    const out = transformLocalKernel(parseLocalKernelWith(parser, src, { file: "k.py" }), program([staticMap(m)]));
    expect(out.source).toContain("        ovl_mb = blk\n        ovl_slot0 = ovl_mb\n");
    expect(out.source.indexOf("wait_slot(")).toBeLessThan(out.source.indexOf("acc += tl.load(kv_ptr + blk)"));
  });

  const refusals: [string, string, LocalKernelErrorCode, RegExp][] = [
    [
      "a load before the kv statement",
      edit(9, "    x = tl.load(kv_ptr)", "    for it in range(0, n):"),
      "unsafe-load",
      /k\.py:9: load of kv_ptr.*outside a kv loop's waited part/,
    ],
    [
      "a kv statement inside an if",
      edit(10, "        if it < n:", "            blk = it  # ovl: tile kv=blk"),
      "unsafe-tile-loop",
      /k\.py:11: .*directly in the body of the for loop/,
    ],
    [
      "a kv statement outside a loop",
      edit(10, "        pass", "    blk = 0  # ovl: tile kv=blk"),
      "unsafe-tile-loop",
      /directly in the body of the for loop/,
    ],
    ["a while kv loop", edit(9, "    while n > 0:"), "unsafe-tile-loop", /directly in the body of the for loop/],
    [
      "two kv statements in one loop",
      edit(10, "        blk = it  # ovl: tile kv=blk", "        blk = it + 0  # ovl: tile kv=blk"),
      "bad-annotation",
      /a kv loop has one kv block statement/,
    ],
    [
      "another write of the block variable",
      edit(12, "            blk = blk + 1", "            acc += tl.load(kv_ptr + blk)"),
      "unsafe-tile-loop",
      /k\.py:12: blk is a tile variable/,
    ],
    [
      "a kv statement with another key",
      edit(10, "        blk = it  # ovl: tile kv=blk m=blk"),
      "bad-annotation",
      /names only its block variable/,
    ],
    [
      "a kv statement naming another variable",
      edit(10, "        blk = it  # ovl: tile kv=other"),
      "bad-annotation",
      /kv block variable other is not assigned/,
    ],
    [
      "a guard whose block shares its line",
      edit(11, "        if blk < n: acc += tl.load(kv_ptr + blk)").replace(
        "            acc += tl.load(kv_ptr + blk * BLOCK + tl.arange(0, BLOCK))\n",
        "",
      ),
      "bad-annotation",
      /must start on a line of its own/,
    ],
    ["a producer with a kv loop", edit(5, "# ovl: producer scatter=o_ptr"), "bad-annotation", /only a consumer waits per kv block/],
    ["kv and tile statements together", edit(8, "    pid = tl.program_id(0)  # ovl: tile m=pid"), "bad-annotation", /not both/],
    [
      "a kv loop outside the tile loop",
      edit(8, "    acc = tl.zeros([BLOCK], dtype=tl.float32)", "    for w in tl.range(0, n):  # ovl: tile-loop", "        acc += 0"),
      "unsafe-tile-loop",
      /k\.py:12: a persistent kernel's kv loop must stand inside its tile loop/,
    ],
  ];
  for (const [what, src, code, message] of refusals) {
    it(`refuses ${what}`, () => {
      let err: unknown;
      try {
        parseLocalKernelWith(parser, src, { file: "k.py" });
      } catch (e) {
        err = e;
      }
      expect(err, src).toBeInstanceOf(LocalKernelError);
      expect((err as LocalKernelError).code).toBe(code);
      expect((err as LocalKernelError).message).toMatch(message);
    });
  }
});

const INSERTED_LOCALS = /^ovl_(m|mb|tok|target|slot\d+)$/;
const mapOf = (name: string): fc.Arbitrary<{ map: IndexMap; table?: string }> =>
  fc.oneof(
    fc
      .record({ a: fc.integer({ min: 0, max: 5 }), b: fc.integer({ min: 0, max: 40 }), n: fc.integer({ min: 1, max: 64 }) })
      .map(({ a, b, n }) => ({ map: staticMap(mod(add(mul(constant(a), m), constant(b)), constant(n))) })),
    fc.integer({ min: 16, max: 64 }).map((length) => ({ map: dynamicMap(lookupTable(name, length), m), table: name })),
  );

describe("the built-in flash-attention body, property", () => {
  it("any order and slot columns: all three kv loops (causal off-diagonal and diagonal, non-causal) remap and wait once per column, the body's text kept, valid Python", () => {
    const emitted: Record<string, string> = {};
    let i = 0;
    fc.assert(
      fc.property(
        fc.record({
          order: mapOf("ovl_order"),
          cols: fc.integer({ min: 0, max: 3 }).chain((c) => fc.tuple(...Array.from({ length: c }, (_, j) => mapOf(`ovl_wait${j}`)))),
        }),
        ({ order, cols }) => {
          const p: TileProgram = {
            role: "consumer",
            order: order.map,
            slots: cols.map((c) => c.map),
            tables: [order, ...cols].flatMap((c) => (c.table === undefined ? [] : [c.table])),
          };
          const out = transformLocalKernel(flash, p);
          expect(out.source.split("ovl_m = kv_blk\n").length - 1).toBe(3);
          expect(out.source.split("wait_slot(ovl_sig_ptr").length - 1).toBe(3 * cols.length);
          expect(out.source.split("kv_blk = consume_token(kv_blk, ovl_tok)").length - 1).toBe(3 * cols.length);
          expect(out.source.split("load_epoch_target(ovl_epoch_ptr, 1)").length - 1).toBe(cols.length > 0 ? 3 : 0);
          for (const name of new Set(out.source.match(/\bovl_[A-Za-z0-9_]*/g) ?? [])) {
            expect(out.insertedParams.includes(name) || INSERTED_LOCALS.test(name) || name === "ovl_runtime", name).toBe(true);
          }
          // Every edit is an insertion: dropping the inserted lines (and parameters) gives the body back.
          const kept = out.source
            .split("\n")
            .filter((l) => !/^\s*(ovl_|if ovl_slot|kv_blk = (consume_token|.*ovl_m))/.test(l))
            .join("\n")
            .replace(`, ${out.insertedParams.join(", ")}`, "");
          const body = FLASH.slice(FLASH.indexOf("@triton.jit"));
          expect(kept).toContain(body.slice(0, body.indexOf("# ovl: consumer")).trimEnd());
          expect(kept).toContain(body.slice(body.indexOf("@triton.jit\ndef flash_attention")).trimEnd());
          emitted[`case${i++}`] = out.source;
        },
      ),
      { numRuns: 40 },
    );
    for (const verdict of Object.values(parseWithPython(emitted))) expect(verdict).toBe("ok");
  });
});
