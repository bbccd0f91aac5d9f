// Public surface of @ovl/bench: workload suites and the measuring harness.
export {};
