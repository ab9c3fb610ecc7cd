"""tjit's launch plans, as the C++ operators make them (ops/csrc/ops/<op>/plan.h).

``plan(name, dtype=..., device=..., **inputs)`` runs the operator's plan function and returns what it
chose: ``{"kind", "needs_occupancy", "launches": [{"kernel", "grid", "num_warps", "maxnreg",
"launch_pdl", "constexprs", "args"}], "workspace"}``, and for a plan made of measured choices
(tjit/kit/plan_choice.h) ``"candidate"``, ``"source"`` (forced; for a real device whose calls of this
class already chose, where that choice came from: tuned, stored, table or default; else table or
default: a describer never measures) and ``"fitting"`` (every candidate that fits); ``candidate=<index in
tjit._C.plan_candidates(name)>`` asks for that candidate's plan. ``device`` is a torch.device (its real facts),
or a dict of device facts (made-up facts have no ``device_index``: no call ran there), so that any
device's plan can be asked for on any machine::

    tjit.plans.plan("softmax", rows=4096, cols=50257, dtype=torch.bfloat16,
                    device=tjit.plans.device_facts(is_cuda=True, multiprocessors=132, memory_gbps=3350))

Plan names: ``tjit.plans.names()``. Inputs by plan (defaults in brackets):
  softmax, softmax_backward: rows, cols, index64 [0], tuner_available [1], and for ALIGN per tensor
    (forward: out, in; backward: grad_in, grad_out, out) element_sizes, base_offsets [0], row_strides [cols];
  layer_norm_forward: rows, cols, index64, has_weight [1], has_bias [1], tuner_available [1],
    resident_programs_per_sm [0: the plan says needs_occupancy when it needs it];
  layer_norm_backward: rows, cols, want_dx/want_dw/want_db [1], has_weight [1], index64,
    resident_programs_per_sm [0];
  rms_norm_forward: rows, cols, index64, has_residual [0], has_weight [1], candidate [-1: the choice];
  rms_norm_backward: rows, cols, want_dx/want_dw [1], has_weight [1], has_grad_sum [0] (add_rms_norm's),
    index64, resident_programs_per_sm [0];
  sum_rows: rows, cols, index64, candidate [-1]; sum_middle: m, r, k, index64;
  add: numel, same_shape_contiguous [1], collapsed [1], x_max_offset, y_max_offset, has_alpha [0],
    candidate [-1].
"""

import json

import torch

CPU = {"is_cuda": False, "multiprocessors": 4, "memory_gbps": 0, "dependent_launch": False, "capability": 0,
       "device_index": -1}


def _c():
    from tjit import _C
    return _C


def names():
    return list(_c().plan_names())


def device_facts(device=None, *, is_cuda=None, multiprocessors=None, memory_gbps=None, dependent_launch=None,
                 capability=None):
    """The facts plans use for `device` (None: the CPU interpreter's), with any fact overridden."""
    if device is None:
        facts = dict(CPU)
    else:
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        facts = dict(_c().device_facts(str(device)))
    for key, value in (("is_cuda", is_cuda), ("multiprocessors", multiprocessors), ("memory_gbps", memory_gbps),
                       ("dependent_launch", dependent_launch), ("capability", capability)):
        if value is not None:
            facts[key] = value
            facts["device_index"] = -1  # another card than the device's: none of its calls ran there
    if is_cuda and multiprocessors is None and device is None:
        raise ValueError("device_facts: a forced CUDA device needs multiprocessors")
    return facts


def plan(name, *, dtype, device=None, **inputs):
    facts = device if isinstance(device, dict) else device_facts(device)
    values = {k: (list(v) if isinstance(v, (list, tuple)) else int(v)) for k, v in inputs.items()}
    return json.loads(_c().describe_plan(name, values, dtype, facts))
