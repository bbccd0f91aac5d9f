// Barrel of the CommIR frontend: Mercury's loop IR, its schedule primitives, the
// interpreter, communication inference and lowering to chunk plans, memory estimates.
export { type IndexExpr, evalExpr, substitute, exprVars, formatExpr } from "./expr.js";
export {
  axis,
  program,
  bufferOf,
  loopOf,
  bufferShape,
  checkProgram,
  type Axis,
  type AxisKind,
  type DimBinding,
  type BufferDecl,
  type Loop,
  type ShardAnnotation,
  type PatchAnnotation,
  type Program,
  type ProgramInput,
} from "./ir.js";
export { tile, join, reorder, patch, parallelize, shift, shard, replicate } from "./transforms.js";
export { interpret, macKernel, type InterpretOptions, type KernelContext, type PatchKernel, type Tensor } from "./interpret.js";
export { analyzeProgram, type BufferFacts, type CommKind, type ProgramFacts } from "./analyze.js";
export { lowerProgram, partialOutput, type LoweredProgram } from "./lower.js";
export { runLowered } from "./run.js";
export { estimateMemory, type MemoryEstimate } from "./memory.js";
