// tjit._C: the Python functions' direct path to the C++ operators (tjit/operators.h).
//
// torch.ops.tjit.* parses every call against the schema and boxes its arguments; for the small
// tensors tjit is for that costs more than the launch tjit saves. These bindings read the
// arguments tjit's Python functions pass straight from the Python objects and call the same
// dispatcher entry points a C++ program calls, so autograd, autocast and dispatch modes (fake
// tensors, Meta) apply exactly as through torch.ops.
//
// A binding returns NotImplemented instead of calling when the direct path could behave
// differently from torch.ops, and the Python function then takes torch.ops.tjit.*:
//   - an active TorchFunctionMode, or an argument whose type overrides __torch_function__
//     (tensor subclasses, FX proxies): torch.ops hands the call to them;
//   - functorch transforms (vmap, grad, ...) are active;
//   - an argument is of any type other than the plain ones read here (a SymInt, a NumPy scalar, a
//     wrong type): torch.ops converts it, or raises its usual error.
// torch.compile and torch.export tracing are told apart in Python (torch.compiler.is_compiling),
// where Dynamo can see the branch.

#include <tjit/operators.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/functorch/DynamicLayer.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <optional>
#include <tuple>
#include <utility>

namespace py = pybind11;

namespace {

using IntList = c10::SmallVector<int64_t, 8>;

py::object not_implemented() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }

// No transform and no TorchFunctionMode: the state in which a call through the dispatcher is what
// torch.ops would do after its own checks.
bool direct_call_allowed() {
  return at::functorch::getDynamicLayerStack().empty() && !at::impl::torch_function_mode_enabled();
}

// What a tensor subclass that does not override __torch_function__ has as its __torch_function__
// (torch._C._disabled_torch_function_impl), and the most common such subclass, nn.Parameter. Set
// when the module is imported; torch keeps both alive.
PyObject* disabled_torch_function = nullptr;
PyTypeObject* parameter_type = nullptr;

// A torch.Tensor, or a subclass that does not override __torch_function__ (nn.Parameter), as
// torch's own has_torch_function decides.
bool read_tensor(py::handle obj, const at::Tensor*& out) {
  PyObject* p = obj.ptr();
  if (!THPVariable_CheckExact(p) && Py_TYPE(p) != parameter_type) {
    if (!THPVariable_Check(p)) {
      return false;
    }
    const auto torch_function = py::reinterpret_steal<py::object>(
        PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(p)), "__torch_function__"));
    if (!torch_function) {
      PyErr_Clear();
    } else if (torch_function.ptr() != disabled_torch_function) {
      return false;
    }
  }
  out = &THPVariable_Unpack(p);
  return true;
}

bool read_optional_tensor(py::handle obj, std::optional<at::Tensor>& out) {
  if (obj.is_none()) {
    out.reset();
    return true;
  }
  const at::Tensor* tensor = nullptr;
  if (!read_tensor(obj, tensor)) {
    return false;
  }
  out = *tensor;
  return true;
}

// A Python int (not a bool, which torch.ops treats as its own kind) that fits in 64 bits.
bool read_int(py::handle obj, int64_t& out) {
  if (!PyLong_CheckExact(obj.ptr())) {
    return false;
  }
  int overflow = 0;
  out = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
  return overflow == 0 && !(out == -1 && PyErr_Occurred());
}

bool read_double(py::handle obj, double& out) {
  if (PyFloat_CheckExact(obj.ptr())) {
    out = PyFloat_AS_DOUBLE(obj.ptr());
    return true;
  }
  int64_t value = 0;
  if (read_int(obj, value)) {
    out = static_cast<double>(value);
    return true;
  }
  return false;
}

bool read_bool(py::handle obj, bool& out) {
  if (obj.ptr() != Py_True && obj.ptr() != Py_False) {
    return false;
  }
  out = obj.ptr() == Py_True;
  return true;
}

// A Python int or float; other scalars (bool, complex, 0-dim tensors) go through torch.ops.
bool read_scalar(py::handle obj, c10::Scalar& out) {
  int64_t integer = 0;
  if (read_int(obj, integer)) {
    out = integer;
    return true;
  }
  if (PyFloat_CheckExact(obj.ptr())) {
    out = PyFloat_AS_DOUBLE(obj.ptr());
    return true;
  }
  return false;
}

bool read_dtype(py::handle obj, at::ScalarType& out) {
  if (!THPDtype_Check(obj.ptr())) {
    return false;
  }
  out = reinterpret_cast<THPDtype*>(obj.ptr())->scalar_type;
  return true;
}

bool read_optional_dtype(py::handle obj, std::optional<at::ScalarType>& out) {
  if (obj.is_none()) {
    out.reset();
    return true;
  }
  at::ScalarType dtype{};
  if (!read_dtype(obj, dtype)) {
    return false;
  }
  out = dtype;
  return true;
}

// A list or tuple (torch.Size included) of Python ints.
bool read_int_list(py::handle obj, IntList& out) {
  PyObject* p = obj.ptr();
  const bool is_list = PyList_Check(p);
  if (!is_list && !PyTuple_Check(p)) {
    return false;
  }
  const Py_ssize_t size = is_list ? PyList_GET_SIZE(p) : PyTuple_GET_SIZE(p);
  out.resize(size);
  for (Py_ssize_t i = 0; i < size; ++i) {
    if (!read_int(is_list ? PyList_GET_ITEM(p, i) : PyTuple_GET_ITEM(p, i), out[i])) {
      return false;
    }
  }
  return true;
}

// int[1]?: None, one int, or a list of ints.
bool read_optional_dims(py::handle obj, IntList& dims, bool& present) {
  present = !obj.is_none();
  if (!present) {
    return true;
  }
  dims.resize(1);
  return read_int(obj, dims[0]) || read_int_list(obj, dims);
}

bool read_bool3(py::handle obj, std::array<bool, 3>& out) {
  PyObject* p = obj.ptr();
  const bool is_list = PyList_Check(p);
  if ((!is_list && !PyTuple_Check(p)) || (is_list ? PyList_GET_SIZE(p) : PyTuple_GET_SIZE(p)) != 3) {
    return false;
  }
  for (Py_ssize_t i = 0; i < 3; ++i) {
    if (!read_bool(is_list ? PyList_GET_ITEM(p, i) : PyTuple_GET_ITEM(p, i), out[i])) {
      return false;
    }
  }
  return true;
}

// Runs `call` without the GIL (as torch.ops and torch's own bindings do: a kernel compile or a
// long interpreter run does not block other Python threads) and wraps its tensors (an undefined
// one as None).
template <typename Call>
py::object call_without_gil(Call&& call) {
  using Result = decltype(call());
  std::optional<Result> result;
  {
    py::gil_scoped_release no_gil;
    result.emplace(call());
  }
  if constexpr (std::is_same_v<Result, at::Tensor>) {
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(*result)));
  } else {
    auto& [a, b, c] = *result;
    return py::reinterpret_steal<py::object>(
        PyTuple_Pack(3, py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(a))).ptr(),
                     py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(b))).ptr(),
                     py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(c))).ptr()));
  }
}

// Each binding: read the arguments (NotImplemented when one is not plain), then call. Errors the
// operator raises reach Python as torch.ops raises them (torch's translation of c10 errors).

py::object add(py::handle self, py::handle other, py::handle alpha) {
  HANDLE_TH_ERRORS
  const at::Tensor* a = nullptr;
  const at::Tensor* b = nullptr;
  c10::Scalar scale;
  if (!direct_call_allowed() || !read_tensor(self, a) || !read_tensor(other, b) || !read_scalar(alpha, scale)) {
    return not_implemented();
  }
  return call_without_gil([&] { return tjit::add(*a, *b, scale); });
  END_HANDLE_TH_ERRORS_PYBIND
}

py::object sum(py::handle self, py::handle dim, py::handle keepdim, py::handle dtype) {
  HANDLE_TH_ERRORS
  const at::Tensor* x = nullptr;
  IntList dims;
  bool has_dims = false;
  bool keep = false;
  std::optional<at::ScalarType> out_dtype;
  if (!direct_call_allowed() || !read_tensor(self, x) || !read_optional_dims(dim, dims, has_dims) ||
      !read_bool(keepdim, keep) || !read_optional_dtype(dtype, out_dtype)) {
    return not_implemented();
  }
  const at::OptionalIntArrayRef dim_ref = has_dims ? at::OptionalIntArrayRef(dims) : std::nullopt;
  return call_without_gil([&] { return tjit::sum(*x, dim_ref, keep, out_dtype); });
  END_HANDLE_TH_ERRORS_PYBIND
}

py::object softmax(py::handle self, py::handle dim, py::handle dtype) {
  HANDLE_TH_ERRORS
  const at::Tensor* x = nullptr;
  int64_t d = 0;
  std::optional<at::ScalarType> out_dtype;
  if (!direct_call_allowed() || !read_tensor(self, x) || !read_int(dim, d) || !read_optional_dtype(dtype, out_dtype)) {
    return not_implemented();
  }
  return call_without_gil([&] { return tjit::softmax(*x, d, out_dtype); });
  END_HANDLE_TH_ERRORS_PYBIND
}

py::object softmax_backward(py::handle grad_output, py::handle output, py::handle dim, py::handle input_dtype) {
  HANDLE_TH_ERRORS
  const at::Tensor* grad = nullptr;
  const at::Tensor* out = nullptr;
  int64_t d = 0;
  at::ScalarType dtype{};
  if (!direct_call_allowed() || !read_tensor(grad_output, grad) || !read_tensor(output, out) || !read_int(dim, d) ||
      !read_dtype(input_dtype, dtype)) {
    return not_implemented();
  }
  return call_without_gil([&] { return tjit::softmax_backward(*grad, *out, d, dtype); });
  END_HANDLE_TH_ERRORS_PYBIND
}

// layer_norm and layer_norm_forward take the same arguments; `Operator` is one of them.
template <auto& Operator>
py::object layer_norm_call(py::handle input, py::handle normalized_shape, py::handle weight, py::handle bias,
                           py::handle eps) {
  HANDLE_TH_ERRORS
  const at::Tensor* x = nullptr;
  IntList shape;
  std::optional<at::Tensor> w;
  std::optional<at::Tensor> b;
  double epsilon = 0;
  if (!direct_call_allowed() || !read_tensor(input, x) || !read_int_list(normalized_shape, shape) ||
      !read_optional_tensor(weight, w) || !read_optional_tensor(bias, b) || !read_double(eps, epsilon)) {
    return not_implemented();
  }
  return call_without_gil([&] { return Operator(*x, shape, w, b, epsilon); });
  END_HANDLE_TH_ERRORS_PYBIND
}

py::object layer_norm_backward(py::handle grad_out, py::handle input, py::handle normalized_shape, py::handle mean,
                               py::handle rstd, py::handle weight, py::handle bias, py::handle output_mask) {
  HANDLE_TH_ERRORS
  const at::Tensor* dy = nullptr;
  const at::Tensor* x = nullptr;
  const at::Tensor* m = nullptr;
  const at::Tensor* r = nullptr;
  IntList shape;
  std::optional<at::Tensor> w;
  std::optional<at::Tensor> b;
  std::array<bool, 3> mask{};
  if (!direct_call_allowed() || !read_tensor(grad_out, dy) || !read_tensor(input, x) ||
      !read_int_list(normalized_shape, shape) || !read_tensor(mean, m) || !read_tensor(rstd, r) ||
      !read_optional_tensor(weight, w) || !read_optional_tensor(bias, b) || !read_bool3(output_mask, mask)) {
    return not_implemented();
  }
  return call_without_gil([&] { return tjit::layer_norm_backward(*dy, *x, shape, *m, *r, w, b, mask); });
  END_HANDLE_TH_ERRORS_PYBIND
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  disabled_torch_function = py::module_::import("torch._C").attr("_disabled_torch_function_impl").ptr();
  parameter_type = reinterpret_cast<PyTypeObject*>(py::module_::import("torch.nn").attr("Parameter").ptr());
  m.doc() = "tjit's direct calls from its Python functions to the C++ operators (internal: call tjit.add etc.). "
            "Each takes every argument positionally and returns NotImplemented where torch.ops.tjit must "
            "take the call.";
  m.def("add", &add);
  m.def("sum", &sum);
  m.def("softmax", &softmax);
  m.def("softmax_backward", &softmax_backward);
  m.def("layer_norm", &layer_norm_call<tjit::layer_norm>);
  m.def("layer_norm_forward", &layer_norm_call<tjit::layer_norm_forward>);
  m.def("layer_norm_backward", &layer_norm_backward);
}
