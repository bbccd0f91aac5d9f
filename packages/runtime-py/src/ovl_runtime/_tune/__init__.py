"""On-device tuning of the compute configuration of an operator the torch API is about to bind: the compiler's
candidates compiled and timed alone on this GPU against cuBLAS, the fastest kept and cached per shape and GPU."""
