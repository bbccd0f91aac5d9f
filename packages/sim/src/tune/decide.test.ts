import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MLP_SHAPES } from "../shapes.js";
import {
  candidateKey,
  decidePath,
  HOPPER_SHARED_BYTES,
  tune,
  type Candidate,
  type CostFunction,
  type MeasuredCandidate,
  type RankedCandidate,
  type TuneSpace,
} from "./index.js";

const ROOMY = { globalBytes: 141e9, sharedBytesPerBlock: HOPPER_SHARED_BYTES };
const SPACE: TuneSpace = {
  splits: [1, 2, 4],
  backends: ["copy-engine"],
  commSms: [],
  tiles: [{ BM: 128, BN: 256, BK: 64 }],
  groupSizesM: [8],
};

/**
 * Measured on 4×H200 (world 4, bf16; /work/shared/notes/device.md): per-rank cuBLAS GEMM and
 * NCCL collective alone, and the two in sequence, in ms.
 */
const W4 = {
  "MLP-1": { ag: { gemm: 0.261, coll: 0.237, seq: 0.507 }, rs: { gemm: 0.273, coll: 0.243, seq: 0.497 } },
  "MLP-4": { ag: { gemm: 0.877, coll: 0.226, seq: 1.153 }, rs: { gemm: 1.006, coll: 0.232, seq: 1.222 } },
  "MLP-5": { ag: { gemm: 1.182, coll: 0.391, seq: 1.644 }, rs: { gemm: 1.397, coll: 0.437, seq: 1.728 } },
} as const;
type Shape = keyof typeof W4;

/** A model that predicts overlap hides the collective behind the GEMM (plus a per-chunk cost): the optimistic prediction. */
function optimistic(shape: Shape, op: "ag" | "rs"): CostFunction {
  const f = W4[shape][op];
  return ({ candidate }) => ({
    latencyMs: candidate.path === "sequential" ? f.gemm + f.coll : Math.max(f.gemm, f.coll) + 0.01 * candidate.split,
  });
}

function problem(shape: Shape, op: "ag" | "rs") {
  const { S, H, I } = MLP_SHAPES[shape];
  return op === "ag"
    ? { operator: "ag-gemm" as const, M: S, N: I / 4, K: H, world: 4 }
    : { operator: "gemm-rs" as const, M: S, N: H, K: I / 4, world: 4 };
}

const ranked = (entries: [Candidate, number][]): RankedCandidate[] =>
  entries
    .map(([candidate, predictedMs]) => ({ candidate, key: candidateKey(candidate), predictedMs, globalBytes: 0 }))
    .sort((a, b) => a.predictedMs - b.predictedMs);

const OVL = (split: number): Candidate => ({
  path: "overlapped",
  split,
  backend: "copy-engine",
  commSms: 0,
  tile: { BM: 128, BN: 256, BK: 64 },
  groupSizeM: 8,
});
const SEQ: Candidate = { path: "sequential" };

describe("decidePath", () => {
  it("decides from measurements: a measured overlapped time slower than the measured baseline loses, whatever the model predicted", () => {
    // The model predicts overlap at 1.37× the non-overlapped path (MLP-1 AG+GEMM, world 4);
    // measured, the overlapped kernel (0.58 ms) is slower than not overlapping (0.507 ms).
    const r = ranked([
      [OVL(2), 0.37],
      [SEQ, 0.507],
    ]);
    const m: MeasuredCandidate[] = [
      { ...r[0]!, measuredMs: 0.58 },
      { ...r[1]!, measuredMs: 0.507 },
    ];
    const d = decidePath(r, m);
    expect(d.decision).toBe("sequential");
    expect(d.figures).toEqual({
      overlapped: { key: r[0]!.key, ms: 0.58, source: "measured" },
      sequential: { key: "sequential", ms: 0.507, source: "measured" },
    });
    expect(d.message).toMatch(/not overlapping is measured at 0\.507 ms .* is measured at 0\.580 ms/);
    expect(d.message).not.toMatch(/predicted/);
  });

  it("says so when it sets a measured figure against a predicted one", () => {
    const r = ranked([
      [OVL(2), 0.4],
      [SEQ, 0.5],
    ]);
    const d = decidePath(r, [{ ...r[0]!, measuredMs: 0.45 }]);
    expect(d.decision).toBe("overlapped");
    expect(d.message).toMatch(
      /measured at 0\.450 ms against not overlapping predicted at 0\.500 ms: 1\.11× faster \(one figure measured, the other predicted\)/,
    );
  });

  it("falls back to predictions, and to the measured-best overlapped candidate over the model's best", () => {
    const r = ranked([
      [OVL(4), 0.3],
      [OVL(2), 0.35],
      [SEQ, 0.5],
    ]);
    expect(decidePath(r).figures.overlapped).toEqual({ key: r[0]!.key, ms: 0.3, source: "predicted" });
    const d = decidePath(r, [
      { ...r[0]!, measuredMs: 0.46 },
      { ...r[1]!, measuredMs: 0.41 },
      { ...r[2]!, error: "not measurable here" },
    ]);
    expect(d.chosen.key).toBe(r[1]!.key);
    expect(d.figures.sequential?.source).toBe("predicted");
  });

  it("property: the chosen path's figure is the smaller, each figure is measured exactly when that path was measured", () => {
    const ms = fc.double({ min: 0.01, max: 10, noNaN: true });
    fc.assert(
      fc.property(ms, ms, ms, fc.option(ms, { nil: undefined }), fc.option(ms, { nil: undefined }), (p1, p2, ps, m1, ms_) => {
        const r = ranked([
          [OVL(1), p1],
          [OVL(2), p2],
          [SEQ, ps],
        ]);
        const by = (c: Candidate) => r.find((x) => x.key === candidateKey(c))!;
        const measured: MeasuredCandidate[] = [
          ...(m1 === undefined ? [] : [{ ...by(OVL(1)), measuredMs: m1 }]),
          ...(ms_ === undefined ? [] : [{ ...by(SEQ), measuredMs: ms_ }]),
        ];
        const d = decidePath(r, measured);
        const o = d.figures.overlapped!;
        const s = d.figures.sequential!;
        expect(o.source).toBe(m1 === undefined ? "predicted" : "measured");
        expect(s.source).toBe(ms_ === undefined ? "predicted" : "measured");
        expect(o.ms).toBe(m1 ?? Math.min(p1, p2));
        expect(s.ms).toBe(ms_ ?? ps);
        expect(d.decision).toBe(o.ms <= s.ms ? "overlapped" : "sequential");
        expect(d.chosen.candidate.path).toBe(d.decision);
      }),
    );
  });
});

describe("tune measures the non-overlapped baseline it compares against", () => {
  it("measures it in the same run even when the model ranks it last, and decides from the measurements (MLP shapes, world 4)", async () => {
    for (const shape of Object.keys(W4) as Shape[]) {
      for (const op of ["ag", "rs"] as const) {
        const f = W4[shape][op];
        // What a GPU run would report: the overlapped kernels lose to not overlapping by 15%.
        const measuredOverlap = f.seq * 1.15;
        const seen: string[] = [];
        const r = await tune(problem(shape, op), {
          cost: optimistic(shape, op),
          memory: ROOMY,
          device: "test",
          space: SPACE,
          topK: 2,
          measure: (c) => {
            seen.push(c.key);
            return c.candidate.path === "sequential" ? f.seq : measuredOverlap;
          },
        });
        expect(r.ranked.at(-1)?.key).toBe("sequential");
        expect(seen).toContain("sequential");
        expect(seen.filter((k) => k !== "sequential")).toHaveLength(2);
        expect(r.decision).toBe("sequential");
        expect(r.measuredMs).toBe(f.seq);
        expect(r.figures.sequential).toEqual({ key: "sequential", ms: f.seq, source: "measured" });
        expect(r.figures.overlapped?.source).toBe("measured");
        expect(r.message).toMatch(/overlap loses/);
      }
    }
  });

  it("keeps overlapping where the measurements say it wins, with both figures measured", async () => {
    const f = W4["MLP-5"].ag;
    const r = await tune(problem("MLP-5", "ag"), {
      cost: optimistic("MLP-5", "ag"),
      memory: ROOMY,
      device: "test",
      space: SPACE,
      measure: (c) => (c.candidate.path === "sequential" ? f.seq : f.gemm * 1.08),
    });
    expect(r.decision).toBe("overlapped");
    expect(r.message).toMatch(/overlapping wins: .* measured at 1\.277 ms against not overlapping measured at 1\.644 ms/);
  });
});
