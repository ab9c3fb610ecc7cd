"""The exchange of programs that share a row: each of a row's S programs owns one chunk of its
columns, publishes two fp32 statistics of that chunk and waits until every chunk's are there.

Workspace ``sync``: int64 [2 + M * S (+ teams)], ZEROED before each launch. sync[0] hands out
tickets (``ticket``), sync[1] is not used, sync[2 + row * S + chunk] is the chunk's word for the
row: its two statistics packed into one 64-bit word, 0 until published. The data is the flag: a
waiting program polls its row's words until none is 0, with no counter, no release fence and no
second read. Kernels of teams (``team_runs``) keep one mode word per team after the rows' words.

Which program owns which chunk:

* ``row_and_chunk``: from the program id, so a program loads at once. The GPU does not promise to
  start programs in id order, so a row's chunk may belong to a program that cannot start until
  others finish: such kernels wait at most HELP_AFTER polls (normally never reached: a sibling
  publishes within microseconds), then publish the words of the chunks still missing themselves
  (``publish_missing``, given the kernel's function computing a chunk's statistics), with
  compare-and-swap from 0, so whichever word reaches a slot first is the one every program of the
  row reads.
* ``ticket``: from an atomic counter; a row's programs take consecutive tickets, so a program only
  waits on programs that took a ticket before the last one handed out; costs a round trip to L2
  before the first load. Such kernels (layer_norm's team backwards) wait inside a software-pipelined
  loop, in PTX (helping_spin_asm), and have a help path too: after LIMIT = HELP_AFTER polls a warp
  computes the missing chunks' statistics itself and publishes them with compare-and-swap from 0,
  each warp on its own (no barrier: the warps of a program may disagree on whether the row is
  complete). Their owners publish with compare-and-swap from 0 as well. A kernel may instead keep
  all help code out (the lag team backward: with it, even unexecuted, ptxas scheduled the row
  loop 5% slower) and ask once, before its row loop, whether its whole team runs (``team_runs``):
  a bounded poll of the ticket count (a program with a ticket is running) settles the team's mode
  word, and a team that runs waits without a limit (``settle_words``); a team whose programs gave
  up waiting for each other does nothing, and a kernel launched after it (stream order: nothing to
  wait for) does its rows.

In all of these, no wait depends on another program running: room on the GPU for one program
suffices.

Every decision a program branches on in Triton code is the same in all its warps, so the barriers
Triton puts in a branch (a reduction across warps, a scalar atomic's broadcast) are met by every
warp or by none. Such a decision is made only from values Triton itself makes program-wide: a
scalar atomic's result (``team_runs``, ``missing``: one thread performs it and shares the result
through shared memory), a tensor atomic's (``_poll`` in ``wait`` and ``poll_words``: each
element's atomic runs once, in one thread, and reaches every thread holding a copy of that element
the same way), and reductions and arithmetic of those. So ``wait``'s ``complete``, its poll loop's
exit and the help path after it are uniform. Per-thread reads exist only in PTX (``peek_words``,
``settle_words``, ``helping_spin_asm``): there the branches are per warp (``vote.sync``) and the
asm has no barrier; the help inside helping_spin_asm is per warp for that reason, and its words
agree in every warp in the end, since each slot keeps the first word written. The help paths are
run at GPU speed with HELP_AFTER = 1 (tests/python/operators: test_split_help_path_cuda and the
layer_norm help-path tests), where a decision taken by some warps only would meet a barrier the
others never reach.

Triton's interpreter runs programs one after another: there a row of several chunks is complete
only through the help path, and a team of several gives up.
"""

import triton
import triton.language as tl

# Polls a waiting program makes before it publishes the missing chunks itself, and the columns a
# helper reads at a time.
HELP_AFTER = tl.constexpr(4096)
HELP_BLOCK = tl.constexpr(512)


@triton.jit
def row_and_chunk(S, INDEX_64: tl.constexpr):
    # Program p takes chunk p % S of row p // S.
    pid = tl.program_id(0)
    row = pid // S
    if INDEX_64:
        row = row.to(tl.int64)
    return row, pid % S


@triton.jit
def ticket(sync_ptr, S):
    # The next ticket's (team or row, chunk): S consecutive tickets share one.
    number = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    return (number // S).to(tl.int32), (number % S).to(tl.int32)


TEAM_RUNS = tl.constexpr(1)
TEAM_GAVE_UP = tl.constexpr(2)


@triton.jit
def team_started(sync_ptr, team, chunk, S, POLLS: tl.constexpr):
    # Whether all S tickets of the team (those of team * S + chunk, chunk < S) have been taken,
    # polling the ticket count at most POLLS times (scalar atomics: every warp gets the same
    # answer). The team's last program knows at once.
    last = tl.minimum((team + 1) * S, tl.num_programs(0)).to(tl.int64)
    taken = (team * S + chunk + 1).to(tl.int64)
    polls = 0
    while (taken < last) & (polls != POLLS):
        taken = tl.atomic_add(sync_ptr, 0, sem="relaxed")
        polls += 1
    return taken >= last


@triton.jit
def team_runs(sync_ptr, modes_ptr, team, chunk, S, POLLS: tl.constexpr):
    # Whether the program's team runs as a team (every program of it running at once, so waits
    # without a limit are safe). The first of the team to decide sets its mode word (modes_ptr[team],
    # compare-and-swap from 0): TEAM_RUNS if it saw every ticket of the team taken (team_started),
    # TEAM_GAVE_UP if it polled POLLS times in vain; every program of the team follows that word.
    started = team_started(sync_ptr, team, chunk, S, POLLS)
    mode = tl.where(started, TEAM_RUNS, TEAM_GAVE_UP).to(tl.int64)
    first = tl.atomic_cas(modes_ptr + team, tl.full((), 0, tl.int64), mode, sem="relaxed")
    return (first == TEAM_RUNS) | ((first == 0) & started)


@triton.jit
def pack_word(hi, lo):
    # +0.0 in the high half goes as -0.0 (the same in every sum), so no published word is 0.
    h = hi.to(tl.int32, bitcast=True)
    h = tl.where(h == 0, -2147483648, h)
    return (h.to(tl.int64) << 32) | (lo.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF)


@triton.jit
def publish(sync_ptr, row, chunk, S, hi, lo, FIRST: tl.constexpr = False):
    # FIRST: only into an empty slot (a compare-and-swap from 0), for slots two programs may fill.
    word = pack_word(hi, lo)
    if FIRST:
        tl.atomic_cas(sync_ptr + 2 + row * S + chunk, tl.full((), 0, tl.int64), word, sem="relaxed")
    else:
        tl.atomic_xchg(sync_ptr + 2 + row * S + chunk, word, sem="relaxed")


@triton.jit
def missing(sync_ptr, row, S, chunk):
    # Whether the chunk's word is still unpublished (read through L2).
    return tl.atomic_add(sync_ptr + 2 + row * S + chunk, 0, sem="relaxed") == 0


@triton.jit
def publish_missing(sync_ptr, row, S, chunk_word: tl.constexpr, args):
    # The help path: publishes the word of every chunk of the row still missing, whose two
    # statistics chunk_word(chunk, *args) computes (the kernel's own @triton.jit function; equal to
    # what the chunk's program publishes up to rounding). The first word in a slot stays.
    for c in tl.range(0, S, num_stages=1):
        if missing(sync_ptr, row, S, c):
            hi, lo = chunk_word(c, *args)
            publish(sync_ptr, row, c, S, hi, lo, True)


@triton.jit
def _poll(slots, kmask):
    # The row's words through L2 (atomics); 1 past S.
    return tl.where(kmask, tl.atomic_add(slots, 0, mask=kmask, sem="relaxed"), 1)


@triton.jit
def poll_words(sync_ptr, row, S, S_POW2: tl.constexpr, POLLS: tl.constexpr):
    # The row's S words (S <= S_POW2) once none is 0, or after POLLS polls (0: no limit), and the
    # mask of the chunks; 1 past S.
    k = tl.arange(0, S_POW2)
    kmask = k < S
    slots = sync_ptr + 2 + row * S + k
    words = _poll(slots, kmask)
    polls = 1
    while (tl.sum((words == 0).to(tl.int32), axis=0) > 0) & (polls != POLLS):
        words = _poll(slots, kmask)
        polls += 1
    return words, kmask


@triton.jit
def unpack_words(words, kmask):
    # The words' two fp32 halves; lanes past the row's chunks (kmask False) give 0.0.
    words = tl.where(kmask, words, 0)
    hi = (words >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    lo = (words & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return hi, lo


@triton.jit
def wait(sync_ptr, row, S, S_POW2: tl.constexpr, POLLS: tl.constexpr):
    # Every chunk's two statistics for the row (0.0 past S), the mask of the chunks, and whether
    # all were published: polls until they are, or POLLS times (0: no limit).
    words, kmask = poll_words(sync_ptr, row, S, S_POW2, POLLS)
    complete = tl.sum((words == 0).to(tl.int32), axis=0) == 0
    hi, lo = unpack_words(words, kmask)
    return hi, lo, kmask, complete


# Waits in PTX, for a wait inside a loop that Triton's pipeliner must still take: a loop directly in
# the body keeps it from pipelining (Triton 3.6; one inside an `if` does not), a call to a noinline
# function makes ptxas spill the loop's values around it, and Triton code lets the compiler choose
# layouts (a reduction across warps brings a barrier) and lets the pipeliner move the wait above the
# program's own publish. One asm block has none of these. None runs under the interpreter, which
# runs no PTX (the kernels use wait and publish_missing there).
#
# helping_spin_asm(chunk_word) is the text of one tl.inline_asm_elementwise over the row's S_POW2
# (<= 32) lanes (pack=1): thread 0 (lane k = 0 of warp 0) publishes the program's own word first
# (compare-and-swap from 0; in the same block so that no scheduling puts the wait before it), then
# each lane loads its chunk's word until every lane of its warp has a published (non-zero) one
# (vote.all keeps the branch warp-uniform), at most LIMIT loads (the count is the same in every
# lane). Then, still missing words: the warp helps on its own, since the warps of a program may
# disagree on whether the row is complete and must not meet at a barrier: it picks a missing chunk
# (ballot over its lanes), computes that chunk's two statistics with the kernel's PTX (chunk_word:
# every lane of the warp together, shuffles only), publishes them by compare-and-swap from 0 from
# its lane 0, loads the words again, and so on until it has seen all. Lanes past S read the row's
# first word (a valid address) and count as done; unpack_words gives them 0. Operands:
#     $0 the words (out, int64)   $1 the lane's slot (spin_slots)   $2 the lane's chunk mask (int32)
#     $3 the lane's chunk index k (int32)   $4 LIMIT (int32)   $5 the program's own slot
#     $6 its word (pack_word)   $7...: chunk_word's own operands.
# chunk_word: PTX that reads the chunk %c (.u32) of the row with the lanes of the warp (%lane is
# the lane's id) and leaves its two statistics' bits in %hi and %lo (.b32) in lane 0 at least; its
# labels and registers inside braces. Words of 0 are not allowed: +0.0 in %hi is published as -0.0
# (as pack_word does).


def helping_spin_asm(chunk_word):
    start = """
        mov.u32 %t, %tid.x;
        or.b32 %t, %t, $3;
        setp.eq.u32 %p0, %t, 0;
        @%p0 atom.relaxed.gpu.global.cas.b64 %old, [$5], %zero, $6;
        mov.u32 %n, $4;
        SPIN:
        ld.relaxed.gpu.global.b64 $0, [$1];
        setp.ne.s64 %pw, $0, 0;
        or.pred %pw, %pw, %pm;
        vote.sync.all.pred %pw, %pw, -1;
        @%pw bra.uni DONE;
        sub.u32 %n, %n, 1;
        setp.ne.u32 %pl, %n, 0;
        @%pl bra.uni SPIN;"""
    return """{
        .reg .pred %pw, %pm, %pl, %pmiss, %pd, %p0;
        .reg .u32 %n, %t, %ballot, %src, %c, %lane;
        .reg .b32 %hi, %lo;
        .reg .b64 %a, %zero, %old, %word, %base;
        mov.b64 %zero, 0;
        mov.u32 %lane, %laneid;
        setp.eq.s32 %pm, $2, 0;
        selp.b32 %t, 0, $3, %pm;
        mul.wide.u32 %a, %t, 8;
        sub.s64 %base, $1, %a;""" + start + """
        HELP:
        setp.eq.s64 %pmiss, $0, 0;
        and.pred %pmiss, %pmiss, !%pm;
        vote.sync.ballot.b32 %ballot, %pmiss, -1;
        setp.eq.u32 %pd, %ballot, 0;
        @%pd bra.uni DONE;
        bfind.u32 %src, %ballot;
        shfl.sync.idx.b32 %c, $3, %src, 31, -1;
        """ + chunk_word + """
        mov.b64 %word, {%lo, %hi};
        mul.wide.u32 %a, %c, 8;
        add.s64 %a, %base, %a;
        setp.eq.u32 %p0, %lane, 0;
        @%p0 atom.relaxed.gpu.global.cas.b64 %old, [%a], %zero, %word;
        ld.relaxed.gpu.global.b64 $0, [$1];
        bra.uni HELP;
        DONE:
        }"""


@triton.jit
def spin_slots(sync_ptr, row, S, S_POW2: tl.constexpr):
    # The lanes' slots (lanes past S: the row's first) and chunk mask for helping_spin_asm.
    k = tl.arange(0, S_POW2)
    kmask = k < S
    return sync_ptr + 2 + row * S + tl.where(kmask, k, 0), kmask


@triton.jit
def peek_words(sync_ptr, row, S, S_POW2: tl.constexpr):
    # The row's words as they are now (0: not published yet), without waiting for the load.
    k = tl.arange(0, S_POW2)
    slots = sync_ptr + 2 + row * S + tl.where(k < S, k, 0)
    return tl.inline_asm_elementwise("ld.relaxed.gpu.global.b64 $0, [$1];", "=l,l", [slots], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def settle_words(sync_ptr, row, S, words, S_POW2: tl.constexpr):
    # The row's two statistics from words peeked earlier (peek_words): polls again, in PTX and
    # without a limit, only while a lane of the warp still has 0. Only where every program of the
    # row is running (team_runs); no help code, so nothing more is live across it.
    slots, kmask = spin_slots(sync_ptr, row, S, S_POW2)
    words = tl.inline_asm_elementwise(
        """{
        .reg .pred %pw, %pm;
        mov.b64 $0, $3;
        setp.eq.s32 %pm, $2, 0;
        CHECK:
        setp.ne.s64 %pw, $0, 0;
        or.pred %pw, %pw, %pm;
        vote.sync.all.pred %pw, %pw, -1;
        @%pw bra.uni DONE;
        ld.relaxed.gpu.global.b64 $0, [$1];
        bra.uni CHECK;
        DONE:
        }""", "=l,l,r,l", [slots, kmask.to(tl.int32), words], dtype=tl.int64, is_pure=False, pack=1)
    return unpack_words(words, kmask)
