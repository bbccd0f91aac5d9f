import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-moe-rs-"));
const sizes = ["--tokens", "64", "--hidden", "96", "--intermediate", "32", "--experts", "6", "--topk", "2"];

describe("ovl emit moe-rs", () => {
  it("compiles the built-in warp-specialised grouped GEMM + scatter body against a direct ReduceScatter of slabs, with device routing", async () => {
    const dir = temp();
    const r = await ovl([
      "emit",
      "moe-rs",
      ...sizes,
      "--choices",
      "0,2,5",
      "--world",
      "4",
      "--split",
      "2",
      "--tile",
      "16x32x16",
      "--out",
      dir,
      "--json",
    ]);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { world: number; kernels: { template: string; stream: string }[]; moe: { slabs: number } };
    expect(out.world).toBe(4);
    expect(out.moe.slabs).toBe(8);
    // h filled in block order before the producer; after it each token's rows summed locally, the slabs notified once, the owners' pulls.
    expect(out.kernels.map((k) => `${k.template}@${k.stream}`)).toEqual([
      "moe-align-count@compute",
      "moe-align-scatter@compute",
      "moe-permute-rows@compute",
      "moe-slab-expect@compute",
      "local-producer@compute",
      "moe-topk-sum@compute",
      "moe-slab-notify@compute",
      "moe-topk-reduce-rs@compute",
    ]);
    const m = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as {
      reference: { operator: string; M: number; N: number; K: number; rowsPerRank: number };
      buffers: { name: string; routing?: unknown }[];
    };
    expect(m.reference).toMatchObject({ operator: "moe-rs", M: 64, N: 96, K: 32, rowsPerRank: 16 });
    expect(m.buffers.find((b) => b.routing !== undefined)?.routing).toEqual({ experts: 6, choices: [0, 2, 5] });
    const producer = (
      JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as { kernels: { template: { params: { body?: string } } }[] }
    ).kernels[4];
    expect(producer?.template.params.body).toBe("moe_gemm_scatter_ws.py");
  }, 60_000);

  it("takes --m/--n/--k as tokens, hidden and intermediate, and refuses other templates, backends and uneven tokens, writing nothing", async () => {
    const ok = await ovl([
      "emit",
      "moe-rs",
      "--m",
      "64",
      "--n",
      "96",
      "--k",
      "32",
      "--experts",
      "6",
      "--topk",
      "2",
      "--world",
      "2",
      "--out",
      temp(),
    ]);
    expect(ok.status).toBe(0);
    const refusals: [string[], RegExp][] = [
      [["--template", "ring"], /direct template/],
      [["--backend", "copy-engine"], /SM pulls only/],
      [["--world", "3"], /must divide evenly over the world \(3\)/],
      [["--split", "3"], /--split 3 must divide each rank's 16 tokens/],
      [["--target", "h100"], /unknown option '--target'/],
    ];
    for (const [flags, message] of refusals) {
      const out = join(temp(), "out");
      const r = await ovl(["emit", "moe-rs", ...sizes, ...(flags.includes("--world") ? [] : ["--world", "4"]), ...flags, "--out", out]);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(message);
      expect(existsSync(out)).toBe(false);
    }
    const missing = await ovl(["emit", "moe-rs", "--tokens", "64", "--hidden", "96", "--experts", "6", "--topk", "2", "--out", temp()]);
    expect(missing.stderr).toMatch(/needs --intermediate \(or --k\)/);
  }, 90_000);
});
