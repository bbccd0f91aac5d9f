// Barrel of the validate module: structure, writes, deadlock and race checks, and symbolic
// execution of chunk plans against their claimed collective.
export { validatePlan, assertValidPlan, type ValidateOptions, type PlanValidation } from "./validate.js";
export { PlanValidationError, InvalidPlanError, formatOp, type PlanValidationCode, type OpAddress } from "./errors.js";
