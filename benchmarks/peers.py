"""FlagGems and Liger-Kernel, two libraries of Triton operators, as benchmark peers of tjit.

load(device) imports whichever is installed and usable (once per process) and returns
{name: Peer}; a peer that is absent, or lacks an operator, says why in its notes, and nothing
here ever raises into the suite. On CPU both are skipped unimported: they are CUDA-only.

Each Peer binds an (op, pass) to its inputs: peer.bind(op, pas, *inputs) -> zero-argument callable,
with the inputs the tjit / aten cases of bandwidth.py and overhead.py use:

    add fwd         (x, y)                      sum fwd          (x,)         -> 0-d tensor
    softmax fwd     (x,)            last dim    softmax bwd      (dy, y, input_dtype) -> dx
    layer_norm fwd  (x, w, b, eps)  last dim    layer_norm bwd   (x, w, b, dy, eps) -> (dx, dw, db)
    rms_norm fwd    (x, w, eps)                 rms_norm bwd     (x, w, dy, eps) -> (dx, dw)
    add_rms_norm fwd (x, r, w, eps) -> (y, x + r)
                                                add_rms_norm bwd (x, r, w, dy, dsum, eps) -> (dx, dw)

Backward passes call the library's backward function directly, as the autograd engine would (like
the tjit and aten cases: tjit.layer_norm_backward, aten.native_layer_norm_backward), with the saved
statistics computed once by the forward when the call is bound, outside the timed call.

What is called (source files inside the wheels flag_gems-5.0.2 and liger_kernel-0.8.5):

    flaggems  (import flag_gems.ops as fg)
      add fwd         fg.add(x, y)                                          flag_gems/ops/add.py
      sum fwd         fg.sum(x): full reduction of any shape (1-D included), two kernels: partial
                      sums of ~sqrt(n) elements each (stored in x's dtype), then their sum
                                                                            flag_gems/ops/sum.py
      softmax fwd     fg.softmax(x, -1)                                     flag_gems/ops/softmax.py
      softmax bwd     fg.softmax_backward(dy, y, -1, input_dtype)           flag_gems/ops/softmax.py
                      (aten._softmax_backward_data's signature; the kernel is autotuned per M, N)
      layer_norm fwd  fg.layer_norm(x, [n], w, b, eps)[0]: returns (y, mean, rstd), mean and rstd
                      in x's dtype                                          flag_gems/ops/layernorm.py
      layer_norm bwd  fg.layer_norm_backward(dy, x, [n], mean, rstd, w, b, [True, True, True])
                      (aten.native_layer_norm_backward's signature), mean/rstd from fg.layer_norm
                                                                            flag_gems/ops/layernorm.py
    liger  (liger_kernel.ops.softmax, liger_kernel.ops.layer_norm)
      softmax fwd     LigerSoftmaxFunction.apply(x)                         liger_kernel/ops/softmax.py
      softmax bwd     _softmax_backward(dy, y, BLOCK_SIZE, num_warps, multi_block_launch), what
                      LigerSoftmaxFunction.backward calls, with the settings its forward keeps
                      (calculate_settings(n), n > BLOCK_SIZE)               liger_kernel/ops/softmax.py
      layer_norm fwd  LigerLayerNormFunction.apply(x, w, b, eps) (also stores fp32 mean/rstd)
                                                                            liger_kernel/ops/layer_norm.py
      layer_norm bwd  layer_norm_backward(dy, x, w, b, mean, rstd), what LigerLayerNormFunction
                      .backward calls, mean/rstd from layer_norm_forward(x, w, b, eps)
                                                                            liger_kernel/ops/layer_norm.py
      no add and no sum; softmax and layer_norm up to 65536 columns (calculate_settings raises
      above: one block holds a whole row)

rms_norm and add_rms_norm (the residual add fused in) call the library's autograd Function; their
backward passes re-run the backward of a graph recorded once when the call is bound
(torch.autograd.grad(..., retain_graph=True)), as the engine would:

    liger     rms_norm      liger_kernel.ops.rms_norm.LigerRMSNormFunction.apply(x, w, eps, 0.0,
                            "llama", False) (in_place False: its default writes dx over dy)
              add_rms_norm  liger_kernel.ops.fused_add_rms_norm.LigerFusedAddRMSNormFunction
                            .apply(x, r, w, eps) where the installed release has it
    flaggems  rms_norm      flag_gems.ops.rms_norm(x, [n], w, eps) (backward where it records a graph)
              add_rms_norm  not measured: flag_gems.ops.fused_add_rms_norm works in place (overwrites
                            input and residual)

flag_gems.enable() is never called: it would register FlagGems' kernels as aten's CUDA kernels
and so replace the aten column. Importing flag_gems registers nothing with aten (enable() does),
but it detects the device vendor (GEMS_VENDOR, else a vendor query command per vendor, e.g.
nvidia-smi; peers.py sets GEMS_VENDOR=nvidia for CUDA builds of torch when unset), queries the
device's capability for arch-specific configs, and keeps generated code and tuned configs under
~/.flaggems (FLAGGEMS_CACHE_DIR).
"""

import importlib
import importlib.metadata
import importlib.util
import os

import torch

PEERS = ("flaggems", "liger")
MODULES = {"flaggems": "flag_gems", "liger": "liger_kernel"}  # import names, also the distributions'
LIGER_MAX_COLS = 65536  # liger_kernel.ops.utils.calculate_settings: MAX_FUSED_SIZE


def _first_error_line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0].strip() if text else ''}"[:300]


def _version(name):
    try:
        return importlib.metadata.version(MODULES[name])
    except Exception:  # noqa: BLE001 - not installed, or no metadata
        return None


def _installed(name):
    try:
        return importlib.util.find_spec(MODULES[name]) is not None
    except Exception:  # noqa: BLE001 - a broken parent package, an odd sys.path entry
        return False


class Peer:
    """One library: available (bool), note (why absent, else None), version, ops {(op, pass): binder},
    op_notes {(op, pass): why that op is not measured}, calls {(op, pass): what is called}."""

    def __init__(self, name, version=None, note=None):
        self.name = name
        self.version = version
        self.note = note
        self.ops = {}
        self.op_notes = {}
        self.calls = {}
        self.max_cols = {}  # {op: most columns it runs}
        self.max_cols_why = None

    @property
    def available(self):
        return self.note is None

    def why_not(self, op, pas, shape=None):
        """None when the peer runs (op, pas) at this shape, else the reason it does not."""
        if not self.available:
            return self.note
        if (op, pas) not in self.ops:
            return self.op_notes.get((op, pas), f"no {op} {pas} in {MODULES[self.name]}")
        limit = self.max_cols.get(op)
        if limit is not None and shape is not None and len(shape) > 1 and shape[-1] > limit:
            return f"more than {limit} columns ({self.max_cols_why})"
        return None

    def bind(self, op, pas, *inputs):
        """Zero-argument callable running (op, pas) on inputs (see the module docstring)."""
        return self.ops[(op, pas)](*inputs)

    def describe(self):
        return {"available": self.available, "version": self.version, "note": self.note,
                "ops": [f"{op} {pas}" for op, pas in self.ops],
                "calls": {f"{op} {pas}": text for (op, pas), text in self.calls.items()},
                "missing": {f"{op} {pas}": text for (op, pas), text in self.op_notes.items()},
                "max_cols": dict(self.max_cols)}


def _flaggems(peer):
    if torch.version.cuda and not torch.version.hip:
        # Without GEMS_VENDOR, FlagGems' DeviceDetector runs one query command per vendor it knows.
        os.environ.setdefault("GEMS_VENDOR", "nvidia")
    import flag_gems
    fg = importlib.import_module("flag_gems.ops")
    if getattr(flag_gems, "current_work_registrar", None) is not None:
        peer.note = "flag_gems.enable() was called in this process: aten runs FlagGems' kernels; peer not used"
        return

    def need(fn):
        return getattr(fg, fn, None)

    add, total, softmax, softmax_bwd = need("add"), need("sum"), need("softmax"), need("softmax_backward")
    ln, ln_bwd = need("layer_norm"), need("layer_norm_backward")
    if add:
        peer.ops[("add", "fwd")] = lambda x, y: (lambda: add(x, y))
        peer.calls[("add", "fwd")] = "flag_gems.ops.add(x, y)"
    if total:
        peer.ops[("sum", "fwd")] = lambda x: (lambda: total(x))
        peer.calls[("sum", "fwd")] = "flag_gems.ops.sum(x)"
    if softmax:
        peer.ops[("softmax", "fwd")] = lambda x: (lambda: softmax(x, -1))
        peer.calls[("softmax", "fwd")] = "flag_gems.ops.softmax(x, -1)"
    if softmax_bwd:
        peer.ops[("softmax", "bwd")] = lambda dy, y, dtype: (lambda: softmax_bwd(dy, y, -1, dtype))
        peer.calls[("softmax", "bwd")] = "flag_gems.ops.softmax_backward(dy, y, -1, input_dtype)"
    if ln:
        peer.ops[("layer_norm", "fwd")] = lambda x, w, b, eps: (lambda: ln(x, [x.shape[-1]], w, b, eps)[0])
        peer.calls[("layer_norm", "fwd")] = "flag_gems.ops.layer_norm(x, [n], w, b, eps)[0]"
    if ln and ln_bwd:

        def bind_bwd(x, w, b, dy, eps):
            n = x.shape[-1]
            with torch.no_grad():
                _, mean, rstd = ln(x, [n], w, b, eps)
            return lambda: ln_bwd(dy, x, [n], mean, rstd, w, b, [True, True, True])

        peer.ops[("layer_norm", "bwd")] = bind_bwd
        peer.calls[("layer_norm", "bwd")] = ("flag_gems.ops.layer_norm_backward(dy, x, [n], mean, rstd, w, b, "
                                             "[True, True, True]), mean/rstd from flag_gems.ops.layer_norm")
    _flaggems_rms(peer, fg)
    for key, fn in ((("add", "fwd"), "add"), (("sum", "fwd"), "sum"), (("softmax", "fwd"), "softmax"),
                    (("softmax", "bwd"), "softmax_backward"), (("layer_norm", "fwd"), "layer_norm"),
                    (("layer_norm", "bwd"), "layer_norm_backward")):
        if key not in peer.ops:
            peer.op_notes[key] = f"flag_gems.ops has no {fn}"


def _liger(peer):
    sm = importlib.import_module("liger_kernel.ops.softmax")
    ln = importlib.import_module("liger_kernel.ops.layer_norm")
    from liger_kernel.ops.utils import calculate_settings

    peer.op_notes[("add", "fwd")] = "Liger-Kernel has no add"
    peer.op_notes[("sum", "fwd")] = "Liger-Kernel has no sum"
    peer.max_cols = {"softmax": LIGER_MAX_COLS, "layer_norm": LIGER_MAX_COLS, "rms_norm": LIGER_MAX_COLS,
                     "add_rms_norm": LIGER_MAX_COLS}
    peer.max_cols_why = "Liger-Kernel keeps a row in one block: liger_kernel.ops.utils.calculate_settings raises above"

    peer.ops[("softmax", "fwd")] = lambda x: (lambda: sm.LigerSoftmaxFunction.apply(x))
    peer.calls[("softmax", "fwd")] = "liger_kernel.ops.softmax.LigerSoftmaxFunction.apply(x)"

    def bind_softmax_bwd(dy, y, dtype):
        # The launch settings LigerSoftmaxFunction.forward keeps in ctx for its backward.
        n = y.shape[-1]
        block, warps = calculate_settings(n)
        return lambda: sm._softmax_backward(dy, y, block, warps, n > block)

    peer.ops[("softmax", "bwd")] = bind_softmax_bwd
    peer.calls[("softmax", "bwd")] = ("liger_kernel.ops.softmax._softmax_backward(dy, y, BLOCK_SIZE, num_warps, "
                                      "multi_block_launch), settings from calculate_settings(n) as the forward")

    peer.ops[("layer_norm", "fwd")] = lambda x, w, b, eps: (lambda: ln.LigerLayerNormFunction.apply(x, w, b, eps))
    peer.calls[("layer_norm", "fwd")] = "liger_kernel.ops.layer_norm.LigerLayerNormFunction.apply(x, w, b, eps)"

    def bind_ln_bwd(x, w, b, dy, eps):
        with torch.no_grad():
            _, x2d, mean, rstd, _, _ = ln.layer_norm_forward(x, w, b, eps)
        return lambda: ln.layer_norm_backward(dy, x2d, w, b, mean, rstd)

    _liger_rms(peer)
    peer.ops[("layer_norm", "bwd")] = bind_ln_bwd
    peer.calls[("layer_norm", "bwd")] = ("liger_kernel.ops.layer_norm.layer_norm_backward(dy, x, w, b, mean, rstd), "
                                         "mean/rstd from layer_norm_forward(x, w, b, eps)")


def _autograd_rms_binders(peer, op, forward, call_text):
    """(op, fwd) and (op, bwd) of a differentiable `forward(x, [r,] w, eps)` returning y (rms_norm)
    or (y, x + r) (add_rms_norm); bwd re-runs the backward of a graph recorded at bind time."""
    residual = op == "add_rms_norm"
    peer.ops[(op, "fwd")] = lambda *inputs: (lambda: forward(*inputs))
    peer.calls[(op, "fwd")] = call_text

    def bind_bwd(*inputs):
        if residual:
            x, r, w, dy, ds, eps = inputs
            leaves = [t.detach().requires_grad_() for t in (x, r, w)]
            y, v = forward(*leaves, eps)
            outs, grads, wrt = [y, v], [dy, ds], (leaves[0], leaves[2])
        else:
            x, w, dy, eps = inputs
            leaves = [t.detach().requires_grad_() for t in (x, w)]
            outs, grads, wrt = [forward(*leaves, eps)], [dy], tuple(leaves)
        if not outs[0].requires_grad:
            raise RuntimeError(f"{call_text} records no autograd graph")
        return lambda: torch.autograd.grad(outs, wrt, grads, retain_graph=True)

    peer.ops[(op, "bwd")] = bind_bwd
    peer.calls[(op, "bwd")] = f"torch.autograd.grad through {call_text} (graph recorded once, retain_graph=True)"


def _flaggems_rms(peer, fg):
    rms = getattr(fg, "rms_norm", None)
    if rms is None:
        peer.op_notes[("rms_norm", "fwd")] = peer.op_notes[("rms_norm", "bwd")] = "flag_gems.ops has no rms_norm"
    else:
        _autograd_rms_binders(peer, "rms_norm", lambda x, w, eps: rms(x, [x.shape[-1]], w, eps),
                              "flag_gems.ops.rms_norm(x, [n], w, eps)")
    why = "flag_gems.ops.fused_add_rms_norm works in place (overwrites input and residual): not comparable"
    peer.op_notes[("add_rms_norm", "fwd")] = peer.op_notes[("add_rms_norm", "bwd")] = why


def _liger_rms(peer):
    try:
        rms = importlib.import_module("liger_kernel.ops.rms_norm")
        # in_place=False: by default its backward writes dx over dy, the caller's gradient
        _autograd_rms_binders(peer, "rms_norm",
                              lambda x, w, eps: rms.LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False),
                              "liger_kernel.ops.rms_norm.LigerRMSNormFunction.apply(x, w, eps, offset=0.0, "
                              "casting_mode='llama', in_place=False)")
    except Exception as exc:  # noqa: BLE001 - an older release: the other ops still run
        peer.op_notes[("rms_norm", "fwd")] = peer.op_notes[("rms_norm", "bwd")] = _first_error_line(exc)
    try:
        fused = importlib.import_module("liger_kernel.ops.fused_add_rms_norm")
        _autograd_rms_binders(peer, "add_rms_norm",
                              lambda x, r, w, eps: fused.LigerFusedAddRMSNormFunction.apply(x, r, w, eps),
                              "liger_kernel.ops.fused_add_rms_norm.LigerFusedAddRMSNormFunction.apply(x, r, w, eps)")
    except Exception as exc:  # noqa: BLE001 - releases before the fused op
        peer.op_notes[("add_rms_norm", "fwd")] = peer.op_notes[("add_rms_norm", "bwd")] = _first_error_line(exc)


_LOADERS = {"flaggems": _flaggems, "liger": _liger}
_CACHE = {}


def load_peer(name, device):
    """A Peer for `name` on `device`; never raises (an import error becomes its note)."""
    version = _version(name)
    module = MODULES[name]
    installed = _installed(name)
    if device != "cuda":
        # Not imported: both libraries are CUDA-only (FlagGems would look for a device at import).
        state = f"{module} {version} installed" if installed and version else \
            f"{module} installed" if installed else f"{module} not installed"
        return Peer(name, version, f"skipped on {device}: a CUDA-only Triton library ({state})")
    if not installed:
        return Peer(name, version, f"{module} not installed")
    peer = Peer(name, version)
    try:
        _LOADERS[name](peer)
    except (Exception, SystemExit) as exc:  # whatever the import does, the suite goes on
        peer = Peer(name, version, f"import failed: {_first_error_line(exc)}")
    return peer


def load(device):
    """{name: Peer} for every peer, imported at most once per process and device."""
    if device not in _CACHE:
        _CACHE[device] = {name: load_peer(name, device) for name in PEERS}
    return _CACHE[device]


def describe(peers):
    return {name: peer.describe() for name, peer in peers.items()}
