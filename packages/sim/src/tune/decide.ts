// The tuner's last step: overlap or not. Each path is represented by one figure — measured
// when the run measured it, predicted otherwise — and the faster figure wins; the message
// says which figures were measured and which predicted, so a measured overlapped time is
// never set against a predicted ratio without saying so.
import type { MeasuredCandidate, RankedCandidate } from "./tune.js";

/** One path's figure in the decision. */
export interface TuneFigure {
  /** The candidate it belongs to (`sequential` for the non-overlapped path). */
  readonly key: string;
  readonly ms: number;
  readonly source: "measured" | "predicted";
}

/** What {@link decidePath} chose, from which figures. */
export interface TuneDecision {
  readonly decision: "overlapped" | "sequential";
  /** The chosen candidate (as ranked or measured). */
  readonly chosen: RankedCandidate;
  /** The figure of each path that competed (absent: the path had no candidate). */
  readonly figures: { readonly overlapped?: TuneFigure; readonly sequential?: TuneFigure };
  /** One sentence for people. */
  readonly message: string;
}

function fmt(f: TuneFigure): string {
  return `${f.source} at ${f.ms.toFixed(3)} ms`;
}

/** The fastest measured candidate of one path, if any was measured. */
function fastestMeasured(measured: readonly MeasuredCandidate[], path: "overlapped" | "sequential"): MeasuredCandidate | undefined {
  return measured
    .filter((m) => m.candidate.path === path && m.measuredMs !== undefined && Number.isFinite(m.measuredMs))
    .sort((a, b) => a.measuredMs! - b.measuredMs!)[0];
}

/**
 * Overlap or not, from `ranked` (the model's ranking, fastest first) and `measured` (what a
 * run measured, possibly nothing). Each path's figure is its fastest measured candidate when
 * one was measured, else its best predicted one; the smaller figure wins (ties overlap). The
 * message names both figures and their sources, and flags a decision that sets a measured
 * figure against a predicted one.
 * @throws {Error} when `ranked` is empty.
 */
export function decidePath(ranked: readonly RankedCandidate[], measured: readonly MeasuredCandidate[] = []): TuneDecision {
  if (ranked.length === 0) throw new Error("decidePath needs at least one ranked candidate");
  const pick = (path: "overlapped" | "sequential"): { c: RankedCandidate; f: TuneFigure } | undefined => {
    const m = fastestMeasured(measured, path);
    if (m !== undefined) return { c: m, f: { key: m.key, ms: m.measuredMs!, source: "measured" } };
    const r = ranked.find((x) => x.candidate.path === path);
    return r === undefined ? undefined : { c: r, f: { key: r.key, ms: r.predictedMs, source: "predicted" } };
  };
  const o = pick("overlapped");
  const s = pick("sequential");
  const figures = { ...(o ? { overlapped: o.f } : {}), ...(s ? { sequential: s.f } : {}) };
  const mixed = o !== undefined && s !== undefined && o.f.source !== s.f.source ? " (one figure measured, the other predicted)" : "";
  if (o !== undefined && (s === undefined || o.f.ms <= s.f.ms)) {
    const vs =
      s === undefined
        ? "; no non-overlapped baseline competed"
        : ` against not overlapping ${fmt(s.f)}: ${(s.f.ms / o.f.ms).toFixed(2)}× faster${mixed}`;
    return { decision: "overlapped", chosen: o.c, figures, message: `overlapping wins: ${o.f.key} ${fmt(o.f)}${vs}` };
  }
  const seq = s!;
  const vs = o === undefined ? "no overlapped candidate fits" : `the best overlapped candidate, ${o.f.key}, is ${fmt(o.f)}`;
  return {
    decision: "sequential",
    chosen: seq.c,
    figures,
    message: `overlap loses for this shape: not overlapping is ${fmt(seq.f)} and ${vs}${mixed}; choosing the non-overlapped path (the collective, then the GEMM)`,
  };
}
