// tjit._C: the Python functions' direct path to the C++ operators (tjit/operators.h): one binding
// per entry point that TJIT_FOR_EACH_OPERATOR names, generated from its C++ signature.
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
//     wrong type, a Python number for add's tensor: the Scalar overloads): torch.ops converts it,
//     picks the overload, or raises its usual error.
// torch.compile and torch.export tracing are told apart in Python (torch.compiler.is_compiling),
// where Dynamo can see the branch.

#include "kernel_launcher.h"

#include <tjit/prepare.h>
#include <tjit/kit/operator_docs.h>
#include <tjit/kit/plan_choice.h>
#include <tjit/kit/plans.h>
#include <tjit/operators.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/functorch/DynamicLayer.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <functional>
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

// bool[N]: a list or tuple of N Python bools.
template <size_t N>
bool read_bools(py::handle obj, std::array<bool, N>& out) {
  PyObject* p = obj.ptr();
  const bool is_list = PyList_Check(p);
  if ((!is_list && !PyTuple_Check(p)) ||
      (is_list ? PyList_GET_SIZE(p) : PyTuple_GET_SIZE(p)) != static_cast<Py_ssize_t>(N)) {
    return false;
  }
  for (size_t i = 0; i < N; ++i) {
    if (!read_bool(is_list ? PyList_GET_ITEM(p, i) : PyTuple_GET_ITEM(p, i), out[i])) {
      return false;
    }
  }
  return true;
}

// Reads one argument of C++ type T from a Python object; false when the object is not of the
// plain type read here (the call then takes torch.ops). An argument's storage lives in Reader<T>
// for the duration of the call.
template <typename T>
struct Reader;


template <>
struct Reader<const at::Tensor&> {
  const at::Tensor* value = nullptr;
  bool read(py::handle obj) { return read_tensor(obj, value); }
  const at::Tensor& get() const { return *value; }
};

template <>
struct Reader<const std::optional<at::Tensor>&> {
  std::optional<at::Tensor> value;
  bool read(py::handle obj) { return read_optional_tensor(obj, value); }
  const std::optional<at::Tensor>& get() const { return value; }
};

template <>
struct Reader<int64_t> {
  int64_t value = 0;
  bool read(py::handle obj) { return read_int(obj, value); }
  int64_t get() const { return value; }
};

template <>
struct Reader<double> {
  double value = 0;
  bool read(py::handle obj) { return read_double(obj, value); }
  double get() const { return value; }
};

template <>
struct Reader<bool> {
  bool value = false;
  bool read(py::handle obj) { return read_bool(obj, value); }
  bool get() const { return value; }
};

template <>
struct Reader<const c10::Scalar&> {
  c10::Scalar value;
  bool read(py::handle obj) { return read_scalar(obj, value); }
  const c10::Scalar& get() const { return value; }
};

template <>
struct Reader<at::ScalarType> {
  at::ScalarType value{};
  bool read(py::handle obj) { return read_dtype(obj, value); }
  at::ScalarType get() const { return value; }
};

template <>
struct Reader<at::IntArrayRef> {
  IntList value;
  bool read(py::handle obj) { return read_int_list(obj, value); }
  at::IntArrayRef get() const { return value; }
};

template <>
struct Reader<at::OptionalIntArrayRef> {
  IntList dims;
  bool present = false;
  bool read(py::handle obj) { return read_optional_dims(obj, dims, present); }
  at::OptionalIntArrayRef get() const { return present ? at::OptionalIntArrayRef(dims) : std::nullopt; }
};

template <size_t N>
struct Reader<std::array<bool, N>> {
  std::array<bool, N> value{};
  bool read(py::handle obj) { return read_bools(obj, value); }
  std::array<bool, N> get() const { return value; }
};

// T? of any T read here by value (float?, int?, ...): None, or what Reader<T> reads.
template <typename T>
struct Reader<std::optional<T>> {
  Reader<T> inner;
  bool present = false;
  bool read(py::handle obj) {
    present = !obj.is_none();
    return !present || inner.read(obj);
  }
  std::optional<T> get() const { return present ? std::optional<T>(inner.get()) : std::nullopt; }
};

py::object wrap(at::Tensor t) { return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t))); }

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
    return wrap(std::move(*result));
  } else {
    return std::apply(
        [](auto&... tensors) {
          PyObject* tuple = PyTuple_New(sizeof...(tensors));
          Py_ssize_t i = 0;
          (PyTuple_SET_ITEM(tuple, i++, wrap(std::move(tensors)).release().ptr()), ...);  // steals each
          return py::reinterpret_steal<py::object>(tuple);
        },
        *result);
  }
}

// The binding of one entry point: every argument positionally, read by its C++ type, then the
// call. Errors the operator raises reach Python as torch.ops raises them (torch's translation of
// c10 errors).
template <auto Operator, typename Signature = decltype(Operator)>
struct DirectCall;

template <auto Operator, typename Result, typename... Args>
struct DirectCall<Operator, Result (*)(Args...)> {
  template <typename... Handles>
  static py::object call(Handles... objects) {
    HANDLE_TH_ERRORS
    if (!direct_call_allowed()) {
      return not_implemented();
    }
    std::tuple<Reader<Args>...> readers;
    if (!std::apply([&](auto&... r) { return (r.read(objects) && ...); }, readers)) {
      return not_implemented();
    }
    return call_without_gil([&] { return std::apply([](const auto&... r) { return Operator(r.get()...); }, readers); });
    END_HANDLE_TH_ERRORS_PYBIND
  }

  template <size_t... I>
  static auto function(std::index_sequence<I...>) {
    return +[](std::conditional_t<true, py::handle, std::integral_constant<size_t, I>>... objects) {
      return call(objects...);
    };
  }

  static auto function() { return function(std::index_sequence_for<Args...>{}); }
};

}  // namespace

PYBIND11_MODULE(_C, m) {
  disabled_torch_function = py::module_::import("torch._C").attr("_disabled_torch_function_impl").ptr();
  parameter_type = reinterpret_cast<PyTypeObject*>(py::module_::import("torch.nn").attr("Parameter").ptr());
  m.doc() = "tjit's direct calls from its Python functions to the C++ operators (internal: call tjit.add etc.). "
            "Each takes every argument positionally and returns NotImplemented where torch.ops.tjit must "
            "take the call.";
  py::list names;
#define TJIT_BIND_DIRECT_CALL(name)                                   \
  m.def(#name, DirectCall<&tjit::name>::function());                  \
  names.append(#name);
  TJIT_FOR_EACH_OPERATOR(TJIT_BIND_DIRECT_CALL)
#undef TJIT_BIND_DIRECT_CALL
  m.attr("operator_names") = py::tuple(names);
  m.def(
      "operator_doc",
      [](const std::string& name) {
        return tjit::kit::operator_doc(name.find("::") == std::string::npos ? "tjit::" + name : name);
      },
      "The documentation an operator was defined with (kit::define): `name` is `namespace::op` (a "
      "library's own too), or an operator of tjit's alone; '' where none was given.");

  m.def(
      "prepare",
      [](const py::function& call, const py::args& args, const py::kwargs& kwargs) {
        tjit::PrepareOnlyScope prepare_only;
        call(*args, **kwargs);
      },
      "Calls `call(*args, **kwargs)` with kernel launches turned into preparation (tjit/prepare.h).");

  // Launch plans (tjit/kit/plans.h), read by tjit.plans: the same functions the operators execute.
  m.def("plan_names", [] { return tjit::kit::plan_names(); }, "The plans operators registered.");
  m.def(
      "describe_plan",
      [](const std::string& name, const py::dict& inputs, const py::object& dtype, const py::dict& device) {
        tjit::kit::PlanQuery query;
        TORCH_CHECK(THPDtype_Check(dtype.ptr()), "describe_plan: dtype must be a torch.dtype");
        query.dtype = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
        for (const auto& [key, value] : inputs) {
          std::vector<int64_t> values;
          if (py::isinstance<py::sequence>(value)) {
            for (const auto& v : value.cast<py::sequence>()) {
              values.push_back(v.cast<int64_t>());
            }
          } else {
            values.push_back(value.cast<int64_t>());
          }
          query.values[key.cast<std::string>()] = std::move(values);
        }
        query.device.is_cuda = device["is_cuda"].cast<bool>();
        query.device.multiprocessors = device["multiprocessors"].cast<int>();
        query.device.memory_gbps = device["memory_gbps"].cast<int>();
        query.device.dependent_launch = device["dependent_launch"].cast<bool>();
        query.device.capability = device.contains("capability") ? device["capability"].cast<int>() : 0;
        // A real device's index finds the choices its calls made in this process; facts made up
        // for a card (no index) describe it as nothing had run there.
        query.device.device_index = device.contains("device_index") ? device["device_index"].cast<int>() : -1;
        return tjit::kit::describe_plan(name, query);
      },
      "The plan `name` as JSON for `inputs` (names to ints or lists of ints), `dtype` and `device` facts "
      "(is_cuda, multiprocessors, memory_gbps, dependent_launch, capability, device_index).");
  // Plans as measured choices (tjit/kit/plan_choice.h), for tjit.plans and the tuning command.
  m.def(
      "plan_candidates",
      [](const std::string& plan) {
        const tjit::kit::PlanCandidates* c = tjit::kit::find_plan_candidates(plan);
        std::vector<std::string> names;
        for (int i = 0; c != nullptr && i < c->size(); ++i) {
          names.push_back(c->name(i));
        }
        return names;
      },
      "The candidates of plan `plan`, in order ([] for a plan that has none).");
  m.def(
      "force_plan_candidate",
      [](const std::string& plan, const std::optional<std::string>& candidate) {
        tjit::kit::PlanCandidates* c = tjit::kit::find_plan_candidates(plan);
        TORCH_CHECK(c != nullptr, "force_plan_candidate: plan '", plan, "' has no candidates");
        const int index = candidate ? c->index_of(*candidate) : -1;
        TORCH_CHECK(!candidate || index >= 0, "force_plan_candidate: plan '", plan, "' has no candidate '",
                    *candidate, "'");
        c->force(index);
        c->forget();
      },
      "Every call of plan `plan` takes `candidate` (None: the usual choice again). For tests and tuning.");
  m.def(
      "plan_table",
      [](const std::string& device) {
        std::string origin;
        std::string text = tjit::kit::plan_table_for(tjit::kit::device_facts(c10::Device(device)), &origin);
        return py::make_tuple(text, origin);
      },
      "The plan table serving `device` as JSON text, and where it came from ('' for none).");
  m.def("reload_plan_tables", &tjit::kit::reload_plan_tables,
        "Reads the plan tables again (TJIT_PLAN_TABLES) and forgets the choices made so far.");
  m.def("plans_with_candidates", &tjit::kit::plans_with_candidates, "The plans that have candidates.");
  m.def(
      "device_facts",
      [](const std::string& device) {
        const tjit::kit::DeviceFacts f = tjit::kit::device_facts(c10::Device(device));
        py::dict d;
        d["is_cuda"] = f.is_cuda;
        d["multiprocessors"] = f.multiprocessors;
        d["memory_gbps"] = f.memory_gbps;
        d["dependent_launch"] = f.dependent_launch;
        d["capability"] = f.capability;
        d["device_index"] = f.device_index;
        return d;
      },
      "The device facts the operators plan with for `device` (e.g. \"cuda:0\", \"cpu\").");
  tjit::python::register_kernel_launcher(m);
}
