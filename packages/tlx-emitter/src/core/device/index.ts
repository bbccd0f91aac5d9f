// Barrel of the device-side primitive library.
export { DEVICE_FUNCTIONS, TL_DTYPE, type ElementType } from "./library.js";
