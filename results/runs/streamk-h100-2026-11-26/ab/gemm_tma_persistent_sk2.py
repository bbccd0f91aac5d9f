"""ovl's built-in persistent TMA GEMM body with a stream-K tail: C = A @ B, A [M, K], B [K, N], C [M, N].

The computation of gemm_tma_persistent.py, scheduled so the last wave does not leave most SMs
idle. With P programs and T tiles, the first T - r tiles (r = T mod P) are whole tiles, exactly
T // P waves of them; the r tiles of the last, partial wave are each cut along K into S pieces
(S = min(4, P // r, STREAM_K_SLOTS // r, K // 512)), so r * S <= P programs run
the tail at once, each piece a fraction 1/S of a tile and 512 of K at least (a shorter piece
would spend more on partial sums than the cut saves). A piece stores its fp32 partial sum in slot
`piece` of `partials_ptr` ([STREAM_K_SLOTS, BLOCK_M, BLOCK_N] fp32) and counts itself in at
`tile_counts_ptr` ([STREAM_K_SLOTS] int32, zero at the first launch): the piece that arrives
last adds the S partials, stores the tile of C and sets the count back to zero for the next
launch. No program waits for another, so any grid size is correct; where S would be below 2
every tile is whole.
"""
import triton
import triton.language as tl


# ovl: consumer gather=a_ptr
@triton.jit
def gemm_tma_persistent_sk2(a_ptr, b_ptr, c_ptr, partials_ptr, tile_counts_ptr, M, N, K, STREAM_K_SLOTS, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_programs = tl.num_programs(0)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_half_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N // 2])
    out_dtype = c_ptr.dtype.element_ty
    num_pid_in_group = GROUP_M * num_pid_n
    # The tail: the last wave's tiles, cut into `split` pieces along K when that makes 2 or more.
    tail = num_tiles % num_programs
    per_tile = max(tail, 1)
    split = min(min(num_programs // per_tile, STREAM_K_SLOTS // per_tile), min(K // 512, 4))
    tail = tail * (split >= 2).to(tl.int32)
    split = max(split, 1)
    whole = num_tiles - tail
    k_per_piece = tl.cdiv(k_tiles, split)
    tile_elems = BLOCK_M * BLOCK_N
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    half_n = tl.arange(0, BLOCK_N // 2)
    for unit in tl.range(tl.program_id(0), whole + tail * split, num_programs, flatten=False):  # ovl: tile-loop
        # A unit is a whole tile (unit < whole) or piece `unit - whole` of the tail.
        is_piece = unit >= whole
        in_tail = is_piece.to(tl.int32)
        piece = max(unit - whole, 0)
        tile_id = unit + in_tail * (whole + piece // split - unit)
        # Grouped order: GROUP_M row blocks share their B column blocks in L2.
        group_id = tile_id // num_pid_in_group
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        pid_m = first_m + (tile_id % group_size_m)  # ovl: tile m=pid_m
        offs_am = pid_m * BLOCK_M
        offs_bn = pid_n * BLOCK_N
        k_lo = in_tail * (piece % split) * k_per_piece
        k_hi = k_tiles + in_tail * (min(k_lo + k_per_piece, k_tiles) - k_tiles)
        if is_piece:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for ki in range(k_lo, k_hi):
                offs_k = ki * BLOCK_K
                a = a_desc.load([offs_am, offs_k])
                b = b_desc.load([offs_k, offs_bn])
                acc = tl.dot(a, b, acc)
            tail_tile = piece // split
            tl.store(partials_ptr + piece * tile_elems + offs_m[:, None] * BLOCK_N + offs_n[None, :], acc)
            # Every thread's partial is stored before the count releases it.
            tl.debug_barrier()
            arrived = tl.atomic_add(tile_counts_ptr + tail_tile, 1, sem="acq_rel", scope="gpu")
            if arrived == split - 1:
                tl.debug_barrier()
                first = partials_ptr + tail_tile * split * tile_elems
                # Half a tile at a time keeps the sum and one loaded partial within the registers.
                for h in tl.static_range(2):
                    cols = h * (BLOCK_N // 2) + half_n
                    total = tl.zeros((BLOCK_M, BLOCK_N // 2), dtype=tl.float32)
                    for j in range(split):
                        total += tl.load(first + j * tile_elems + offs_m[:, None] * BLOCK_N + cols[None, :], cache_modifier=".cg")
                    c_half_desc.store([offs_am, offs_bn + h * (BLOCK_N // 2)], total.to(out_dtype))
                tl.atomic_xchg(tile_counts_ptr + tail_tile, 0, sem="relaxed", scope="gpu")
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for ki in range(k_tiles):
                offs_k = ki * BLOCK_K
                a = a_desc.load([offs_am, offs_k])
                b = b_desc.load([offs_k, offs_bn])
                acc = tl.dot(a, b, acc)
            # Two half-tile stores ([BM, BN] -> two [BM, BN/2]) share the tail's staging buffer.
            left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            c_half_desc.store([offs_am, offs_bn], left.to(out_dtype))
            c_half_desc.store([offs_am, offs_bn + BLOCK_N // 2], right.to(out_dtype))
