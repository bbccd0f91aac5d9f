// @ovl/sim README: simulate AllGather+GEMM of MLP-1 on 8 ranks, draw its timeline, tune its knobs.
import { allGatherSwizzle, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import { DEVICE_MEMORY_BYTES, HOPPER_SHARED_BYTES, simulate, simulatorCost, timelineChart, tune } from "@ovl/sim";
import { holds } from "./check.js";

const plan = planSignals(allGatherSwizzle({ tensor: { name: "A", shape: [8192, 4096], dtype: "bf16" }, axis: 0, mesh: [8], side: "push" }));
const schedule = lowerToTileSchedule(plan, {
  tensor: "A",
  problem: { M: 8192, N: 1376, K: 4096 },
  tile: { BM: 128, BN: 256, BK: 64 },
  persistent: { numSms: 132 },
  groupSizeM: 8,
});
const sim = simulate(plan, schedule, { hardware: "H200_SXM" });
holds(
  sim.latencyMs > 0 && sim.boundMs <= sim.latencyMs && sim.nonOverlappedMs > 0,
  `bound ≤ latency, got ${JSON.stringify([sim.boundMs, sim.latencyMs, sim.nonOverlappedMs])}`,
);
const svg = await timelineChart(sim);
holds(svg.startsWith("<svg") && svg.includes("</svg>"), "the timeline renders to SVG");

const result = await tune(
  { operator: "ag-gemm", M: 8192, N: 1376, K: 4096, world: 8 },
  {
    cost: simulatorCost("H200_SXM"),
    memory: { globalBytes: DEVICE_MEMORY_BYTES.H200_SXM!, sharedBytesPerBlock: HOPPER_SHARED_BYTES },
    device: "H200_SXM",
  },
);
holds(typeof result.winnerKey === "string" && result.winnerKey.length > 0, "tune picks a winner");
console.log(`@ovl/sim: README example ok (${sim.latencyMs.toFixed(3)} ms predicted, winner ${result.winnerKey})`);
