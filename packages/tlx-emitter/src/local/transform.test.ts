import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { add, dynamicMap, lookupTable, mod, mul, staticMap, variable } from "@ovl/mapping";
import { beforeAll, describe, expect, it } from "vitest";
import { parseWithPython } from "../testing/python.js";
import {
  loadPythonParser,
  parseLocalKernelWith,
  transformLocalKernel,
  type LocalKernelOutput,
  type PythonParser,
  type TileProgram,
} from "./index.js";

const read = (rel: string): string => readFileSync(fileURLToPath(new URL(`../../${rel}`, import.meta.url)), "utf8");
const BODIES = {
  gemm_tma_persistent: "kernels/gemm_tma_persistent.py",
  grouped_gemm: "kernels/grouped_gemm.py",
  gemm_producer: "kernels/gemm_producer.py",
  gemm_producer_tma_flat: "kernels/gemm_producer_tma_flat.py",
  tutorial_matmul: "examples/user-kernels/tutorial_matmul.py",
} as const;

const M_BLOCKS = 8;
const m = variable("ovl_m", { min: 0, max: M_BLOCKS - 1 });
/** Identity order, one static column: m-block m waits on slot m. */
const IDENTITY: TileProgram = { role: "consumer", order: staticMap(m), slots: [staticMap(m)], tables: [] };
/** Table-driven order and two columns (a chunk boundary inside a tile): one table, one affine with a per-rank scalar. */
const TABLES: TileProgram = {
  role: "consumer",
  order: dynamicMap(lookupTable("ovl_order", M_BLOCKS), m),
  slots: [dynamicMap(lookupTable("ovl_wait0", M_BLOCKS), m), staticMap(mod(add(mul(m, 2), variable("rank_off", { min: 0, max: 3 })), 16))],
  tables: ["ovl_order", "ovl_wait0"],
  scalars: ["rank_off"],
};
const TILES = 32;
const t = variable("ovl_t", { min: 0, max: TILES - 1 });
const PRODUCER_STATIC: TileProgram = { role: "producer", order: staticMap(t), slots: [staticMap(mod(t, 4))], numPidN: 4, tables: [] };
const PRODUCER_TABLES: TileProgram = {
  role: "producer",
  order: dynamicMap(lookupTable("ovl_order", TILES), t),
  slots: [dynamicMap(lookupTable("ovl_notify0", TILES), t), dynamicMap(lookupTable("ovl_notify1", TILES), t)],
  numPidN: 4,
  tables: ["ovl_order", "ovl_notify0", "ovl_notify1"],
};

let parser: PythonParser;
beforeAll(async () => {
  parser = await loadPythonParser();
});

function emit(body: keyof typeof BODIES, program: TileProgram): LocalKernelOutput {
  const file = BODIES[body].split("/").pop() as string;
  return transformLocalKernel(parseLocalKernelWith(parser, read(BODIES[body]), { file }), program);
}

const count = (text: string, needle: string): number => text.split(needle).length - 1;

describe("transformLocalKernel on the built-in bodies and the tutorial kernel", () => {
  it("golden modules", async () => {
    await expect(emit("gemm_tma_persistent", IDENTITY).source).toMatchFileSnapshot("./__golden__/gemm_tma_persistent.identity.py");
    await expect(emit("gemm_tma_persistent", TABLES).source).toMatchFileSnapshot("./__golden__/gemm_tma_persistent.tables.py");
    await expect(emit("grouped_gemm", TABLES).source).toMatchFileSnapshot("./__golden__/grouped_gemm.tables.py");
    await expect(emit("tutorial_matmul", IDENTITY).source).toMatchFileSnapshot("./__golden__/tutorial_matmul.identity.py");
    await expect(emit("tutorial_matmul", TABLES).source).toMatchFileSnapshot("./__golden__/tutorial_matmul.tables.py");
    await expect(emit("gemm_producer", PRODUCER_STATIC).source).toMatchFileSnapshot("./__golden__/gemm_producer.static.py");
    await expect(emit("gemm_producer", PRODUCER_TABLES).source).toMatchFileSnapshot("./__golden__/gemm_producer.tables.py");
  });

  it("every emitted module and every body alone parses with Python", () => {
    const files: Record<string, string> = {};
    for (const [name, path] of Object.entries(BODIES)) files[`${name}.py`] = read(path);
    for (const body of ["gemm_tma_persistent", "grouped_gemm", "tutorial_matmul"] as const) {
      files[`${body}.identity`] = emit(body, IDENTITY).source;
      files[`${body}.tables`] = emit(body, TABLES).source;
    }
    files["producer.static"] = emit("gemm_producer", PRODUCER_STATIC).source;
    files["producer.tables"] = emit("gemm_producer", PRODUCER_TABLES).source;
    const result = parseWithPython(files);
    for (const [name, verdict] of Object.entries(result)) expect(verdict, name).toBe("ok");
  });

  it("appends tables, scalars, then the runtime parameters, keeping the user's", () => {
    const out = emit("gemm_tma_persistent", TABLES);
    expect(out.entry).toBe("gemm_tma_persistent");
    expect(out.params).toEqual([
      "a_ptr",
      "b_ptr",
      "c_ptr",
      "M",
      "N",
      "K",
      "BLOCK_M",
      "BLOCK_N",
      "BLOCK_K",
      "GROUP_M",
      "ovl_order",
      "ovl_wait0",
      "rank_off",
      "ovl_sig_ptr",
      "ovl_err_ptr",
      "ovl_rank",
      "ovl_epoch_ptr",
      "ovl_timeout_ns",
    ]);
    expect(out.insertedParams).toEqual([
      "ovl_order",
      "ovl_wait0",
      "rank_off",
      "ovl_sig_ptr",
      "ovl_err_ptr",
      "ovl_rank",
      "ovl_epoch_ptr",
      "ovl_timeout_ns",
    ]);
    expect(out.constexprs).toEqual(["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]);
    const producer = emit("gemm_producer", PRODUCER_STATIC);
    expect(producer.insertedParams).toEqual(["ovl_sig_ptr", "ovl_rank"]);
  });

  it("consumer: remaps at every tile statement, waits once per column at the first, before any load of A", () => {
    const out = emit("tutorial_matmul", TABLES).source;
    expect(count(out, "ovl_m = pid_m\n")).toBe(2);
    expect(count(out, "pid_m = tl.load(ovl_order + (ovl_m))")).toBe(2);
    expect(count(out, "wait_slot(ovl_sig_ptr")).toBe(2);
    expect(out).toContain("ovl_slot0 = tl.load(ovl_wait0 + (ovl_mb))");
    expect(out).toContain("ovl_slot1 = (ovl_mb * 2 + rank_off) % 16");
    expect(out.indexOf("consume_token(pid_m, ovl_tok)")).toBeLessThan(out.indexOf("tl.load(a_ptrs"));
    expect(out).toContain("from ovl_runtime.language import load_epoch_target, wait_slot, consume_token\n");
    // Host code and its imports are gone; the helper stays.
    expect(out).not.toContain("torch");
    expect(out).not.toContain("__main__");
    expect(out).toContain("def _compute_pid(");
  });

  it("producer: linearises, remaps and splits the tile, and notifies every column after the tile's last store", () => {
    const out = emit("gemm_producer", PRODUCER_TABLES).source;
    expect(out).toContain("ovl_t = pid_m * 4 + pid_n\n");
    expect(out).toContain("ovl_t2 = tl.load(ovl_order + (ovl_t))\n");
    expect(out).toContain("pid_m = ovl_t2 // 4\n");
    expect(out).toContain("pid_n = ovl_t2 % 4\n");
    expect(count(out, "notify_slot(ovl_sig_ptr, ovl_slot")).toBe(2);
    expect(out.indexOf("tl.store(c_ptr")).toBeLessThan(out.indexOf("notify_slot(ovl_sig_ptr, ovl_slot0, ovl_slot0 >= 0)"));
    expect(out).toContain("from ovl_runtime.language import notify_slot\n");
  });

  it("producer: notifies at gpu scope only when the program asks, and refuses any other scope", () => {
    const masked = "(ovl_sig_ptr, ovl_slot0, ovl_slot0 >= 0)\n";
    expect(emit("gemm_producer", PRODUCER_STATIC).source).toContain(`notify_slot${masked}`);
    const gpu = emit("gemm_producer", { ...PRODUCER_STATIC, notifyScope: "gpu" }).source;
    expect(gpu).toContain(`notify_slot_gpu${masked}`);
    expect(emit("gemm_producer", { ...PRODUCER_STATIC, notifyScope: "sys" }).source).toContain(`notify_slot${masked}`);
    const bad = { ...PRODUCER_STATIC, notifyScope: 'gpu")\nimport os  #' } as unknown as TileProgram;
    expect(() => emit("gemm_producer", bad)).toThrow(/notifyScope must be "gpu" or "sys"/);
    expect(() => emit("tutorial_matmul", { ...IDENTITY, notifyScope: "gpu" })).toThrow(/notifyScope is a producer's/);
  });

  it("producer, notifyAt \"next-tile\": a tile's slots known before its K loop, the previous run's notified at K step 1 unless on the same slot, what is pending after its stores, the last run after the tile loop", () => {
    const out = emit("gemm_producer_tma_flat", { ...PRODUCER_TABLES, notifyAt: "next-tile" }).source;
    expect(out).toContain("from ovl_runtime.language import notify_slot_if\n");
    expect(out).not.toMatch(/notify_slot\(/);
    expect(out).toContain(
      ["    ovl_prev0 = -1", "    ovl_cnt0 = 0", "    ovl_prev1 = -1", "    ovl_cnt1 = 0", "    for tile_id in"].join("\n"),
    );
    // The tile's slots before its K loop; at the loop's top, before the step's loads, the due notifies of the last run.
    expect(out).toContain(
      [
        "        ovl_slot0 = tl.load(ovl_notify0 + (ovl_t2))",
        "        ovl_slot1 = tl.load(ovl_notify1 + (ovl_t2))",
        "        ovl_k = 0",
        "        for ki in range(k_tiles):",
        "            ovl_due0 = (ovl_k == 1) & (ovl_prev0 >= 0) & (ovl_prev0 != ovl_slot0)",
        "            notify_slot_if(ovl_sig_ptr, ovl_prev0, ovl_due0, ovl_cnt0)",
        "            ovl_prev0 = tl.where(ovl_due0, -1, ovl_prev0)",
        "            ovl_cnt0 = tl.where(ovl_due0, 0, ovl_cnt0)",
        "            ovl_due1 = (ovl_k == 1) & (ovl_prev1 >= 0) & (ovl_prev1 != ovl_slot1)",
        "            notify_slot_if(ovl_sig_ptr, ovl_prev1, ovl_due1, ovl_cnt1)",
        "            ovl_prev1 = tl.where(ovl_due1, -1, ovl_prev1)",
        "            ovl_cnt1 = tl.where(ovl_due1, 0, ovl_cnt1)",
        "            ovl_k += 1",
        "            offs_k = ki * BLOCK_K",
        "",
      ].join("\n"),
    );
    // After the stores: a run on another slot still pending, then this tile joins the run of its slot.
    const end = out.lastIndexOf("c_desc.store(");
    expect(out.indexOf("        ovl_flush0 = (ovl_prev0 >= 0) & (ovl_prev0 != ovl_slot0)\n")).toBeGreaterThan(end);
    expect(out).toContain(
      [
        "        ovl_flush1 = (ovl_prev1 >= 0) & (ovl_prev1 != ovl_slot1)",
        "        notify_slot_if(ovl_sig_ptr, ovl_prev1, ovl_flush1, ovl_cnt1)",
        "        ovl_cnt1 = tl.where(ovl_slot1 >= 0, tl.where(ovl_prev1 == ovl_slot1, ovl_cnt1, 0) + 1, 0)",
        "        ovl_prev1 = ovl_slot1",
        "    notify_slot_if(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0, ovl_cnt0)",
        "    notify_slot_if(ovl_sig_ptr, ovl_prev1, ovl_prev1 >= 0, ovl_cnt1)",
        "",
      ].join("\n"),
    );
    expect(emit("gemm_producer_tma_flat", { ...PRODUCER_TABLES, notifyAt: "next-tile", notifyScope: "gpu" }).source).toContain(
      "notify_slot_gpu_if(ovl_sig_ptr, ovl_prev0, ovl_due0, ovl_cnt0)",
    );
    expect(parseWithPython({ out })).toEqual({ out: "ok" });
  });

  it('producer, notifyAt: "tile" is the default; a bad value or a consumer is refused', () => {
    expect(emit("gemm_producer", { ...PRODUCER_STATIC, notifyAt: "tile" }).source).toBe(emit("gemm_producer", PRODUCER_STATIC).source);
    const bad = { ...PRODUCER_STATIC, notifyAt: "later" } as unknown as TileProgram;
    expect(() => emit("gemm_producer", bad)).toThrow(/notifyAt must be "tile" or "next-tile"/);
    expect(() => emit("tutorial_matmul", { ...IDENTITY, notifyAt: "next-tile" })).toThrow(/notifyAt is a producer's/);
  });

  it("keeps the user's text outside the insertions byte for byte", () => {
    const source = read(BODIES.tutorial_matmul);
    const out = emit("tutorial_matmul", IDENTITY).source;
    const kernelText = source.slice(
      source.indexOf("@triton.jit\ndef matmul_kernel_persistent"),
      source.indexOf("\n\n\ndef matmul_persistent"),
    );
    const userLines = kernelText.split("\n").filter((l) => !l.includes("NUM_SMS: tl.constexpr,  #"));
    const emitted = out.split("\n");
    let at = 0;
    for (const line of userLines) {
      const found = emitted.indexOf(line, at);
      expect(found, line).toBeGreaterThanOrEqual(at);
      at = found + 1;
    }
  });

  it('a non-persistent kernel: the body is the tile, notified at its end (notifyAt "next-tile" too)', () => {
    const src = [
      "import triton",
      "import triton.language as tl",
      "",
      "",
      "# ovl: producer scatter=c_ptr",
      "@triton.jit",
      "def add_one(x_ptr, c_ptr, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):",
      "    pid_m, pid_n = tl.program_id(0), tl.program_id(1)  # ovl: tile m=pid_m n=pid_n",
      "    offs = pid_m * BLOCK_M * N + pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
      "    tl.store(c_ptr + offs, tl.load(x_ptr + offs) + 1)",
      "",
    ].join("\n");
    const kernel = parseLocalKernelWith(parser, src, { file: "add_one.py" });
    const out = transformLocalKernel(kernel, PRODUCER_STATIC).source;
    expect(out).toContain(
      "    tl.store(c_ptr + offs, tl.load(x_ptr + offs) + 1)\n    ovl_slot0 = ovl_t2 % 4\n    notify_slot(ovl_sig_ptr, ovl_slot0, ovl_slot0 >= 0)\n",
    );
    expect(transformLocalKernel(kernel, { ...PRODUCER_STATIC, notifyAt: "next-tile" }).source).toBe(out);
    expect(parseWithPython({ out })).toEqual({ out: "ok" });
  });
});
