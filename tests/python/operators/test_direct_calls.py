"""The direct path of tjit's Python functions (tjit._C, straight to the C++ operators) and the
cases where they take torch.ops.tjit.* instead: it is taken for plain arguments and gives what
torch.ops gives; a TorchFunctionMode and a tensor subclass see every call; a TorchDispatchMode sees
the op on the direct path too; torch.compile, torch.export and FX graphs hold torch.ops.tjit.*;
vmap and gradcheck agree with aten; arguments of other types, autocast and errors behave exactly
as through torch.ops."""

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import random_tensor
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import tjit
from tjit import _C

# Every operator tjit registers, from its C++ library: a new one fails test_calls_cover_every_operator
# until calls() and all_ops() take it.
NAMES = list(_C.operator_names)


def calls(device, dtype=torch.float32):
    """{name: (args as the Python function takes them positionally, _C's positional args)} on fresh
    random inputs of odd sizes."""
    x = random_tensor((3, 2, 11), dtype, device)
    y = random_tensor((11, ), dtype, device)
    w = random_tensor((11, ), dtype, device)
    b = random_tensor((11, ), dtype, device)
    out = torch.softmax(x, -1)
    _, mean, rstd = torch.ops.tjit.layer_norm_forward(x, [11], w, b, 1e-5)
    _, rms_rstd = torch.ops.tjit.rms_norm_forward(x, [11], w, 1e-5)
    r = random_tensor((3, 2, 11), dtype, device)
    return {
        "add": ((x, y), (x, y, 2)),
        "sum": ((x, [0, 2], True), (x, [0, 2], True, None)),
        "softmax": ((x, 1), (x, 1, None)),
        "softmax_backward": ((y.expand(3, 2, 11), out, -1, dtype), (y.expand(3, 2, 11), out, -1, dtype)),
        "layer_norm": ((x, [11], w, b), (x, [11], w, b, 1e-5)),
        "layer_norm_forward": ((x, (11, ), w, None, 0.01), (x, (11, ), w, None, 0.01)),
        "layer_norm_backward": ((x, x, [11], mean, rstd, w, b, [True, True, True]),
                                (x, x, [11], mean, rstd, w, b, [True, True, True])),
        "rms_norm": ((x, [11], w), (x, [11], w, None)),
        "rms_norm_forward": ((x, (11, ), w, 0.01), (x, (11, ), w, 0.01)),
        "rms_norm_backward": ((x, x, [11], rms_rstd, w, [True, True], r), (x, x, [11], rms_rstd, w, [True, True], r)),
        "add_rms_norm": ((x, r, [11], w), (x, r, [11], w, None)),
        "add_rms_norm_forward": ((x, r, (11, ), None, 0.01), (x, r, (11, ), None, 0.01)),
    }


def as_tuple(value):
    return value if isinstance(value, tuple) else (value, )


def assert_same(got, want):
    """Bit for bit, with shape, stride and dtype (None for None)."""
    for g, w in zip(as_tuple(got), as_tuple(want), strict=True):
        if w is None:
            assert g is None
            continue
        assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride() and g.device == w.device
        assert torch.equal(g, w)


def kwargs_for(name):
    return {"alpha": 2} if name == "add" else {}


@pytest.mark.parametrize("name", NAMES)
def test_direct_path_taken_and_same_as_torch_ops(device, name):
    args, c_args = calls(device)[name]
    direct = getattr(_C, name)(*c_args)
    assert direct is not NotImplemented, f"_C.{name} fell back for plain arguments"
    assert_same(direct, getattr(torch.ops.tjit, name)(*args, **kwargs_for(name)))
    assert_same(getattr(tjit, name)(*args, **kwargs_for(name)), direct)


def test_direct_path_takes_parameters_and_sizes(device):
    """nn.Parameter (a subclass without its own __torch_function__) and torch.Size stay direct."""
    x = random_tensor((4, 9), torch.float32, device)
    w = torch.nn.Parameter(random_tensor((9, ), torch.float32, device))
    b = torch.nn.Parameter(random_tensor((9, ), torch.float32, device))
    got = _C.layer_norm(x, x.shape[1:], w, b, 1e-5)
    assert got is not NotImplemented
    torch.testing.assert_close(got, F.layer_norm(x, [9], w, b, 1e-5), rtol=1e-5, atol=1e-5)
    assert got.requires_grad  # autograd recorded through the dispatcher, as from C++
    assert _C.sum(x, (0, 1), False, torch.float64) is not NotImplemented
    assert _C.add(x, w, 0.5) is not NotImplemented


class Recorder(TorchFunctionMode):

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


def op_names(funcs):
    return {str(f).split("(")[0].removesuffix(".default") for f in funcs}


@pytest.mark.parametrize("name", NAMES)
def test_torch_function_mode_sees_call(device, name):
    args, c_args = calls(device)[name]
    want = getattr(torch.ops.tjit, name)(*args, **kwargs_for(name))
    with Recorder() as mode:
        assert getattr(_C, name)(*c_args) is NotImplemented
        got = getattr(tjit, name)(*args, **kwargs_for(name))
    assert f"tjit.{name}" in op_names(mode.seen), mode.seen
    assert_same(got, want)


class Tagged(torch.Tensor):
    """A tensor subclass that records the functions called on it."""
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("name", NAMES)
def test_tensor_subclass_sees_call(device, name):
    args, c_args = calls(device)[name]
    want = getattr(torch.ops.tjit, name)(*args, **kwargs_for(name))
    tagged = (args[0].as_subclass(Tagged), ) + args[1:]
    Tagged.seen = []
    assert getattr(_C, name)(tagged[0], *c_args[1:]) is NotImplemented
    got = getattr(tjit, name)(*tagged, **kwargs_for(name))
    assert f"tjit.{name}" in op_names(Tagged.seen), Tagged.seen
    assert isinstance(as_tuple(got)[0], Tagged)
    assert_same(tuple(t.as_subclass(torch.Tensor) if t is not None else None for t in as_tuple(got)), as_tuple(want))


def test_dispatch_mode_sees_direct_call(device):
    """A TorchDispatchMode sits in the dispatcher, which the direct path goes through too."""

    class DispatchRecorder(TorchDispatchMode):

        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(func)
            return func(*args, **(kwargs or {}))

    for name, (args, c_args) in calls(device).items():
        with DispatchRecorder() as mode:
            got = getattr(_C, name)(*c_args)
        assert got is not NotImplemented
        assert getattr(torch.ops.tjit, name).default in mode.seen, (name, mode.seen)


def graph_targets(gm):
    return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}


def all_ops(x, y, w, b):
    """Every function once, on (rows, 11) inputs."""
    h = tjit.layer_norm(tjit.add(x, y, alpha=0.5), [11], w, b)
    out, mean, rstd = tjit.layer_norm_forward(h, [11], w, b, 1e-5)
    dx, dw, db = tjit.layer_norm_backward(out, h, [11], mean, rstd, w, b, [True, True, True])
    s = tjit.softmax(dx, -1)
    normed, summed = tjit.add_rms_norm(tjit.rms_norm(s, [11], w), h, [11], w)
    y2, residual, rms_rstd = tjit.add_rms_norm_forward(normed, summed, [11], w)
    gx, gw = tjit.rms_norm_backward(y2, residual, [11], rms_rstd, w, [True, True], normed)
    _, rstd2 = tjit.rms_norm_forward(gx, [11], w)
    return tjit.sum(tjit.softmax_backward(s, s, -1, torch.float32), [0]) + dw + db + gw + tjit.sum(rstd2) * b


def graph_inputs(device):
    return tuple(random_tensor(shape, torch.float32, device) for shape in ((5, 11), (11, ), (11, ), (11, )))


def test_calls_cover_every_operator():
    missing = sorted(set(NAMES) - set(calls("cpu")))
    assert not missing, f"operators without a call in calls(): {missing} (add one, and to all_ops)"


def assert_every_op(targets):
    for name in NAMES:
        assert any(f"tjit.{name}" in t for t in targets), f"tjit.{name} missing from the graph: {targets}"


def test_compile_graph_holds_ops(device):
    torch._dynamo.reset()
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    inputs = graph_inputs(device)
    got = torch.compile(all_ops, fullgraph=True, backend=capture)(*inputs)  # fullgraph: no graph break
    assert len(graphs) == 1
    assert_every_op(graph_targets(graphs[0]))
    torch.testing.assert_close(got, all_ops(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strict", [True, False])
def test_export_graph_holds_ops(strict):

    class Model(torch.nn.Module):

        def forward(self, x, y, w, b):
            return all_ops(x, y, w, b)

    inputs = graph_inputs("cpu")
    program = torch.export.export(Model(), inputs, strict=strict)
    assert_every_op(graph_targets(program.graph_module))
    torch.testing.assert_close(program.module()(*inputs), all_ops(*inputs), rtol=1e-5, atol=1e-5)


def test_fx_symbolic_trace_holds_ops():
    gm = torch.fx.symbolic_trace(all_ops)
    assert_every_op(graph_targets(gm))
    inputs = graph_inputs("cpu")
    torch.testing.assert_close(gm(*inputs), all_ops(*inputs), rtol=1e-5, atol=1e-5)


def test_vmap_matches_aten(device):
    x = random_tensor((4, 3, 13), torch.float32, device)
    y = random_tensor((4, 13), torch.float32, device)
    w = random_tensor((13, ), torch.float32, device)

    def probe(a):
        assert _C.softmax(a, -1, None) is NotImplemented  # transforms are active: torch.ops takes it
        return tjit.softmax(a, -1)

    cases = [
        (probe, lambda a: torch.softmax(a, -1), (x, )),
        (lambda a, c: tjit.add(a, c, alpha=3), lambda a, c: torch.add(a, c, alpha=3), (x, y)),
        (lambda a: tjit.sum(a, 1), lambda a: torch.sum(a, 1), (x, )),
        (lambda a: tjit.layer_norm(a, [13], w), lambda a: F.layer_norm(a, [13], w), (x, )),
        (lambda a: tjit.rms_norm(a, [13], w), lambda a: F.rms_norm(a, [13], w), (x, )),
    ]
    for fn, ref, inputs in cases:
        torch.testing.assert_close(torch.vmap(fn)(*inputs), torch.vmap(ref)(*inputs), rtol=1e-5, atol=1e-5)


def test_functorch_grad_behaves_as_torch_ops():
    """Under torch.func.grad both entry points give torch's gradient (the direct path hands the
    call to torch.ops; test_higher_order covers every transform)."""
    x = random_tensor((3, 5), torch.float64, "cpu")
    want = torch.func.grad(lambda a: (torch.softmax(a, -1)**2).sum())(x)
    for softmax in (tjit.softmax, torch.ops.tjit.softmax):
        got = torch.func.grad(lambda a, softmax=softmax: (softmax(a, -1)**2).sum())(x)
        torch.testing.assert_close(got, want)


def test_gradcheck(device):
    x = random_tensor((3, 7), torch.float64, device).requires_grad_()
    y = random_tensor((7, ), torch.float64, device).requires_grad_()
    w = random_tensor((7, ), torch.float64, device).requires_grad_()
    torch.autograd.gradcheck(lambda a, c: tjit.add(a, c, alpha=-1.5), (x, y))
    torch.autograd.gradcheck(lambda a: tjit.sum(a, 1, True), (x, ))
    torch.autograd.gradcheck(lambda a: tjit.softmax(a, 0), (x, ))
    torch.autograd.gradcheck(lambda a, c, d: tjit.layer_norm(a, [7], c, d), (x, w, y))


def test_autocast_same_as_torch_ops(device):
    """tjit's ops have no autocast rule: under autocast both entry points run in the inputs' dtype."""
    for name, (args, _) in calls(device).items():
        with torch.autocast(device, dtype=torch.bfloat16):
            got = getattr(tjit, name)(*args, **kwargs_for(name))
            want = getattr(torch.ops.tjit, name)(*args, **kwargs_for(name))
        assert_same(got, want)


def test_other_argument_types_take_torch_ops(device):
    """Values torch.ops converts (NumPy numbers, a 0-dim tensor for an int, an int for a bool, a
    bool alpha) are handed to it: same result as torch.ops."""
    x = random_tensor((4, 6), torch.float32, device)
    cases = [
        ("sum", (x, [np.int64(1)]), (x, [np.int64(1)], False, None)),
        ("sum", (x, 1, 1), (x, 1, 1, None)),
        ("softmax", (x, np.int32(0)), (x, np.int32(0), None)),
        ("softmax", (x, torch.tensor(1)), (x, torch.tensor(1), None)),
        ("add", (x, x), (x, x, np.float64(2.5))),
        ("add", (x, 3), (x, 3, np.float64(2.5))),
        ("layer_norm", (x, [np.int64(6)]), (x, [np.int64(6)], None, None, 1e-5)),
        ("layer_norm", (x, [6], None, None, np.float64(1e-3)), (x, [6], None, None, np.float64(1e-3))),
    ]
    for name, args, c_args in cases:
        assert getattr(_C, name)(*c_args) is NotImplemented, name
        kwargs = {"alpha": np.float64(2.5)} if name == "add" else {}
        assert_same(getattr(tjit, name)(*args, **kwargs), getattr(torch.ops.tjit, name)(*args, **kwargs))


def raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


def test_errors_same_as_torch_ops(device):
    """Bad input raises the same exception with the same message through both entry points,
    whether the operator rejects it (direct path) or torch.ops does (the function hands it over)."""
    x = random_tensor((4, 5), torch.float32, device)
    bad_calls = [
        ("add", (x, x.to(torch.complex64)), {}),  # the operator's dtype check
        ("add", (x.int(), x.int()), {"alpha": True}),  # a bool alpha for an integer result
        ("add", (x, random_tensor((3, ), torch.float32, device)), {}),  # shapes
        ("add", (x, None), {}),  # an undefined tensor
        ("add", (x.int(), x.int()), {"alpha": 0.5}),  # float alpha for integers
        ("add", (x, "x"), {}),  # not a tensor at all: torch.ops' own error
        ("sum", (x, 5), {}),  # dim out of range
        ("sum", (x, "0"), {}),
        ("softmax", (x.int(), 0), {}),  # unsupported dtype
        ("softmax", (x, 1.5), {}),
        ("softmax_backward", (x, x[:, :2], 1, torch.float32), {}),
        ("layer_norm", (x, [4]), {}),  # normalized_shape not the trailing dims
        ("layer_norm", (x, [5], x), {}),  # weight of the wrong shape
        ("layer_norm_backward", (x, x, [5], x, x, None, None, [True, True]), {}),  # two-entry mask
    ]
    for name, args, kwargs in bad_calls:
        via_function = raised(lambda: getattr(tjit, name)(*args, **kwargs))
        via_torch_ops = raised(lambda: getattr(torch.ops.tjit, name)(*args, **kwargs))
        assert via_function == via_torch_ops, (name, via_function, via_torch_ops)


def test_threads(device):
    """Calls from several threads at once (the direct path releases the GIL around the operator)."""
    inputs = [random_tensor((8, 33), torch.float32, device) for _ in range(4)]
    results = [None] * len(inputs)
    errors = []

    def work(i):
        try:
            for _ in range(3):
                results[i] = tjit.softmax(tjit.add(inputs[i], inputs[i], alpha=0.5), -1)
        except Exception as exc:  # reported below: an assertion in a thread would be lost
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, )) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for x, got in zip(inputs, results):
        torch.testing.assert_close(got, torch.softmax(x * 1.5, -1), rtol=1e-5, atol=1e-5)
