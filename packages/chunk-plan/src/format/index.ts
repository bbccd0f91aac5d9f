// Barrel of the format module (filled as the module lands).
export {};
