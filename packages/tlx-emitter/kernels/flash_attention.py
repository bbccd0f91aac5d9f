"""ovl's built-in flash-attention forward body (sequence parallel): O = softmax(Q K^T * scale) V.

Layout (row-major): Q [SQ, H * HEAD_DIM] holds this rank's query rows (global positions
q_shard * SQ onward), kv [SKV, 2 * HKV * HEAD_DIM] every key/value row (row = sequence
position; K of kv head g at columns g * HEAD_DIM, V of kv head g at (HKV + g) * HEAD_DIM),
O [SQ, H * HEAD_DIM]. Query head h reads kv head h // (H // HKV) (MHA when H == HKV, GQA
otherwise). Persistent: a grid of (about) one program per SM, each looping over work items
(BLOCK_M query rows, head), head-major so programs running together share kv heads in L2;
online softmax in fp32, base 2. A fixed number of programs that wait on signals is what lets
every rank of a world share one GPU (the runner's SM budget sizes the grid).

A plain Triton kernel: the `# ovl:` comments tell @ovl/tlx-emitter that kv is gathered and
which statement sets the kv block an iteration reads, so it can visit kv blocks in arrival
order (the online softmax does not depend on the order) and wait for each block's chunks.
Causal: one kv loop over the blocks fully below a query block's diagonal (no mask), one over
the diagonal blocks (masked); blocks past the diagonal are skipped (per block before its wait;
with arrival groups the compiler clips each group's range by the `if`'s bounds instead, so both
loops are software-pipelined).
"""
import triton
import triton.language as tl


@triton.jit
def _attend_block(acc, l_i, m_i, q, q_pos, kv_ptr, kv_blk, kv_head, SKV, qk_scale,
                  HKV: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    # One kv block of the online softmax: scores, running max and sum, rescaled accumulator.
    row_stride = 2 * HKV * HEAD_DIM
    offs_n = kv_blk * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    in_seq = offs_n < SKV
    k = tl.load(kv_ptr + offs_n[None, :] * row_stride + kv_head * HEAD_DIM + offs_d[:, None], mask=in_seq[None, :], other=0.0)
    qk = tl.dot(q, k)
    keep = in_seq[None, :]
    if CAUSAL:
        keep = keep & (offs_n[None, :] <= q_pos[:, None])
    qk = tl.where(keep, qk * qk_scale, float("-inf"))
    m_ij = tl.maximum(m_i, tl.max(qk, 1))
    p = tl.math.exp2(qk - m_ij[:, None])
    alpha = tl.math.exp2(m_i - m_ij)
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(kv_ptr + offs_n[:, None] * row_stride + (HKV + kv_head) * HEAD_DIM + offs_d[None, :], mask=in_seq[:, None], other=0.0)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, l_i, m_ij


# ovl: consumer gather=kv_ptr
@triton.jit
def flash_attention(q_ptr, kv_ptr, o_ptr, SQ, SKV, q_shard, sm_scale: tl.constexpr,
                    H: tl.constexpr, HKV: tl.constexpr, HEAD_DIM: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    num_pid_m = tl.cdiv(SQ, BLOCK_M)
    num_kv = tl.cdiv(SKV, BLOCK_N)
    qk_scale = sm_scale * 1.4426950408889634
    offs_d = tl.arange(0, HEAD_DIM)
    for work in tl.range(tl.program_id(0), num_pid_m * H, tl.num_programs(0), flatten=False):  # ovl: tile-loop
        head = work // num_pid_m
        pid_m = work % num_pid_m
        kv_head = head // (H // HKV)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        q_rows = offs_m[:, None] < SQ
        q = tl.load(q_ptr + offs_m[:, None] * (H * HEAD_DIM) + head * HEAD_DIM + offs_d[None, :], mask=q_rows, other=0.0)
        q_pos = q_shard * SQ + offs_m
        # A finite floor: a row whose first visited block is all masked keeps alpha = 1, not NaN.
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - 1.0e30
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        if CAUSAL:
            # Blocks before kv_diag end before the block's first query position: no row masks them.
            # Keys past the block's last query position are masked for every row: skip their blocks.
            kv_diag = (q_shard * SQ + pid_m * BLOCK_M) // BLOCK_N
            kv_end = tl.cdiv(tl.minimum(q_shard * SQ + (pid_m + 1) * BLOCK_M, SKV), BLOCK_N)
            for it in range(0, num_kv):
                kv_blk = it  # ovl: tile kv=kv_blk
                if kv_blk < kv_diag:
                    acc, l_i, m_i = _attend_block(acc, l_i, m_i, q, q_pos, kv_ptr, kv_blk, kv_head, SKV, qk_scale,
                                                  HKV, HEAD_DIM, BLOCK_N, False)
            # The diagonal: blocks the causal mask cuts.
            for it in range(0, num_kv):
                kv_blk = it  # ovl: tile kv=kv_blk
                if kv_diag <= kv_blk and kv_blk < kv_end:
                    acc, l_i, m_i = _attend_block(acc, l_i, m_i, q, q_pos, kv_ptr, kv_blk, kv_head, SKV, qk_scale,
                                                  HKV, HEAD_DIM, BLOCK_N, True)
        else:
            for it in range(0, num_kv):
                kv_blk = it  # ovl: tile kv=kv_blk
                acc, l_i, m_i = _attend_block(acc, l_i, m_i, q, q_pos, kv_ptr, kv_blk, kv_head, SKV, qk_scale,
                                              HKV, HEAD_DIM, BLOCK_N, False)
        acc = acc / l_i[:, None]
        o_ptrs = o_ptr + offs_m[:, None] * (H * HEAD_DIM) + head * HEAD_DIM + offs_d[None, :]
        tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=q_rows)
