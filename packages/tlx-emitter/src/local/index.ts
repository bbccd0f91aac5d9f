// Local kernels: a user's own annotated Triton kernel, parsed with a real Python parser,
// checked against the safety rules, and transformed into an overlapped kernel.
export { LocalKernelError, type LocalKernelErrorCode } from "./errors.js";
export { loadPythonParser, type PythonParser, type PythonSyntaxTree } from "./parser.js";
export { parseLocalKernel, parseLocalKernelWith, PRIMITIVES, type LocalKernel, type ParseLocalKernelOptions } from "./parse.js";
export type { LocalParam, TileStatement } from "./kernel.js";
export {
  DOMAIN_VARIABLE,
  GATHER_VARIABLES,
  PEER_SIGNALS_PARAM,
  RUNTIME_PARAMS,
  runtimeParams,
  type GatherRows,
  type TileProgram,
} from "./program.js";
export { transformLocalKernel, type LocalKernelOutput, type TransformOptions } from "./transform.js";
export type { KvGroups } from "./kv-block.js";
