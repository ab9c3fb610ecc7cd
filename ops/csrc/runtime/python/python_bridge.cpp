// libtjit_python: the embedded-Python side of the runtime (see python_bridge.h).
// Python symbols are resolved from the process (the python executable, or the libpython that
// python_bridge_loader.cpp loaded globally), never linked, so the library works both inside a
// Python process and inside a pure C++ one.

#include "python/python_bridge.h"

#include <tjit/tensor_descriptor.h>

#include <ATen/DLConvertor.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <string>
#include <vector>

namespace py = pybind11;

namespace tjit::detail {

// Generated at build time from the triton_adapter package (ops/triton_adapter/, see CMakeLists.txt):
// its modules' names and sources, each after the modules it imports, __init__ last.
extern const char* const kTritonAdapterNames[];
extern const char* const kTritonAdapterTexts[];
extern const std::size_t kTritonAdapterCount;

namespace {

std::wstring widen(const std::string& s) { return std::wstring(s.begin(), s.end()); }

// Starts an interpreter in a process that has none. The program name decides sys.prefix, so a
// virtual environment's python finds its own site-packages this way.
void start_interpreter(const std::string& exe) {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  PyStatus status = PyConfig_SetString(&config, &config.program_name, widen(exe).c_str());
  if (!PyStatus_Exception(status)) {
    status = Py_InitializeFromConfig(&config);
  }
  PyConfig_Clear(&config);
  TORCH_CHECK(!PyStatus_Exception(status), "tjit: could not start the embedded Python interpreter (",
              status.err_msg != nullptr ? status.err_msg : "unknown error",
              "); set TJIT_PYTHON_EXECUTABLE to a python that has triton installed");
  // Any thread may compile later: give the GIL up now and take it per call.
  PyEval_SaveThread();
}

std::string python_error_text(const py::error_already_set& e) { return e.what(); }

// The embedded triton_adapter package as the module `tjit_triton_adapter`. It is registered in
// sys.modules first, and each submodule runs into a module of its own registered as
// tjit_triton_adapter.<name> before the modules that import it run, so their relative imports
// find it; __init__ runs last, into the package. Nothing stays registered when a module fails.
py::object run_triton_adapter() {
  const std::string package_name = "tjit_triton_adapter";
  py::object module_spec = py::module_::import("importlib.machinery").attr("ModuleSpec");
  py::object module_from_spec = py::module_::import("importlib.util").attr("module_from_spec");
  py::object modules = py::module_::import("sys").attr("modules");
  auto new_module = [&](const std::string& name, bool is_package) {
    return module_from_spec(module_spec(name, py::none(), py::arg("is_package") = is_package));
  };
  py::object package = new_module(package_name, true);
  std::vector<std::string> registered{package_name};
  modules[py::str(package_name)] = package;
  try {
    for (std::size_t i = 0; i < kTritonAdapterCount; ++i) {
      const std::string name = kTritonAdapterNames[i];
      if (name == "__init__") {
        py::exec(kTritonAdapterTexts[i], package.attr("__dict__"));
        continue;
      }
      py::object module = new_module(package_name + "." + name, false);
      registered.push_back(package_name + "." + name);
      modules[py::str(registered.back())] = module;
      py::exec(kTritonAdapterTexts[i], module.attr("__dict__"));
      package.attr(name.c_str()) = module;
    }
  } catch (const py::error_already_set&) {
    for (const std::string& name : registered) {
      modules.attr("pop")(name, py::none());
    }
    throw;
  }
  return package;
}

class EmbeddedTritonBridge final : public PythonBridge {
 public:
  explicit EmbeddedTritonBridge(const std::string& python_executable) {
    if (Py_IsInitialized() == 0) {
      start_interpreter(python_executable);
    }
    py::gil_scoped_acquire gil;
    try {
      py::object module = run_triton_adapter();
      // Held for the life of the process and never released: the interpreter may be finalised
      // before static destructors run, and a late decref would crash at exit.
      load_kernel_ = py::object(module.attr("load_kernel")).release().ptr();
      compile_ = py::object(module.attr("compile")).release().ptr();
      run_interpreted_ = py::object(module.attr("run_interpreted")).release().ptr();
      prune_configs_ = py::object(module.attr("prune_configs")).release().ptr();
      heuristic_values_ = py::object(module.attr("heuristic_values")).release().ptr();
      descriptor_hook_ = py::object(module.attr("descriptor_hook")).release().ptr();
    } catch (const py::error_already_set& e) {
      const py::module_ sys = py::module_::import("sys");
      TORCH_CHECK(false, "tjit: could not set up Triton in the embedded Python interpreter: ",
                  python_error_text(e), "\nsys.executable = ", py::str(sys.attr("executable")).cast<std::string>(),
                  "\nsys.path = ", py::str(sys.attr("path")).cast<std::string>(), "\nsys.prefix = ", py::str(sys.attr("prefix")).cast<std::string>(),
                  "\n(is triton installed for this Python? TJIT_PYTHON_EXECUTABLE selects the interpreter)");
    }
  }

  KernelDefinition load_kernel(const std::string& file, const std::string& name) override {
    py::gil_scoped_acquire gil;
    try {
      auto result = py::reinterpret_borrow<py::object>(load_kernel_)(file, name).cast<py::tuple>();
      KernelDefinition loaded;
      loaded.handle = result[0].cast<int64_t>();
      for (py::handle p : result[1].cast<py::list>()) {
        auto t = p.cast<py::tuple>();
        KernelParam param;
        param.name = t[0].cast<std::string>();
        param.is_constexpr = t[1].cast<bool>();
        param.is_const = t[2].cast<bool>();
        param.do_not_specialize = t[3].cast<bool>();
        param.do_not_specialize_on_alignment = t[4].cast<bool>();
        param.annotation_type = t[5].cast<std::string>();
        auto default_value = t[6].cast<py::tuple>();
        if (default_value[0].cast<bool>()) {
          param.default_value = constexpr_from_python(default_value[1]);
        }
        loaded.params.push_back(std::move(param));
      }
      for (py::handle f : result[2].cast<py::list>()) {
        auto t = f.cast<py::tuple>();
        loaded.sources.emplace_back(t[0].cast<std::string>(), t[1].cast<std::string>());
      }
      loaded.triton_version = result[3].cast<std::string>();
      loaded.tuning = result[4].cast<std::string>();
      return loaded;
    } catch (const py::error_already_set& e) {
      TORCH_CHECK(false, "tjit: cannot load kernel '", name, "' from ", file, ": ", python_error_text(e));
    }
  }

  CompiledKernel compile(int64_t handle, const Specialization& spec, const CompileTarget& target,
                         const LaunchOptions& options) override {
    py::gil_scoped_acquire gil;
    try {
      py::list constexprs;
      for (const auto& [index, value] : spec.constexprs) {
        constexprs.append(py::make_tuple(index, to_python(value)));
      }
      py::list tuple_constexprs;
      for (const auto& [path, value] : spec.tuple_constexprs) {
        tuple_constexprs.append(py::make_tuple(py::cast(path), to_python(value)));
      }
      py::dict opts;
      opts["num_warps"] = options.num_warps;
      opts["num_stages"] = options.num_stages;
      opts["num_ctas"] = options.num_ctas;
      opts["enable_fp_fusion"] = options.enable_fp_fusion;
      opts["launch_cooperative_grid"] = options.launch_cooperative_grid;
      opts["launch_pdl"] = options.launch_pdl;
      if (options.maxnreg != 0) {
        opts["maxnreg"] = options.maxnreg;
      }
      py::tuple result = py::reinterpret_borrow<py::object>(compile_)(
          handle, spec.types, constexprs, spec.divisible_by_16,
          py::make_tuple(target.backend, target.arch, target.warp_size), opts, tuple_constexprs,
          spec.tuple_divisible_by_16);
      CompiledKernel kernel;
      kernel.binary = result[0].cast<std::string>();
      py::dict md = result[1];
      kernel.name = md["name"].cast<std::string>();
      kernel.target = target;
      kernel.shared_memory = md["shared"].cast<int>();
      kernel.num_warps = md["num_warps"].cast<int>();
      kernel.num_ctas = md["num_ctas"].cast<int>();
      kernel.global_scratch_size = md["global_scratch_size"].cast<int64_t>();
      kernel.global_scratch_align = md["global_scratch_align"].cast<int64_t>();
      kernel.profile_scratch_size = md["profile_scratch_size"].cast<int64_t>();
      kernel.profile_scratch_align = md["profile_scratch_align"].cast<int64_t>();
      kernel.launch_cooperative_grid = md["launch_cooperative_grid"].cast<bool>();
      kernel.launch_pdl = md["launch_pdl"].cast<bool>();
      for (py::handle item : md["tensor_descriptors"].cast<py::list>()) {
        py::dict d = py::reinterpret_borrow<py::dict>(item);
        DescriptorLaunch launch;
        launch.tma = d["tma"].cast<bool>();
        if (launch.tma) {
          launch.swizzle = d["swizzle"].cast<int>();
          launch.elem_size = d["elem_size"].cast<int>();
          launch.elem_type = d["elem_type"].cast<int>();
          launch.block_size = d["block_size"].cast<std::vector<int>>();
          launch.fp4_padded = d["fp4_padded"].cast<bool>();
        } else {
          launch.flags = d["flags"].cast<int>();
        }
        kernel.tensor_descriptors.push_back(std::move(launch));
      }
      return kernel;
    } catch (const py::error_already_set& e) {
      TORCH_CHECK(false, "triton.compile failed: ", python_error_text(e));
    }
  }

  void run_interpreted(int64_t handle, Grid grid, const LaunchOptions& options,
                       const std::vector<InterpretedArg>& args) override {
    py::gil_scoped_acquire gil;
    try {
      py::reinterpret_borrow<py::object>(run_interpreted_)(
          handle, py::make_tuple(grid.x, grid.y, grid.z), options.num_warps, python_values(args));
    } catch (const py::error_already_set& e) {
      TORCH_CHECK(false, "Triton's interpreter failed: ", python_error_text(e));
    }
  }

  std::vector<int> prune_configs(int64_t handle, const std::vector<InterpretedArg>& args) override {
    py::gil_scoped_acquire gil;
    try {
      return py::reinterpret_borrow<py::object>(prune_configs_)(handle, python_values(args)).cast<std::vector<int>>();
    } catch (const py::error_already_set& e) {
      TORCH_CHECK(false, "prune_configs_by failed: ", python_error_text(e));
    }
  }

  std::vector<std::pair<int, ConstexprValue>> heuristic_values(int64_t handle, const std::vector<InterpretedArg>& args,
                                                               int config) override {
    py::gil_scoped_acquire gil;
    try {
      std::vector<std::pair<int, ConstexprValue>> values;
      py::list result = py::reinterpret_borrow<py::object>(heuristic_values_)(handle, python_values(args), config);
      for (py::handle item : result) {
        auto t = item.cast<py::tuple>();
        values.emplace_back(t[0].cast<int>(), constexpr_from_python(t[1]));
      }
      return values;
    } catch (const py::error_already_set& e) {
      TORCH_CHECK(false, "a @triton.heuristics function failed: ", python_error_text(e));
    }
  }

  std::string descriptor_hook(int64_t handle, int config, const std::string& arguments_json) override {
    py::gil_scoped_acquire gil;
    try {
      return py::reinterpret_borrow<py::object>(descriptor_hook_)(handle, config, arguments_json).cast<std::string>();
    } catch (const py::error_already_set& e) {
      TORCH_CHECK(false, "a config pre_hook failed: ", python_error_text(e));
    }
  }

 private:
  // A value triton_adapter checked: None, bool, int, float, str, a tl.dtype or its JSON {"dtype": name}.
  static ConstexprValue constexpr_from_python(py::handle v) {
    if (v.is_none()) {
      return std::monostate{};
    }
    if (py::isinstance<py::bool_>(v)) {
      return v.cast<bool>();
    }
    if (py::isinstance<py::int_>(v)) {
      return v.cast<int64_t>();
    }
    if (py::isinstance<py::str>(v)) {
      return v.cast<std::string>();
    }
    if (py::isinstance<py::float_>(v)) {
      return v.cast<double>();
    }
    if (py::isinstance<py::dict>(v)) {
      return Dtype::named(v["dtype"].cast<std::string>());
    }
    return Dtype::named(py::str(v).cast<std::string>());  // a tl.dtype
  }

  static py::object to_python(const ConstexprValue& value) {
    return std::visit(
        [](const auto& v) -> py::object {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::monostate>) {
            return py::none();
          } else if constexpr (std::is_same_v<T, Dtype>) {
            return interpreted_value(v);
          } else {
            return py::cast(v);
          }
        },
        value);
  }

  static py::list python_values(const std::vector<InterpretedArg>& args) {
    py::list values;
    for (size_t i = 0; i < args.size();) {
      values.append(python_value(args, i));
    }
    return values;
  }

  // The value at args[i] (a tuple with its elements), advancing i past it.
  static py::object python_value(const std::vector<InterpretedArg>& args, size_t& i) {
    const InterpretedArg& arg = args[i++];
    if (const auto* tuple = std::get_if<InterpretedTuple>(&arg)) {
      py::tuple elements(tuple->size);
      for (size_t e = 0; e < tuple->size; ++e) {
        elements[e] = python_value(args, i);
      }
      return std::move(elements);
    }
    return std::visit([](const auto& v) { return interpreted_value(v); }, arg);
  }

  static py::object interpreted_value(std::monostate) { return py::none(); }
  static py::object interpreted_value(bool v) { return py::bool_(v); }
  static py::object interpreted_value(int64_t v) { return py::int_(v); }
  static py::object interpreted_value(uint64_t v) { return py::int_(v); }
  static py::object interpreted_value(double v) { return py::float_(v); }
  static py::object interpreted_value(const std::string& v) { return py::str(v); }
  static py::object interpreted_value(InterpretedTuple) { return py::none(); }  // python_value builds tuples
  static py::object interpreted_value(Dtype v) {
    return py::module_::import("triton.language").attr("dtype")(v.name());
  }
  static py::object interpreted_value(const TensorDescriptor* d) {
    // triton_adapter turns it into Triton's TensorDescriptor over the shared tensor.
    py::dict out;
    out["tensordesc"] = interpreted_value(&d->base());
    out["shape"] = py::cast(d->shape().vec());
    out["strides"] = py::cast(d->strides().vec());
    out["block_shape"] = py::cast(d->block_shape().vec());
    out["padding"] = d->padding() == Padding::Nan ? "nan" : "zero";
    return std::move(out);
  }
  static py::object interpreted_value(const at::Tensor* t) {
    // Shares the memory: the interpreter writes its results straight into the C++ tensor.
    DLManagedTensor* managed = at::toDLPack(*t);
    PyObject* capsule = PyCapsule_New(managed, "dltensor", [](PyObject* self) {
      // Only a capsule nobody consumed still owns its tensor.
      if (PyCapsule_IsValid(self, "dltensor")) {
        auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(self, "dltensor"));
        if (m != nullptr && m->deleter != nullptr) {
          m->deleter(m);
        }
      }
    });
    if (capsule == nullptr) {
      managed->deleter(managed);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(capsule);
  }

  PyObject* load_kernel_ = nullptr;
  PyObject* compile_ = nullptr;
  PyObject* run_interpreted_ = nullptr;
  PyObject* prune_configs_ = nullptr;
  PyObject* heuristic_values_ = nullptr;
  PyObject* descriptor_hook_ = nullptr;
};

}  // namespace
}  // namespace tjit::detail

extern "C" __attribute__((visibility("default"))) tjit::detail::PythonBridge* tjit_python_bridge_instance(
    const char* python_executable) {
  // Its destructor is trivial (the Python objects are never released), so exit is safe.
  static tjit::detail::EmbeddedTritonBridge bridge(python_executable);
  return &bridge;
}
