import { dynamicMap, lookupTable, staticMap, sub, variable } from "@ovl/mapping";
import { beforeAll, describe, expect, it } from "vitest";
import { EmitError } from "../core/writer/index.js";
import {
  LocalKernelError,
  loadPythonParser,
  parseLocalKernel,
  parseLocalKernelWith,
  transformLocalKernel,
  type LocalKernelErrorCode,
  type PythonParser,
  type TileProgram,
} from "./index.js";

let parser: PythonParser;
beforeAll(async () => {
  parser = await loadPythonParser();
});

const HEAD = ["import triton", "import triton.language as tl", "", ""];
/** A small persistent consumer; line numbers below count from 1 over HEAD + these lines. */
const GOOD = [
  ...HEAD,
  "# ovl: consumer gather=a_ptr", // 5
  "@triton.jit", // 6
  "def k(a_ptr, c_ptr, M, BLOCK_M: tl.constexpr):", // 7
  "    n = tl.cdiv(M, BLOCK_M)", // 8
  "    for t in tl.range(tl.program_id(0), n, tl.num_programs(0)):  # ovl: tile-loop", // 9
  "        pid_m = t  # ovl: tile m=pid_m", // 10
  "        offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)", // 11
  "        tl.store(c_ptr + offs, tl.load(a_ptr + offs))", // 12
  "",
];

/** GOOD with line `line` (1-based) replaced by `text` (several lines allowed). */
function edit(line: number, ...text: string[]): string {
  const lines = [...GOOD];
  lines.splice(line - 1, 1, ...text);
  return lines.join("\n");
}

function refusal(source: string, file = "my_kernel.py"): LocalKernelError {
  try {
    parseLocalKernelWith(parser, source, { file });
  } catch (e) {
    if (e instanceof LocalKernelError) return e;
    throw e;
  }
  throw new Error("accepted");
}

function expectRefused(source: string, code: LocalKernelErrorCode, line: number, text?: RegExp): void {
  const e = refusal(source);
  expect(e).toBeInstanceOf(EmitError);
  expect({ code: e.code, line: e.line }).toEqual({ code, line });
  expect(e.message.startsWith(line > 0 ? `my_kernel.py:${line}: ` : "my_kernel.py: ")).toBe(true);
  if (text) expect(e.message).toMatch(text);
}

const m = variable("ovl_m", { min: 0, max: 7 });
const PROGRAM: TileProgram = { role: "consumer", order: staticMap(m), slots: [staticMap(m)], tables: [] };

describe("local kernels the parser refuses", () => {
  it("accepts the reference kernel", async () => {
    const k = await parseLocalKernel(GOOD.join("\n"), "my_kernel.py", "k");
    expect([k.entry, k.role, k.operand, k.persistent]).toEqual(["k", "consumer", "a_ptr", true]);
    expect(k.params).toEqual([
      { name: "a_ptr", constexpr: false },
      { name: "c_ptr", constexpr: false },
      { name: "M", constexpr: false },
      { name: "BLOCK_M", constexpr: true },
    ]);
  });

  it("Python syntax errors, naming the first one's line", () => {
    expectRefused(edit(11, "        offs = (pid_m * BLOCK_M"), "syntax-error", 11);
    expectRefused(edit(8, "    n = tl.cdiv(M BLOCK_M)"), "syntax-error", 8);
  });

  it("no kernel annotation, or a misplaced one", () => {
    expectRefused(edit(5, ""), "no-annotation", 0, /no kernel annotation/);
    expectRefused(edit(5, "# ovl: consumer gather=a_ptr", ""), "bad-annotation", 5, /directly above/);
    expectRefused(edit(10, "        pid_m = t"), "no-annotation", 7, /no "# ovl: tile/);
  });

  it("unknown annotation words and keys", () => {
    expectRefused(edit(5, "# ovl: consumr gather=a_ptr"), "bad-annotation", 5, /unknown annotation "consumr"/);
    expectRefused(edit(5, "# ovl: consumer scatter=a_ptr"), "bad-annotation", 5, /unknown key "scatter"/);
    expectRefused(edit(10, "        pid_m = t  # ovl: tile m=pid_m k=t"), "bad-annotation", 10, /unknown key "k"/);
    expectRefused(edit(9, "    for t in tl.range(tl.program_id(0), n, tl.num_programs(0)):  # ovl: tile-loop x=1"), "bad-annotation", 9);
  });

  it("blocks=: only a producer's, beside rows=, naming another tensor parameter", () => {
    const producer = (words: string) =>
      edit(5, `# ovl: producer ${words}`)
        .replace("def k(a_ptr, c_ptr, M, BLOCK_M", "def k(a_ptr, c_ptr, ids, M, BLOCK_M")
        .replace("pid_m = t  # ovl: tile m=pid_m", "pid_m, pid_n = t, 0  # ovl: tile m=pid_m n=pid_n");
    expectRefused(edit(5, "# ovl: consumer gather=a_ptr blocks=c_ptr"), "bad-annotation", 5, /unknown key "blocks"/);
    expectRefused(producer("scatter=c_ptr blocks=a_ptr"), "bad-annotation", 5, /name the table with rows=/);
    expectRefused(producer("scatter=c_ptr rows=ids blocks=ids"), "unknown-parameter", 5, /other than c_ptr and ids/);
    expectRefused(producer("scatter=c_ptr rows=ids blocks=BLOCK_M"), "unknown-parameter", 5, /blocks=BLOCK_M/);
    const k = parseLocalKernelWith(parser, producer("scatter=c_ptr rows=ids blocks=a_ptr"), { file: "my_kernel.py" });
    expect([k.rows, k.blocks, k.warpSpecialized]).toEqual(["ids", "a_ptr", false]);
  });

  it("reads a warp-specialised tile loop and transforms nothing into it", () => {
    const ws = edit(9, "    for t in tl.range(tl.program_id(0), n, tl.num_programs(0), warp_specialize=True):  # ovl: tile-loop");
    expect(parseLocalKernelWith(parser, ws, { file: "my_kernel.py" }).warpSpecialized).toBe(true);
    const off = ws.replace("warp_specialize=True", "warp_specialize=False");
    expect(parseLocalKernelWith(parser, off, { file: "my_kernel.py" }).warpSpecialized).toBe(false);
    // A consumer waits inside its tile loop: refused, naming the loop's line.
    const consumer = parseLocalKernelWith(parser, ws, { file: "my_kernel.py" });
    expect(() => transformLocalKernel(consumer, PROGRAM)).toThrow(/my_kernel\.py:9: .*warp_specialize=True\), and a consumer waits/);
    // A producer that notifies nothing, tiles in their own order: emitted as written, nothing appended.
    const t = variable("ovl_t", { min: 0, max: 7 });
    const wsProducer = ws
      .replace("consumer gather=a_ptr", "producer scatter=c_ptr")
      .replace("pid_m = t  # ovl: tile m=pid_m", "pid_m, pid_n = t, 0  # ovl: tile m=pid_m n=pid_n");
    const producer = parseLocalKernelWith(parser, wsProducer, { file: "my_kernel.py" });
    const out = transformLocalKernel(producer, { role: "producer", order: staticMap(t), slots: [], numPidN: 1, tables: [] });
    expect(out.insertedParams).toEqual([]);
    expect(out.source.endsWith(wsProducer.slice(wsProducer.indexOf("@triton.jit")))).toBe(true);
    expect(() =>
      transformLocalKernel(producer, { role: "producer", order: staticMap(t), slots: [staticMap(t)], numPidN: 1, tables: [] }),
    ).toThrow(/this operator notifies per tile/);
    const reversed = staticMap(sub(7, t));
    expect(() => transformLocalKernel(producer, { role: "producer", order: reversed, slots: [], numPidN: 1, tables: [] })).toThrow(
      /this operator reorders the tiles/,
    );
  });

  it("a gather= naming no parameter", () => {
    expectRefused(edit(5, "# ovl: consumer gather=b_ptr"), "unknown-parameter", 5, /b_ptr names no parameter of k/);
    expectRefused(edit(5, "# ovl: consumer gather=BLOCK_M"), "unknown-parameter", 5, /constexpr/);
  });

  it("tile m=x naming a variable the statement does not assign", () => {
    expectRefused(edit(10, "        pid_m = t  # ovl: tile m=pid_x"), "bad-annotation", 10, /pid_x is not assigned/);
    expectRefused(edit(10, "        pid_m = t  # ovl: tile m=pid_m n=t"), "bad-annotation", 10, /t is not assigned/);
  });

  it("a tile loop that is not a for over range", () => {
    expectRefused(edit(9, "    for t in [0, 1]:  # ovl: tile-loop"), "unsafe-tile-loop", 9, /range/);
    expectRefused(edit(9, "    t = 0", "    while t < n:  # ovl: tile-loop"), "unsafe-tile-loop", 10, /range/);
  });

  it("break, continue or return at the tile level", () => {
    expectRefused(edit(11, "        if pid_m > 3:", "            break"), "unsafe-tile-loop", 12, /break/);
    expectRefused(edit(11, "        if pid_m > 3:", "            continue"), "unsafe-tile-loop", 12, /continue/);
    expectRefused(
      edit(11, "        for j in range(2):", "            if j > 0:", "                return"),
      "unsafe-tile-loop",
      13,
      /return/,
    );
    // A continue of a loop nested in the tile is fine.
    expect(() =>
      parseLocalKernelWith(
        parser,
        edit(
          11,
          "        for j in range(2):",
          "            if j > 0:",
          "                continue",
          "        offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        ),
      ),
    ).not.toThrow();
  });

  it("a tile statement nested in if/for, or not alone on its line", () => {
    expectRefused(
      edit(10, "        if t >= 0:", "            pid_m = t  # ovl: tile m=pid_m"),
      "unsafe-tile-loop",
      11,
      /directly in the tile loop/,
    );
    expectRefused(edit(10, "        pid_m = t; q = 1  # ovl: tile m=pid_m"), "bad-annotation", 10, /alone/);
  });

  it("an unannotated assignment to a tile variable", () => {
    expectRefused(edit(11, "        pid_m = pid_m + 0", GOOD[10] as string), "unsafe-tile-loop", 11, /pid_m is a tile variable/);
    expectRefused(edit(11, "        pid_m += 1", GOOD[10] as string), "unsafe-tile-loop", 11);
  });

  it("a load of the gathered operand before the tile statement or outside the tile loop", () => {
    expectRefused(edit(8, "    x = tl.load(a_ptr)", "    n = tl.cdiv(M, BLOCK_M)"), "unsafe-load", 8, /outside the tile loop/);
    expectRefused(
      edit(10, "        a_row = a_ptr + t * BLOCK_M", "        x = tl.load(a_row)", GOOD[9] as string),
      "unsafe-load",
      11,
      /before the first tile statement \(line 12\)/,
    );
    expectRefused(
      edit(
        8,
        "    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, 1], strides=[1, 1], block_shape=[BLOCK_M, 1])",
        "    x = a_desc.load([0, 0])",
        "    n = tl.cdiv(M, BLOCK_M)",
      ),
      "unsafe-load",
      9,
    );
    expectRefused(edit(10, "        pid_m = tl.load(a_ptr + t)  # ovl: tile m=pid_m"), "unsafe-load", 10);
  });

  it("a non-persistent kernel: loads before the tile statement, early returns", () => {
    const flat = (...body: string[]): string =>
      [...HEAD, "# ovl: consumer gather=a_ptr", "@triton.jit", "def k(a_ptr, c_ptr, BLOCK_M: tl.constexpr):", ...body, ""].join("\n");
    const tile = "    pid_m = tl.program_id(0)  # ovl: tile m=pid_m";
    expect(() => parseLocalKernelWith(parser, flat(tile, "    tl.store(c_ptr + pid_m, tl.load(a_ptr + pid_m))"))).not.toThrow();
    expectRefused(flat("    x = tl.load(a_ptr)", tile), "unsafe-load", 8, /before the tile statement/);
    expectRefused(flat(tile, "    if pid_m > 4:", "        return"), "unsafe-tile-loop", 10);
    // A program past the last tile may exit before its tile statement: it has waited on and read nothing.
    const early = flat("    if tl.program_id(0) > 4:", "        return", tile, "    tl.store(c_ptr + pid_m, tl.load(a_ptr + pid_m))");
    expect(parseLocalKernelWith(parser, early).persistent).toBe(false);
    expectRefused(
      flat("    for i in range(2):", "        pid_m = i  # ovl: tile m=pid_m"),
      "unsafe-tile-loop",
      9,
      /top level of the kernel's body/,
    );
  });

  it("a producer: a store to the scattered operand outside the tile, a tile without n", () => {
    const prod = (...body: string[]): string =>
      [...HEAD, "# ovl: producer scatter=c_ptr", "@triton.jit", "def k(c_ptr, BLOCK: tl.constexpr):", ...body, ""].join("\n");
    const tile = "    pid_m, pid_n = tl.program_id(0), tl.program_id(1)  # ovl: tile m=pid_m n=pid_n";
    expectRefused(prod("    tl.store(c_ptr, 0)", tile), "unsafe-store", 8, /notify would not cover/);
    expectRefused(prod("    pid_m = tl.program_id(0)  # ovl: tile m=pid_m"), "bad-annotation", 8, /n=<var>/);
    // A producer's program that exits early would never notify its tile.
    expectRefused(prod("    if tl.program_id(0) > 4:", "        return", tile, "    tl.store(c_ptr, 0)"), "unsafe-tile-loop", 9, /return/);
  });

  it("identifiers starting with ovl_ and the primitives' names", () => {
    expectRefused(edit(11, "        ovl_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)"), "name-collision", 11, /ovl_m/);
    expectRefused(edit(7, "def k(a_ptr, c_ptr, M, BLOCK_M: tl.constexpr, ovl_sig_ptr):"), "name-collision", 7, /ovl_sig_ptr/);
    expectRefused(edit(8, "    wait_slot = tl.cdiv(M, BLOCK_M)", "    n = wait_slot"), "name-collision", 8, /device primitive/);
  });

  it("imports other than triton, math and typing; host code is dropped", () => {
    expectRefused(edit(2, "import triton.language as tl", "import os"), "bad-import", 3, /"os"/);
    expectRefused(edit(1, "from . import helpers", "import triton"), "bad-import", 1);
    const withTorch = (use: string): string =>
      ["import torch", ...GOOD.slice(0, 7), use, ...GOOD.slice(8), "if __name__ == '__main__':", "    print(torch.zeros(1))", ""].join(
        "\n",
      );
    // torch only in host code: the import is dropped with it.
    expect(() => parseLocalKernelWith(parser, withTorch(GOOD[7] as string))).not.toThrow();
    expectRefused(withTorch("    n = torch.numel(M)"), "bad-import", 1, /"torch" is imported from a host module but used/);
  });

  it("a signature the appended parameters cannot follow", () => {
    expectRefused(edit(7, "def k(a_ptr, c_ptr, M, BLOCK_M: tl.constexpr = 64):"), "bad-signature", 7, /defaults/);
    expectRefused(edit(7, "def k(a_ptr, c_ptr, M, *rest):"), "bad-signature", 7);
  });

  it("an expected entry name that is not the annotated kernel", async () => {
    await expect(parseLocalKernel(GOOD.join("\n"), { file: "my_kernel.py", entry: "other" })).rejects.toThrow(/the annotated kernel is k/);
  });
});

describe("tile programs the transformation refuses before emitting", () => {
  const kernel = (): ReturnType<typeof parseLocalKernelWith> => parseLocalKernelWith(parser, GOOD.join("\n"), { file: "my_kernel.py" });
  const refused = (program: TileProgram): LocalKernelError => {
    try {
      transformLocalKernel(kernel(), program);
    } catch (e) {
      if (e instanceof LocalKernelError) return e;
      throw e;
    }
    throw new Error("accepted");
  };

  it("table and scalar names that are not identifiers", () => {
    for (const name of ["1table", "a-b", "tl", "for", "x y", "", "range"]) {
      expect(refused({ ...PROGRAM, tables: [name] }).code, name).toBe("bad-identifier");
      expect(refused({ ...PROGRAM, scalars: [name] }).code, name).toBe("bad-identifier");
    }
  });

  it("names that collide with the kernel's or the inserted ones", () => {
    expect(refused({ ...PROGRAM, tables: ["offs"] }).code).toBe("name-collision");
    expect(refused({ ...PROGRAM, tables: ["ovl_sig_ptr"] }).code).toBe("name-collision");
    expect(refused({ ...PROGRAM, tables: ["ovl_slot3"] }).code).toBe("name-collision");
    expect(refused({ ...PROGRAM, tables: ["x", "x"] }).code).toBe("bad-program");
  });

  it("maps that do not fit the role, the tables or the scalars", () => {
    const t = variable("ovl_t", { min: 0, max: 7 });
    expect(refused({ ...PROGRAM, role: "producer" }).message).toMatch(/annotated consumer/);
    expect(refused({ ...PROGRAM, order: staticMap(t) }).message).toMatch(/uses variable ovl_t/);
    expect(refused({ ...PROGRAM, slots: [dynamicMap(lookupTable("wait0", 8), m)] }).message).toMatch(/not in the program's tables/);
    expect(
      refused({ ...PROGRAM, order: { kind: "static", expr: { op: "var", name: "bad name", range: { min: 0, max: 1 } } } }).message,
    ).toMatch(/not an index map/);
  });
});
