import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { H100_SXM } from "../simulate/hardware.js";
import { COMM_SMS_CANDIDATES, chooseCommSms } from "./comm-sms.js";
import { TuneError } from "./errors.js";

const mlp = (H: number, I: number, world: number) => ({ M: 8192, N: H, K: I / world, world, elementBytes: 2 });

describe("chooseCommSms", () => {
  it("picks what the four-H100 runs found fastest at MLP shapes", () => {
    // 16 at world 4, MLP-1/3 (comm-heavy); 8 at world 4, MLP-5/6; 4 at world 2, MLP-3…6.
    expect(chooseCommSms(H100_SXM, mlp(4096, 11008, 4)).commSms).toBe(16);
    expect(chooseCommSms(H100_SXM, mlp(3584, 14336, 4)).commSms).toBe(16);
    expect(chooseCommSms(H100_SXM, mlp(8192, 28672, 4)).commSms).toBe(8);
    expect(chooseCommSms(H100_SXM, mlp(8192, 29568, 4)).commSms).toBe(8);
    for (const [H, I] of [
      [3584, 14336],
      [4608, 36864],
      [8192, 28672],
      [8192, 29568],
    ] as const) {
      expect(chooseCommSms(H100_SXM, mlp(H, I, 2)).commSms).toBe(4);
    }
  });

  it("returns the fewest candidate SMs that move the bytes in the window, else the most", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 1, max: 64 }),
        fc.integer({ min: 1, max: 8 }),
        (m, n, k, world) => {
          const c = chooseCommSms(H100_SXM, { M: 128 * m * world, N: 128 * n, K: 128 * k, world, elementBytes: 2 });
          expect(COMM_SMS_CANDIDATES).toContain(c.commSms);
          expect(c.bytes).toBeCloseTo((world - 1) * 128 * m * 128 * n * 2, 3);
          const i = COMM_SMS_CANDIDATES.indexOf(c.commSms as (typeof COMM_SMS_CANDIDATES)[number]);
          if (c.neededSms <= COMM_SMS_CANDIDATES.at(-1)!) expect(c.commSms).toBeGreaterThanOrEqual(c.neededSms);
          else expect(c.commSms).toBe(COMM_SMS_CANDIDATES.at(-1));
          if (i > 0) expect(COMM_SMS_CANDIDATES[i - 1]!).toBeLessThan(c.neededSms);
          // More bytes over the same GEMM never asks for fewer SMs.
          const wider = chooseCommSms(H100_SXM, { M: 128 * m * world, N: 128 * n, K: 128 * k, world, elementBytes: 4 });
          expect(wider.commSms).toBeGreaterThanOrEqual(c.commSms);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("refuses a non-positive size or world", () => {
    expect(() => chooseCommSms(H100_SXM, { M: 8192, N: 4096, K: 0, world: 4, elementBytes: 2 })).toThrow(TuneError);
    expect(() => chooseCommSms(H100_SXM, { M: 8192, N: 4096, K: 128, world: 0, elementBytes: 2 })).toThrow(
      /world must be a positive integer/,
    );
  });
});
