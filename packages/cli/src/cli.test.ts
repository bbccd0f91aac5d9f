// Every command of the built binary, with good and bad input.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parsePlanJson, serializePlan, validatePlan, type ChunkPlan } from "@ovl/chunk-plan";
import { defaultPython } from "@ovl/runtime-py";
import { chooseCommSms, H100_SXM } from "@ovl/sim";
import { computeConfigs, lookupComputeConfig, Manifest } from "@ovl/tlx-emitter";
import { runCli } from "./cli.js";
import { emulationUnavailable } from "./demo.js";
import { ovl } from "./testing.js";

const COMMANDS = ["plan", "validate", "emit", "simulate", "tune", "run", "report", "demo"];
const temp = () => mkdtempSync(join(tmpdir(), "ovl-cli-"));
const canEmulate = emulationUnavailable(defaultPython()) === undefined;

describe("ovl --help", () => {
  it("prints usage and an example for every command, and exits 0", async () => {
    // In process (the same program the binary runs): nine spawns would only time node's start.
    for (const c of COMMANDS) {
      let out = "";
      const status = await runCli([c, "--help"], { out: (t) => (out += t), err: () => undefined, interactive: false });
      expect(status).toBe(0);
      expect(out).toContain(`Usage: ovl ${c}`);
      expect(out).toMatch(/Examples?:\n {2}ovl /);
    }
    const top = await ovl(["--help"]);
    expect(top.status).toBe(0);
    for (const c of COMMANDS) expect(top.stdout).toContain(c);
  });

  it("exits 2 on an unknown command, with the closest one", async () => {
    const r = await ovl(["dmeo"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("unknown command 'dmeo'");
    expect(r.stderr).toContain("Did you mean demo?");
    expect((await ovl([])).status).toBe(2);
  });
});

describe("ovl plan and ovl validate", () => {
  it("prints a plan as JSON that validates, and validates it from a file", async () => {
    const dir = temp();
    const r = await ovl(["plan", "ag-gemm", "--world", "4", "--split", "1", "--json"]);
    expect(r.status).toBe(0);
    const plan = parsePlanJson(r.stdout);
    expect(plan.ranks).toHaveLength(4);
    expect(validatePlan(plan)).toEqual({ ok: true });
    writeFileSync(join(dir, "plan.json"), r.stdout);
    const v = await ovl(["validate", join(dir, "plan.json"), "--json"]);
    expect(v.status).toBe(0);
    expect(JSON.parse(v.stdout)).toMatchObject({ ok: true, world: 4, ops: 12, errors: [] });
  });

  it("writes plan.json, plan.txt and plan.mmd with --out, for a hierarchical mesh", async () => {
    const dir = temp();
    const r = await ovl(["plan", "all-gather", "--mesh", "2x4", "--template", "hierarchical", "--out", dir]);
    expect(r.status).toBe(0);
    expect(validatePlan(parsePlanJson(readFileSync(join(dir, "plan.json"), "utf8")))).toEqual({ ok: true });
    expect(readFileSync(join(dir, "plan.mmd"), "utf8")).toMatch(/^flowchart/);
    expect(readFileSync(join(dir, "plan.txt"), "utf8")).toContain("mesh [2, 4]");
  });

  it("reports an invalid plan's findings and exits 1", async () => {
    const dir = temp();
    const good = parsePlanJson((await ovl(["plan", "all-gather", "--world", "2", "--split", "1", "--json"])).stdout);
    // Drop rank 1's only transfer: its copy of shard 0 is never written.
    const broken: ChunkPlan = { ...good, ranks: good.ranks.map((r) => (r.rank === 1 ? { ...r, streams: [[]] } : r)) };
    writeFileSync(join(dir, "broken.json"), serializePlan(broken));
    const json = await ovl(["validate", join(dir, "broken.json"), "--json"]);
    expect(json.status).toBe(1);
    const verdict = JSON.parse(json.stdout) as { ok: boolean; errors: { code: string }[] };
    expect(verdict.ok).toBe(false);
    expect(verdict.errors.length).toBeGreaterThan(0);
    const text = await ovl(["validate", join(dir, "broken.json")]);
    expect(text.status).toBe(1);
    expect(text.stdout).toContain("INVALID");
    expect(text.stderr).toContain("failed validation");
  });

  it("refuses bad operators, shapes and meshes with exit 2 and what to type", async () => {
    const cases: [string[], string][] = [
      [["plan", "ag_gemm"], "did you mean 'ag-gemm'?"],
      [["plan", "ag-gemm", "--shape", "mlp1"], "did you mean 'MLP-1'?"],
      [["plan", "ag-gemm", "--shape", "MLP7"], "use one of: MLP-1, MLP-2"],
      [["plan", "ag-gemm", "--world", "3"], "use --world 2, 4, 8"],
      [["plan", "all-gather", "--template", "hierarchical", "--world", "8"], "--mesh 2x4"],
      [["plan", "ag-gemm", "--mesh", "2x"], "e.g. --mesh 8 or --mesh 2x4"],
      [["plan", "ag-gemm", "--world", "zero"], "--world needs a positive integer"],
      [["validate", "missing.json"], "ovl plan ag-gemm --json > plan.json"],
      [["validate", "reduce_scatter"], "did you mean 'reduce-scatter'?"],
    ];
    const runs = await Promise.all(cases.map(([args]) => ovl(args)));
    runs.forEach((r, i) => {
      expect(r.status, cases[i]![0].join(" ")).toBe(2);
      expect(r.stderr).toContain(cases[i]![1]);
    });
  });
});

describe("ovl emit", () => {
  it("writes kernels and a manifest the runner's schema accepts", async () => {
    const dir = temp();
    const r = await ovl(["emit", "gemm-rs", "--world", "2", "--backend", "sm", "--out", dir, "--json"]);
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { manifest: string; files: string[]; kernels: { template: string }[] };
    for (const f of out.files) expect(existsSync(f)).toBe(true);
    const manifest = Manifest.parse(JSON.parse(readFileSync(out.manifest, "utf8")));
    expect(manifest.world).toBe(2);
    expect(out.kernels.map((k) => k.template)).toEqual(manifest.kernels.map((k) => k.template.kind));
    expect(out.kernels.map((k) => k.template)).toContain("sm-push");
  });

  it("gives GEMM+RS's push kernel the simulator's choice of SMs unless --comm-sms names them", async () => {
    const emit = async (...flags: string[]) => {
      const r = await ovl(["emit", "gemm-rs", "--backend", "sm", "--target", "h100", ...flags, "--out", temp(), "--json"]);
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as { manifest: string; commSms?: number };
      const m = Manifest.parse(JSON.parse(readFileSync(out.manifest, "utf8")));
      const push = m.kernels.find((k) => k.name === "sm_push")!;
      const producer = m.kernels.find((k) => k.stream === "compute")!;
      return { json: out.commSms, push: push.grid[0], reserve: (producer.grid[0] as { reserve?: number }).reserve };
    };
    // World 2, MLP-5: a long GEMM, few bytes → 4 push SMs; world 4, MLP-1: 16.
    expect(await emit("--shape", "MLP-5", "--world", "2")).toEqual({ json: 4, push: { kind: "num-sms", cap: 4 }, reserve: 4 });
    expect(await emit("--shape", "MLP-1", "--world", "4")).toEqual({ json: 16, push: { kind: "num-sms", cap: 16 }, reserve: 16 });
    expect(await emit("--shape", "MLP-5", "--world", "2", "--comm-sms", "8")).toEqual({
      json: 8,
      push: { kind: "num-sms", cap: 8 },
      reserve: 8,
    });
    const ce = await ovl(["emit", "gemm-rs", "--shape", "MLP-5", "--world", "2", "--comm-sms", "8", "--out", temp()]);
    expect(ce.status).not.toBe(0);
    expect(ce.stderr).toContain("--comm-sms sets the push kernel's programs; add --backend sm or nvshmem");
  });

  it("takes the tuned configuration of the shape unless --tile names one", async () => {
    const table = computeConfigs("h200");
    const found = table === null ? undefined : lookupComputeConfig(table, { op: "ag-gemm", M: 8192, N: 1376, K: 4096, dtype: "bf16" });
    expect(found?.match).toBe("exact");
    const e = found!.entry;
    const tuned = await ovl(["emit", "ag-gemm", "--shape", "MLP-1", "--world", "8", "--out", temp(), "--json"]);
    expect(tuned.status, tuned.stderr).toBe(0);
    const t = JSON.parse(tuned.stdout) as { manifest: string; compute: Record<string, unknown> };
    expect(t.compute).toEqual({ BM: e.BM, BN: e.BN, BK: e.BK, groupM: e.groupM, source: "table", table: "h200", target: "h200" });
    const params = Manifest.parse(JSON.parse(readFileSync(t.manifest, "utf8"))).kernels[0]!.template.params;
    expect([params.BLOCK_M, params.BLOCK_N, params.BLOCK_K]).toEqual([e.BM, e.BN, e.BK]);
    const named = await ovl(["emit", "ag-gemm", "--shape", "MLP-1", "--world", "8", "--tile", "128x128x64", "--out", temp()]);
    expect(named.status, named.stderr).toBe(0);
    expect(named.stdout).toContain("compute: tile 128x128x64, group 8");
    expect(named.stdout).toContain("(named by --tile)");
  });

  it("adds the TLX kernel and its manifest with --tlx", async () => {
    const dir = temp();
    const r = await ovl(["emit", "ag-gemm", "--world", "2", "--tlx", "--out", dir, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const tlx = Manifest.parse(JSON.parse(readFileSync(join(dir, "tlx", "manifest.json"), "utf8")));
    expect(tlx.kernels.map((k) => k.template.kind)).toEqual(["tlx-ag-gemm"]);
    const out = JSON.parse(r.stdout) as { files: string[]; tlx: { fastest: string } };
    expect(out.files).toContain(join(dir, "tlx", "manifest.json"));
    // What fastestBackend() takes at this shape (the default MLP-1 on two ranks: the tuned table measured TLX faster),
    // for a kernel library's TLX record.
    expect(out.tlx.fastest).toBe("tlx");
  });

  it("--tlx on GEMM+RS: the TLX producer at the tuned TLX configuration, its PTX expectations and the measured comparison", async () => {
    const dir = temp();
    const r = await ovl(["emit", "gemm-rs", "--shape", "MLP-1", "--world", "8", "--tlx", "--target", "h200", "--out", dir, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const tlx = Manifest.parse(JSON.parse(readFileSync(join(dir, "tlx", "manifest.json"), "utf8")));
    expect(tlx.kernels.map((k) => k.template.kind)).toEqual(["tlx-gemm-rs", "rs-reduce"]);
    const expectations = JSON.parse(readFileSync(join(dir, "tlx", "expect.json"), "utf8")) as Record<string, string[]>;
    expect(Object.keys(expectations)).toEqual([tlx.kernels[0]!.name]);
    const e = lookupComputeConfig(computeConfigs("h200")!, { op: "gemm-rs", M: 8192, N: 4096, K: 1376, dtype: "bf16" })!.entry;
    const out = JSON.parse(r.stdout) as { tlx: { BM: number; BN: number; consumerSchedule: string; measuredMs?: { tlx: number } } };
    expect(out.tlx).toMatchObject({
      BM: e.tlx!.BM,
      BN: e.tlx!.BN,
      consumerSchedule: e.tlx!.consumerSchedule,
      measuredMs: { tlx: e.tlx!.ms },
    });
    expect(tlx.kernels[0]!.constexprs).toMatchObject({ BLOCK_M: e.tlx!.BM, BLOCK_N: e.tlx!.BN, NUM_STAGES: e.tlx!.stages });
    const refused = await ovl(["emit", "gemm-ar", "--world", "2", "--tlx", "--out", temp()]);
    expect(refused.status).not.toBe(0);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain("unknown option '--tlx'");
  });

  it("refuses collectives; a split finer than the tile makes tiles wait on several chunks", async () => {
    const dir = temp();
    const [collective, fine] = await Promise.all([
      ovl(["emit", "all-gather"]),
      ovl(["emit", "ag-gemm", "--world", "2", "--split", "64", "--out", dir]),
    ]);
    expect(collective.status).toBe(2);
    expect(collective.stderr).toContain("unknown command 'all-gather'");
    expect(fine.status, fine.stderr).toBe(0);
    const kernel = readFileSync(join(dir, "ag_gemm_mlp1_w2_s64.py"), "utf8");
    expect((kernel.match(/wait_slot\(/g) ?? []).length).toBeGreaterThan(1);
  });

  it("compiles a user's kernel file against a plan file", async () => {
    const dir = temp();
    const plan = await ovl([
      "plan",
      "ag-gemm",
      "--world",
      "2",
      "--template",
      "ring",
      "--m",
      "512",
      "--n",
      "256",
      "--k",
      "128",
      "--out",
      join(dir, "p"),
    ]);
    expect(plan.status, plan.stderr).toBe(0);
    const kernel = fileURLToPath(new URL("../../tlx-emitter/examples/user-kernels/tutorial_matmul.py", import.meta.url));
    const r = await ovl([
      "emit",
      "ag-gemm",
      "--world",
      "2",
      "--m",
      "512",
      "--n",
      "256",
      "--k",
      "128",
      "--tile",
      "128x128x64",
      "--kernel",
      kernel,
      "--plan",
      join(dir, "p", "plan.json"),
      "--out",
      join(dir, "o"),
      "--json",
    ]);
    expect(r.status, r.stderr).toBe(0);
    const manifest = Manifest.parse(JSON.parse(readFileSync(join(dir, "o", "manifest.json"), "utf8")));
    expect(manifest.kernels[0]!.entry).toBe("matmul_kernel_persistent");
    expect(readFileSync(join(dir, "o", `${manifest.kernels[0]!.name}.py`), "utf8")).toContain("wait_slot(ovl_sig_ptr");
  });

  it("refuses a kernel that imports anything but triton, naming the file and line; writes nothing", async () => {
    const dir = temp();
    const bad = join(dir, "bad.py");
    writeFileSync(bad, "import os\nimport triton\n# ovl: consumer gather=a\n@triton.jit\ndef k(a):\n    pass\n");
    const r = await ovl(["emit", "ag-gemm", "--world", "2", "--kernel", bad, "--out", join(dir, "o")]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("bad.py:1:");
    expect(existsSync(join(dir, "o"))).toBe(false);
  });
});

describe("ovl simulate and ovl tune", () => {
  it("predicts on a hardware model and draws the timeline", async () => {
    const dir = temp();
    const svg = join(dir, "t.svg");
    const r = await ovl(["simulate", "ag-gemm", "--world", "4", "--device", "h100", "--svg", svg, "--json"]);
    expect(r.status).toBe(0);
    const s = JSON.parse(r.stdout) as {
      hardware: string;
      latencyMs: number;
      notOverlappedMs: number;
      speedupOverNotOverlapped: number;
      ranks: unknown[];
    };
    expect(s.hardware).toBe("H100_SXM");
    expect(s.ranks).toHaveLength(4);
    expect(s.speedupOverNotOverlapped).toBeCloseTo(s.notOverlappedMs / s.latencyMs, 9);
    expect(readFileSync(svg, "utf8")).toMatch(/^<svg/);
    const bad = await ovl(["simulate", "ag-gemm", "--device", "H300"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("unknown device 'H300'");
  });

  it("prices SM pushes with the producer on the SMs the push kernel leaves it", async () => {
    const r = await ovl(["simulate", "gemm-rs", "--shape", "MLP-4", "--world", "4", "--backend", "sm", "--device", "h100", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as { latencyMs: number; nonOverlappedMs: number; computeAloneMs: number; commSms: number };
    expect(s.commSms).toBe(chooseCommSms(H100_SXM, { M: 8192, N: 4608, K: 9216, world: 4, elementBytes: 2 }).commSms); // as ovl emit gives it
    // 132 persistent programs on 116 SMs would double up and stretch every wave past the serial time.
    expect(s.latencyMs).toBeLessThan(s.nonOverlappedMs);
    expect(s.latencyMs).toBeGreaterThan(s.computeAloneMs);
  });

  it("tunes by the model, caches the result, and answers from the cache", async () => {
    const dir = temp();
    const cache = join(dir, "cache.json");
    const first = await ovl(["tune", "ag-gemm", "--world", "4", "--cache", cache, "--json"]);
    expect(first.status).toBe(0);
    const a = JSON.parse(first.stdout) as {
      fromCache: boolean;
      winnerKey: string;
      top: { key: string; predictedMs: number }[];
      decision: string;
    };
    expect(a.fromCache).toBe(false);
    expect(a.winnerKey).toBe(a.top[0]!.key);
    expect(a.top.map((t) => t.predictedMs)).toEqual([...a.top.map((t) => t.predictedMs)].sort((x, y) => x - y));
    expect(first.stderr).toMatch(/tune 100%/);
    const stored = JSON.parse(readFileSync(cache, "utf8")) as { entries: Record<string, unknown> };
    expect(Object.keys(stored.entries)).toEqual(["ag-gemm M=8192 N=2752 K=4096 bf16 world=4 H200_SXM"]);
    const second = await ovl(["tune", "ag-gemm", "--world", "4", "--cache", cache, "--json"]);
    expect(JSON.parse(second.stdout)).toMatchObject({ fromCache: true, winnerKey: a.winnerKey, decision: a.decision });
    const bad = await ovl(["tune", "all-gather"]);
    expect(bad.status).toBe(2);
  });
});

describe("ovl run and ovl report", () => {
  it("prints the torchrun command for --gpus N and checks N against the manifest", async () => {
    const dir = temp();
    await ovl(["emit", "ag-gemm", "--world", "2", "--out", dir]);
    const m = join(dir, "manifest.json");
    const dry = await ovl(["run", m, "--gpus", "2", "--dry-run"]);
    expect(dry.status).toBe(0);
    expect(dry.stdout.trim()).toBe(`torchrun --nproc_per_node=2 -m ovl_runtime run ${m} --out ${join(dir, "report.json")}`);
    const [wrong, missing] = await Promise.all([ovl(["run", m, "--gpus", "4"]), ovl(["run", join(dir, "nope.json")])]);
    expect(wrong.status).toBe(2);
    expect(wrong.stderr).toContain("use --gpus 2");
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("no manifest");
  });

  it.skipIf(!canEmulate)("emits and runs AG+GEMM over an M the world does not divide (uneven shards)", async () => {
    const dir = temp();
    const emitted = await ovl([
      "emit",
      "ag-gemm",
      "--m",
      "100",
      "--n",
      "64",
      "--k",
      "64",
      "--world",
      "3",
      "--tile",
      "32x32x32",
      "--out",
      dir,
    ]);
    expect(emitted.status, emitted.stderr).toBe(0);
    const manifest = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(manifest.reference).toMatchObject({ M: 100, rowCounts: [34, 33, 33] });
    expect(manifest.reference.rowsPerRank).toBeUndefined();
    const r = await ovl(["run", join(dir, "manifest.json"), "--emulate", "--epochs", "1", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, mode: "emulate" });
  });

  it.skipIf(!canEmulate)(
    "emits AllToAll+GEMM and runs it correctly in CPU emulation; refuses slabs the world does not divide",
    async () => {
      const dir = temp();
      const flags = ["--n", "64", "--k", "64", "--world", "3", "--split", "2", "--tile", "32x32x32"];
      const emitted = await ovl(["emit", "a2a-gemm", "--m", "96", ...flags, "--out", dir]);
      expect(emitted.status, emitted.stderr).toBe(0);
      const manifest = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
      expect(manifest.reference).toMatchObject({ operator: "a2a-gemm", M: 96, inputs: { A: "A_send" } });
      const r = await ovl(["run", join(dir, "manifest.json"), "--emulate", "--epochs", "1", "--json"]);
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, mode: "emulate" });
      const uneven = await ovl(["emit", "a2a-gemm", "--m", "100", ...flags, "--out", temp()]);
      expect(uneven.status).toBe(2);
      expect(uneven.stderr).toContain("sends equal slabs of rows");
    },
  );

  it.skipIf(!canEmulate)("runs a manifest in CPU emulation and reports it against baselines", async () => {
    const dir = temp();
    await ovl(["emit", "ag-gemm", "--m", "512", "--n", "256", "--k", "128", "--world", "2", "--tile", "128x128x64", "--out", dir]);
    const r = await ovl(["run", join(dir, "manifest.json"), "--emulate", "--epochs", "2", "--json"]);
    expect(r.status).toBe(0);
    const report = JSON.parse(r.stdout) as { ok: boolean; mode: string; checks: unknown[] };
    expect(report).toMatchObject({ ok: true, mode: "emulate" });
    expect(report.checks).toHaveLength(2);
    expect(r.stderr).toMatch(/run \S+ 100% \(2\/2\)/);
    // The same report as a GPU run would write it, with the baselines the runner times.
    const gpu = { ...JSON.parse(readFileSync(join(dir, "report.json"), "utf8")), mode: "gpu", device: "NVIDIA H200" };
    gpu.times = { ...gpu.times, clock: "cuda-events", maxMedian: 0.25 };
    gpu.baselines = [
      { name: "torch-gemm", ms: 0.2 },
      { name: "all-gather-then-gemm", ms: 0.5 },
      { name: "torch-async-tp", ms: null, error: "not built" },
    ];
    writeFileSync(join(dir, "gpu.json"), JSON.stringify(gpu));
    const svg = join(dir, "lat.svg");
    const table = await ovl(["report", join(dir, "report.json"), join(dir, "gpu.json"), "--svg", svg, "--json"]);
    expect(table.status).toBe(0);
    const rows = (JSON.parse(table.stdout) as { rows: { mode: string; speedup: number | null; ms: number }[] }).rows;
    expect(rows.map((x) => x.mode)).toEqual(["emulate", "gpu"]);
    expect(rows[1]!.speedup).toBe(2);
    expect(rows[0]!.speedup).toBeNull();
    expect(readFileSync(svg, "utf8")).toMatch(/^<svg/);
    const text = await ovl(["report", join(dir, "gpu.json")]);
    expect(text.stdout).toMatch(/all-gather-then-gemm ms/);
    expect(text.stdout).toMatch(/2\.00×/);
  });

  it("refuses files that are not reports", async () => {
    const dir = temp();
    writeFileSync(join(dir, "x.json"), JSON.stringify({ $schema: "ovl.report/v1" }));
    const [missing, wrong] = await Promise.all([ovl(["report", join(dir, "nope.json")]), ovl(["report", join(dir, "x.json")])]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("ovl run <manifest.json> --emulate");
    expect(wrong.status).toBe(2);
    expect(wrong.stderr).toContain("is not an ovl.report/v1");
  });
});
