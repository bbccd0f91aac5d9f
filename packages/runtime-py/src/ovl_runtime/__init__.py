"""ovl_runtime: runs ovl's compute-communication overlapped kernels.

The public faces: :mod:`ovl_runtime.ops` (one PyTorch function per operator), :mod:`ovl_runtime.nn` (layers built
on them), :mod:`ovl_runtime.groups`, :mod:`ovl_runtime.errors` and :mod:`ovl_runtime.language` (the device
primitives emitted kernels import). This module: ``load_manifest`` reads and validates an ``ovl.manifest/v1``
file; ``emulate`` runs it on the CPU (ranks as threads; the numpy engine re-implements the kernel templates, the
``interpret`` engine runs the kernels' own source under Triton's interpreter); ``python -m ovl_runtime run`` runs
it on GPUs and writes an ``ovl.report/v1`` report. The signal model (monotone epochs, bounded waits) is shared.
"""

from ._emulate.engine import ENGINES, Emulator, choose_engine, emulate
from ._manifest.parse import load_manifest, parse_manifest
from ._manifest.types import MANIFEST_SCHEMA, Manifest
from ._report.outcome import Baseline, CheckRecord, RunOutcome
from ._report.report import REPORT_SCHEMA, build_report
from ._signals.board import SignalBoard, SignalError, SignalTimeout, SignalWorld, epoch_target, reached
from ._version import __version__
from .errors import CheckFailed, DeviceError, KernelFault, ManifestError, RunnerError, UsageError, WaitTimeout

__all__ = [
    "ENGINES",
    "MANIFEST_SCHEMA",
    "REPORT_SCHEMA",
    "Baseline",
    "CheckFailed",
    "CheckRecord",
    "DeviceError",
    "Emulator",
    "KernelFault",
    "Manifest",
    "ManifestError",
    "RunOutcome",
    "RunnerError",
    "SignalBoard",
    "SignalError",
    "SignalTimeout",
    "SignalWorld",
    "UsageError",
    "WaitTimeout",
    "build_report",
    "choose_engine",
    "emulate",
    "epoch_target",
    "load_manifest",
    "parse_manifest",
    "reached",
    "__version__",
]
