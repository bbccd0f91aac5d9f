// Barrel of the lower module (filled as the module lands).
export {};
