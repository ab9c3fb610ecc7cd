"""Candidate kernels of benchmarks/bandwidth_variants.py, not shipped: each is a committed kernel with
one thing changed, so an A/B in one process says whether that one thing pays.

softmax_fwd_split_peek_kernel
    softmax_fwd_split_kernel (ops/kernels_py/softmax.py, same arguments and grid) whose wait for the
    row's other chunks polls with plain relaxed loads (row_exchange.peek_words: one 256-byte read per
    warp) instead of per-lane atomics (row_exchange.wait: S atomics a poll, and all S programs of a
    row poll the same S words, which sit in one L2 slice). PEEK=False polls with the atomics, as the
    committed kernel does: the interpreter runs no PTX, so the smoke run takes that path. The help
    path is the committed one; a warp's copy of the words may lag the one the loop's reduction
    read, so the words are settled (settle_words: polled again until every lane of the warp has its
    word, which the reduction saw published) before they are used.

softmax_fwd_team_kernel
    The split forward as layer_norm's team backward is built (layer_norm/backward.py): teams of
    S = cdiv(N, BLOCK_N) programs, as many teams as the GPU holds at once, each team walking its
    rows [team * rows_per_team, ...) with program `chunk` owning columns [chunk * BLOCK_N, ...);
    the row loop is pipelined (STAGES - 1 rows' loads ahead, into shared memory) so the next rows
    are in flight while a row waits for its team's words (peek_words, then settle_words: in PTX,
    which the pipeliner takes, and without a limit; teams take tickets, so a team waits only on
    programs that have started, and the grid is no larger than the GPU holds at once; a shipped
    form would ask team_runs first, as layer_norm's lag team backward does). Rows start 16-byte
    aligned, N a multiple of 8 (no ALIGN). CUDA only: programs wait for each other, which the interpreter, running them
    one after another, cannot do.
        sync  int64 [2 + M * S], ZEROED before each launch (sync[0]: the tickets)
        grid  (teams * S,)
"""

import triton
import triton.language as tl

from triton_wrappers import softmax_k as _softmax

_row_parts = _softmax._row_parts
_vectors = _softmax._vectors
_load_chunk = _softmax._load_chunk
_store_chunk = _softmax._store_chunk
_chunk_word = _softmax._chunk_word
publish = _softmax.publish
publish_missing = _softmax.publish_missing
row_and_chunk = _softmax.row_and_chunk
_exchange = _softmax.__name__.rsplit(".", 1)[0] + ".row_exchange"
_row_exchange = __import__(_exchange, fromlist=["peek_words"])
peek_words = _row_exchange.peek_words
ticket = _row_exchange.ticket
poll_words = _row_exchange.poll_words
settle_words = _row_exchange.settle_words
unpack_words = _row_exchange.unpack_words
HELP_AFTER = _row_exchange.HELP_AFTER
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _peek_poll(sync_ptr, row, S, S_POW2: tl.constexpr, POLLS: tl.constexpr):
    # The row's words (1 past S) once none is 0, or after POLLS polls, read with relaxed loads.
    kmask = tl.arange(0, S_POW2) < S
    words = tl.where(kmask, peek_words(sync_ptr, row, S, S_POW2), 1)
    polls = 1
    while (tl.sum((words == 0).to(tl.int32), axis=0) > 0) & (polls != POLLS):
        words = tl.where(kmask, peek_words(sync_ptr, row, S, S_POW2), 1)
        polls += 1
    return words


@triton.jit
def softmax_fwd_split_peek_kernel(out_ptr, in_ptr, sync_ptr, M, N, S, stride_in_row, stride_out_row,
                                  BLOCK_N: tl.constexpr, S_POW2: tl.constexpr, ALIGN: tl.constexpr,
                                  INDEX_64: tl.constexpr, PEEK: tl.constexpr):
    row, chunk = row_and_chunk(S, INDEX_64)
    in_row = in_ptr + row * stride_in_row
    out_row = out_ptr + row * stride_out_row
    head, n_vec, edge_cols, edge_mask = _row_parts(row * stride_in_row, N, chunk == S - 1, ALIGN)
    x = _load_chunk(_vectors(in_row, head, ALIGN), chunk, n_vec, float("-inf"), BLOCK_N, "")
    x_edge = tl.load(in_row + edge_cols, mask=edge_mask, other=float("-inf")).to(tl.float32)
    m = tl.maximum(tl.max(x, axis=0), tl.max(x_edge, axis=0))
    shift = tl.where(m == float("-inf"), 0.0, m) * LOG2E
    e = tl.math.exp2(x * LOG2E - shift)
    e_edge = tl.math.exp2(x_edge * LOG2E - shift)
    publish(sync_ptr, row, chunk, S, m, tl.sum(e, axis=0) + tl.sum(e_edge, axis=0), True)
    kmask = tl.arange(0, S_POW2) < S
    if PEEK:
        words = _peek_poll(sync_ptr, row, S, S_POW2, HELP_AFTER)
    else:
        words, kmask = poll_words(sync_ptr, row, S, S_POW2, HELP_AFTER)
    if tl.sum((words == 0).to(tl.int32), axis=0) > 0:
        publish_missing(sync_ptr, row, S, _chunk_word, (in_row, in_row, S, row * stride_in_row, N, BLOCK_N, ALIGN,
                                                     True))
        if not PEEK:
            words, kmask = poll_words(sync_ptr, row, S, S_POW2, 0)
        x = _load_chunk(_vectors(in_row, head, ALIGN), chunk, n_vec, float("-inf"), BLOCK_N, "")
        x_edge = tl.load(in_row + edge_cols, mask=edge_mask, other=float("-inf")).to(tl.float32)
        e = tl.math.exp2(x * LOG2E - shift)
        e_edge = tl.math.exp2(x_edge * LOG2E - shift)
    if PEEK:
        ms, ss = settle_words(sync_ptr, row, S, words, S_POW2)
    else:
        ms, ss = unpack_words(words, kmask)
    ms = tl.where(kmask, ms, float("-inf"))
    row_max = tl.max(ms, axis=0)
    total = tl.sum(tl.where(kmask, ss * tl.exp(ms - row_max), 0.0), axis=0)
    scale = tl.math.exp2(shift - row_max * LOG2E) / total
    _store_chunk(_vectors(out_row, head, ALIGN), chunk, n_vec, e * scale, BLOCK_N)
    tl.store(out_row + edge_cols, (e_edge * scale).to(out_ptr.dtype.element_ty), mask=edge_mask)


@triton.jit
def softmax_fwd_team_kernel(out_ptr, in_ptr, sync_ptr, M, N, S, rows_per_team, stride_in_row, stride_out_row,
                            BLOCK_N: tl.constexpr, S_POW2: tl.constexpr, STAGES: tl.constexpr, INDEX_64: tl.constexpr):
    team, chunk = ticket(sync_ptr, S)
    if INDEX_64:
        team = team.to(tl.int64)
    cols = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    row_begin = team * rows_per_team
    row_end = tl.minimum(row_begin + rows_per_team, M)
    for row in tl.range(row_begin, row_end, num_stages=STAGES):
        x = tl.load(in_ptr + row * stride_in_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        shift = tl.where(m == float("-inf"), 0.0, m) * LOG2E
        e = tl.math.exp2(x * LOG2E - shift)
        publish(sync_ptr, row, chunk, S, m, tl.sum(e, axis=0))
        ms, ss = settle_words(sync_ptr, row, S, peek_words(sync_ptr, row, S, S_POW2), S_POW2)
        kmask = tl.arange(0, S_POW2) < S
        ms = tl.where(kmask, ms, float("-inf"))
        row_max = tl.max(ms, axis=0)
        total = tl.sum(tl.where(kmask, ss * tl.exp(ms - row_max), 0.0), axis=0)
        scale = tl.math.exp2(shift - row_max * LOG2E) / total
        tl.store(out_ptr + row * stride_out_row + cols, (e * scale).to(out_ptr.dtype.element_ty), mask=mask)
