import threading

import pytest

from ovl_runtime import SignalBoard, SignalError, SignalTimeout, SignalWorld, epoch_target, reached


def test_epoch_targets_are_monotone_multiples_of_arrivals():
    assert [epoch_target(k, 3) for k in (1, 2, 3)] == [3, 6, 9]


@pytest.mark.parametrize("epoch,arrivals", [(0, 1), (-1, 2), (1, 0), (True, 1), (1.5, 2)])
def test_epoch_target_rejects_bad_input(epoch, arrivals):
    with pytest.raises(SignalError):
        epoch_target(epoch, arrivals)


def test_reached_is_wrap_aware():
    top = (1 << 32) - 1
    assert reached(5, 5) and reached(6, 5) and not reached(4, 5)
    # A counter that wrapped past zero is still ahead of a target just below the top.
    assert reached(2, top - 1)
    assert not reached(top - 1, 2)


def test_epochs_never_reset_across_launches():
    board = SignalBoard(rank=0, num_slots=2)
    for epoch in range(1, 5):
        for _ in range(4):
            board.notify(1)
        assert board.wait(1, epoch_target(epoch, 4), timeout_s=0.1) == 4 * epoch
    assert board.value(0) == 0


def test_wait_blocks_until_a_peer_notifies():
    world = SignalWorld(world_size=2, num_slots=1)
    seen = []

    def consumer():
        seen.append(world.board(1).wait(0, epoch_target(1, 2), timeout_s=5))

    t = threading.Thread(target=consumer)
    t.start()
    world.board(1).notify(0)
    world.board(1).notify(0)
    t.join()
    assert seen == [2]


def test_timeout_names_rank_slot_seen_and_expected():
    board = SignalBoard(rank=3, num_slots=4)
    board.notify(2)
    with pytest.raises(SignalTimeout) as err:
        board.wait(2, 5, timeout_s=0.01)
    e = err.value
    assert (e.rank, e.slot, e.seen, e.expected) == (3, 2, 1, 5)
    assert "rank 3" in str(e) and "slot 2" in str(e) and "saw 1" in str(e)


def test_bad_slots_and_ranks_are_errors():
    world = SignalWorld(world_size=2, num_slots=1)
    with pytest.raises(SignalError, match="out of range"):
        world.board(0).notify(1)
    with pytest.raises(SignalError, match="outside the world"):
        world.board(2)
    with pytest.raises(SignalError):
        SignalBoard(0, 1, bits=16)


def test_counter_wraps_at_its_width():
    board = SignalBoard(rank=0, num_slots=1)
    board._values[0] = (1 << 32) - 1
    assert board.notify(0) == 0
    assert board.wait(0, (1 << 32) - 1, timeout_s=0.01) == 0
