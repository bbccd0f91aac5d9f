"""One session's buffers on NVSHMEM's symmetric heap when ovl bootstrapped NVSHMEM itself (``_runner.nvshmem_direct``).

The allocator and :class:`~ovl_runtime._runner.rank.PeerViews` of a ``GpuSession`` in such a process: symmetric
buffers (the signal buffer included) are nvshmem4py tensors, allocated in manifest order on every rank, so a local
address is the same symmetric address on every PE, as ``put_signal_add`` expects; other buffers are plain tensors.

**No peer views**, as in PyTorch's NVSHMEM session (``_runner.nvshmem``): a manifest whose host copies or
peer-pointer tables reach other ranks' buffers (the copy-engine and SM backends) is refused before anything is
allocated. ``nvshmem_ptr`` (nvshmem4py's ``get_peer_tensor``) did reach a peer's memory in the probe, so such
manifests could be served; they are not, yet: their host-side stream waits on peers' slots have not run in
NVSHMEM's limited multiple-processes-per-GPU mode, whose unsupported calls end the process rather than fail.
"""

from __future__ import annotations

from typing import Any

from .._manifest.types import BufferSpec, Manifest
from ..errors import ManifestError, UsageError
from .nvshmem import peer_view_need


def check_direct_session(m: Manifest, group_is_world: bool) -> None:
    """Refuse what a session of ``m`` cannot run on a directly bootstrapped NVSHMEM (see the module)."""
    why = peer_view_need(m)
    if why is not None:
        raise UsageError(
            f"manifest {m.name} cannot run on NVSHMEM bootstrapped through nvshmem4py: {why}, and this session gives no peer "
            "views; run it in a torchrun of its own with one GPU per process (the CUDA backend), or --ranks-on-one-gpu"
        )
    if m.requires_nvshmem and not group_is_world:
        raise UsageError(f"manifest {m.name} puts through NVSHMEM, whose PEs are the global ranks: run it on the world group")


class DirectPeers:
    """Allocator and peer views of one session on ``heap`` (a ``DirectNvshmem``); :meth:`free` gives the memory back."""

    views = False

    def __init__(self, heap: Any, rank: int, bound: frozenset[str] = frozenset()) -> None:
        self.heap, self.rank, self.bound = heap, rank, bound
        self.tensors: dict[str, Any] = {}

    def allocate(self, b: BufferSpec, dtype: Any) -> Any:
        import torch

        if b.name in self.bound:  # the caller passes this buffer per launch (RankState.bind)
            return torch.empty(0, dtype=dtype, device="cuda")
        if not b.symmetric:
            return torch.empty(*b.shape, dtype=dtype, device="cuda")
        t = self.heap.tensor(tuple(b.shape), dtype)
        self.tensors[b.name] = t
        return t

    def flat(self, buffer: str, rank: int) -> Any:
        t = self.tensors.get(buffer)
        if t is None:
            raise ManifestError("hostOps", f"rank {self.rank} addresses non-symmetric buffer {buffer!r} on rank {rank}")
        if rank == self.rank:
            return t.view(-1)
        raise ManifestError("hostOps", f"rank {self.rank} addresses {buffer!r} on rank {rank}: a direct NVSHMEM session has no peer views")

    def pointers(self, buffer: str) -> list[int]:
        raise ManifestError("kernels", f"peer pointers of {buffer!r}: a direct NVSHMEM session has no peer views (kernels address PEs)")

    def free(self) -> None:
        """Free every symmetric tensor, in allocation order (collective: every rank frees the same buffers)."""
        tensors, self.tensors = self.tensors, {}
        for t in tensors.values():
            self.heap.free(t)
