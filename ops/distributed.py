"""DTensor sharding strategies for tjit's operators (`torch.distributed.tensor`).

DTensor runs an operator on each rank's local shard after choosing, from the operator's sharding
strategies, the placements its inputs must have and its outputs will have. tjit's operators
register theirs here, so tensor and sequence parallel models (`parallelize_module`,
`SequenceParallel`) call `tjit.layer_norm`, `tjit.softmax`, ... on sharded DTensors without
gathering them:

- `add`: pointwise with broadcasting (a dim sharded in the output is sharded in each input that has
  it, replicated where it is broadcast); Partial inputs stay Partial where the sum allows it.
- `sum`: a kept dim keeps its sharding; a sharded reduced dim makes the result Partial("sum").
- `softmax` and the norms: sharded on any dim but the normalised ones (softmax's `dim`, the trailing
  `normalized_shape` dims); weight and bias replicated; their gradients Partial("sum") over the
  sharded rows, as aten's rules for `native_layer_norm_backward` have them. Backward operators are
  linear in the incoming gradients, which may therefore be Partial.

One line of `STRATEGIES` per operator. Registration goes through DTensor's sharding propagator
(`register_op_strategy`, the call `torch.distributed.tensor.experimental.register_sharding` makes)
with schema information of our own: register_sharding hashes no list argument (sum's `dim`,
`normalized_shape`) into its cache key, and would reuse one call's placements for another.

`import tjit` registers them when `torch.distributed.tensor` is imported (at once if it already is;
DTensor's import is heavy, so tjit does not import it itself); nothing happens where
torch.distributed is unavailable. `register()` registers explicitly and returns the operators.
"""

import importlib.abc
import importlib.util
import sys
import warnings

import torch

_DTENSOR_MODULE = "torch.distributed.tensor"
# Tensor arguments that are per-feature parameters (shape normalized_shape): replicated, and the
# gradient outputs named after them are Partial over sharded rows.
_PARAMETERS = ("weight", "bias")


class _Call:
    """One call's arguments by schema name (defaults filled in) and its tensor arguments in the
    order DTensor lists their strategies (positional, then keyword)."""

    def __init__(self, op_schema):
        schema = op_schema.op._schema
        self.values = {}
        for i, argument in enumerate(schema.arguments):
            if i < len(op_schema.args_schema):
                self.values[argument.name] = op_schema.args_schema[i]
            elif argument.name in op_schema.kwargs_schema:
                self.values[argument.name] = op_schema.kwargs_schema[argument.name]
            elif argument.has_default_value():
                self.values[argument.name] = argument.default_value
            else:
                self.values[argument.name] = None
        from torch.distributed.tensor._op_schema import OpStrategy

        positional = [a.name for a in schema.arguments[:len(op_schema.args_schema)]]
        keyword = [name for name in op_schema.kwargs_schema]
        self.tensors = [n for n in positional + keyword if isinstance(self.values.get(n), OpStrategy)]
        self.outputs = len(schema.returns)

    def ndim(self, name):
        return self.values[name].ndim

    def shape(self, name):
        return tuple(self.values[name].shape)


def _placements():
    from torch.distributed.tensor import Partial, Replicate, Shard

    return Partial, Replicate, Shard


# --- rules: each returns (output placements, {tensor argument: placement}) pairs for one mesh dim.


def _add(call):
    """self + alpha * other, broadcasting."""
    Partial, Replicate, Shard = _placements()
    out_shape = torch.broadcast_shapes(*(call.shape(n) for n in call.tensors))
    rules = [([Replicate()], {n: Replicate() for n in call.tensors})]
    for d in range(len(out_shape)):
        inputs = {}
        for n in call.tensors:
            shape = call.shape(n)
            own = d - (len(out_shape) - len(shape))
            broadcast = own < 0 or (shape[own] == 1 and out_shape[d] != 1)
            inputs[n] = Replicate() if broadcast else Shard(own)
        rules.append(([Shard(d)], inputs))
    # Linear: sums of partial sums (averages of averages) add up. A replicated term added to each
    # rank's average, maximum or minimum is added once; to a partial sum it would be added per rank.
    # (A replicated `other` with a partial maximum would not do: alpha may be negative.)
    for kind in ("sum", "avg"):
        rules.append(([Partial(kind)], {"self": Partial(kind), "other": Partial(kind)}))
    for kind in ("avg", "max", "min"):
        rules.append(([Partial(kind)], {"self": Partial(kind), "other": Replicate()}))
    rules.append(([Partial("avg")], {"self": Replicate(), "other": Partial("avg")}))
    return rules


def _sum(call):
    """sum over `dim` (every dim when None or empty), `keepdim`."""
    Partial, Replicate, Shard = _placements()
    ndim = call.ndim("self")
    dims = call.values["dim"]
    reduced = set(range(ndim)) if not dims else {d % max(ndim, 1) for d in dims}
    keepdim = bool(call.values["keepdim"])
    rules = [([Replicate()], {"self": Replicate()})]
    for d in range(ndim):
        if d in reduced:
            rules.append(([Partial("sum")], {"self": Shard(d)}))
        else:
            kept = d if keepdim else d - sum(1 for r in reduced if r < d)
            rules.append(([Shard(kept)], {"self": Shard(d)}))
    for kind in ("sum", "avg"):  # a sum of partial sums (averages) is their partial sum (average)
        rules.append(([Partial(kind)], {"self": Partial(kind)}))
    return rules


def _softmax_dim(call, ndim):
    return {call.values["dim"] % max(ndim, 1)}


def _normalized_dims(call, ndim):
    return set(range(ndim - len(call.values["normalized_shape"]), ndim))


def _rows(normalised, outputs=None, linear_in_grads=False):
    """Operators on rows over the `normalised` dims (softmax's dim, a norm's trailing dims): every
    tensor but the parameters shares the leading dims of the first tensor argument (its shape, or
    those dims only: mean, rstd), so they shard together on any other dim.

    `outputs` names each output: "rows" (sharded as the rows) or a parameter ("weight", "bias"):
    that parameter's gradient, Partial("sum") over sharded rows, None where the parameter is absent
    or `output_mask` leaves it out. Default: every output is rows. `linear_in_grads`: a backward
    operator, linear in its `grad*` arguments, so Partial gradients in give Partial outputs."""

    def rule(call):
        Partial, Replicate, Shard = _placements()
        names = outputs or ("rows",) * call.outputs
        mask = call.values.get("output_mask")

        def output(i, rows_placement, parameter_placement):
            kind = names[i]
            if mask is not None and not mask[i]:
                return None
            if kind == "rows":
                return rows_placement
            return parameter_placement if call.values.get(kind) is not None else None

        first = call.tensors[0]
        ndim = call.ndim(first)
        skip = normalised(call, ndim)
        rules = [([output(i, Replicate(), Replicate()) for i in range(len(names))],
                  {n: Replicate() for n in call.tensors})]
        for d in range(ndim):
            if d in skip:
                continue
            rules.append(([output(i, Shard(d), Partial("sum")) for i in range(len(names))],
                          {n: Replicate() if n in _PARAMETERS else Shard(d) for n in call.tensors}))
        if linear_in_grads:
            rules.append(([output(i, Partial("sum"), Partial("sum")) for i in range(len(names))],
                          {n: Partial("sum") if n.startswith("grad") else Replicate() for n in call.tensors}))
        return rules

    rule.outputs = outputs
    return rule


# One line per operator; an operator this build lacks is left out.
STRATEGIES = {
    "add": _add,
    "sum": _sum,
    "softmax": _rows(_softmax_dim),
    "softmax_backward": _rows(_softmax_dim, linear_in_grads=True),
    "layer_norm": _rows(_normalized_dims),
    "layer_norm_forward": _rows(_normalized_dims),
    "layer_norm_backward": _rows(_normalized_dims, ("rows", "weight", "bias"), linear_in_grads=True),
    "rms_norm": _rows(_normalized_dims),
    "rms_norm_forward": _rows(_normalized_dims),
    "add_rms_norm": _rows(_normalized_dims),
    "add_rms_norm_forward": _rows(_normalized_dims),
    "rms_norm_backward": _rows(_normalized_dims, ("rows", "weight"), linear_in_grads=True),
}


def _strategy(rule, op_schema):
    from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy

    call = _Call(op_schema)
    single_dim = [list(outs) + [inputs[n] for n in call.tensors] for outs, inputs in rule(call)]
    return expand_to_full_mesh_op_strategy(op_schema.get_mesh_from_args(), op_schema, single_dim,
                                           input_index=call.outputs)


def _schema_problem(name, rule):
    """Why the schema of torch.ops.tjit.<name> does not fit its rule, or None."""
    schema = getattr(torch.ops.tjit, name).default._schema
    arguments = {a.name for a in schema.arguments}
    outputs = getattr(rule, "outputs", None)
    if outputs is not None and len(outputs) != len(schema.returns):
        return f"its rule names {len(outputs)} outputs but the schema has {len(schema.returns)}"
    for needed in [o for o in outputs or () if o != "rows"]:
        if needed not in arguments:
            return f"its rule names the gradient of `{needed}`, which is no argument"
    return None


_registered = []


def register():
    """Registers every operator's strategy with DTensor (idempotent); returns their names."""
    if _registered:
        return list(_registered)
    from functools import partial

    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._op_schema import RuntimeSchemaInfo

    propagator = DTensor._op_dispatcher.sharding_propagator
    for name, rule in STRATEGIES.items():
        if not hasattr(torch.ops.tjit, name):
            continue
        problem = _schema_problem(name, rule)
        if problem is not None:
            warnings.warn(f"tjit: no DTensor sharding strategy for tjit::{name}: {problem} "
                          "(ops/distributed.py)", stacklevel=2)
            continue
        op = getattr(torch.ops.tjit, name).default
        # Every non-tensor argument (dims, shapes, masks, dtypes) decides placements: all of them,
        # from the second argument on, and every keyword-only one, go into the cache key.
        keyword_only = [a.name for a in op._schema.arguments if a.kwarg_only]
        propagator.register_op_strategy(op, partial(_strategy, rule),
                                        RuntimeSchemaInfo(static_argnum=1, static_kwargkey=keyword_only or None))
        _registered.append(name)
    return list(_registered)


def _register_quietly():
    # Runs inside someone's `import torch.distributed.tensor`: a failure must not break that import.
    try:
        register()
    except Exception as e:  # noqa: BLE001  (reported, then DTensor works without tjit's strategies)
        warnings.warn(f"tjit: DTensor sharding strategies were not registered: {type(e).__name__}: {e}",
                      stacklevel=2)


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Wraps the loader of torch.distributed.tensor so that, once the module has run, tjit's
    strategies are registered. Leaves sys.meta_path at its first use."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _DTENSOR_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            _register_quietly()

        spec.loader.exec_module = exec_module
        return spec


def install():
    """Registers now if torch.distributed.tensor is loaded, else when it is imported."""
    if not torch.distributed.is_available():
        return
    if _DTENSOR_MODULE in sys.modules:
        _register_quietly()
    elif not any(isinstance(f, _RegisterAfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())
