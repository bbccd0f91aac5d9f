// `ovl emit / simulate / tune gemm-ar`: GEMM+AllReduce through the built binary, both
// realisations (template direct: the partitioned AllReduce; tilewise: DistFuse's).
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defaultPython } from "@ovl/runtime-py";
import { Manifest } from "@ovl/tlx-emitter";
import { emulationUnavailable } from "./demo.js";
import { emitFlags } from "./commands/tune.js";
import { resolveProblem } from "./problem.js";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-cli-ar-"));
const canEmulate = emulationUnavailable(defaultPython()) === undefined;
const SMALL = ["--m", "512", "--n", "256", "--k", "128", "--world", "2", "--tile", "128x128x64"];

describe("ovl emit gemm-ar", () => {
  it("writes the partitioned AllReduce (copy engine or SM pushes) and the tile-wise one", async () => {
    const dirs = [temp(), temp(), temp()];
    const runs = await Promise.all([
      ovl(["emit", "gemm-ar", ...SMALL, "--out", dirs[0]!, "--json"]),
      ovl(["emit", "gemm-ar", ...SMALL, "--backend", "sm", "--out", dirs[1]!, "--json"]),
      ovl(["emit", "gemm-ar", ...SMALL, "--template", "tilewise", "--out", dirs[2]!, "--json"]),
    ]);
    const kinds = [
      ["local-producer", "ar-reduce"],
      ["local-producer", "sm-push", "ar-reduce-broadcast", "slot-wait"],
      ["local-producer", "tile-push", "ar-tile-reduce", "slot-wait"],
    ];
    runs.forEach((r, i) => {
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as { name: string; manifest: string };
      const m = Manifest.parse(JSON.parse(readFileSync(out.manifest, "utf8")));
      expect(m.reference.operator).toBe("gemm-ar");
      expect(m.kernels.map((k) => k.template.kind)).toEqual(kinds[i]);
    });
    expect((JSON.parse(runs[2]!.stdout) as { name: string }).name).toBe("gemm_ar_m512n256k128_w2_tw_s2");
  });

  it.skipIf(!canEmulate)("the tile-wise and the SM partitioned manifests are correct in CPU emulation", async () => {
    for (const flags of [
      ["--template", "tilewise"],
      ["--backend", "sm"],
    ]) {
      const dir = temp();
      await ovl(["emit", "gemm-ar", ...SMALL, ...flags, "--out", dir]);
      const r = await ovl(["run", join(dir, "manifest.json"), "--emulate", "--epochs", "2", "--json"]);
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, mode: "emulate" });
    }
  });
});

describe("ovl simulate and tune gemm-ar", () => {
  it("prices both realisations against GEMM then all-reduce, and tunes between them", async () => {
    const [part, tiles, tuned] = await Promise.all([
      ovl(["simulate", "gemm-ar", "--world", "4", "--json"]),
      ovl(["simulate", "gemm-ar", "--world", "4", "--template", "tilewise", "--json"]),
      ovl(["tune", "gemm-ar", "--world", "4", "--no-cache", "--json"]),
    ]);
    for (const r of [part, tiles]) {
      expect(r.status, r.stderr).toBe(0);
      const s = JSON.parse(r.stdout) as { latencyMs: number; notOverlappedMs: number };
      expect(s.latencyMs).toBeGreaterThan(0);
      expect(s.notOverlappedMs).toBeGreaterThan(0);
    }
    expect(tuned.status, tuned.stderr).toBe(0);
    const t = JSON.parse(tuned.stdout) as { winnerKey: string; top: { key: string }[]; problem: { operator: string } };
    expect(t.problem.operator).toBe("gemm-ar");
    // Every overlapped key names its realisation.
    expect(t.winnerKey).toMatch(/^(overlapped (partitioned|tilewise) |sequential)/);
    for (const c of t.top) expect(c.key).toMatch(/^(overlapped (partitioned|tilewise) |sequential)/);
  });

  it("a tile-wise winner is emitted with --template tilewise", () => {
    const p = resolveProblem("gemm-ar", { world: 4 });
    const flags = emitFlags(p, {
      path: "overlapped",
      split: 8,
      backend: "sm",
      commSms: 16,
      tile: { BM: 128, BN: 256, BK: 64 },
      groupSizeM: 8,
      allReduce: "tilewise",
    });
    expect(flags).toContain("ovl emit gemm-ar --shape MLP-1 --world 4 --template tilewise");
    expect(flags).toContain("--backend sm");
  });
});
