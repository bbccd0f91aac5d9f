"""NVSHMEM's unique id (UID bootstrap) handed from rank 0 to the other ranks through the process group's store.

Rank 0 makes the id (``nvshmem.core.get_unique_id()``), writes its bytes under a key of the store torchrun's
process group already shares, and every other rank waits for that key, bounded, and copies the bytes into an
empty id (``get_unique_id(empty=True)``) before ``init``. The id is an opaque C struct of fixed size: the bytes
are carried as they are, and a size that differs from the local struct's is refused rather than truncated.
Imports neither torch nor nvshmem4py (the store and the id are duck-typed; ``tests/test_nvshmem_direct.py``
runs it on a fake store).
"""

from __future__ import annotations

import ctypes
from datetime import timedelta
from typing import Any, Protocol

from ..errors import DeviceError

KEY = "ovl/nvshmem/uid"


class Store(Protocol):
    """What of ``torch.distributed.Store`` the exchange uses."""

    def set(self, key: str, value: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def wait(self, keys: list[str], timeout: timedelta) -> None: ...


def uid_bytes(uid: Any) -> bytes:
    """The raw bytes of an nvshmem4py ``UniqueID`` (its ``_data`` array)."""
    return bytes(uid._data.tobytes())


def load_uid(empty: Any, raw: bytes) -> Any:
    """``raw`` copied into ``empty`` (an id from ``get_unique_id(empty=True)``, whose ``ptr`` is its address); returns it."""
    size = len(uid_bytes(empty))
    if len(raw) != size:
        raise DeviceError(
            f"NVSHMEM bootstrap: the unique id from rank 0 has {len(raw)} bytes, this process's has {size} (mixed NVSHMEM versions?)"
        )
    ctypes.memmove(empty.ptr, raw, size)
    return empty


def share_uid(store: Store, rank: int, make: Any, empty: Any, timeout_s: float, key: str = KEY) -> Any:
    """Rank 0: ``make()`` (a new id), published under ``key``; other ranks: ``empty()`` filled with rank 0's bytes,
    waiting at most ``timeout_s`` for them (a ``DeviceError`` naming the key past that). Returns this rank's id."""
    if rank == 0:
        uid = make()
        store.set(key, uid_bytes(uid))
        return uid
    try:
        store.wait([key], timedelta(seconds=timeout_s))
    except Exception as exc:  # torch raises DistStoreError (a RuntimeError) on timeout
        raise DeviceError(
            f"NVSHMEM bootstrap: rank {rank} got no unique id from rank 0 within {timeout_s:g} s (store key {key!r}): {exc}"
        ) from exc
    return load_uid(empty(), bytes(store.get(key)))
