import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { SignalWidth } from "../model/common.js";
import { afterNotify, epochTarget, reached, SignalError } from "./epoch.js";

const widths = fc.constantFrom<SignalWidth>(32, 64);
const u = (bits: SignalWidth) => fc.bigInt({ min: 0n, max: (1n << BigInt(bits)) - 1n });

describe("epochTarget", () => {
  it("is epoch × arrivals below the wrap", () => {
    expect(epochTarget(1, 4)).toBe(4n);
    expect(epochTarget(3, 8)).toBe(24n);
    expect(epochTarget(5, 7, 64)).toBe(35n);
  });

  it("wraps at 2^bits", () => {
    expect(epochTarget(2 ** 31, 2)).toBe(0n);
    expect(epochTarget(2 ** 31 + 1, 2)).toBe(2n);
    expect(epochTarget(1n << 63n, 2n, 64)).toBe(0n);
  });

  it("rejects epochs below 1, arrivals below 1, other widths and non-integers", () => {
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(SignalError);
        return (e as SignalError).code;
      }
      return "no error";
    };
    expect(code(() => epochTarget(0, 1))).toBe("bad-epoch");
    expect(code(() => epochTarget(1, 0))).toBe("bad-arrivals");
    expect(code(() => epochTarget(1, 1, 16 as SignalWidth))).toBe("bad-width");
    expect(code(() => epochTarget(1.5, 1))).toBe("not-an-integer");
    expect(code(() => reached(0, 0, 8 as SignalWidth))).toBe("bad-width");
    expect(code(() => afterNotify(0, 0))).toBe("bad-add");
  });
});

describe("reached", () => {
  it("compares as >= away from the wrap", () => {
    expect(reached(4, 4)).toBe(true);
    expect(reached(5, 4)).toBe(true);
    expect(reached(3, 4)).toBe(false);
  });

  it("treats a counter that wrapped past zero as ahead", () => {
    const max = 2 ** 32 - 1;
    expect(reached(2, max)).toBe(true);
    expect(reached(max, 2)).toBe(false);
    expect(reached(1n, (1n << 64n) - 1n, 64)).toBe(true);
  });

  it("property: value = target + d reaches target exactly when d < 2^(bits-1)", () => {
    fc.assert(
      fc.property(
        widths.chain((bits) => fc.tuple(fc.constant(bits), u(bits), u(bits))),
        ([bits, target, d]) => {
          const m = 1n << BigInt(bits);
          const value = (target + d) % m;
          expect(reached(value, target, bits)).toBe(d < m / 2n);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("property: monotone within half the range (once reached, further notifies keep it reached)", () => {
    fc.assert(
      fc.property(
        widths.chain((bits) =>
          fc.tuple(
            fc.constant(bits),
            u(bits),
            fc.bigInt({ min: 0n, max: (1n << BigInt(bits - 2)) - 1n }),
            fc.bigInt({ min: 0n, max: (1n << BigInt(bits - 2)) - 1n }),
          ),
        ),
        ([bits, target, d1, d2]) => {
          const m = 1n << BigInt(bits);
          const v1 = (target + d1) % m;
          const v2 = (v1 + d2) % m;
          expect(reached(v1, target, bits)).toBe(true);
          expect(reached(v2, target, bits)).toBe(true);
          // Strictly before the target is never reached.
          expect(reached((target - 1n - d1 + m) % m, target, bits)).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("property: launch k's notifies reach launch k's target and not launch k+1's, across the wrap", () => {
    fc.assert(
      fc.property(
        widths,
        fc.integer({ min: 1, max: 64 }),
        fc.bigInt({ min: 1n, max: 1n << 40n }),
        fc.constantFrom(0n, 1n << 31n, 1n << 63n),
        (bits, arrivals, k, near) => {
          // Start near a wrap point to exercise it: the slot holds launch (epoch-1)'s total.
          const epoch = near / BigInt(arrivals) + k;
          let value = ((epoch - 1n) * BigInt(arrivals)) % (1n << BigInt(bits));
          for (let i = 0; i < arrivals; i++) value = afterNotify(value, 1, bits);
          expect(reached(value, epochTarget(epoch, arrivals, bits), bits)).toBe(true);
          expect(reached(value, epochTarget(epoch + 1n, arrivals, bits), bits)).toBe(false);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("agreement with the Python runner (ovl_runtime.signals)", () => {
  it("gives the same reached / epoch_target on a batch of random cases", () => {
    const pySrc = fileURLToPath(new URL("../../../runtime-py/src", import.meta.url));
    const cases = fc.sample(
      widths.chain((bits) =>
        fc.record({
          bits: fc.constant(bits),
          value: u(bits),
          target: u(bits),
          epoch: fc.bigInt({ min: 1n, max: 1n << 48n }),
          arrivals: fc.bigInt({ min: 1n, max: 1n << 20n }),
        }),
      ),
      { numRuns: 500, seed: 20261122 },
    );
    const script = [
      // Load signals.py on its own: it needs only the standard library, while the package's
      // __init__ pulls in the runner (numpy), which plain python3 may lack.
      "import importlib.util, json, os, sys",
      `spec = importlib.util.spec_from_file_location("ovl_signals", os.path.join(${JSON.stringify(pySrc)}, "ovl_runtime", "_signals", "board.py"))`,
      'signals = sys.modules["ovl_signals"] = importlib.util.module_from_spec(spec)',
      "spec.loader.exec_module(signals)",
      "epoch_target, reached = signals.epoch_target, signals.reached",
      "out = []",
      "for c in json.load(sys.stdin):",
      "    b = c['bits']",
      "    out.append([reached(int(c['value']), int(c['target']), b), str(epoch_target(int(c['epoch']), int(c['arrivals']), b))])",
      "print(json.dumps(out))",
    ].join("\n");
    const input = JSON.stringify(
      cases.map((c) => ({ ...c, value: String(c.value), target: String(c.target), epoch: String(c.epoch), arrivals: String(c.arrivals) })),
    );
    const py = JSON.parse(execFileSync("python3", ["-c", script], { input, encoding: "utf8" })) as [boolean, string][];
    expect(py).toHaveLength(cases.length);
    const ts = cases.map((c) => [reached(c.value, c.target, c.bits), String(epochTarget(c.epoch, c.arrivals, c.bits))]);
    expect(ts).toEqual(py);
    // The batch must exercise both outcomes, or the comparison proves little.
    expect(new Set(ts.map(([r]) => r)).size).toBe(2);
  });
});
