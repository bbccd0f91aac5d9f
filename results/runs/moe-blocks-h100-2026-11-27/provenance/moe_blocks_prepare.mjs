// Compiles, where Node is (the repository built), what moe_blocks.py times and checks on a GPU machine:
//  <out>/tuned/<MoE-n>/default: `ovl emit ag-moe --target h100` with no tile (the tuned table's choice);
//  <out>/persistent/<MoE-n>/default: the persistent built-in body (kernels/moe_gather_gemm.py) at 128x256x64;
//  <out>/blocks/<MoE-n>/<BMxBNxBK_gG_wW_sS>: the non-persistent body (kernels/moe_gather_gemm_blocks.py)
//  compiled through the same path at every configuration moe_blocks.py times (what moe_table.py picks from);
//  <out>/loop/<MoE-n>/tuned: diag/moe_bodies/moe_gather_gemm_loop.py (a grid-stride tile loop) at the tuned configuration;
//  <out>/onegpu/agmoe_<case>: small ag-moe operators (the compiler's defaults) at worlds 2, 4 and 8 for
//  the one-GPU multi-rank correctness run.
//    node packages/bench/gpu/diag/moe_blocks_prepare.mjs [out]     (default ./out-moe-blocks)
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
const emitter = await import(join(repo, "packages/tlx-emitter/dist/index.js"));
const { parsePlanJson } = await import(join(repo, "packages/chunk-plan/dist/index.js"));
const out = resolve(process.argv[2] ?? join(repo, "out-moe-blocks"));
// name: hidden, intermediate per rank, experts, top-k (8192 tokens, world 8)
const SHAPES = { "MoE-1": [2048, 192, 8, 2], "MoE-2": [2048, 192, 32, 2], "MoE-3": [2048, 192, 32, 5], "MoE-4": [4096, 256, 8, 2], "MoE-5": [4096, 256, 32, 2], "MoE-6": [4096, 256, 32, 5] };
// BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages: moe_blocks.py's CONFIGS
const CONFIGS = [[64, 64, 32, 8, 4, 3], [64, 128, 64, 8, 4, 4], [64, 256, 64, 8, 4, 3], [128, 128, 64, 8, 4, 4], [128, 128, 64, 16, 8, 3], [128, 256, 64, 1, 8, 3], [128, 256, 64, 8, 8, 4], [128, 128, 64, 1, 8, 3]];
const body = emitter.builtinBody("moe_gather_gemm_blocks");
const write = (dir, r) => {
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), emitter.emitManifestJson(r.manifest));
};
const ovl = (...args) => execFileSync("node", [join(repo, "packages/cli/dist/bin.js"), ...args]);
rmSync(out, { recursive: true, force: true });
for (const [name, [H, I, E, k]] of Object.entries(SHAPES)) {
  const flags = ["--tokens", "8192", "--hidden", `${H}`, "--intermediate", `${I}`, "--experts", `${E}`, "--topk", `${k}`, "--world", "8", "--split", "2"];
  const base = join(out, "tuned", name, "default");
  ovl("emit", "ag-moe", ...flags, "--target", "h100", "--out", base);
  ovl("emit", "ag-moe", ...flags, "--kernel", join(repo, "packages/tlx-emitter/kernels/moe_gather_gemm.py"), "--tile", "128x256x64",
    "--out", join(out, "persistent", name, "default"));
  const plan = parsePlanJson(readFileSync(join(base, "plan.json"), "utf8"));
  // The grid-stride variant (diag/moe_bodies/moe_gather_gemm_loop.py) at the tuned configuration.
  const tuned = JSON.parse(readFileSync(join(base, "manifest.json"), "utf8")).kernels.at(-1);
  const c = tuned.constexprs;
  const loopBody = { path: "moe_gather_gemm_loop.py", source: readFileSync(join(repo, "packages/bench/gpu/diag/moe_bodies/moe_gather_gemm_loop.py"), "utf8") };
  write(join(out, "loop", name, "tuned"), await emitter.compile({ name: "ag_moe", kind: "ag-moe", plan, body: loopBody, problem: { M: 8192, N: I, K: H },
    moe: { experts: E, topk: k }, tile: { BM: c.BLOCK_M, BN: c.BLOCK_N, BK: c.BLOCK_K }, groupM: c.GROUP_M,
    options: { numWarps: tuned.numWarps, numStages: tuned.numStages } }));
  for (const [bm, bn, bk, g, w, s] of CONFIGS) {
    const r = await emitter.compile({ name: "ag_moe", kind: "ag-moe", plan, body, problem: { M: 8192, N: I, K: H }, moe: { experts: E, topk: k },
      tile: { BM: bm, BN: bn, BK: bk }, groupM: g, options: { numWarps: w, numStages: s } });
    write(join(out, "blocks", name, `${bm}x${bn}x${bk}_g${g}_w${w}_s${s}`), r);
  }
  console.log(`wrote ${out}/*/${name}`);
}
// name: world, tokens, hidden, intermediate per rank, experts, top-k, split, the experts a routing draws from
const ONEGPU = { w2_e8_top2: [2, 2048, 1024, 256, 8, 2, 2, ""], w4_e32_top5: [4, 2048, 768, 192, 32, 5, 4, ""], w8_e8_top2_sparse: [8, 4096, 512, 128, 8, 2, 2, "0,3,5"] };
for (const [name, [world, T, H, I, E, k, split, choices]] of Object.entries(ONEGPU)) {
  ovl("emit", "ag-moe", "--tokens", `${T}`, "--hidden", `${H}`, "--intermediate", `${I}`, "--experts", `${E}`, "--topk", `${k}`, "--world", `${world}`,
    "--split", `${split}`, ...(choices ? ["--choices", choices] : []), "--out", join(out, "onegpu", `agmoe_${name}`));
}
console.log(`wrote ${out}/onegpu`);
