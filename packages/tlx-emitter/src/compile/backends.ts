// The backends compile() takes: Triton (the operator's local body transformed, any annotated
// Triton kernel), TLX (warp-specialised kernels assembled from TLX parts, where the operator's
// registry entry has a TLX realisation) and the fastest measured of the two per shape.
import type { TargetName } from "@ovl/primitives";
import { BACKEND_SPECIFICATION, type Backend } from "../core/backend.js";
import { EmitError } from "../core/writer/index.js";
import { isTlxDtype } from "../core/dtype.js";
import { computeConfigs, lookupComputeConfig } from "../compute/configs.js";
import { builtinOf } from "../compute/tuned.js";
import { operatorDefinition } from "../operators/index.js";
import type { TlxTarget } from "../backends/tlx/gemm.js";
import type { Operator } from "../core/operator.js";
import { NVSHMEM_OPERATORS } from "../core/options.js";

/** Triton: the operator's local body, transformed (any annotated Triton kernel), by its registry entry's realisation. */
export const tritonBackend: Backend = {
  specificationVersion: BACKEND_SPECIFICATION,
  name: "triton",
  refusal: (op) => {
    if (op.rows !== undefined && operatorDefinition(op.kind).realiseRows === undefined)
      return `${op.kind} is compiled for one row count: leave rows out (rows as a run-time argument: ag-gemm, gemm-rs, gemm-ar, a2a-gemm)`;
    return nvshmemRefusal(op);
  },
  realise: (op) => {
    const def = operatorDefinition(op.kind);
    return op.rows !== undefined && def.realiseRows !== undefined ? def.realiseRows(op) : def.realise(op);
  },
};

/**
 * Why the `nvshmem` transfer backend cannot realise `op`, or undefined (also when `op` does not ask
 * for it): it realises AllGather+GEMM's chunk pushes and GEMM+RS's partial-slab pushes, for one
 * row count (a rows manifest's transfers are host copies instantiated per M).
 */
export function nvshmemRefusal(op: Operator): string | undefined {
  if (op.options?.backend !== "nvshmem") return undefined;
  if (!(NVSHMEM_OPERATORS as readonly string[]).includes(op.kind))
    return `the nvshmem transfer backend realises ${NVSHMEM_OPERATORS.slice(0, -1).join(", ")} and ${NVSHMEM_OPERATORS.at(-1)}; compile ${op.kind} with options.backend "copy-engine" or "sm"`;
  if (op.rows !== undefined)
    return 'an operator serving any row count moves its chunks with host copies instantiated per M; compile one row count for options.backend "nvshmem", or drop it';
  return undefined;
}

/** Options of {@link tlxBackend}. */
export interface TlxBackendOptions {
  readonly target?: TlxTarget;
  /** AllGather+GEMM transport: host copies (`copy-engine`, default) or the in-kernel communication task. */
  readonly comm?: "copy-engine" | "comm-task";
}

/**
 * TLX: warp-specialised AllGather+GEMM and GEMM+ReduceScatter on Hopper (a TMA producer
 * warp group, two wgmma consumer warp groups, cooperative or ping-pong, with chunk waits
 * before a tile's loads or tile-done notifies after its stores), assembled from TLX parts.
 * The body must be one of ovl's built-in bodies of the operator's family (the GEMM is the
 * same), since a TLX kernel is not a transformation of a Triton body. The operator's
 * `warpSpecialization` (from the tuned table's TLX entry when it names no tile) picks the
 * consumer schedule and the ring.
 */
export function tlxBackend(options: TlxBackendOptions = {}): Backend {
  return {
    specificationVersion: BACKEND_SPECIFICATION,
    name: "tlx",
    refusal(op) {
      if (op.rows !== undefined)
        return "the TLX backend compiles one row count (its tile order is fixed in the cubin); compile rows with the triton backend";
      if (operatorDefinition(op.kind).realiseTlx === undefined)
        return `the TLX backend builds AllGather+GEMM and GEMM+ReduceScatter only; compile ${op.kind} with the triton backend`;
      if (builtinOf(op) === undefined) {
        return `the TLX backend assembles its own warp-specialised GEMM and cannot transform ${op.body.path}; use the triton backend for a local body`;
      }
      // wgmma takes 2-byte operands here; fp32 would need a TF32 GEMM of its own, fp8 a K-major B and scales.
      const dtype = op.options?.dtype ?? "bf16";
      if (!isTlxDtype(dtype))
        return `the TLX GEMM's wgmma takes bf16 or fp16 operands, not ${dtype}; compile ${dtype} with the triton backend`;
      if ((options.target ?? "sm_90a") !== "sm_90a")
        return 'TLX operators are emitted for sm_90a only: use tlxBackend({ target: "sm_90a" }), or the triton backend';
      if (op.options?.backend === "nvshmem")
        return 'the TLX backend does not build the nvshmem transfer backend\'s kernels; compile options.backend "nvshmem" with the triton backend';
      if (op.kind === "gemm-rs" && options.comm !== undefined)
        return "the comm option is AllGather+GEMM's transport; GEMM+ReduceScatter takes options.backend (copy-engine or sm)";
      return undefined;
    },
    realise(op) {
      const realiseTlx = operatorDefinition(op.kind).realiseTlx;
      if (realiseTlx === undefined) return Promise.reject(new EmitError("unsupported-op", `the TLX backend does not build ${op.kind}`));
      return realiseTlx(op, options.comm === undefined ? {} : { comm: options.comm });
    },
  };
}

/**
 * The faster measured backend per shape: TLX where the tuned table's entry of the operator's
 * own shape holds a TLX configuration that ran faster than the entry's Triton kernel in the
 * same run (`tlx.ms < ms`), the operator names no tile and the TLX backend can build it (a
 * built-in body of AllGather+GEMM or GEMM+ReduceScatter), except GEMM+ReduceScatter over SM
 * pushes and fp32 and fp8e4m3 (which the TLX GEMM does not take); Triton otherwise. fp16 reads bf16's
 * entries (`lookupComputeConfig`: same bytes, same tensor-core rate). TLX kernels are precompiled: the result's `expect` and
 * scripts/tlx-aot-compile.py make their cubins. The choice is the faster kernel alone, on one
 * GPU; end to end on two H200s the two backends' operators over the copy engine measured within
 * a few percent of each other per MLP shape (evidence: `results/runs/h200x2-2026-11-28`),
 * but beside the SM push kernel the TLX GEMM+RS operator ran 3-14% slower than the Triton one
 * at every MLP shape on two and four H200s
 * (evidence: `results/runs/deferred-notify-h200-2026-11-28`).
 */
export function fastestBackend(options: TlxBackendOptions = {}): Backend {
  const tlx = tlxBackend(options);
  return {
    specificationVersion: BACKEND_SPECIFICATION,
    name: "fastest",
    select(op, target: TargetName) {
      if (op.tile !== undefined || (op.kind !== "ag-gemm" && op.kind !== "gemm-rs") || builtinOf(op) === undefined) return tritonBackend;
      if (op.kind === "gemm-rs" && op.options?.backend === "sm") return tritonBackend;
      if (!isTlxDtype(op.options?.dtype ?? "bf16")) return tritonBackend;
      if (op.options?.backend === "nvshmem") return tritonBackend;
      const table = computeConfigs(target);
      const found =
        table === null ? undefined : lookupComputeConfig(table, { op: op.kind, ...op.problem, dtype: op.options?.dtype ?? "bf16" });
      const e = found?.match === "exact" ? found.entry : undefined;
      return e?.tlx?.ms !== undefined && e.ms !== undefined && e.tlx.ms < e.ms ? tlx : tritonBackend;
    },
    refusal: () => "the fastest backend only selects another backend (compile() asks it through select)",
    realise: () => Promise.reject(new EmitError("unsupported-op", "the fastest backend only selects another backend")),
  };
}
