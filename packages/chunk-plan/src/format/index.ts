// Barrel of the format module: plans in and out of JSON, a readable text dump, a Mermaid
// graph of dependencies, and the JSON Schema of `ovl.chunk-plan/v1`.
export { FormatError, jsonPath, type FormatErrorCode, type FormatIssue } from "./errors.js";
export { parsePlan, parsePlanJson, serializePlan, chunkPlanJsonSchema, type SerializeOptions } from "./json.js";
export { dumpPlan, describeOp, formatDependency, formatRegionText } from "./dump.js";
export { planToMermaid, mermaidLabel } from "./mermaid.js";
