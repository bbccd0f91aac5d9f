// Public surface of @ovl/cli: the demo pipeline, also usable as a library.
export { runDemo, type DemoOptions, type DemoResult } from "./demo.js";
