// Calibration constants of the attention and MoE compute bodies, each fitted from a committed
// GPU measurement (one H100, 2026-11-25). Efficiencies are relative to the hardware model's
// sustained GEMM rate (`gemm.tflopsPerSm · smCount`), so the same constant prices the body on
// any model (H200_SXM: the same SMs and tensor cores; not measured there).
// `operators.test.ts` re-fits both from the committed JSON and checks the stated errors.

/** Where the attention constants come from. */
export const ATTENTION_SOURCE = "packages/bench/results/gpu/attention-compute-2026-11-25/attention-compute.json";

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

/** Where the MoE constants come from. */
export const MOE_SOURCE = "packages/bench/results/gpu/moe-2026-11-25/moe-compute.json";

/**
 * The gather + grouped GEMM body (`kernels/moe_gather_gemm.py` at 128×128×64, 8 warps, 3
 * stages): wave-quantised rounds of `BM × BN` tiles (each expert's token slots padded to
 * whole `BM` blocks) at `efficiency` of the GEMM rate, plus `launchUs`. Least squares of
 * the relative error (grid 0.5 µs × 0.002) over MoE-1…6 at their world-8 per-rank shapes, each
 * priced as the mean over four seeded uniform routings (`moeRouting`, seeds 1–4; the
 * measurement drew one uniform routing): launch 10.5 µs, efficiency 0.53, max error 6.9%.
 */
export const MOE_BODY = { launchUs: 10.5, efficiency: 0.53, tile: { BM: 128, BN: 128 }, maxError: 0.07 } as const;

/** Where the moe-rs constants come from. */
export const MOE_RS_SOURCE = "packages/bench/results/gpu/moe-ws-h100-2026-11-26/run2/moe-rs-compute.json";

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
