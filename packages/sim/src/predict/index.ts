// Barrel of the prediction suites that span several nodes (two-level hardware models).
export { predictMultiNode, MULTI_NODE_TUNE_SPACE, type MultiNodeRow, type PredictMultiNodeOptions } from "./multi-node.js";
export { multiNodeMarkdown, multiNodeChart } from "./report.js";
