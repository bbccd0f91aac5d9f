// Barrel of the compile path: an Operator (local body + chunk plan + backend choices) and the
// one compile() that the CLI, the tuner, the bench and users call.
export { compile, tritonBackend, tlxBackend, BACKEND_SPECIFICATION, type Backend } from "./backend.js";
export type { Operator, OperatorKind, KernelBody, GemmProblem } from "./operator.js";
export { builtinBody, builtinBodyPath, BUILTIN_BODIES, type BuiltinBodyName } from "./builtin.js";
export { bindGemm, type Binding, type GemmBindingInput } from "./bind.js";
export { compileAgGemm, LOCAL_CONSUMER_KIND } from "./ag-gemm.js";
export { compileGemmRs, LOCAL_PRODUCER_KIND } from "./gemm-rs.js";
export { rankMap, consumerColumns, RANK_VAR, type BuiltMap, type ConsumerColumns } from "./maps.js";
export { compiledExamples, tutorialMatmulBody } from "./examples.js";
