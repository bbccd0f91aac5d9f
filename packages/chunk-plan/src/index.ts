// Public surface of @ovl/chunk-plan. This package is scaffolded; its behaviour lands with its issue
// (see README.md), and nothing is exported until it is real.
export {};
