"""nvshmem-push: wait on a local slot, then put a segment to a PE with a signal add on its slot (NVSHMEM).

Emitted by @ovl/tlx-emitter (NVSHMEM). The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.nvshmem import put_signal_add
from ovl_runtime.language import load_epoch_target, wait_slot, consume_token


@triton.jit
def nvshmem_push(src_ptr, dst_ptr, sig_ptr, seg_ptr, num_segments, err_ptr, rank, epoch_ptr, timeout_ns):
    for seg in tl.range(tl.program_id(0), num_segments, tl.num_programs(0)):
        row = seg_ptr + seg * 7
        src_offset = tl.load(row + 0)
        dst_rank = tl.load(row + 1)
        dst_offset = tl.load(row + 2)
        length = tl.load(row + 3)
        wait_at = tl.load(row + 4)
        wait_arrivals = tl.load(row + 5)
        notify_at = tl.load(row + 6)
        zero = rank * 0
        if wait_at >= 0:
            target = load_epoch_target(epoch_ptr, wait_arrivals)
            tok = wait_slot(sig_ptr, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)
            zero = consume_token(wait_at.to(tl.int32) * 0, tok)
        if notify_at >= 0:
            put_signal_add(dst_ptr + dst_offset, src_ptr + src_offset + zero, length, sig_ptr + notify_at, dst_rank)
