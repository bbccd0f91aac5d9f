// Public surface of @ovl/chunk-plan: AutoOverlap's chunk abstraction as a library.
export { CodedError } from "./errors.js";
export * from "./model/schema.js";
export * from "./region/index.js";
export * from "./plan/index.js";
export * from "./templates/index.js";
export * from "./validate/index.js";
export * from "./format/index.js";
export * from "./signals/index.js";
export * from "./lower/index.js";
