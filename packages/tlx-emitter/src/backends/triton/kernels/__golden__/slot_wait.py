"""slot-wait: wait on the slots that complete a rank's output; the launch's last wait, on the device.

Emitted by @ovl/tlx-emitter. The device primitives come from ovl_runtime.language (the ovl runner).
"""
import triton
import triton.language as tl
from ovl_runtime.language import load_epoch_target, wait_slot


@triton.jit
def slot_wait(sig_ptr, seg_ptr, num_segments, err_ptr, rank, epoch_ptr, timeout_ns):
    for seg in tl.range(tl.program_id(0), num_segments, tl.num_programs(0)):
        row = seg_ptr + seg * 2
        wait_at = tl.load(row + 0)
        wait_arrivals = tl.load(row + 1)
        if wait_at >= 0:
            target = load_epoch_target(epoch_ptr, wait_arrivals)
            wait_slot(sig_ptr, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)
