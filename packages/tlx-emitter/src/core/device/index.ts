// Barrel of the device-side primitive library.
export { DEVICE_FUNCTIONS, ELEMENT_BYTES, TL_DTYPE, type ElementType } from "./library.js";
