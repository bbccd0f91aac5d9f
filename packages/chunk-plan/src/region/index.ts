// Barrel of the region module (filled as the module lands).
export {};
