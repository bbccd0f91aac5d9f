import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { generate } from "./generate.js";
import { BEGIN, END, figureText, operatorTable, replaceMarkers } from "./render.js";
import { loadRuns, REPO_ROOT, type Run, type RunMeta } from "./schema.js";

const runs = loadRuns();
const NUMBER = /\d+(?:\.\d+)?/g;
// Another run's folder name cited in a sentence: its date is that run's, not a figure of this one.
const RUN_NAME = /[a-z0-9][a-z0-9-]*-\d{4}-\d{2}-\d{2}/g;

/** Every number printed in a run's readable files (raw.tar.xz, run.json and provenance/ aside), and in its name. */
function numbersOf(run: Run): Set<number> {
  const found = new Set((run.name.match(NUMBER) ?? []).map(Number));
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== "provenance") walk(path);
      } else if (e.name !== "run.json" && !/\.(xz|gz|tgz)$/.test(e.name)) {
        for (const n of readFileSync(path, "utf8").match(NUMBER) ?? []) found.add(Number(n));
      }
    }
  };
  walk(run.dir);
  return found;
}

/** The numbers a run.json states: in its headline and decided sentences, and its figures. */
function claimed(meta: RunMeta): number[] {
  const text = `${meta.headline} ${meta.decided}`.replace(RUN_NAME, "");
  const figures = (meta.figures ?? []).flatMap((f) => [f.value, f.min, f.max].filter((v) => v !== undefined));
  return [...(text.match(NUMBER) ?? []).map(Number), ...figures];
}

describe("the evidence tree", () => {
  it("holds a valid run.json in every run folder, dated as the folder is", () => {
    expect(runs.length).toBeGreaterThan(70);
    for (const r of runs) expect(r.name.endsWith(`-${r.meta.date}`), r.name).toBe(true);
  });

  it("states no number a run's own files do not print", () => {
    const unfound = runs.flatMap((r) => {
      const known = numbersOf(r);
      return claimed(r.meta)
        .filter((n) => !known.has(n))
        .map((n) => `${r.name}: ${n}`);
    });
    expect(unfound).toEqual([]);
  });

  it("names every provenance/ file in its run's provenance, and every run path cited there exists", () => {
    for (const r of runs) {
      const dir = join(r.dir, "provenance");
      const files = existsSync(dir) ? readdirSync(dir) : [];
      for (const f of files) expect(r.meta.provenance.some((p) => p.includes(`${r.name}/provenance/${f}`)), `${r.name}: ${f}`).toBe(true);
      for (const path of r.meta.provenance.join(" ").match(/results\/runs\/[^\s),;:]+/g) ?? []) {
        expect(existsSync(join(REPO_ROOT, path)), `${r.name} cites ${path}`).toBe(true);
      }
    }
  });

  it("commits exactly what the generator writes: results/index.md, docs/performance.md, the marker tables", () => {
    const out = generate();
    expect([...out.keys()].map((f) => relative(REPO_ROOT, f))).toEqual(expect.arrayContaining(["results/index.md", "docs/performance.md"]));
    for (const [file, text] of out) {
      const where = `${relative(REPO_ROOT, file)} is stale: pnpm --filter @ovl/bench results:index`;
      expect(existsSync(file) ? readFileSync(file, "utf8") : "", where).toBe(text);
    }
  });
});

describe("the generated views", () => {
  const fig = { operator: "gemm-rs", metric: "speed ÷ the sequence", unit: "×", baseline: "NCCL", world: 4 } as const;
  const meta = (date: string, figures: RunMeta["figures"]): RunMeta => ({
    $schema: "ovl.run/v1",
    ...{ date, device: "4×H100", operators: ["gemm-rs"], worlds: [4], mode: ["eager", "graph"], figures },
    ...{ headline: "1.1× from a graph", decided: "what the run decided, in a sentence", provenance: ["a script"] },
  });

  it("writes a figure's value with two decimals at least, and its range", () => {
    expect(figureText({ ...fig, mode: "graph", value: 1.1, min: 0.958, max: 1.2 })).toBe("1.10× (0.958–1.20)");
    expect(figureText({ ...fig, mode: "eager", min: 2, max: 4.8 })).toBe("2.00–4.80×");
    expect(figureText({ ...fig, mode: "cpu", value: 14.6, unit: "µs" })).toBe("14.6 µs");
  });

  it("puts the newest run's figures in the operator table, eager and from a CUDA graph side by side", () => {
    const old: Run = { name: "a-2026-11-01", dir: "", meta: meta("2026-11-01", [{ ...fig, mode: "graph", value: 1.5 }]) };
    const now: Run = { name: "b-2026-11-02", dir: "", meta: meta("2026-11-02", [{ ...fig, mode: "eager", value: 0.9 }, { ...fig, mode: "graph", value: 1.2 }]) };
    const table = operatorTable([old, now], "results/runs/");
    expect(table).toContain("| gemm-rs | eager | 0.90× | NCCL | world 4, 4×H100 | [b-2026-11-02] |");
    expect(table).toContain("| gemm-rs | CUDA graph | 1.20× | NCCL | world 4, 4×H100 | [b-2026-11-02] |");
    // A mode no run measured says so; the older run's graph figure is not shown.
    const graphOnly = operatorTable([old], "results/runs/");
    expect(graphOnly).toContain("| gemm-rs | eager | not measured |  |  |  |");
    expect(graphOnly).toContain("| gemm-rs | CUDA graph | 1.50× | NCCL | world 4, 4×H100 | [a-2026-11-01] |");
    expect(table).toContain("\n[b-2026-11-02]: results/runs/b-2026-11-02/");
    expect(table).not.toContain("1.50×");
    const doc = `# README\n\n${BEGIN}\nold table\n${END}\n\nmore\n`;
    const once = replaceMarkers(doc, table);
    expect(once).toContain(`${BEGIN}\n`);
    expect(once).not.toContain("old table");
    expect(replaceMarkers(once, table)).toBe(once);
    expect(replaceMarkers("# no markers\n", table)).toBe("# no markers\n");
    const quoted = `between \`${BEGIN}\` and \`${END}\` of a file\n`;
    expect(replaceMarkers(quoted, table)).toBe(quoted);
  });

  it("never puts a simulated figure in the operator table, nor a part of an operator", () => {
    const real: Run = { name: "a-2026-11-01", dir: "", meta: meta("2026-11-01", [{ ...fig, mode: "graph", value: 1.1 }]) };
    const sim: Run = { name: "b-2026-11-02", dir: "", meta: meta("2026-11-02", [{ ...fig, mode: "simulated", value: 1.5 }]) };
    const compute = { ...fig, operator: "compute", mode: "kernel-alone", value: 0.9 } as const;
    const part: Run = { name: "c-2026-11-03", dir: "", meta: meta("2026-11-03", [compute]) };
    const table = operatorTable([real, sim, part], "runs/");
    expect(table).toContain("| gemm-rs | CUDA graph | 1.10× | NCCL | world 4, 4×H100 | [a-2026-11-01] |");
    expect(table).not.toContain("1.50×");
    expect(table).not.toContain("compute");
    // Neither eager nor graph measured: the kernel alone, in its own words.
    const alone = operatorTable([{ ...part, meta: meta("2026-11-03", [{ ...fig, mode: "kernel-alone", value: 0.97 }]) }], "runs/");
    expect(alone).toContain("| gemm-rs | kernel alone | 0.97× | NCCL | world 4, 4×H100 | [c-2026-11-03] |");
  });

  it("keeps every line of the repository's operator table within 200 characters (the README's limit)", () => {
    const long = operatorTable(runs, "results/runs/")
      .split("\n")
      .filter((line) => line.length > 200);
    expect(long).toEqual([]);
  });

  it("refuses a run folder without run.json, or with one that does not parse", () => {
    const root = mkdtempSync(join(tmpdir(), "ovl-runs-"));
    mkdirSync(join(root, "x-2026-11-01"));
    expect(() => loadRuns(root)).toThrow("results/runs/x-2026-11-01 has no run.json");
    writeFileSync(join(root, "x-2026-11-01", "run.json"), JSON.stringify({ ...meta("2026-11-01", undefined), headline: "no figure" }));
    expect(() => loadRuns(root)).toThrow("the headline carries a measured figure");
  });
});
