// Barrel of the device-side primitive library.
export { DEVICE_FUNCTIONS, TL_DTYPE, writeDeviceLibrary, type ElementType } from "./library.js";
