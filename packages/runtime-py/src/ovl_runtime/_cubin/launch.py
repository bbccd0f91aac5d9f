"""The launch plan of a precompiled kernel, as pure functions: argument values, warm-up epoch, residency.

``_runner.session`` feeds these the device addresses it allocated and hands the result to
``cubin.CubinKernel.launch``; nothing here touches a GPU, so every rule is tested on the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .._manifest.types import KernelArg, KernelSpec
from .._signals.board import epoch_target, signed32
from .metadata import CubinError, CubinMetadata

# Kernels whose every launch sends notifications (the in-kernel communication task): the
# epoch must count every launch, and a warm-up waiting for 0 would let the next launch's
# waits pass on the warm-up's arrivals.
SENDS_EVERY_LAUNCH = ("tlx-ag-gemm-push",)
# Kernels whose producers wait on notifies issued by other CTAs of the same launch.
NEEDS_CO_RESIDENCY = ("tlx-ag-gemm-push",)
_POINTER_KINDS = ("buffer", "table", "peer-pointers", "error-buffer", "epoch-word")
_SCALAR_KINDS = ("int", "rank", "world", "epoch", "epoch-target", "timeout-ns")
# sm_90 per-multiprocessor limits, used by ``blocks_per_sm_bound``.
SM90_REGISTERS = 65536
SM90_THREADS = 2048
SM90_BLOCKS = 32


class CoResidencyError(CubinError):
    """A kernel whose CTAs wait on each other has more CTAs than the GPU can hold at once: it would hang."""

    code = "not-co-resident"


@dataclass(frozen=True)
class DeviceAddresses:
    """The device address of every manifest object a pointer argument may name, on one rank.

    ``peers[buffer]`` is the address of the int64 table of that symmetric buffer's peer
    pointers; ``buffers`` includes the signal buffer (as the kernels see it)."""

    buffers: Mapping[str, int] = field(default_factory=dict)
    tables: Mapping[str, int] = field(default_factory=dict)
    peers: Mapping[str, int] = field(default_factory=dict)
    error: int = 0
    #: The rank's epoch word (``epoch-word`` arguments); a warm-up passes a word holding 0.
    epoch: int = 0


@dataclass(frozen=True)
class LaunchScalars:
    """The integers of one rank's launch: ``epoch`` is the value passed for ``epoch`` arguments
    (``launch_epoch`` decides it for a warm-up), ``bits`` the width of the signal slots."""

    rank: int
    world: int
    epoch: int
    bits: int
    timeout_ns: int


def launch_epoch(kernel: KernelSpec, epoch: int, warm: bool) -> int:
    """The epoch a launch passes to the kernel. A warm-up passes 0 (every wait is met at once)
    except for kernels that send on every launch: they get the real, counted epoch, which is
    safe because such a kernel both sends and waits within one launch."""
    if warm and kernel.template_kind not in SENDS_EVERY_LAUNCH:
        return 0
    return epoch


def scalar_arg(a: KernelArg, s: LaunchScalars) -> int:
    """The integer a scalar manifest argument resolves to; epoch targets wrap as the slots do
    (the kernels compare signed 32-bit values for 32-bit slots)."""
    if a.kind == "int":
        return int(a.value or 0)
    if a.kind == "rank":
        return s.rank
    if a.kind == "world":
        return s.world
    if a.kind == "timeout-ns":
        return s.timeout_ns
    if a.kind == "epoch":
        return s.epoch
    if a.kind == "epoch-target":
        value = 0 if s.epoch == 0 else epoch_target(s.epoch, a.arrivals or 1, s.bits)
        return signed32(value) if s.bits == 32 else value
    raise CubinError("args", f"argument kind {a.kind!r} is not a scalar")


def pointer_arg(a: KernelArg, name: str, addr: DeviceAddresses) -> int:
    """The device address a pointer manifest argument resolves to. @raises CubinError when it was not allocated."""
    if a.kind == "error-buffer":
        found: int | None = addr.error or None
    elif a.kind == "epoch-word":
        found = addr.epoch or None
    elif a.kind == "buffer":
        found = addr.buffers.get(a.name or "")
    elif a.kind == "table":
        found = addr.tables.get(a.name or "")
    else:
        found = addr.peers.get(a.buffer or "")
    if not found:
        target = a.name or a.buffer or a.kind
        raise CubinError(f"args.{name}", f"no device address for {a.kind} {target!r} (is it a symmetric buffer, a table of the manifest?)")
    return found


def _same_value(a: KernelArg, v: Mapping[str, object]) -> bool:
    if v.get("kind") != a.kind:
        return False
    if a.kind in ("buffer", "table"):
        return v.get("name") == a.name
    if a.kind == "peer-pointers":
        return v.get("buffer") == a.buffer
    if a.kind == "int":
        return v.get("value") == a.value
    if a.kind == "epoch-target":
        return v.get("arrivals") == a.arrivals
    return True


def check_metadata(meta: CubinMetadata, kernel: KernelSpec) -> None:
    """Refuse metadata compiled for another version of the kernel: entry, parameter names and
    the manifest value of each must agree, pointers packed as ``ptr`` and scalars as integers.
    @raises CubinError saying to recompile."""
    fix = "recompile it (scripts/tlx-aot-compile.py of @ovl/tlx-emitter) from this manifest"
    if meta.entry != kernel.entry:
        raise CubinError("metadata.entry", f"is {meta.entry!r}, but kernel {kernel.name} calls {kernel.entry!r}: {fix}")
    want = (kernel.precompiled.cluster if kernel.precompiled is not None else None) or (1, 1, 1)
    if tuple(meta.cluster_dims) != tuple(want):
        raise CubinError(
            "metadata.cluster_dims",
            f"kernel {kernel.name} was compiled for clusters {list(meta.cluster_dims)}, the manifest asks {list(want)}: {fix}",
        )
    manifest_args = dict(kernel.args)
    meta_names = [a.name for a in meta.args]
    missing = [n for n in manifest_args if n not in meta_names]
    extra = [n for n in meta_names if n not in manifest_args]
    if missing or extra:
        raise CubinError(
            "metadata.args", f"kernel {kernel.name}: parameters differ from the manifest (missing {missing}, extra {extra}): {fix}"
        )
    for i, ca in enumerate(meta.args):
        a = manifest_args[ca.name]
        if not _same_value(a, ca.value):
            raise CubinError(f"metadata.args[{i}]", f"{ca.name} was compiled for {dict(ca.value)}, the manifest gives {a}: {fix}")
        if (a.kind in _POINTER_KINDS) != (ca.pack == "ptr"):
            raise CubinError(f"metadata.args[{i}]", f"{ca.name} is a {a.kind} argument packed as {ca.pack}: {fix}")


def cubin_values(
    meta: CubinMetadata, kernel: KernelSpec, addr: DeviceAddresses, scalars: LaunchScalars, scratch: Mapping[str, int]
) -> dict[str, int]:
    """Every parameter of a launch by name, in the form ``_cubin.driver.pack_args`` takes: device
    addresses for pointers, integers for scalars, and the hidden scratch pointers (``scratch``
    maps each hidden parameter to its buffer's address; one of 0 bytes may be left out: null).
    @raises CubinError when a value the kernel was compiled to assume a multiple of 16
    (``meta.aligned``) is not one."""
    check_metadata(meta, kernel)
    manifest_args = dict(kernel.args)
    out: dict[str, int] = {}
    for ca in meta.args:
        a = manifest_args[ca.name]
        out[ca.name] = pointer_arg(a, ca.name, addr) if ca.pack == "ptr" else scalar_arg(a, scalars)
    for h in meta.hidden_args:
        if h.name in scratch:
            out[h.name] = scratch[h.name]
        elif h.bytes_per_program > 0:
            raise CubinError(
                f"hidden_args.{h.name}",
                f"kernel {kernel.name} needs {h.bytes_per_program} bytes of {h.name} per program; none was allocated",
            )
    for name in meta.aligned:
        if name in out and out[name] % 16:
            raise CubinError(
                f"args.{name}", f"kernel {kernel.name} was compiled assuming {name} is a multiple of 16; this launch passes {out[name]:#x}"
            )
    return out


def blocks_per_sm_bound(meta: CubinMetadata, shared_per_sm: int | None = None) -> int:
    """An upper bound on resident CTAs per multiprocessor from the metadata alone (sm_90 limits).

    ptxas compiles a warp-specialised kernel under the launch cap of ``65536 / threads``
    registers (rounded down to 8), and ``setmaxnreg`` hands the whole file around, so the
    bound counts that cap for every thread."""
    threads = meta.threads_per_block
    cap = (SM90_REGISTERS // threads) // 8 * 8
    bound = min(SM90_BLOCKS, SM90_THREADS // threads, SM90_REGISTERS // max(1, threads * cap))
    if shared_per_sm is not None and meta.shared > 0:
        bound = min(bound, shared_per_sm // meta.shared)
    return bound


def check_co_resident(kernel: KernelSpec, grid: tuple[int, int, int], num_sms: int, blocks_per_sm: int) -> None:
    """For a kernel whose producers wait on other CTAs' pushes, every CTA must be resident at
    once: refuse a grid beyond ``num_sms × blocks_per_sm``. @raises CoResidencyError."""
    if kernel.template_kind not in NEEDS_CO_RESIDENCY:
        return
    ctas = grid[0] * grid[1] * grid[2]
    limit = num_sms * max(0, blocks_per_sm)
    if ctas > limit:
        raise CoResidencyError(
            f"kernels.{kernel.name}.grid",
            f"{ctas} CTAs, but only {num_sms} SMs x {blocks_per_sm} resident CTA(s) per SM = {limit} fit at once; "
            "a producer waits on pushes of other CTAs, so this launch would hang: cap the grid at the SM count "
            "(grid: [{kind: 'num-sms'}]) or lower the shared memory per CTA",
        )
