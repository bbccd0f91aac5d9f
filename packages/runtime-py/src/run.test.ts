import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunnerError, Report, runManifest, type RunnerProgress } from "./index.js";
import { agGemmManifest, writeManifest } from "./test-manifests.js";

const PYTHON = fileURLToPath(new URL("../.venv/bin/python", import.meta.url));
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ovl-runtime-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function failure(p: Promise<unknown>): Promise<RunnerError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(RunnerError);
  return e as RunnerError;
}

describe.skipIf(!existsSync(PYTHON))("runManifest (the real Python runner, emulated)", () => {
  it("runs an AG+GEMM manifest over three epochs and returns a typed report", async () => {
    const path = await writeManifest(join(dir, "ok"), agGemmManifest(2));
    const events: RunnerProgress[] = [];
    const out = join(dir, "ok", "report.json");
    const report = await runManifest(path, { emulate: true, python: PYTHON, out, onProgress: (e) => events.push(e) });
    expect(report.ok).toBe(true);
    expect(report.mode).toBe("emulate");
    expect(report.world).toBe(2);
    expect(report.checks.map((c) => c.epoch)).toEqual([1, 2, 3]);
    for (const c of report.checks) expect(c.maxRelError).toBeLessThan(1e-5);
    expect(report.times?.perRank).toHaveLength(2);
    expect(events[0]?.event).toBe("start");
    expect(events.filter((e) => e.event === "check")).toHaveLength(3);
    expect(events.at(-1)).toEqual({ event: "done", ok: true, exitCode: 0 });
    expect(Report.parse(JSON.parse(await readFile(out, "utf8")))).toEqual(report);
  });

  it("emulates the TLX AG+GEMM push manifest (precompiled cubin alongside) over three epochs", async () => {
    const fixture = fileURLToPath(new URL("../tests/fixtures/tlx_push_w2/manifest.json", import.meta.url));
    const report = await runManifest(fixture, { emulate: true, python: PYTHON, epochs: 3 });
    expect(report.ok).toBe(true);
    expect(report.backends.kernels).toEqual([{ name: "tlx_ag_gemm_push", template: "tlx-ag-gemm-push", stream: "compute" }]);
    expect(report.checks.map((c) => c.epoch)).toEqual([1, 2, 3]);
    for (const c of report.checks) expect(c.maxRelError).toBeLessThan(1e-5);
  });

  it("turns a missing copy into a wait-timeout naming rank, slot, seen and expected", async () => {
    const m = agGemmManifest(3, 96);
    const hostOps = m.hostOps as { streams: { ops: unknown[] }[] }[];
    hostOps[0]?.streams[0]?.ops.splice(1, 1); // rank 0's second chunk for rank 1
    const path = await writeManifest(join(dir, "timeout"), m);
    const e = await failure(runManifest(path, { emulate: true, python: PYTHON, timeoutS: 0.5 }));
    expect(e.code).toBe("wait-timeout");
    expect(e.message).toMatch(/rank 1: wait on signal slot 1 .*saw 0, expected >= 1/);
    expect(e.report?.failures[0]).toMatchObject({ code: "wait-timeout", rank: 1, slot: 1, seen: 0, expected: 1 });
  });

  it("turns a duplicate tile in the visit table into check-failed, with the report", async () => {
    const m = agGemmManifest(2);
    const tables = m.tables as { values: number[][] }[];
    const order = tables[0]?.values[1] ?? [];
    order[3] = order[2] ?? 0;
    const path = await writeManifest(join(dir, "check"), m);
    const e = await failure(runManifest(path, { emulate: true, python: PYTHON }));
    expect(e.code).toBe("check-failed");
    expect(e.message).toMatch(/rank 1's output holds NaN/);
    expect(e.report?.checks[0]?.relErrors[1]).toBeNull();
    expect(e.details.exitCode).toBe(1);
  });

  it("rejects a malformed manifest with bad-manifest naming the field", async () => {
    const m = agGemmManifest(2);
    (m.reference as Record<string, unknown>).tolerance = -1;
    const path = await writeManifest(join(dir, "bad"), m);
    const e = await failure(runManifest(path, { emulate: true, python: PYTHON }));
    expect(e.code).toBe("bad-manifest");
    expect(e.message).toMatch(/^reference\.tolerance: /);
    expect(e.report).toBeUndefined();
  });
});

describe("runManifest failures outside the runner", () => {
  it("reports spawn-failed when the interpreter does not exist", async () => {
    const e = await failure(runManifest(join(dir, "none.json"), { python: join(dir, "no-such-python") }));
    expect(e.code).toBe("spawn-failed");
  });

  it("reports bad-report when the runner exits 0 without an ovl.report/v1", async () => {
    const fake = join(dir, "fake-python");
    await writeFile(fake, '#!/bin/sh\nfor a; do case "$prev" in --out) echo \'{"$schema":"nope"}\' > "$a";; esac; prev=$a; done\nexit 0\n');
    await chmod(fake, 0o755);
    const e = await failure(runManifest(join(dir, "m.json"), { python: fake, emulate: true }));
    expect(e.code).toBe("bad-report");
    expect(e.message).toMatch(/not ovl\.report\/v1/);
  });
});
