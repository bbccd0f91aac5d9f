// Barrel of the templates module (filled as the module lands).
export {};
