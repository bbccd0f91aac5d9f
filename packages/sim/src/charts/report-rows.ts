// Turns ovl run reports (`ovl.report/v1`, as runtime-py writes them) into latency rows:
// ovl's time beside the baselines measured in the same process.
import type { LatencyRow } from "./latency.js";

/** The fields of an `ovl.report/v1` document this module reads. */
export interface RunReportLike {
  readonly manifest: string;
  readonly ok?: boolean;
  readonly times: { readonly maxMedian: number } | null;
  readonly baselines: readonly { readonly name: string; readonly ms: number }[];
}

/** Display names of the baselines runtime-py measures. */
export const BASELINE_SERIES: Readonly<Record<string, string>> = {
  "all-gather-then-gemm": "not overlapped (cuBLAS + NCCL)",
  "gemm-then-reduce-scatter": "not overlapped (cuBLAS + NCCL)",
  "torch-async-tp": "PyTorch async-TP",
  "torch-gemm": "GEMM alone (cuBLAS)",
};

/**
 * Latency rows from reports keyed by case: `ovl` (max over ranks of the median) and each
 * baseline named in {@link BASELINE_SERIES}. Cases that failed or have no times are left
 * out, so a chart never shows a number that was not measured.
 */
export function reportLatencyRows(reports: Readonly<Record<string, RunReportLike>>): LatencyRow[] {
  const rows: LatencyRow[] = [];
  for (const [name, r] of Object.entries(reports)) {
    if (r.times === null || r.ok === false) continue;
    rows.push({ case: name, series: "ovl", ms: r.times.maxMedian });
    for (const b of r.baselines) {
      const series = BASELINE_SERIES[b.name];
      if (series !== undefined) rows.push({ case: name, series, ms: b.ms });
    }
  }
  return rows;
}
