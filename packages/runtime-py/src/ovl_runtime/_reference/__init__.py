"""The references a checked run compares each rank's output with: numpy (the CPU engines) and torch (the GPU
modes), dispatched by the manifest's operator to that operator's modules, and the relative-error check."""
