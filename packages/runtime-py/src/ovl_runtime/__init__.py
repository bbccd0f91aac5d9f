"""ovl_runtime: runs ovl manifests on GPUs under torchrun, or emulated on the CPU.

This release carries the signal model shared by the GPU runner and the CPU emulation:
monotone-epoch counters with release/acquire semantics and bounded waits.
"""

from .signals import (
    SignalBoard,
    SignalError,
    SignalTimeout,
    SignalWorld,
    epoch_target,
    reached,
)

__version__ = "0.1.0"

__all__ = [
    "SignalBoard",
    "SignalError",
    "SignalTimeout",
    "SignalWorld",
    "epoch_target",
    "reached",
    "__version__",
]
