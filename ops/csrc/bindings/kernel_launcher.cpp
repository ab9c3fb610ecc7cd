// tjit.jit's launch path (ops/python_kernels.py): Python's `kernel[grid](*args, **kwargs)` for a
// user's own @triton.jit kernel, read straight from the Python objects (vectorcall: no argument
// tuple, no keyword dictionary) and launched through the same TritonJitFunction C++ programs use.
//
// A launcher is a KernelLauncher object bound to one kernel: `launcher[grid]` keeps the grid in a
// BoundLaunch, whose call launches (as does `launcher(grid, *args, **kwargs)`). Per call
// it matches keywords by the interned names' addresses (a string comparison only for a name
// Python did not intern), converts each argument into the runtime's stack-held argument pack,
// and launches with the GIL released, so other Python threads run while a first call compiles or
// tunes. It hands the call to the Python fallback it was given (Triton's own launch) for what it
// must not run: tensor subclasses (fake, functional and distributed tensors are traced or
// dispatched, not launched).

#include "kernel_launcher.h"

#include <tjit/current_stream.h>
#include <tjit/tensor_descriptor.h>
#include <tjit/triton_jit_function.h>

#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <structmember.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace py = pybind11;

namespace tjit::python {
namespace {

// Parameters one launch may have (tuple elements included): the argument pack's stack slots.
constexpr size_t kMaxSlots = 64;

// Python types the conversion recognises, set by make_kernel_launcher from Triton's modules.
PyObject* triton_dtype_type = nullptr;       // triton.language.dtype
PyObject* triton_constexpr_type = nullptr;   // triton.language.constexpr
PyObject* tensor_descriptor_type = nullptr;  // triton.tools.tensor_descriptor.TensorDescriptor
PyTypeObject* parameter_type = nullptr;      // torch.nn.Parameter

enum class Option : uint8_t { NumWarps, NumStages, NumCtas, Maxnreg, EnableFpFusion, LaunchCooperativeGrid, LaunchPdl };
constexpr std::array<std::pair<const char*, Option>, 7> kOptions{{
    {"num_warps", Option::NumWarps},
    {"num_stages", Option::NumStages},
    {"num_ctas", Option::NumCtas},
    {"maxnreg", Option::Maxnreg},
    {"enable_fp_fusion", Option::EnableFpFusion},
    {"launch_cooperative_grid", Option::LaunchCooperativeGrid},
    {"launch_pdl", Option::LaunchPdl},
}};

struct Launcher {
  const TritonJitFunction* function = nullptr;
  // Under @triton.autotune / @triton.heuristics: the call takes the caller's parameters (run()).
  bool wrapped = false;
  // The parameters a call names (all of them, or the caller's), interned, and their indices among
  // the kernel's parameters.
  std::vector<py::object> names;
  std::vector<size_t> param_index;
  std::vector<py::object> option_names;  // kOptions' names, interned
  py::object fallback;                   // fallback(grid, *args, **kwargs)
  std::string kernel_name;  // the function's own name, for messages
};

const std::vector<KernelParam>& params_of(const Launcher& l) { return l.function->params(); }

[[noreturn]] void wrong_type(const Launcher& l, size_t i, PyObject* value, const char* what) {
  TORCH_CHECK_TYPE(false, "tjit.jit: kernel ", l.kernel_name, ", argument ",
                   py::str(l.names[i]).cast<std::string>(), " is a ", Py_TYPE(value)->tp_name, ": ", what,
                   " (a kernel takes tensors, ints, floats, bools, None, strings and dtypes for constexprs, "
                   "host tensor descriptors, and tuples of these)");
}

// A number for an error message, as text: messages here take strings only (c10::str of an integer
// crashed in this module on a torch 2.11 / Python 3.12 build).
template <typename T>
std::string number(T value) {
  return std::to_string(value);
}

// Whether `o` is an int, bool, float, str or None: tested before THPVariable_Check, which for
// anything but a tensor costs an isinstance call through Tensor's metaclass (about 0.1 us).
bool is_python_scalar(PyObject* o) {
  return o == Py_None || PyLong_Check(o) || PyFloat_Check(o) || PyUnicode_Check(o);
}

// Whether `o` is a plain tensor or nn.Parameter (no subclass, which is the fallback's).
bool is_plain_tensor(PyObject* o) { return THPVariable_CheckExact(o) || Py_TYPE(o) == parameter_type; }

// Whether the call must take the fallback: a tensor argument of a subclass (FakeTensor,
// FunctionalTensor, DTensor, ...), also inside tuples.
bool needs_fallback(PyObject* const* values, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    PyObject* o = values[i];
    if (o == nullptr || is_python_scalar(o) || is_plain_tensor(o)) {
      continue;
    }
    if (PyTuple_Check(o) ? needs_fallback(&PyTuple_GET_ITEM(o, 0), PyTuple_GET_SIZE(o)) : THPVariable_Check(o)) {
      return true;
    }
  }
  return false;
}

Padding padding_of(PyObject* descriptor) {
  py::object padding = py::reinterpret_borrow<py::object>(descriptor).attr("padding");
  const std::string text = py::str(padding);
  TORCH_CHECK_VALUE(text == "zero" || text == "nan", "tjit.jit: a tensor descriptor's padding is \"zero\" or \"nan\", not ",
                    text);
  return text == "nan" ? Padding::Nan : Padding::Zero;
}

// Host tensor descriptors a call passes live here until the launch is over.
struct DescriptorStorage {
  std::array<std::optional<TensorDescriptor>, detail::kMaxTensorDescriptors> slots;
  size_t used = 0;

  const TensorDescriptor& add(PyObject* o) {
    TORCH_CHECK(used < slots.size(), "tjit.jit: a launch takes at most ", number(slots.size()), " tensor descriptors");
    py::handle d(o);
    PyObject* base = d.attr("base").ptr();
    TORCH_CHECK_TYPE(THPVariable_Check(base), "tjit.jit: a tensor descriptor's base must be a tensor");
    const auto ints = [](py::handle seq) {
      std::vector<int64_t> out;
      for (py::handle item : seq) {
        out.push_back(item.cast<int64_t>());
      }
      return out;
    };
    return slots[used++].emplace(THPVariable_Unpack(base), ints(d.attr("shape")), ints(d.attr("strides")),
                                 ints(d.attr("block_shape")), padding_of(o));
  }
};

// Hands Python value `o` (parameter i's, or an element of its tuple) to `sink` as the C++ argument
// of its kind; `sink` is an argument pack or a detail::ArgumentVisitor.
template <typename Sink>
void add_python(Sink& sink, const Launcher& l, size_t i, PyObject* o, DescriptorStorage& descriptors) {
  if (is_plain_tensor(o)) {
    sink.add_tensor(THPVariable_Unpack(o));
  } else if (o == Py_None) {
    sink.add_none();
  } else if (PyBool_Check(o)) {
    sink.add_bool(o == Py_True);
  } else if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
      sink.add_signed(v);
    } else {
      const unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(o) : 0;
      if (overflow < 0 || PyErr_Occurred() != nullptr) {
        PyErr_Clear();
        TORCH_CHECK_VALUE(false, "tjit.jit: kernel ", l.kernel_name, ", argument ",
                          py::str(l.names[i]).cast<std::string>(), ": ", py::str(o).cast<std::string>(),
                          " does not fit in 64 bits");
      }
      sink.add_unsigned(u);
    }
  } else if (PyFloat_Check(o)) {
    sink.add_float(PyFloat_AS_DOUBLE(o));
  } else if (PyUnicode_Check(o)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(o, &size);
    if (text == nullptr) {
      throw python_error();
    }
    sink.add_string(std::string_view(text, static_cast<size_t>(size)));
  } else if (THPDtype_Check(o)) {
    sink.add_dtype(Dtype(reinterpret_cast<THPDtype*>(o)->scalar_type));
  } else if (PyTuple_Check(o)) {
    sink.begin_tuple(static_cast<size_t>(PyTuple_GET_SIZE(o)));
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(o); ++k) {
      add_python(sink, l, i, PyTuple_GET_ITEM(o, k), descriptors);
    }
    sink.end_tuple();
  } else if (THPVariable_Check(o)) {
    sink.add_tensor(THPVariable_Unpack(o));
  } else if (triton_constexpr_type != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(triton_constexpr_type))) {
    py::object value = py::reinterpret_borrow<py::object>(o).attr("value");
    add_python(sink, l, i, value.ptr(), descriptors);
  } else if (triton_dtype_type != nullptr && Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(triton_dtype_type)) {
    sink.add_dtype(Dtype::named(py::str(py::reinterpret_borrow<py::object>(o).attr("name")).cast<std::string>()));
  } else if (tensor_descriptor_type != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(tensor_descriptor_type))) {
    sink.add_tensor_descriptor(descriptors.add(o));
  } else if (PyObject_HasAttrString(o, "data_ptr") && PyObject_HasAttrString(o, "dtype")) {
    // Anything with data_ptr() and a torch dtype, as Triton takes it (TensorWrapper, reinterpret).
    py::handle h(o);
    py::object dtype = h.attr("dtype");
    if (!THPDtype_Check(dtype.ptr())) {
      wrong_type(l, i, o, "an object with data_ptr() needs a torch dtype");
    }
    sink.add_pointer(DevicePointer{reinterpret_cast<const void*>(h.attr("data_ptr")().cast<uintptr_t>()),
                                   reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type});
  } else {
    wrong_type(l, i, o, "no kernel argument");
  }
}

// The device of the first tensor in `o`: a tensor, a host descriptor's base, or inside a tuple (as
// the argument pack finds it for plain kernels). False when there is none.
bool tensor_device(PyObject* o, c10::Device& device) {
  if (is_python_scalar(o)) {
    return false;
  }
  if (is_plain_tensor(o) || THPVariable_Check(o)) {
    const at::Tensor& t = THPVariable_Unpack(o);
    if (t.defined()) {
      device = t.device();
      return true;
    }
    return false;
  }
  if (PyTuple_Check(o)) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(o); ++k) {
      if (tensor_device(PyTuple_GET_ITEM(o, k), device)) {
        return true;
      }
    }
    return false;
  }
  if (tensor_descriptor_type != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(tensor_descriptor_type))) {
    py::object base = py::reinterpret_borrow<py::object>(o).attr("base");
    return tensor_device(base.ptr(), device);
  }
  return false;
}

// Walks a tuple argument of a wrapped kernel's call for the runtime (detail::CapturedArg::visit_tuple).
struct TupleWalk {
  const Launcher* launcher;
  size_t param;
  PyObject* tuple;
  DescriptorStorage* descriptors;
};

void visit_tuple(const void* walk, detail::ArgumentVisitor& visitor) {
  const auto& w = *static_cast<const TupleWalk*>(walk);
  py::gil_scoped_acquire gil;  // the launch runs with the GIL released
  add_python(visitor, *w.launcher, w.param, w.tuple, *w.descriptors);
}

uint32_t grid_dim(PyObject* o, const Launcher& l) {
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    TORCH_CHECK_TYPE(false, "tjit.jit: kernel ", l.kernel_name, ": a grid dimension must be an int, not ",
                     Py_TYPE(o)->tp_name);
  }
  TORCH_CHECK_VALUE(v >= 0 && v <= 0xFFFFFFFFLL, "tjit.jit: kernel ", l.kernel_name, ": grid dimension ", number(v),
                    " is out of range");
  return static_cast<uint32_t>(v);
}

// A grid as Python gives it: an int, or a tuple or list of one to three ints.
Grid grid_of(PyObject* o, const Launcher& l) {
  if (PyLong_Check(o)) {
    return Grid(grid_dim(o, l));
  }
  if (PyTuple_Check(o) || PyList_Check(o)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(o);
    const size_t n = seq.size();
    TORCH_CHECK_VALUE(n >= 1 && n <= 3, "tjit.jit: kernel ", l.kernel_name, ": a grid has one to three dimensions, not ",
                      number(n));
    Grid g;
    g.x = grid_dim(seq[0].ptr(), l);
    g.y = n > 1 ? grid_dim(seq[1].ptr(), l) : 1;
    g.z = n > 2 ? grid_dim(seq[2].ptr(), l) : 1;
    return g;
  }
  TORCH_CHECK_TYPE(false, "tjit.jit: kernel ", l.kernel_name,
                   ": the grid must be an int, a tuple of one to three ints or a callable returning one, not ",
                   Py_TYPE(o)->tp_name);
}

py::object python_value(const ConstexprValue& value) {
  return std::visit(
      [](const auto& v) -> py::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return py::none();
        } else if constexpr (std::is_same_v<T, Dtype>) {
          return py::module_::import("triton.language").attr(v.attribute_name());
        } else {
          return py::cast(v);
        }
      },
      value);
}

py::object interned(const std::string& text) {
  PyObject* s = PyUnicode_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
  if (s == nullptr) {
    throw py::error_already_set();
  }
  PyUnicode_InternInPlace(&s);
  return py::reinterpret_steal<py::object>(s);
}

bool same_name(PyObject* a, PyObject* b) {
  return a == b || PyUnicode_Compare(a, b) == 0;
}

// Whether the device has a CUDA stream to launch on: the tensors' device, else the current CUDA one.
c10::Device launch_device(bool has_device, c10::Device device) {
  if (has_device) {
    return device;
  }
  const c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
  return guard.getDevice();
}

// The GIL released for the launch (a first call compiles or tunes; other threads run meanwhile).
class GilReleased {
 public:
  GilReleased() : state_(PyEval_SaveThread()) {}
  ~GilReleased() { PyEval_RestoreThread(state_); }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_;
};

// fallback(grid, *args, **kwargs): the call handed to Python as it came (a rare path; it allocates).
PyObject* call_fallback(const Launcher& l, PyObject* grid, PyObject* const* args, size_t positional,
                        PyObject* kwnames) {
  const size_t n_keywords = kwnames == nullptr ? 0 : static_cast<size_t>(PyTuple_GET_SIZE(kwnames));
  std::vector<PyObject*> call(1 + positional + n_keywords);
  call[0] = grid;
  std::copy(args, args + positional + n_keywords, call.begin() + 1);
  return PyObject_Vectorcall(l.fallback.ptr(), call.data(), 1 + positional, kwnames);
}

// Where `name` is among `names` (their count when it is not): by address first, as the interned
// names of a call written out in code match; by text only for a name built at run time.
size_t find_name(const std::vector<py::object>& names, PyObject* name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].ptr() == name) {
      return i;
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (PyUnicode_Compare(names[i].ptr(), name) == 0) {
      return i;
    }
  }
  return names.size();
}

// One launch: `grid` and the call's arguments as vectorcall passes them (`positional` of them,
// then the values of `kwnames`).
PyObject* launch_call(const Launcher& l, PyObject* grid_arg, PyObject* const* args, size_t positional,
                      PyObject* kwnames) {
  const size_t n_names = l.names.size();
  std::array<PyObject*, kMaxSlots> values{};
  TORCH_CHECK_TYPE(positional <= n_names, "tjit.jit: kernel ", l.kernel_name, " takes ", number(n_names),
                   " arguments here, but ", number(positional), " were given positionally");
  for (size_t i = 0; i < positional; ++i) {
    values[i] = args[i];
  }
  LaunchOptions options;
  const size_t n_keywords = kwnames == nullptr ? 0 : static_cast<size_t>(PyTuple_GET_SIZE(kwnames));
  for (size_t k = 0; k < n_keywords; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    PyObject* value = args[positional + k];
    const size_t i = find_name(l.names, name);
    if (i < n_names) {
      TORCH_CHECK_TYPE(values[i] == nullptr, "tjit.jit: kernel ", l.kernel_name, " got argument ",
                       py::str(name).cast<std::string>(), " twice (by position and by keyword)");
      values[i] = value;
      continue;
    }
    const size_t o = find_name(l.option_names, name);
    TORCH_CHECK_TYPE(o < kOptions.size(), "tjit.jit: kernel ", l.kernel_name, " has no parameter ",
                     py::str(name).cast<std::string>(), " and it is no launch option (",
                     l.wrapped ? "its configs and heuristics set the rest" : "num_warps, num_stages, num_ctas, maxnreg, "
                                                                            "enable_fp_fusion, launch_cooperative_grid, launch_pdl",
                     ")");
    TORCH_CHECK_TYPE(!l.wrapped, "tjit.jit: kernel ", l.kernel_name, ": ", py::str(name).cast<std::string>(),
                     " comes from the autotune config, not from the call");
    if (value == Py_None) {
      continue;
    }
    switch (kOptions[o].second) {
      case Option::NumWarps: options.num_warps = py::cast<int>(value); break;
      case Option::NumStages: options.num_stages = py::cast<int>(value); break;
      case Option::NumCtas: options.num_ctas = py::cast<int>(value); break;
      case Option::Maxnreg: options.maxnreg = py::cast<int>(value); break;
      case Option::EnableFpFusion: options.enable_fp_fusion = PyObject_IsTrue(value) == 1; break;
      case Option::LaunchCooperativeGrid: options.launch_cooperative_grid = PyObject_IsTrue(value) == 1; break;
      case Option::LaunchPdl: options.launch_pdl = PyObject_IsTrue(value) == 1; break;
    }
  }
  if (needs_fallback(values.data(), n_names)) {
    return call_fallback(l, grid_arg, args, positional, kwnames);
  }
  const auto& params = params_of(l);
  // A missing argument takes its parameter's default, as Python binds it (values[i] stays null).
  for (size_t i = 0; i < n_names; ++i) {
    if (values[i] == nullptr) {
      const KernelParam& p = params[l.param_index[i]];
      TORCH_CHECK_TYPE(p.default_value.has_value(), "tjit.jit: kernel ", l.kernel_name, " is missing argument ",
                       p.name, " (", number(i + 1), " of ", number(n_names), ")");
    }
  }
  // Argument i as a Python object (a default converted), for a grid callable's meta-parameters.
  const auto python_argument = [&](size_t i) {
    return values[i] != nullptr ? py::reinterpret_borrow<py::object>(values[i])
                                : python_value(*params[l.param_index[i]].default_value);
  };
  DescriptorStorage descriptors;
  const bool grid_is_callable = !PyLong_Check(grid_arg) && !PyTuple_Check(grid_arg) && !PyList_Check(grid_arg) &&
                                PyCallable_Check(grid_arg);
  if (!l.wrapped) {
    detail::ArgumentPack<kMaxSlots> pack(params, l.kernel_name.c_str());
    for (size_t i = 0; i < n_names; ++i) {
      if (values[i] != nullptr) {
        add_python(pack, l, i, values[i], descriptors);
      } else {
        detail::add_value(pack, *params[l.param_index[i]].default_value);
      }
    }
    Grid grid;
    if (grid_is_callable) {
      // Triton calls it with the bound arguments by name.
      py::dict meta;
      for (size_t i = 0; i < n_names; ++i) {
        meta[l.names[i]] = python_argument(i);
      }
      py::object result = py::reinterpret_borrow<py::object>(grid_arg)(meta);
      grid = grid_of(result.ptr(), l);
    } else {
      grid = grid_of(grid_arg, l);
    }
    const c10::Device device = launch_device(pack.has_device(), pack.device());
    GilReleased released;
    l.function->launch_packed(current_stream(device), grid, options, pack);
  } else {
    std::array<detail::CapturedArg, kMaxSlots> captured;
    std::array<TupleWalk, kMaxSlots> walks;
    bool has_device = false;
    c10::Device device(c10::kCPU);
    for (size_t i = 0; i < n_names; ++i) {
      PyObject* o = values[i];
      if (o == nullptr) {
        detail::add_value(captured[i], *params[l.param_index[i]].default_value);
        continue;
      }
      has_device = has_device || tensor_device(o, device);
      if (PyTuple_Check(o)) {
        walks[i] = TupleWalk{&l, i, o, &descriptors};
        captured[i].kind = detail::CapturedArg::Kind::Tuple;
        captured[i].tuple = &walks[i];
        captured[i].visit_tuple = &visit_tuple;
        continue;
      }
      add_python(captured[i], l, i, o, descriptors);
    }
    const auto call_grid = [&](const KernelMeta& meta) -> Grid {
      py::gil_scoped_acquire gil;
      py::dict dict;
      for (size_t p = 0; p < params.size(); ++p) {
        if (meta.has_value_at(p)) {
          dict[py::str(params[p].name)] = python_value(meta.value_at(p));
        }
      }
      for (size_t i = 0; i < n_names; ++i) {
        if (values[i] != nullptr && !is_python_scalar(values[i]) && THPVariable_Check(values[i])) {
          dict[l.names[i]] = py::reinterpret_borrow<py::object>(values[i]);
        }
      }
      py::object result = py::reinterpret_borrow<py::object>(grid_arg)(dict);
      return grid_of(result.ptr(), l);
    };
    const Grid fixed = grid_is_callable ? Grid() : grid_of(grid_arg, l);
    const c10::Device launch_on = launch_device(has_device, device);
    const Stream stream = current_stream(launch_on);
    GilReleased released;
    if (grid_is_callable) {
      l.function->run_with(stream, detail::GridSource(call_grid), captured.data(), n_names);
    } else {
      l.function->run_with(stream, detail::GridSource(fixed), captured.data(), n_names);
    }
  }
  Py_RETURN_NONE;
}

// The Python objects. A KernelLauncher (tjit._C.kernel_launcher's result) owns one kernel's
// Launcher: launcher[grid] is a BoundLaunch, launcher(grid, *args, **kwargs) launches. A BoundLaunch
// keeps the grid; calling it launches. Both are called through vectorcall, so a launch builds no
// argument tuple, no keyword dictionary and no functools.partial.
struct LauncherObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  Launcher* launcher;
};

struct BoundObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  LauncherObject* owner;
  PyObject* grid;
};

PyTypeObject* bound_type = nullptr;

PyObject* launcher_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  HANDLE_TH_ERRORS
  const Launcher& l = *reinterpret_cast<LauncherObject*>(self)->launcher;
  const size_t nargs = static_cast<size_t>(PyVectorcall_NARGS(nargsf));
  TORCH_CHECK_TYPE(nargs >= 1, "tjit.jit: kernel ", l.kernel_name, ": launch as kernel[grid](*args)");
  return launch_call(l, args[0], args + 1, nargs - 1, kwnames);
  END_HANDLE_TH_ERRORS
}

PyObject* bound_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  HANDLE_TH_ERRORS
  const auto* bound = reinterpret_cast<BoundObject*>(self);
  return launch_call(*bound->owner->launcher, bound->grid, args, static_cast<size_t>(PyVectorcall_NARGS(nargsf)),
                     kwnames);
  END_HANDLE_TH_ERRORS
}

PyObject* launcher_subscript(PyObject* self, PyObject* grid) {
  auto* bound = PyObject_New(BoundObject, bound_type);
  if (bound == nullptr) {
    return nullptr;
  }
  bound->vectorcall = &bound_call;
  bound->owner = reinterpret_cast<LauncherObject*>(Py_NewRef(self));
  bound->grid = Py_NewRef(grid);
  return reinterpret_cast<PyObject*>(bound);
}

int launcher_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  const Launcher* l = reinterpret_cast<LauncherObject*>(self)->launcher;
  if (l != nullptr) {
    Py_VISIT(l->fallback.ptr());  // the JitKernel's bound method: a cycle through the JitKernel
  }
  return 0;
}

int launcher_clear(PyObject* self) {
  Launcher* l = reinterpret_cast<LauncherObject*>(self)->launcher;
  if (l != nullptr) {
    py::object fallback = std::move(l->fallback);  // released after the member is empty
  }
  return 0;
}

void launcher_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  delete reinterpret_cast<LauncherObject*>(self)->launcher;
  PyObject_GC_Del(self);
  Py_DECREF(type);
}

void bound_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  auto* bound = reinterpret_cast<BoundObject*>(self);
  Py_DECREF(bound->owner);
  Py_DECREF(bound->grid);
  PyObject_Free(self);
  Py_DECREF(type);
}

PyMemberDef launcher_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(LauncherObject, vectorcall)), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr},
};
PyMemberDef bound_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(BoundObject, vectorcall)), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot launcher_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&launcher_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(&launcher_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&launcher_clear)},
    {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
    {Py_mp_subscript, reinterpret_cast<void*>(&launcher_subscript)},
    {Py_tp_members, launcher_members},
    {Py_tp_doc, const_cast<char*>("A kernel's launch through tjit's runtime (tjit.jit): launcher[grid](*args, "
                                  "**kwargs), or launcher(grid, *args, **kwargs).")},
    {0, nullptr},
};
PyType_Slot bound_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&bound_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
    {Py_tp_members, bound_members},
    {Py_tp_doc, const_cast<char*>("launcher[grid]: calling it launches the kernel with that grid.")},
    {0, nullptr},
};
PyType_Spec launcher_spec{"tjit._C.KernelLauncher", sizeof(LauncherObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, launcher_slots};
PyType_Spec bound_spec{"tjit._C.BoundLaunch", sizeof(BoundObject), 0,
                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, bound_slots};

PyTypeObject* launcher_type = nullptr;

PyTypeObject* make_type(PyType_Spec& spec) {
  PyObject* type = PyType_FromSpec(&spec);
  if (type == nullptr) {
    throw py::error_already_set();
  }
  return reinterpret_cast<PyTypeObject*>(type);
}

}  // namespace

void register_kernel_launcher(py::module_& m) {
  m.def(
      "kernel_launcher",
      [](const std::string& file, const std::string& name, const std::string& label, bool wrapped,
         py::object fallback) {
        if (triton_dtype_type == nullptr) {
          py::module_ tl = py::module_::import("triton.language");
          triton_dtype_type = py::object(tl.attr("dtype")).release().ptr();
          triton_constexpr_type = py::object(tl.attr("constexpr")).release().ptr();
          tensor_descriptor_type =
              py::object(py::module_::import("triton.tools.tensor_descriptor").attr("TensorDescriptor")).release().ptr();
          parameter_type = reinterpret_cast<PyTypeObject*>(
              py::object(py::module_::import("torch.nn").attr("Parameter")).release().ptr());
        }
        auto launcher = std::make_unique<Launcher>();
        launcher->function = &TritonJitFunction::get_instance(file, name);
        launcher->wrapped = wrapped;
        launcher->fallback = std::move(fallback);
        launcher->kernel_name = label;
        const auto& params = launcher->function->params();
        const std::vector<std::string> caller = wrapped ? launcher->function->caller_parameters()
                                                        : std::vector<std::string>{};
        for (size_t p = 0; p < params.size(); ++p) {
          if (wrapped && std::find(caller.begin(), caller.end(), params[p].name) == caller.end()) {
            continue;
          }
          launcher->names.push_back(interned(params[p].name));
          launcher->param_index.push_back(p);
        }
        TORCH_CHECK(launcher->names.size() <= kMaxSlots, "tjit.jit: kernel ", name, " has ",
                    number(launcher->names.size()), " parameters; a launch takes at most ", number(kMaxSlots));
        for (const auto& option : kOptions) {
          launcher->option_names.push_back(interned(option.first));
        }
        if (launcher_type == nullptr) {
          launcher_type = make_type(launcher_spec);
          bound_type = make_type(bound_spec);
        }
        auto* self = PyObject_GC_New(LauncherObject, launcher_type);
        if (self == nullptr) {
          throw py::error_already_set();
        }
        self->vectorcall = &launcher_call;
        self->launcher = launcher.release();
        PyObject_GC_Track(self);
        return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(self));
      },
      py::arg("file"), py::arg("name"), py::arg("label"), py::arg("wrapped"), py::arg("fallback"),
      "A launcher for kernel `name` of `file` (tjit.jit; errors call it `label`): launcher[grid](*args, "
      "**kwargs) or launcher(grid, *args, **kwargs) launches it through tjit's runtime; fallback(grid, *args, "
      "**kwargs) takes calls with tensor subclasses.");
}

}  // namespace tjit::python
