// Barrel of the plan module (filled as the module lands).
export {};
