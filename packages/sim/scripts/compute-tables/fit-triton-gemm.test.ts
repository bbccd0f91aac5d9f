import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { H200_SXM } from "../../src/index.js";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ComputeResults } from "./compute-table.js";
import { asCalibration, errors, fitPoints, fitTriton } from "./fit-triton-gemm.js";

const RUN = fileURLToPath(new URL("../../../../results/runs/tlx-backend-h200-2026-11-26/run2/bench-h200.json", import.meta.url));
const results = JSON.parse(readFileSync(RUN, "utf8")) as ComputeResults;
const points = fitPoints(results, H200_SXM);

describe("fit-triton-gemm", () => {
  it("prices every shape's tuned kernel with the simulator (rounds at efficiency 1)", () => {
    expect(points).toHaveLength(36);
    for (const p of points) {
      expect(p.t0Ms).toBeGreaterThan(0);
      // Efficiency 1 is the model's peak: no measured kernel beats it.
      expect(p.t0Ms).toBeLessThan(p.ms);
    }
  });

  it("property: recovers a calibration from times it generated, whatever the launch and factors", () => {
    const tiles = [...new Set(points.map((p) => p.tile))];
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 40, noNaN: true }),
        fc.array(fc.double({ min: 0.5, max: 1.2, noNaN: true }), { minLength: tiles.length, maxLength: tiles.length }),
        (launchUs, effs) => {
          const synthetic = points.map((p) => ({ ...p, ms: launchUs * 1e-3 + p.t0Ms / effs[tiles.indexOf(p.tile)]! }));
          const fit = fitTriton(synthetic);
          expect(fit.launchUs).toBeCloseTo(launchUs, 3);
          tiles.forEach((t, i) => expect(1 / fit.inverse[t]!).toBeCloseTo(effs[i]!, 4));
        },
      ),
      { numRuns: 25 },
    );
  });

  it("holds the launch at 0 when the best fit wants it negative, and the committed H200 model is the run's fit", () => {
    const shrunk = points.map((p) => ({ ...p, ms: p.t0Ms / 0.9 - 0.02 }));
    expect(fitTriton(shrunk).launchUs).toBe(0);
    const calibration = asCalibration(fitTriton(points));
    expect(calibration).toEqual(H200_SXM.tritonGemm);
    const errs = errors(points, calibration);
    expect(Math.max(...errs.map(Math.abs))).toBeLessThan(0.15);
  });
});
