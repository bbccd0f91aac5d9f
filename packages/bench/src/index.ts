// Public surface of @ovl/bench: the measuring harness and its result formats.
export { measure, writeSuite, toMarkdown, machineDescription, RESULTS_DIR } from "./harness.js";
export type { Measurement, MeasureOptions, SuiteResult } from "./harness.js";
export { predictionRows, mlpProblem, MLP_OPERATORS, type PredictionRow } from "./predict/predictions.js";
export { predictionsJson, predictionsMarkdown, predictionsChart, PREDICTIONS_SCHEMA, PREDICTION_FAMILIES } from "./predict/report.js";
export { MOE_SHAPES, ATTENTION_SHAPES, ATTENTION_SEQS, PREDICTION_WORLDS, PREDICTION_HARDWARE } from "./predict/suites.js";
