"""A bound operator's own CUDA graph: its launch captured once, replayed on every eager call.

A launch issues, per rank, copies and signal writes on side streams, kernels on others, and the events
that join them: hundreds of microseconds of Python and driver calls on the host. Captured into a graph
once (the epoch already lives on the device, the operator's buffers are fixed), a call costs one graph
launch plus rewriting the kernel parameters that hold the caller's tensors' addresses
(:class:`~ovl_runtime._runner.graph_params.GraphParams`). The replay is enqueued on the caller's current stream,
so it is ordered like any other work there. Imports torch: GPU only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from .graph_params import AddressKey, GraphParams, GraphParamsError


class OwnGraph:
    """``launch`` captured into a graph, with the caller's addresses rewritten before each replay."""

    def __init__(self, launch: Callable[[], None], addresses: Mapping[AddressKey, int]) -> None:
        """``launch`` enqueues one launch on the current stream; ``addresses``: the caller's tensors it binds
        (key → device address), which later replays may change."""
        graph = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(graph):
            launch()
        graph.instantiate()
        try:
            self.params = GraphParams(graph.raw_cuda_graph(), graph.raw_cuda_graph_exec(), addresses)
        except GraphParamsError:
            graph.reset()
            raise
        self.graph = graph
        self.replays = 0

    def replay(self, addresses: Mapping[AddressKey, int]) -> None:
        """Enqueue the launch on the current stream with ``addresses`` bound."""
        self.params.update(addresses)
        self.graph.replay()
        self.replays += 1
