"""The address matching behind an own-graph replay (``graph_params.find_words``): which 8-byte words of a
kernel's parameter bytes hold a caller's address. The driver calls around it run on GPU machines only."""

import random

import pytest

from ovl_runtime._runner.graph_params import find_words


def _words(*values: int) -> bytes:
    return b"".join(v.to_bytes(8, "little") for v in values)


def test_finds_every_aligned_occurrence_of_every_address():
    blob = _words(0x7F00_0000_1000, 512, 0x7F00_0000_2000, 0x7F00_0000_1000)
    got = find_words(blob, {0x7F00_0000_1000: "w", 0x7F00_0000_2000: "out"})
    assert got == [(0, "w"), (16, "out"), (24, "w")]


def test_ignores_unaligned_bytes_and_a_short_tail():
    addr = 0x7F00_DEAD_BEE0
    blob = b"\x00" * 4 + addr.to_bytes(8, "little") + b"\x00" * 4 + addr.to_bytes(8, "little")[:7]
    assert find_words(blob, {addr: "x"}) == []


@pytest.mark.parametrize("seed", range(20))
def test_matches_exactly_the_planted_words(seed):
    rng = random.Random(seed)
    keys = {rng.randrange(1 << 40, 1 << 47) & ~0xF: f"k{i}" for i in range(rng.randrange(1, 5))}
    addrs = list(keys)
    words, planted = [], []
    for i in range(rng.randrange(1, 40)):
        if rng.random() < 0.3:
            a = rng.choice(addrs)
            words.append(a)
            planted.append((8 * i, keys[a]))
        else:
            words.append(rng.randrange(0, 1 << 32))  # sizes, strides and flags: far below any device address
    assert find_words(_words(*words), keys) == planted
