// Public surface of @ovl/bench: the measuring harness and its result formats.
export { measure, writeSuite, toMarkdown, machineDescription, RESULTS_DIR } from "./harness.js";
export type { Measurement, MeasureOptions, SuiteResult } from "./harness.js";
