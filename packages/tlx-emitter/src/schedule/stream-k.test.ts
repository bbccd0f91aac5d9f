import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import { TARGETS } from "@ovl/primitives";
import { describe, expect, it } from "vitest";
import { parseWithPython } from "../testing/python.js";
import { EmitError } from "../core/writer/index.js";
import {
  builtinBody,
  compile,
  resolveCompute,
  STREAM_K_BUFFERS,
  STREAM_K_PARAMS,
  STREAM_K_SLOTS,
  streamKScratch,
  type Operator,
} from "../index.js";

function agOp(body = builtinBody("gemm_tma_persistent_streamk"), tile = { BM: 64, BN: 128, BK: 32 }): Operator {
  const plan = planSignals(
    allGatherSwizzle({ tensor: { name: "A", shape: [512, 1024], dtype: "bf16" }, axis: 0, mesh: [4], split: 2, side: "push" }),
  );
  return { name: "ag_gemm_sk", kind: "ag-gemm", plan, body, problem: { M: 512, N: 384, K: 1024 }, tile, groupM: 4 };
}

describe("stream-K scratch", () => {
  it("gives the stream-K body zeroed partials and tile counts of its own, one slot per SM of the largest target", async () => {
    const r = await compile(agOp());
    const m = r.manifest;
    expect(STREAM_K_SLOTS).toBe(Math.max(...Object.values(TARGETS).map((t) => t.smCount)));
    expect(m.buffers.find((b) => b.name === STREAM_K_BUFFERS.partials)).toEqual({
      name: STREAM_K_BUFFERS.partials,
      shape: [STREAM_K_SLOTS, 64, 128],
      dtype: "fp32",
      symmetric: false,
      init: "zeros",
    });
    expect(m.buffers.find((b) => b.name === STREAM_K_BUFFERS.counts)).toMatchObject({
      shape: [STREAM_K_SLOTS],
      dtype: "int32",
      init: "zeros",
    });
    const args = Object.fromEntries(m.kernels[0]!.args.map((a) => [a.name, a.value]));
    expect(args[STREAM_K_PARAMS.partials]).toEqual({ kind: "buffer", name: STREAM_K_BUFFERS.partials });
    expect(args[STREAM_K_PARAMS.counts]).toEqual({ kind: "buffer", name: STREAM_K_BUFFERS.counts });
    expect(args[STREAM_K_PARAMS.slots]).toEqual({ kind: "int", value: STREAM_K_SLOTS });
    // Every unit (a whole tile or a piece of the tail) waits for its m-block before its loads.
    const src = r.files[0]!.text;
    expect(src.indexOf("wait_slot(")).toBeGreaterThan(src.indexOf("pid_m = first_m + (tile_id % group_size_m)"));
    expect(src.indexOf("wait_slot(")).toBeLessThan(src.indexOf("a_desc.load("));
    expect(parseWithPython({ k: src })).toEqual({ k: "ok" });
  });

  it("gives bodies without the parameters no scratch, and refuses a body naming only some of them", async () => {
    const plain = await compile(agOp(builtinBody("gemm_tma_persistent")));
    expect(plain.manifest.buffers.map((b) => b.name)).not.toContain(STREAM_K_BUFFERS.partials);
    expect(streamKScratch(["a_ptr", "M"], 128, 256)).toEqual({ buffers: [], bindings: {} });
    expect(() => streamKScratch(["a_ptr", STREAM_K_PARAMS.partials], 128, 256)).toThrow(EmitError);
    expect(() => streamKScratch(["a_ptr", STREAM_K_PARAMS.partials], 128, 256)).toThrow(/tile_counts_ptr, STREAM_K_SLOTS/);
  });

  it("is the ag-gemm family's variant the tuned table picks where the tail pays (the H100's MLP-6 at world 8)", () => {
    const op = { ...agOp(builtinBody("gemm_tma_persistent")), problem: { M: 8192, N: 3696, K: 8192 }, tile: undefined };
    const plan = planSignals(
      allGatherSwizzle({ tensor: { name: "A", shape: [8192, 8192], dtype: "bf16" }, axis: 0, mesh: [8], split: 1, side: "push" }),
    );
    const { op: tuned, choice } = resolveCompute({ ...op, plan }, { target: "h100" });
    expect(choice.source).toBe("table");
    expect(tuned.body.path).toBe("gemm_tma_persistent_streamk.py");
  });
});
