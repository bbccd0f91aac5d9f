import { describe, expect, it } from "vitest";
import { codeOf } from "../../../testing/errors.js";
import { checkSlabSumParams, slabSumGrid, slabSumSource } from "./index.js";

const P = { CONTRIB: 4, BLOCK_M: 128, BLOCK_N: 128, N: 1024, blocks: 8 };

describe("the slab-sum kernel", () => {
  it("sums the contributions of each listed m-block, own rows in place, staged ones after their bounded wait", async () => {
    await expect(slabSumSource(P)).toMatchFileSnapshot("./__golden__/slab_sum.py");
    const src = slabSumSource(P, { dtype: "fp16" });
    expect(src).toContain("tok = wait_slot(sig_ptr, slot, target, err_ptr, rank, timeout_ns)");
    expect(src).toContain("notify_slot(sig_ptr, done_base + i)");
    expect(src).toContain("acc.to(tl.float16)");
  });

  it("checks its parameters and leaves the communication kernel its SMs", () => {
    expect(codeOf(() => checkSlabSumParams({ ...P, CONTRIB: 1 }))).toBe("bad-param");
    expect(codeOf(() => checkSlabSumParams({ ...P, BLOCK_M: 96 }))).toBe("bad-param");
    expect(slabSumGrid(P, 16)).toEqual([{ kind: "num-sms", cap: 64, reserve: 16 }]);
  });
});
