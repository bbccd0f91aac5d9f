// Public surface of @ovl/tlx-emitter: the manifest contract, the Python writer, the
// device primitive library, the kernel templates and the emitters.
export * from "./manifest/schema.js";
export { manifestJsonSchema, manifestJsonSchemaText } from "./manifest/json-schema.js";
export * from "./writer/index.js";
export * from "./device/index.js";
export * from "./kernels/index.js";
export * from "./emit/index.js";
export * from "./tlx/index.js";
export * from "./local/index.js";
export * from "./compile/index.js";
export * from "./chain/index.js";
