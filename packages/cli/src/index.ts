// Public surface of @ovl/cli: the command line as a function, and the demo pipeline.
export { runCli, buildProgram } from "./cli.js";
export { runDemo, type DemoOptions, type DemoResult, type DemoSummary } from "./demo.js";
export { CliError, UsageError, type CliErrorCode } from "./errors.js";
export { processIo, type Io } from "./io.js";
export { resolveProblem, type Problem, type ProblemFlags, OPERATORS, TEMPLATES, type Operator } from "./problem.js";
