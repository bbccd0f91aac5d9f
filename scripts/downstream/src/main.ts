// Runs every package's README example in dependency order; any failed assertion or throw exits 1.
await import("./primitives.js");
await import("./mapping.js");
await import("./chunk-plan.js");
await import("./frontends.js");
await import("./sim.js");
await import("./tlx-emitter.js");
await import("./runtime-py.js");
await import("./cli.js");
console.log("downstream: every README example compiled and ran");
