"""Compile the prototype kernels for sm_90a without a GPU."""
import sys, triton
from triton.backends.compiler import GPUTarget
sys.path.insert(0, ".")
import proto_kernels as pk
target = GPUTarget("cuda", 90, 32)
def comp(fn, sig, constexprs, **opts):
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=constexprs)
    k = triton.compile(src, target=target, options=opts)
    asm = k.asm
    print(fn.__name__, "ok", "wgmma" in asm["ptx"], "cp.async.bulk.tensor" in asm["ptx"], "ld.global.acquire.sys" in asm["ptx"], k.metadata.shared, k.metadata.num_warps)
    return k
sig = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "order_ptr": "*i32", "slot_ptr": "*i32", "sig_ptr": "*i32", "err_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32", "rank": "i32", "target": "i32", "timeout_ns": "i64",
       "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "GROUP_M": "constexpr", "NUM_SMS": "constexpr", "WAIT": "constexpr"}
comp(pk.ag_gemm_consumer, sig, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "NUM_SMS": 132, "WAIT": True}, num_warps=8, num_stages=3)
sig2 = {"a_ptr": "*bf16", "b_ptr": "*bf16", "order_ptr": "*i32", "peer_ptrs": "*i64", "sig_ptrs": "*i64", "M": "i32", "N": "i32", "K": "i32", "rank": "i32", "WORLD": "constexpr", "rows_per_rank": "i32",
        "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "GROUP_M": "constexpr", "NUM_SMS": "constexpr"}
comp(pk.gemm_rs_producer, sig2, {"WORLD": 2, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "NUM_SMS": 132}, num_warps=8, num_stages=3)
sig3 = {"part_ptr": "*bf16", "out_ptr": "*bf16", "sig_ptr": "*i32", "err_ptr": "*i32", "N": "i32", "rank": "i32", "target": "i32", "timeout_ns": "i64", "rows_per_rank": "i32", "WORLD": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
comp(pk.rs_reduce, sig3, {"WORLD": 2, "BLOCK_M": 64, "BLOCK_N": 128}, num_warps=4)
