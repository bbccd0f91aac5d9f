// Barrel of the validate module (filled as the module lands).
export {};
