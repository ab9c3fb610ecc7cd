"""Size grids made by rule, not by hand, so that no plan can be fitted to the sizes measured.

dense   every operator and pass, fp32 and bf16:
          norms (layer_norm, rms_norm, add_rms_norm): hidden sizes every 256 columns from 512 to
          16384, plus the odd widths ODD_HIDDEN_SIZES;
          softmax: vocabularies every 8192 from 32000 to 262144, plus ODD_VOCAB_SIZES;
          add and sum: four element counts per octave from 2^10 to 2^28, each made odd;
          rows: the odd count whose bf16 tensor is nearest DENSE_TENSOR_BYTES (never a multiple of 64).
decode  the rows an inference engine's decode steps run: 1, 2, 4, ... 256 rows at hidden sizes 2048,
        4096, 5120 and 8192, forward passes (layer_norm, rms_norm, add_rms_norm, softmax), timed as
        GPU time per call inside a CUDA graph (bandwidth.Timer replays one).

shard(sizes, index, count) keeps every count-th size from index on, so each of `count` commands
runs sizes spread over the whole range (a part must fit a 10-minute command).
"""

DENSE_TENSOR_BYTES = 64 * 2**20  # one bf16 row tensor: over an H200's 50 MB L2, so DRAM is measured
ODD_HIDDEN_SIZES = (1000, 3000, 4097, 5000, 11008)
ODD_VOCAB_SIZES = (50257, 100277, 151936, 256000)
DECODE_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DECODE_HIDDEN_SIZES = (2048, 4096, 5120, 8192)
NORMS = ("layer_norm", "rms_norm", "add_rms_norm")


def hidden_sizes(smoke=False):
    if smoke:
        return [512, 1000]
    return sorted(set(range(512, 16384 + 1, 256)) | set(ODD_HIDDEN_SIZES))


def vocab_sizes(smoke=False):
    if smoke:
        return [768, 1001]
    return sorted(set(range(32000, 262144 + 1, 8192)) | set(ODD_VOCAB_SIZES))


def flat_sizes(smoke=False):
    """Four element counts per octave from 2^10 to 2^28, each the odd number at or below 2^(k/4)."""
    if smoke:
        return [1001, 3001]
    sizes = (int(2 ** (k / 4)) for k in range(40, 112 + 1))
    return [n if n % 2 else n - 1 for n in sizes]


def dense_rows(cols, smoke=False):
    """The odd row count whose bf16 rows x cols tensor is nearest DENSE_TENSOR_BYTES."""
    if smoke:
        return 3
    rows = max(1, round(DENSE_TENSOR_BYTES / (2 * cols)))
    return rows if rows % 2 else rows + 1


def shard(sizes, index=0, count=1):
    if not 0 <= index < count:
        raise ValueError(f"shard {index}/{count}: the index must be in 0..{count - 1}")
    return list(sizes)[index::count]


def dense_grid(smoke=False, index=0, count=1):
    """{op: sizes}: element counts for add and sum, [rows, cols] pairs for the others."""
    flat = shard(flat_sizes(smoke), index, count)
    hidden = [[dense_rows(n, smoke), n] for n in shard(hidden_sizes(smoke), index, count)]
    vocab = [[dense_rows(n, smoke), n] for n in shard(vocab_sizes(smoke), index, count)]
    return {"add": flat, "sum": flat, "softmax": vocab, **{op: hidden for op in NORMS}}


def decode_grid(smoke=False, index=0, count=1):
    """{op: [rows, cols] pairs}: every decode row count at every decode hidden size."""
    rows = (1, 3) if smoke else DECODE_ROWS
    cols = (256, ) if smoke else DECODE_HIDDEN_SIZES
    shapes = shard([[m, n] for n in cols for m in rows], index, count)
    return {"softmax": shapes, **{op: shapes for op in NORMS}}


def parse_shard(text):
    """'I/N' -> (I, N): the I-th (from 0) of N shards."""
    try:
        index, count = (int(v) for v in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes I/N (e.g. 0/3), not {text!r}") from None
    shard([], index, count)  # checks the range
    return index, count


def grid_size(grid):
    return sum(len(v) for v in grid.values())

