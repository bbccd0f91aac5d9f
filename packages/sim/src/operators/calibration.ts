// Calibration constants of the attention and MoE compute bodies, each fitted from a committed
// GPU measurement (one H100, 2026-11-25). Efficiencies are relative to the hardware model's
// sustained GEMM rate (`gemm.tflopsPerSm · smCount`), so the same constant prices the body on
// any model (H200_SXM: the same SMs and tensor cores; not measured there).
// `operators.test.ts` re-fits both from the committed JSON and checks the stated errors.

/** Where the attention constants come from. */
export const ATTENTION_SOURCE = "results/runs/attention-compute-2026-11-25/attention-compute.json";

/**
 * The flash-attention body (`kernels/flash_attention.py`, fastest of its four configurations
 * per shape): time = `launchUs + flops / (efficiency · gemm rate)`, flops `4 · Sq · Skv · D ·
 * heads` times the visible fraction of (query, key) pairs. Least squares of the relative
 * error over the 8 non-causal and, separately, the 8 causal measured cases (world-8 per-rank
 * shapes of Attn-1/2 at 16k–128k; causal there is lower-right aligned, fraction
 * `1 − Sq / (2·Skv)`), launch held at the GEMM model's 22 µs: non-causal mean error 5.5%, max
 * 8.0%; causal mean 2.3%, max 6.6%. Causal runs slower per flop: the skip of masked blocks
 * ends the kv loop in an `if` that Triton does not software-pipeline.
 */
export const ATTENTION_BODY = { launchUs: 22, efficiency: 0.5539, causalEfficiency: 0.3925, meanError: 0.06, maxError: 0.08 } as const;

/** Where the MoE constants come from: two runs of the emitted kernels at their tuned configurations. */
export const MOE_SOURCE = [
  "results/runs/moe-blocks-h100-2026-11-27/final/moe-blocks-run1.json",
  "results/runs/moe-blocks-h100-2026-11-27/final/moe-blocks-run2.json",
] as const;

/** The valid blocks of the routing those runs drew, per BLOCK_M (evidence: `results/runs/moe-blocks-h100-2026-11-27`). */
export const MOE_ROUTING_BLOCKS = "results/runs/moe-blocks-h100-2026-11-27/final/routing-blocks.json";

/**
 * The gather + grouped GEMM body as ovl emits it (`kernels/moe_gather_gemm_blocks.py`, non-persistent,
 * vector waits in and met): rounds of `BM × BN` tiles (each expert's token slots padded to whole `BM`
 * blocks) over `smCount × p` slots, `p` programs per SM (as many as the tile's ring of shared memory
 * and its warps allow, at most `maxProgramsPerSm`), each tile taking `p` times its time alone at
 * `efficiency` of the GEMM rate; plus `launchUs`. Least squares of the max relative error (grid 0.5 µs ×
 * 0.002 × the cap) over MoE-1…6 at their world-8 per-rank shapes, each at its tuned configuration
 * (64×64×32 at MoE-2, 128×128×64 at MoE-5, 128×256×64 elsewhere) and priced at the measured routing's
 * block count (`MOE_ROUTING_BLOCKS`): launch 12 µs, efficiency 0.864, cap 6, max error 7.7%. At MoE-1/4
 * (8 experts, ~16.5 blocks of 128 each) the count sits at the SM count: a routing with 133 blocks
 * instead of 131 adds a second round of one tile, on the GPU as in the model.
 */
export const MOE_BODY = { launchUs: 12, efficiency: 0.864, maxProgramsPerSm: 6, sharedBytesPerSm: 227 * 1024, maxError: 0.08 } as const;

/** Where the moe-rs constants come from. */
export const MOE_RS_SOURCE = "results/runs/moe-ws-h100-2026-11-26/run2/moe-rs-compute.json";

/**
 * The moe-rs producers at 128×256×64 (`ovl emit moe-rs`, TileLink's MoE-1…6 per-rank shapes of
 * world 8 on one H100): wave-quantised rounds of `BM × BN` tiles over the expert blocks at
 * `efficiency` of the GEMM rate, plus `launchUs`; least squares of the relative error over the six
 * shapes, each priced as the mean over the routings of seeds 1–4. `launch`: the default
 * warp-specialised body (notifies once per launch): launch 15.5 µs, efficiency 0.522, max error
 * 10.2%. `tile`: the per-tile-notify body (`moe_gemm_scatter.py`, 8 warps, 4 stages, its
 * notifies in): launch 22 µs, efficiency 0.334, max error 14.5%. `smallKernelUs`: each of the
 * small kernels around the warp-specialised producer (`moe_permute_rows`, `moe_topk_sum`,
 * `moe_slab_notify`), besides its bytes at HBM bandwidth: the measured permute + producer +
 * notify chain less the producer and the permute's bytes, over two kernels, mean of the six
 * shapes (3.5–5.8 µs each).
 */
export const MOE_RS_BODY = {
  tile: { BM: 128, BN: 256 },
  launch: { launchUs: 15.5, efficiency: 0.522, maxError: 0.11 },
  perTile: { launchUs: 22, efficiency: 0.334, maxError: 0.15 },
  smallKernelUs: 4.3,
} as const;
