"""One rank's GPU session under torchrun: a :class:`~ovl_runtime._runner.rank.RankState` on
symmetric memory, launched in this process's streams and synchronised through NCCL.

Built after ``torch.distributed`` is up. Symmetric buffers come from
``torch.distributed._symmetric_memory`` (``empty`` + ``rendezvous``; one process per GPU), and the peer views and
peer-pointer tables from its handles; or, for manifests of the ``nvshmem`` backend in a process that bootstrapped
NVSHMEM itself (several processes on one GPU: ``_runner.nvshmem_select``), from NVSHMEM's heap through nvshmem4py
(``_runner.nvshmem_peers``), with no peer views. A launch enqueues the comm kernels, then the compute
kernels, then the host ops (their Python overhead must not delay the GEMM), then joins the
side streams; ``wait`` host ops are stream memory waits (``_runner.streamwait``), bounded from
the host.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from .._manifest.types import BufferSpec, Manifest
from ..errors import ManifestError, UsageError, WaitTimeout
from .host_gather import collective_device, gather_rows
from .nvshmem import check_nvshmem_session
from .rank import ERR_WORDS, TORCH_DTYPES, RankState, load_entry, whole_device_grids

__all__ = ["ERR_WORDS", "TORCH_DTYPES", "GpuSession", "SymmetricPeers", "check_world", "load_entry"]


class SymmetricPeers:
    """Peer views through the symmetric-memory handles of this process's buffers."""

    def __init__(self, rank: int, group: Any = None, bound: frozenset[str] = frozenset(), views: bool = True) -> None:
        """``views=False``: the NVSHMEM backend, which gives no peer views (``_runner.nvshmem``)."""
        self.rank = rank
        self.group: Any = group if group is not None else dist.group.WORLD
        self.bound = bound
        self.views = views
        self.handles: dict[str, Any] = {}
        self.tensors: dict[str, torch.Tensor] = {}

    def allocate(self, b: BufferSpec, dtype: torch.dtype) -> torch.Tensor:
        if b.name in self.bound:  # the caller passes this buffer per launch (RankState.bind)
            return torch.empty(0, dtype=dtype, device="cuda")
        if not b.symmetric:
            return torch.empty(*b.shape, dtype=dtype, device="cuda")
        t = symm_mem.empty(*b.shape, dtype=dtype, device=torch.device("cuda"))
        self.handles[b.name] = symm_mem.rendezvous(t, self.group)
        self.tensors[b.name] = t
        return t

    def flat(self, buffer: str, rank: int) -> torch.Tensor:
        t = self.tensors.get(buffer)
        if t is None:
            raise ManifestError("hostOps", f"rank {self.rank} addresses non-symmetric buffer {buffer!r} on rank {rank}")
        if rank == self.rank:
            return t.view(-1)
        if not self.views:
            raise ManifestError("hostOps", f"rank {self.rank} addresses {buffer!r} on rank {rank}: an NVSHMEM process has no peer views")
        return self.handles[buffer].get_buffer(rank, [t.numel()], t.dtype, 0)

    def pointers(self, buffer: str) -> list[int]:
        if not self.views:
            raise ManifestError("kernels", f"peer pointers of {buffer!r}: an NVSHMEM process has no peer views (kernels address PEs)")
        return list(self.handles[buffer].buffer_ptrs)


class GpuSession(RankState):
    """The state of this process's rank: allocate once, then launch epoch after epoch."""

    def __init__(
        self, m: Manifest, rank: int, num_sms: int, group: Any = None, bound: frozenset[str] = frozenset(), nvshmem: Any = None
    ) -> None:
        """``group``: the process group of the ranks (default: the world); ``bound``: buffers
        the caller passes per launch (``RankState.bind``), given no memory here. Under the NVSHMEM
        symmetric-memory backend (a manifest that puts through NVSHMEM selects it), a manifest that
        needs peer views is refused before anything is allocated (``_runner.nvshmem``). ``nvshmem``: this
        process's directly bootstrapped NVSHMEM (a ``DirectNvshmem``), which then allocates the symmetric buffers
        and launches the NVSHMEM kernels instead of PyTorch's symmetric memory (``_runner.nvshmem_peers``)."""
        self.direct_peers: Any = None
        peers: Any
        if nvshmem is not None:
            from .nvshmem_peers import DirectPeers, check_direct_session

            check_direct_session(m, group is None or group == dist.group.WORLD)
            peers = self.direct_peers = DirectPeers(nvshmem, rank, bound)
            self.nvshmem_launcher = nvshmem.launcher
            self.group = group if group is not None else dist.group.WORLD
            self.handles: dict[str, Any] = {}
            views = False
        else:
            views = not check_nvshmem_session(m, group)
            peers = SymmetricPeers(rank, group, bound, views)
            self.group = peers.group
            self.handles = peers.handles
        super().__init__(m, rank, num_sms, peers.allocate)
        self.connect(peers, whole_device_grids(m, num_sms), peer_views=views)
        self.host_streams = [(name, torch.cuda.Stream(), ops) for name, ops in self.host_ops]
        self.comm_kernel_stream = torch.cuda.Stream()
        self.stream_waits = None
        if any(op[0] == "wait" for _n, ops in self.host_ops for op in ops):
            from .streamwait import StreamWaits

            assert self.sig_u32 is not None  # host waits need 32-bit slots (checked in connect)
            # Waits on a peer's slot go through its symmetric signal buffer's peer address.
            self.stream_waits = StreamWaits(self.sig_u32, rank, peers=self.peer_sig32)
        torch.cuda.synchronize()
        dist.barrier(group=self.group)

    def launch(self, warm: bool = False) -> None:
        """Enqueue the next epoch. ``warm``: every wait targets 0 (compile and load, never spin),
        except in kernels that send on every launch (``_cubin.launch.launch_epoch``)."""
        main = torch.cuda.current_stream()
        self.advance_epoch()  # the device word first: every stream below starts after it
        start = torch.cuda.Event()
        start.record(main)
        # Communication kernels (a few programs) go first so that they hold their SMs before
        # a persistent GEMM takes every SM and spins on data only they would move.
        comm = [kd for kd in self.kernels if kd["spec"].stream == "comm"]
        if comm:
            self.comm_kernel_stream.wait_event(start)
            with torch.cuda.stream(self.comm_kernel_stream):
                for kd in comm:
                    self.launch_kernel(kd, warm)
        # Compute kernels before the host ops: the Python cost of many copy calls must not
        # delay the GEMM.
        for kd in self.kernels:
            if kd["spec"].stream == "compute":
                self.launch_kernel(kd, warm)
        for _name, st, ops in self.host_streams:
            st.wait_event(start)
            self.enqueue_host_ops(ops, st, warm, self.stream_waits)
        for _name, st, _ops in self.host_streams:
            main.wait_stream(st)
        if comm:
            main.wait_stream(self.comm_kernel_stream)

    def sync(self) -> None:
        """Synchronize this device, bounded: a host-side wait never filled is released and recorded."""
        if self.stream_waits is None:
            torch.cuda.synchronize()
            return
        self.stream_waits.sync(self.m.wait_timeout_ns / 1e9 + 2.0)
        if self.stream_waits.timeouts:
            self.record_host_timeout(*self.stream_waits.timeouts[0])

    def raise_wait_errors(self) -> None:
        """After a sync: if any rank's waits timed out, raise the same WaitTimeout on every rank."""
        # On the CPU under gloo (processes sharing a GPU), which reduces and gathers no CUDA tensors.
        flag = torch.tensor([int(self.err[0].item() != 0)], device=collective_device(self.group))
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        if not flag.item():
            return
        rows = [r.tolist() for r in gather_rows(self.err, self.group)]
        for r, e in enumerate(rows):
            if e[0]:
                raise WaitTimeout(
                    e[1], e[2], e[3] % (1 << 32), e[4] % (1 << 32), f"a device-side wait (reported by rank {r}, epoch {self.epoch})"
                )

    def init_buffers(self, gen: torch.Generator) -> None:
        """Fresh inputs and poisoned outputs before a checked launch; signal slots are never reset."""
        super().init_buffers(gen)
        torch.cuda.synchronize()
        dist.barrier(group=self.group)  # no peer may push into a buffer this rank is still filling

    def close(self) -> None:
        """Give back NVSHMEM memory of a direct session (collective: every rank closes its session, after a bounded
        barrier; a rank whose peers are gone keeps it, and its exit releases it). Other sessions free on deletion."""
        if self.direct_peers is None:
            return
        torch.cuda.synchronize()
        dist.barrier(group=self.group)  # bounded by the process group's timeout: raises if a peer is gone
        self.direct_peers.free()
        self.tensors.clear()


def check_world(m: Manifest) -> None:
    if dist.get_world_size() != m.world:
        raise UsageError(
            f"the manifest is for {m.world} ranks, but {dist.get_world_size()} processes run: use torchrun --nproc_per_node={m.world}"
        )
