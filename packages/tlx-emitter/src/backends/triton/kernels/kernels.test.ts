import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEVICE_FUNCTIONS } from "../../../core/device/index.js";
import {
  AG_GEMM_CONSUMER,
  agGemmConsumerSource,
  arReduceBroadcastSource,
  arReduceSource,
  arTileReduceSource,
  checkGemmParams,
  checkLaunch,
  checkRsReduceParams,
  checkSegmentAlignment,
  devicePrimitivesUsed,
  GEMM_PRODUCER,
  gemmProducerSource,
  RING_REDUCE,
  ringReduceSource,
  RS_REDUCE,
  RS_REDUCE_TILE_ELEMENTS,
  rsReduceBlockN,
  rsReduceSource,
  SM_PULL,
  SM_PUSH,
  SM_PUSH_FIELDS,
  smPullSource,
  smPushSource,
  slotWaitSource,
  tilePushSource,
} from "./index.js";
import { codeOf } from "../../../testing/errors.js";

const GEMM = { M: 512, N: 256, K: 128, BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64, GROUP_M: 8 };
const RS = { WORLD: 2, BLOCK_M: 128, BLOCK_N: 128, N: 256, rows_per_rank: 256 };

/** The kernel itself: from its `@triton.jit` line to the end of the module. */
function kernelOf(source: string, entry: string): string {
  const at = source.indexOf(`def ${entry}(`);
  return source.slice(source.lastIndexOf("@triton.jit", at));
}

describe("kernel templates", () => {
  it("golden modules", async () => {
    await expect(agGemmConsumerSource(GEMM)).toMatchFileSnapshot("./__golden__/ag_gemm_consumer.py");
    await expect(gemmProducerSource(GEMM)).toMatchFileSnapshot("./__golden__/gemm_producer.py");
    await expect(rsReduceSource(RS)).toMatchFileSnapshot("./__golden__/rs_reduce.py");
    await expect(smPushSource({ BLOCK: 2048 })).toMatchFileSnapshot("./__golden__/sm_push.py");
    await expect(smPullSource({ BLOCK: 2048 })).toMatchFileSnapshot("./__golden__/sm_pull.py");
    await expect(ringReduceSource({ BLOCK: 2048 })).toMatchFileSnapshot("./__golden__/ring_reduce.py");
  });

  it("rs_reduce waits per (rank, m-block) and threads the token into its loads", () => {
    expect(kernelOf(rsReduceSource(RS), "rs_reduce")).toMatchInlineSnapshot(`
      "@triton.jit
      def rs_reduce(part_ptr, own_ptr, out_ptr, sig_ptr, slot_ptr, err_ptr, N, rank, epoch_ptr, timeout_ns, rows_per_rank, WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
          blocks_per_slab = rows_per_rank // BLOCK_M
          target = load_epoch_target(epoch_ptr, 1)
          num_pn = tl.cdiv(N, BLOCK_N)
          for t in range(tl.program_id(0), blocks_per_slab * num_pn, tl.num_programs(0)):
              mb = t // num_pn
              pn = t % num_pn
              rows = mb * BLOCK_M + tl.arange(0, BLOCK_M)
              cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
              mask = cols[None, :] < N
              acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
              off = rows[:, None] * N + cols[None, :]
              for p in tl.static_range(WORLD):
                  slab_off = p * rows_per_rank * N
                  src = part_ptr
                  if p == rank:
                      src = own_ptr
                  else:
                      slot = tl.load(slot_ptr + p * blocks_per_slab + mb)
                      tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)
                      slab_off = consume_token(slab_off, tok)
                  slab = tl.multiple_of(src + slab_off, 16)
                  acc += tl.load(slab + off, mask=mask).to(tl.float32)
              tl.store(out_ptr + off, acc.to(tl.bfloat16), mask=mask)
      "
    `);
  });

  it("every signature lists the manifest's arguments in order, then the constexprs", () => {
    const cases = [
      [AG_GEMM_CONSUMER, agGemmConsumerSource(GEMM)],
      [GEMM_PRODUCER, gemmProducerSource(GEMM)],
      [RS_REDUCE, rsReduceSource(RS)],
      [SM_PUSH, smPushSource({ BLOCK: 1024 })],
      [SM_PULL, smPullSource({ BLOCK: 1024 })],
      [RING_REDUCE, ringReduceSource({ BLOCK: 1024 })],
    ] as const;
    for (const [info, source] of cases) {
      const params = [...info.args, ...info.constexprs.map((c) => `${c}: tl.constexpr`)].join(", ");
      expect(source).toContain(`def ${info.entry}(${params}):`);
    }
  });

  it("the element type reaches the stores", () => {
    expect(agGemmConsumerSource(GEMM, { dtype: "fp16" })).toContain("acc.to(tl.float16)");
    expect(gemmProducerSource(GEMM, { dtype: "fp32" })).toContain("acc.to(tl.float32)");
    // Peer pointers take the element type of the local buffer they copy from or into.
    expect(smPushSource({ BLOCK: 1024 }, { dtype: "fp16" })).toContain("peer_base(dst_ptrs, dst_rank, src_ptr)");
    expect(smPullSource({ BLOCK: 1024 })).toContain("peer_base(src_ptrs, src_rank, dst_ptr)");
    expect(ringReduceSource({ BLOCK: 1024 })).toContain("peer_base(recv_ptrs, fwd_rank, recv_ptr)");
    expect(codeOf(() => agGemmConsumerSource(GEMM, { dtype: "int8" as "bf16" }))).toBe("bad-param");
  });

  it("fp16 changes a template's text only where bf16 names its element type", () => {
    const TILE = { BLOCK_R: 16, BLOCK_C: 128, WORLD: 4 };
    const templates: Record<string, (dtype: "bf16" | "fp16") => string> = {
      ag_gemm_consumer: (dtype) => agGemmConsumerSource(GEMM, { dtype }),
      gemm_producer: (dtype) => gemmProducerSource(GEMM, { dtype }),
      rs_reduce: (dtype) => rsReduceSource(RS, { dtype }),
      sm_push: (dtype) => smPushSource({ BLOCK: 2048 }, { dtype }),
      sm_pull: (dtype) => smPullSource({ BLOCK: 2048 }, { dtype }),
      ring_reduce: (dtype) => ringReduceSource({ BLOCK: 2048 }, { dtype }),
      ar_reduce: (dtype) => arReduceSource(RS, { dtype }),
      ar_reduce_broadcast: (dtype) => arReduceBroadcastSource(RS, { dtype }),
      tile_push: (dtype) => tilePushSource(TILE, { dtype }),
      ar_tile_reduce: (dtype) => arTileReduceSource(TILE, { dtype }),
      slot_wait: (dtype) => slotWaitSource({ dtype }),
    };
    const changed: string[] = [];
    for (const [name, source] of Object.entries(templates)) {
      const [bf16, fp16] = [source("bf16").split("\n"), source("fp16").split("\n")];
      expect(fp16.length, name).toBe(bf16.length);
      fp16.forEach((line, i) => {
        if (line !== bf16[i]) changed.push(`${name}: ${line.trim()}`);
      });
    }
    // The stores of the fp32 accumulators, and nothing else (the copies and sums take their pointers' element type).
    expect(changed).toMatchInlineSnapshot(`
      [
        "ag_gemm_consumer: c_desc.store([pid_m * BLOCK_M, offs_bn], acc.to(tl.float16))",
        "gemm_producer: tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.float16), mask=mask)",
        "rs_reduce: tl.store(out_ptr + off, acc.to(tl.float16), mask=mask)",
        "ar_reduce: tl.store(out_base + off, acc.to(tl.float16), mask=mask)",
        "ar_reduce_broadcast: total = acc.to(tl.float16)",
      ]
    `);
  });

  it("imports the device primitives it calls from ovl_runtime.language, and defines none", () => {
    const cases = [
      [agGemmConsumerSource(GEMM), "wait_slot, consume_token"],
      [gemmProducerSource(GEMM), "notify_slot"],
      [rsReduceSource(RS), "load_epoch_target, wait_slot, consume_token"],
      [smPushSource({ BLOCK: 1024 }), "load_epoch_target, wait_slot, consume_token, peer_notify, peer_base"],
      [smPullSource({ BLOCK: 1024 }), "load_epoch_target, wait_slot, consume_token, notify_slot, peer_base"],
      [ringReduceSource({ BLOCK: 1024 }), "load_epoch_target, wait_slot, consume_token, notify_slot, peer_notify, peer_base"],
    ] as const;
    for (const [source, names] of cases) {
      expect(source).toContain(`\nimport triton.language as tl\nfrom ovl_runtime.language import ${names}\n`);
      expect(source.match(/^def /gm)).toHaveLength(1);
      for (const f of DEVICE_FUNCTIONS) expect(source).not.toContain(`def ${f}(`);
    }
    expect(devicePrimitivesUsed("x = peer_base(a, b, c)\ny = tl.wait_slot(1)\nmy_notify_slot(2)")).toEqual(["peer_base"]);
  });

  it("rejects parameters the kernels cannot run with", () => {
    expect(codeOf(() => checkGemmParams({ ...GEMM, BLOCK_M: 96 }))).toBe("bad-param");
    expect(codeOf(() => checkGemmParams({ ...GEMM, BLOCK_K: 8 }))).toBe("bad-param");
    expect(codeOf(() => checkGemmParams({ ...GEMM, K: 100 }))).toBe("bad-param");
    expect(codeOf(() => checkGemmParams({ ...GEMM, M: 0 }))).toBe("bad-param");
    expect(codeOf(() => checkGemmParams({ ...GEMM, GROUP_M: 1.5 }))).toBe("bad-param");
    expect(codeOf(() => checkGemmParams({ ...GEMM, N: Number.NaN }))).toBe("bad-param");
    expect(codeOf(() => checkRsReduceParams({ ...RS, rows_per_rank: 200 }))).toBe("bad-param");
    expect(codeOf(() => smPushSource({ BLOCK: 1000 }))).toBe("bad-param");
    expect(codeOf(() => checkLaunch({ numWarps: 6, numStages: 3 }))).toBe("bad-param");
    expect(codeOf(() => checkLaunch({ numWarps: 8, numStages: 9 }))).toBe("bad-param");
    expect(checkGemmParams(GEMM)).toEqual(GEMM);
  });

  it("narrows the reduction's default tile to at most 128×128 elements under any m-block height", () => {
    expect([16, 64, 128, 256].map(rsReduceBlockN)).toEqual([128, 128, 128, 64]);
    fc.assert(
      fc.property(fc.integer({ min: 4, max: 8 }), (e) => {
        const blockM = 2 ** e;
        const n = rsReduceBlockN(blockM);
        // A valid BLOCK_N (a power of two of at least 16) no wider than 128, the tile within bounds.
        return (
          checkRsReduceParams({ ...RS, BLOCK_M: blockM, BLOCK_N: n, rows_per_rank: 256 }).BLOCK_N === n &&
          n <= 128 &&
          blockM * n <= RS_REDUCE_TILE_ELEMENTS
        );
      }),
    );
    expect(codeOf(() => rsReduceBlockN(96))).toBe("bad-param");
  });

  it("SM copy loops move whole steps through 16-byte aligned pointers and mask only the tail", () => {
    for (const src of [smPushSource({ BLOCK: 512 }), smPullSource({ BLOCK: 512 }), ringReduceSource({ BLOCK: 512 })]) {
      const body = kernelOf(src, src.includes("def sm_push(") ? "sm_push" : src.includes("def sm_pull(") ? "sm_pull" : "ring_reduce");
      expect(body).toContain("whole = length - length % BLOCK");
      expect(body).toMatch(/for i in range\(0, whole, BLOCK\):\n(\s+\w+ = tl\.multiple_of\(.+ \+ i, 16\)\n)+/);
      expect(body).toContain("m = offs < length - whole");
    }
  });

  it("segment tables with starts off 16-byte units are refused, naming the row and field", () => {
    const row = (src: number, dst: number, len: number) => [src, 1, dst, len, -1, 0, -1];
    expect(() =>
      checkSegmentAlignment([...row(0, 8, 13), ...row(16, 24, 5)], SM_PUSH_FIELDS, ["src_offset", "dst_offset"], "bf16"),
    ).not.toThrow();
    expect(() =>
      checkSegmentAlignment([...row(0, 8, 13), ...row(16, 28, 5)], SM_PUSH_FIELDS, ["src_offset", "dst_offset"], "bf16"),
    ).toThrow(/segment 1: dst_offset = 28 .* 8 bf16 elements/);
    expect(() => checkSegmentAlignment(row(4, 0, 8), SM_PUSH_FIELDS, ["src_offset"], "fp32")).not.toThrow();
    expect(codeOf(() => checkSegmentAlignment(row(4, 0, 8), SM_PUSH_FIELDS, ["src_offset"], "bf16"))).toBe("bad-param");
    expect(codeOf(() => checkSegmentAlignment(row(0, 0, 8), SM_PUSH_FIELDS, ["nope"], "bf16"))).toBe("bad-param");
  });
});
