// Public surface of @ovl/sim: the discrete-event simulator of overlapped operators and its
// hardware models, the autotuner that ranks candidates with it, the charts that draw a
// simulated (or measured) operator, and the MLP workload shapes the suites use.
export * from "./simulate/index.js";
export * from "./tune/index.js";
export * from "./charts/index.js";
export * from "./operators/index.js";
export { MLP_SHAPES, type MlpShapeName, MOE_SHAPES, type MoeShapeName } from "./shapes.js";
export * from "./predict/index.js";
