// Compiling one operator in-process (the one compile path): plan validation, lowering to the
// tile schedule, map building, parsing the local body with tree-sitter, the transformation
// and the manifest — AG+GEMM and GEMM+RS of TileLink's MLP-1 at 8 ranks, from ovl's built-in
// bodies and from a user's tutorial-style matmul. The parser is loaded once per process,
// before timing (its one-time start-up is reported separately).
import { allGatherSwizzle, planSignals, reduceScatterDirect } from "@ovl/chunk-plan";
import { builtinBody, compile, loadPythonParser, tutorialMatmulBody, type Operator } from "@ovl/tlx-emitter";
import { measureAsync, type Measurement, type SuiteResult } from "../harness.js";

const WORLD = 8;
const S = 8192;
const H = 4096;
const I = 11008;
const TILE = { BM: 128, BN: 256, BK: 64 } as const;

function operators(): Record<string, Operator> {
  const n = I / WORLD;
  const ag = planSignals(
    allGatherSwizzle({ tensor: { name: "A", shape: [S, H], dtype: "bf16" }, axis: 0, mesh: [WORLD], split: 2, side: "push" }),
  );
  const rs = planSignals(
    reduceScatterDirect({
      tensor: { name: "C", shape: [S, H], dtype: "bf16" },
      src: "C_partial",
      axis: 0,
      mesh: [WORLD],
      split: 2,
      afterCompute: true,
    }),
  );
  const agOp = (name: string, body: Operator["body"]): Operator => ({
    name,
    kind: "ag-gemm",
    plan: ag,
    body,
    problem: { M: S, N: n, K: H },
    tile: TILE,
    groupM: 8,
  });
  return {
    "AG+GEMM, built-in TMA body": agOp("ag_tma", builtinBody("gemm_tma_persistent")),
    "AG+GEMM, tutorial-style user matmul": agOp("ag_tutorial", tutorialMatmulBody()),
    "GEMM+RS, built-in producer body": {
      name: "gemm_rs",
      kind: "gemm-rs",
      plan: rs,
      body: builtinBody("gemm_producer"),
      problem: { M: S, N: H, K: n },
      tile: TILE,
      groupM: 8,
    },
  };
}

export default async function run(): Promise<SuiteResult> {
  const measurements: Measurement[] = [];
  const t0 = performance.now();
  await loadPythonParser();
  const loadMs = performance.now() - t0;
  measurements.push({
    name: "load the Python parser (once per process)",
    itemsPerIteration: 1,
    iterations: 1,
    medianMs: loadMs,
    p10Ms: loadMs,
    p90Ms: loadMs,
    itemsPerSecond: 1000 / loadMs,
  });
  for (const [name, op] of Object.entries(operators())) {
    measurements.push(
      await measureAsync(`compile(): ${name}, MLP-1, ${WORLD} ranks`, () => compile(op), {
        warmup: 3,
        maxIterations: 50,
        budgetMs: 4000,
        extra: { world: WORLD, M: op.problem.M, N: op.problem.N, K: op.problem.K },
      }),
    );
  }
  return {
    suite: "compile",
    description:
      "compile() of one operator in-process: validatePlan, lowerToTileSchedule, index maps (rank-affine recovery or tables), parsing the body with tree-sitter, the transformation and the manifest, for MLP-1 (S=8192, H=4096, I=11008) at 8 ranks, split 2, 128×256×64 tiles. Medians after a warm-up; the parser's one-time load is listed first.",
    measurements,
  };
}
