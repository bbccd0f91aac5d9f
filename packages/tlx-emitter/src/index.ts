// Public surface of @ovl/tlx-emitter: the manifest contract, the Python writer, the
// device primitive library, the kernel templates and the emitters.
export * from "./core/manifest/schema.js";
export { manifestJsonSchema, manifestJsonSchemaText } from "./core/manifest/json-schema.js";
export * from "./core/writer/index.js";
export * from "./core/device/index.js";
export * from "./backends/triton/kernels/index.js";
export * from "./api-emit.js";
export * from "./api-tlx.js";
export * from "./local/index.js";
export * from "./api-compile.js";
export * from "./core/chain/index.js";
