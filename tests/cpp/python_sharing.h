#pragma once
// Test support for comparing with Python Triton in the tests' embedded interpreter: C++ values
// shared with Python (tensors by DLPack, so both sides see the same memory), and the Python that
// turns them back into what a Python caller passes.

#include <tjit/tensor_descriptor.h>

#include <ATen/DLConvertor.h>
#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

namespace tjit::testing {

namespace py = pybind11;

// A tensor for Python: a DLPack capsule sharing its memory.
inline py::object shared(const at::Tensor& t) {
  DLManagedTensor* managed = at::toDLPack(t);
  PyObject* capsule = PyCapsule_New(managed, "dltensor", [](PyObject* self) {
    // Only a capsule nobody consumed still owns its tensor.
    if (PyCapsule_IsValid(self, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(self, "dltensor"));
      if (m != nullptr && m->deleter != nullptr) {
        m->deleter(m);
      }
    }
  });
  return py::reinterpret_steal<py::object>(capsule);
}

// A host tensor descriptor for Python: its shared tensor, shape, strides and block shape.
inline py::dict shared(const TensorDescriptor& d) {
  py::dict out;
  out["base"] = shared(d.base());
  out["shape"] = d.shape().vec();
  out["strides"] = d.strides().vec();
  out["block_shape"] = d.block_shape().vec();
  return out;
}

// Python defining _load(path, name) (a kernel from its file) and _value(a) (a shared value as a
// Python caller passes it: tensors, Triton's TensorDescriptor, tuples); the tests' own Python follows.
inline const std::string kPythonValues = R"py(
import importlib, importlib.util, os, sys, torch

def _load(path, name):
    # A file of an importable package (folders with __init__.py up to one on sys.path) is imported
    # by its dotted name, as its package imports it, so its relative imports work.
    folder, parts = os.path.dirname(os.path.abspath(path)), [os.path.splitext(os.path.basename(path))[0]]
    while os.path.exists(os.path.join(folder, "__init__.py")):
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    if len(parts) > 1 and folder in {os.path.abspath(p or ".") for p in sys.path}:
        return getattr(importlib.import_module(".".join(parts)), name)
    spec = importlib.util.spec_from_file_location("tjit_test_kernels_" + str(abs(hash(path))), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)

def _value(a):
    if isinstance(a, tuple):
        return tuple(_value(e) for e in a)
    if isinstance(a, dict):  # a host tensor descriptor over a shared tensor
        from triton.tools.tensor_descriptor import TensorDescriptor
        return TensorDescriptor(torch.from_dlpack(a["base"]), a["shape"], a["strides"], a["block_shape"])
    return torch.from_dlpack(a) if type(a).__name__ == "PyCapsule" else a
)py";

}  // namespace tjit::testing
