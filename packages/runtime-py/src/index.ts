// Public surface of @ovl/runtime-py: the TypeScript driver of the `ovl_runtime` Python
// runner. It lands with the runner (see README.md); nothing is exported until it is real.
export {};
