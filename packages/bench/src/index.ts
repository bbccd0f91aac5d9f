// Public surface of @ovl/bench: the measuring harness and its result formats.
export { MLP_SHAPES, type MlpShapeName } from "./shapes.js";
export { measure, writeSuite, toMarkdown, machineDescription, RESULTS_DIR } from "./harness.js";
export type { Measurement, MeasureOptions, SuiteResult } from "./harness.js";
export * from "./charts/index.js";
