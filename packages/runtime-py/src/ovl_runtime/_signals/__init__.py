"""The signal model (monotone epochs, bounded waits) executable on the CPU, and the segment tables of the SM
communication kernels."""
