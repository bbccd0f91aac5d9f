export { Chain, CHAIN_SCHEMA, ChainLink, ChainReference, ChainStage, StageBuffer, chainJsonSchema, chainJsonSchemaText } from "./schema.js";
