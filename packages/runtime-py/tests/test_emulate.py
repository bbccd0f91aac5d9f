import math
import random

import builders
import numpy as np
import pytest

from ovl_runtime import CheckFailed, Emulator, KernelFault, ManifestError, WaitTimeout, emulate, parse_manifest

FAST = 0.25  # seconds: the bound of every emulated wait in fault tests (a backstop: stalls are detected)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_ag_gemm_is_exact_over_three_epochs(world):
    m = parse_manifest(builders.ag_gemm(world=world, M=64 * world, N=48, K=32, BM=16, BN=32, split=2))
    out = emulate(m, epochs=3)
    assert out.failures == [] and out.ok
    assert [c.epoch for c in out.checks] == [1, 2, 3]
    assert all(c.max_rel_error is not None and c.max_rel_error < 1e-5 for c in out.checks)
    assert len(out.times_ms) == world and all(len(t) == 3 for t in out.times_ms)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_gemm_rs_is_exact_over_three_epochs(world):
    m = parse_manifest(builders.gemm_rs(world=world, M=32 * world, N=80, K=24, BM=16, BN=32))
    out = emulate(m, epochs=3)
    assert out.failures == [] and out.ok and len(out.checks) == 3


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("chunk_blocks", [1, 2])
def test_gemm_rs_with_one_copy_and_one_signal_per_chunk_is_exact(world, chunk_blocks):
    d = builders.gemm_rs(world=world, M=64 * world, N=48, K=24, BM=16, BN=32, chunk_blocks=chunk_blocks)
    copies = [op for op in d["hostOps"][0]["streams"][0]["ops"] if op["kind"] == "copy"]
    assert len(copies) == 4 // chunk_blocks  # 4 m-blocks per slab
    out = emulate(parse_manifest(d), epochs=3)
    assert out.failures == [] and out.ok and len(out.checks) == 3


def test_rs_reduce_waits_on_the_slot_its_table_names():
    d = builders.gemm_rs(world=2, M=128, BM=16, chunk_blocks=2)
    table = d["tables"][2]["values"]
    assert table[1][:4] == [0, 0, 2, 2]  # rank 0's chunks of rank 1's slab
    assert table[0][:4] == [-1] * 4  # rank 0's own partial is read in place
    d["tables"][2]["values"] = [list(table[0]), [1, *table[1][1:]]]  # rank 1 waits for (rank 0, m-block 0) on slot 1, which no copy signals
    out = emulate(parse_manifest(d), timeout_s=FAST)
    (err,) = out.failures
    assert isinstance(err, WaitTimeout)
    assert (err.rank, err.slot, err.seen, err.expected) == (1, 1, 0, 1) and "rs_reduce" in str(err)


def test_an_rs_reduce_slot_outside_the_signal_buffer_is_a_kernel_fault():
    d = builders.gemm_rs(world=2, M=64, BM=16)
    d["tables"][2]["values"] = [list(d["tables"][2]["values"][0]), [99, 1, 2, 3]]
    out = emulate(parse_manifest(d), timeout_s=FAST)
    assert isinstance(out.failures[0], KernelFault) and "slot_ptr[0] = 99" in str(out.failures[0])


def test_signal_slots_are_never_reset_between_epochs():
    d = builders.gemm_rs(world=2, M=64, N=64, BM=16, BN=32)
    emu = Emulator(parse_manifest(d))
    for run in range(3):
        rec, _ = emu.checked_launch(run)
        assert rec.ok
    sig = emu.world.signals
    assert sig is not None
    per_slab, n_tiles = 2, 2
    arrival = [sig.board(0).value(s) for s in range(2 * per_slab)]
    done = [sig.board(0).value(s) for s in range(2 * per_slab, 2 * per_slab + 4)]
    assert arrival == [0, 0, 3, 3]  # host-written: the epoch (rank 0's own partial is never delivered)
    assert done == [3 * n_tiles] * 4  # device-notified: epoch x arrivals


def test_a_missing_copy_times_out_naming_rank_slot_seen_and_expected():
    d = builders.ag_gemm(world=3, M=96, BM=16, split=2)
    ops = d["hostOps"][0]["streams"][0]["ops"]
    dropped = ops.pop(1)  # rank 0's second chunk to rank 1
    assert dropped["signal"] == {"rank": 1, "slot": 1}
    out = emulate(parse_manifest(d), epochs=3, timeout_s=FAST)
    (err,) = out.failures
    assert isinstance(err, WaitTimeout)
    assert (err.rank, err.slot, err.seen, err.expected) == (1, 1, 0, 1)
    assert "rank 1" in str(err) and "slot 1" in str(err) and "saw 0" in str(err)
    assert out.exit_code == 3 and out.checks == []
    with pytest.raises(WaitTimeout):
        out.raise_for_failure()


def test_a_missing_reduce_scatter_send_times_out_on_its_owner():
    d = builders.gemm_rs(world=2, M=128, BM=16)
    stream = d["hostOps"][1]["streams"][0]  # rank 1 -> rank 0
    del stream["ops"][2:4]  # the wait and the copy of m-block 1
    out = emulate(parse_manifest(d), timeout_s=FAST)
    (err,) = out.failures
    assert isinstance(err, WaitTimeout)
    assert (err.rank, err.slot, err.seen, err.expected) == (0, 1 * 4 + 1, 0, 1)
    assert "rs_reduce" in str(err)


def test_a_tile_that_never_notifies_stalls_the_host_wait():
    d = builders.gemm_rs(world=2, M=64, N=64, BM=16, BN=32)
    d["tables"][1]["values"][0][3] = -1  # rank 0's m-block 3 no longer notifies its tile-done slot
    out = emulate(parse_manifest(d), timeout_s=30)  # a stall is detected without waiting out the bound
    root, downstream = out.failures
    assert isinstance(root, WaitTimeout) and isinstance(downstream, WaitTimeout)
    assert (root.rank, root.slot, root.seen, root.expected) == (0, 4 + 3, 0, 2)
    assert "host stream to1" in str(root)
    # rank 1's reduce waits on the copy that rank 0's stalled stream would have sent next
    assert (downstream.rank, downstream.slot, downstream.seen, downstream.expected) == (1, 1, 0, 1)


def test_a_duplicate_tile_in_the_visit_table_fails_the_check():
    d = builders.ag_gemm(world=2, M=128, BM=16)
    order = d["tables"][0]["values"][1]
    order[5] = order[4]  # m-block order[5] is never computed
    out = emulate(parse_manifest(d), epochs=3)
    (err,) = out.failures
    assert isinstance(err, CheckFailed) and err.rank == 1 and err.run == 0
    assert "NaN" in str(err) and out.exit_code == 1
    assert out.checks[0].max_rel_error is None and math.isnan(out.checks[0].rel_errors[1])
    assert out.checks[0].rel_errors[0] < 1e-5


def test_data_copied_to_the_wrong_rows_fails_the_check_with_a_finite_error():
    d = builders.ag_gemm(world=2, M=128, BM=16, split=2)
    ops = d["hostOps"][0]["streams"][0]["ops"]
    ops[0]["dst"]["offset"], ops[1]["dst"]["offset"] = ops[1]["dst"]["offset"], ops[0]["dst"]["offset"]
    out = emulate(parse_manifest(d))
    (err,) = out.failures
    assert isinstance(err, CheckFailed) and "exceeds the tolerance" in str(err)
    assert out.checks[0].rel_errors[1] > 0.1


def test_a_wait_bound_still_applies_when_some_thread_keeps_running():
    import threading

    from ovl_runtime import SignalBoard
    from ovl_runtime._emulate.kernels import Aborted, wait_slot

    board = SignalBoard(rank=2, num_slots=4)
    with pytest.raises(WaitTimeout) as err:
        wait_slot(board, 3, 5, 0.05, threading.Event(), 2, "a test")
    assert (err.value.rank, err.value.slot, err.value.seen, err.value.expected) == (2, 3, 0, 5)
    stop = threading.Event()
    stop.set()
    with pytest.raises(Aborted):
        wait_slot(board, 3, 5, 5.0, stop, 2, "a test")


def test_the_wait_bound_runs_from_the_slots_last_change():
    """A slot still filling is progress (a full-size GEMM emulated tile by tile); one that stops short times out."""
    import threading
    import time

    from ovl_runtime import SignalBoard
    from ovl_runtime._emulate.kernels import wait_slot

    def notifier(board, times, every):
        for _ in range(times):
            time.sleep(every)
            board.notify(1)

    board = SignalBoard(rank=0, num_slots=2)
    filling = threading.Thread(target=notifier, args=(board, 8, 0.05))
    filling.start()
    start = time.monotonic()
    wait_slot(board, 1, 8, 0.15, threading.Event(), 0, "a test")  # 0.4 s in all, never 0.15 s without a change
    filling.join()
    assert time.monotonic() - start >= 0.35
    board = SignalBoard(rank=0, num_slots=2)
    short = threading.Thread(target=notifier, args=(board, 3, 0.05))
    short.start()
    with pytest.raises(WaitTimeout) as err:
        wait_slot(board, 1, 8, 0.15, threading.Event(), 0, "a test")
    short.join()
    assert err.value.seen == 3


def test_a_visit_table_entry_out_of_range_is_a_kernel_fault():
    d = builders.ag_gemm(world=2, M=64, BM=16)
    d["tables"][0]["values"][0][0] = 99
    out = emulate(parse_manifest(d), timeout_s=FAST)
    assert isinstance(out.failures[0], KernelFault) and "order_ptr[0] = 99" in str(out.failures[0])


def test_templates_the_emulation_lacks_are_manifest_errors():
    d = builders.ag_gemm()
    d["kernels"][0]["template"]["kind"] = "tile-all-to-all"
    with pytest.raises(ManifestError, match="no template 'tile-all-to-all'"):
        emulate(parse_manifest(d))


def test_a_missing_template_argument_is_named():
    d = builders.ag_gemm()
    d["kernels"][0]["args"] = [a for a in d["kernels"][0]["args"] if a["name"] != "order_ptr"]
    out = emulate(parse_manifest(d), timeout_s=FAST)
    assert isinstance(out.failures[0], ManifestError) and "order_ptr" in str(out.failures[0])


def test_bf16_manifests_check_against_their_tolerance():
    m = parse_manifest(builders.ag_gemm(dtype="bf16", tolerance=2e-2))
    assert emulate(m, epochs=2).ok


def test_random_shapes_and_worlds_run_correctly():
    for seed in range(8):
        rng = random.Random(seed)
        world = rng.choice([2, 3, 4])
        BM = rng.choice([16, 32])
        split = rng.choice([1, 2])
        M = world * split * BM * rng.randint(1, 2)
        N, K = rng.randint(8, 80), rng.randint(4, 40)
        BN = rng.choice([16, 32])
        group_m = rng.randint(1, 4)
        ag = builders.ag_gemm(world=world, M=M, N=N, K=K, BM=BM, BN=BN, split=split, group_m=group_m)
        rs = builders.gemm_rs(world=world, M=M, N=N, K=K, BM=BM, BN=BN, group_m=group_m)
        for d in (ag, rs):
            out = emulate(parse_manifest(d), epochs=2, seed=seed, timeout_s=5)
            assert out.ok, (seed, d["name"], out.failures)


def test_dropping_any_one_copy_names_the_slot_it_should_have_filled():
    for seed in range(4):
        rng = random.Random(100 + seed)
        world = rng.choice([2, 3])
        d = builders.ag_gemm(world=world, M=world * 32, BM=16, split=2)
        src = rng.randrange(world)
        ops = d["hostOps"][src]["streams"][0]["ops"]
        dropped = ops.pop(rng.randrange(len(ops)))
        out = emulate(parse_manifest(d), timeout_s=FAST)
        (err,) = out.failures
        assert isinstance(err, WaitTimeout)
        assert (err.rank, err.slot) == (dropped["signal"]["rank"], dropped["signal"]["slot"])


def test_group_order_visits_every_tile_once():
    from ovl_runtime._emulate.kernels import grouped_tiles

    for pm, pn, g in [(5, 3, 2), (8, 1, 8), (1, 7, 3), (6, 4, 1)]:
        tiles = list(grouped_tiles(pm, pn, g))
        assert sorted(tiles) == [(m, n) for m in range(pm) for n in range(pn)]
    assert np.array_equal(np.array(list(grouped_tiles(2, 2, 2))), np.array([(0, 0), (1, 0), (0, 1), (1, 1)]))
