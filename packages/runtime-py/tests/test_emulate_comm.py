import builders
import pytest

from ovl_runtime import KernelFault, WaitTimeout, emulate, parse_manifest


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize(
    "build", [builders.gemm_rs_sm, builders.all_gather_pull, builders.reduce_scatter_ring], ids=lambda f: getattr(f, "__name__", "")
)
def test_sm_communication_kernels_are_exact_over_three_epochs(build, world):
    out = emulate(parse_manifest(build(world=world, M=32 * world)), epochs=3)
    assert out.ok and out.failures == [] and [c.epoch for c in out.checks] == [1, 2, 3]
    assert all(c.max_rel_error is not None and c.max_rel_error < 1e-5 for c in out.checks)


def test_an_sm_pull_waits_on_the_owners_slot():
    d = builders.all_gather_pull(world=3, M=96)
    d["hostOps"][2]["streams"][0]["ops"][0].pop("signal")  # rank 2 stages its shard but never says so
    out = emulate(parse_manifest(d), timeout_s=30)
    assert out.failures and all(isinstance(f, WaitTimeout) for f in out.failures)
    # ranks 0 and 1 pull rank 2's shard; rank 2 pulls its own: each waits on rank 2's slot 2
    assert sorted((f.rank, f.slot, f.seen, f.expected) for f in out.failures) == [(0, 2, 0, 1), (1, 2, 0, 1), (2, 2, 0, 1)]


def test_a_ring_that_forwards_to_the_wrong_rank_stalls_downstream():
    d = builders.reduce_scatter_ring(world=3, M=96)
    seg = d["tables"][0]["values"][0]  # rank 0, hop 1: chunk 1, forwards to rank 1
    assert seg[5] == 1
    seg[5] = 2  # now rank 2 receives chunk 1 again (and overwrites) while rank 1 waits for it forever
    out = emulate(parse_manifest(d), timeout_s=30)
    root = out.failures[0]
    assert isinstance(root, WaitTimeout) and (root.rank, root.slot) == (1, 1)


def test_a_segment_past_its_buffer_is_a_kernel_fault():
    d = builders.gemm_rs_sm(world=2)
    d["tables"][-1]["values"][1][3] = 10**6  # rank 1's first segment length
    out = emulate(parse_manifest(d), timeout_s=30)
    assert isinstance(out.failures[0], KernelFault)
    assert "rank 1" in str(out.failures[0]) and "sm_push" in str(out.failures[0])


def test_the_in_place_output_is_checked_without_being_poisoned():
    d = builders.reduce_scatter_ring(world=2, M=64)
    d["tables"][0]["values"][1][0:8] = [0, 0, 0, -1, 1, -1, 0, 2]  # rank 1 skips the add of chunk 1
    d["tables"][0]["values"][1][2] = 0  # length 0: nothing reduced, the slot is not even waited on
    out = emulate(parse_manifest(d), timeout_s=30)
    (err,) = out.failures
    assert "exceeds the tolerance" in str(err) and err.rank == 1
