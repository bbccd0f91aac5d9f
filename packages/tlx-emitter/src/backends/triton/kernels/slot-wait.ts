// The `slot-wait` template: a launch's last wait, on the device. A rank's output is complete
// once its peers' notifies reach some slots (the rows they store into it); a kernel that waits
// on those slots on the rank's stream ends the launch there, where a host stream's
// `cuStreamWaitValue32` would take the host's epoch, which a CUDA graph would freeze.
import { type KernelTemplateInfo, kernelModule, signature, type SourceOptions } from "./common.js";
import { forEachSegment } from "./sm-comm.js";

/** Fields of one `slot-wait` row (int64), in order: the slot, and the notifies it waits for per launch. */
export const SLOT_WAIT_FIELDS = ["wait_at", "wait_arrivals"] as const;

/** `slot-wait`: wait (bounded) on every slot of a table for this launch's target; nothing else. */
export const SLOT_WAIT: KernelTemplateInfo = {
  kind: "slot-wait",
  entry: "slot_wait",
  args: ["sig_ptr", "seg_ptr", "num_segments", "err_ptr", "rank", "epoch_ptr", "timeout_ns"],
  constexprs: [],
};

/**
 * Source of `slot_wait`. Programs stride over the rows of the int64 table ({@link SLOT_WAIT_FIELDS});
 * a row with `wait_at >= 0` waits (acquire, system scope, bounded) on the local slot `wait_at` for
 * `epoch × wait_arrivals`. Work after the kernel on its stream sees what the notifies released.
 */
export function slotWaitSource(options: SourceOptions = {}): string {
  return kernelModule(
    "slot-wait: wait on the slots that complete a rank's output; the launch's last wait, on the device.",
    options.dtype,
    (w) =>
      w.block(signature(SLOT_WAIT), (f) =>
        forEachSegment(f, SLOT_WAIT_FIELDS, (b) =>
          b.block("if wait_at >= 0", (i) => {
            i.line("target = load_epoch_target(epoch_ptr, wait_arrivals)");
            i.line("wait_slot(sig_ptr, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)");
          }),
        ),
      ),
  );
}
