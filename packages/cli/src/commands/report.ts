// `ovl report`: read `ovl.report/v1` files and print them side by side: the operator's
// time against every baseline measured in the same run, and the speed-up over the best
// non-overlapped one.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { latencyBarChart, reportLatencyRows } from "@ovl/sim";
import { Report } from "@ovl/runtime-py";
import { UsageError } from "../errors.js";
import type { CommandOutput } from "../io.js";

/** One row of the report table. */
export interface ReportRow {
  readonly file: string;
  readonly manifest: string;
  readonly mode: string;
  readonly device: string;
  readonly world: number;
  readonly operator: string;
  readonly shape: string;
  readonly ok: boolean;
  /** The operator's time (slowest rank's median), ms; null when it was not timed. */
  readonly ms: number | null;
  readonly baselines: Readonly<Record<string, number | null>>;
  /** Best not-overlapped baseline ÷ ovl's time (> 1: ovl is faster); null without both. */
  readonly speedup: number | null;
}

// Baselines that run the GEMM and the collective one after the other (the runner names them
// `all-gather-then-gemm`, `gemm-then-reduce-scatter`, …).
const SEQUENTIAL = /-then-/;

/** Read and check one report file. */
export function readReport(path: string): Report {
  if (!existsSync(path)) throw new UsageError("bad-file", `no report at ${path}; make one with: ovl run <manifest.json> --emulate`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new UsageError("bad-file", `${path} is not JSON: ${(e as Error).message}`);
  }
  const parsed = Report.safeParse(json);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    throw new UsageError("bad-file", `${path} is not an ovl.report/v1: ${i?.path.join(".") ?? ""}: ${i?.message ?? "invalid"}`);
  }
  return parsed.data;
}

/** The table row of a report. */
export function reportRow(file: string, r: Report): ReportRow {
  const ms = r.times?.maxMedian ?? null;
  const baselines = Object.fromEntries(r.baselines.map((b) => [b.name, b.ms]));
  const sequential = r.baselines.filter((b) => SEQUENTIAL.test(b.name) && b.ms !== null).map((b) => b.ms!);
  const best = sequential.length > 0 ? Math.min(...sequential) : null;
  return {
    file,
    manifest: r.manifest,
    mode: r.mode,
    device: r.device,
    world: r.world,
    operator: r.shapes.operator,
    shape: `${r.shapes.M}x${r.shapes.N}x${r.shapes.K}`,
    ok: r.ok,
    ms,
    baselines,
    speedup: best !== null && ms !== null && ms > 0 ? best / ms : null,
  };
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [fmt(header), fmt(widths.map((w) => "-".repeat(w))), ...rows.map(fmt)];
}

/** Write a bar chart of ovl's time against the baselines of each report; the SVG's path. */
export async function writeLatencyChart(reports: readonly { file: string; report: Report }[], svg: string): Promise<string> {
  const byCase = Object.fromEntries(
    reports.map(({ report: r }) => [
      `${r.manifest} (${r.mode})`,
      {
        manifest: r.manifest,
        ok: r.ok,
        times: r.times,
        baselines: r.baselines.filter((b) => b.ms !== null).map((b) => ({ name: b.name, ms: b.ms! })),
      },
    ]),
  );
  const rows = reportLatencyRows(byCase);
  if (rows.length === 0)
    throw new UsageError(
      "usage",
      "no report has both a passing check and times to chart; run one with: ovl run <manifest> --gpus N --baselines",
    );
  const path = resolve(svg);
  mkdirSync(dirname(path), { recursive: true });
  const devices = [...new Set(reports.map((r) => r.report.device))].join(", ");
  writeFileSync(path, await latencyBarChart(rows, { title: "ovl against its baselines (same run)", subtitle: devices }));
  return path;
}

/** Run `ovl report` over report files; with `svg`, also write the latency bar chart. */
export async function reportCommand(files: readonly string[], svg?: string): Promise<CommandOutput & { rows: ReportRow[] }> {
  if (files.length === 0) throw new UsageError("usage", "give at least one report: ovl report report.json [more.json …]");
  const reports = files.map((file) => ({ file, report: readReport(file) }));
  const rows = reports.map(({ file, report }) => reportRow(file, report));
  const names = [...new Set(rows.flatMap((r) => Object.keys(r.baselines)))];
  const ms = (v: number | null | undefined) => (v === null || v === undefined ? "-" : v.toFixed(3));
  const lines = table(
    ["manifest", "mode", "device", "W", "operator", "MxNxK", "ok", "ovl ms", ...names.map((n) => `${n} ms`), "speed-up"],
    rows.map((r) => [
      r.manifest,
      r.mode,
      r.device,
      String(r.world),
      r.operator,
      r.shape,
      r.ok ? "yes" : "NO",
      ms(r.ms),
      ...names.map((n) => ms(r.baselines[n])),
      r.speedup === null ? "-" : `${r.speedup.toFixed(2)}×`,
    ]),
  );
  if (rows.some((r) => r.mode === "emulate")) lines.push("", "emulated rows are CPU wall-clock times: they check data movement, not speed");
  const chart = svg === undefined ? null : await writeLatencyChart(reports, svg);
  if (chart !== null) lines.push(`wrote ${chart}`);
  return { rows, json: { rows, chart }, lines };
}
