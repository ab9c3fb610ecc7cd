// tjit's specialisation of a C++ call must equal what Python Triton derives for the same
// Python call: both are computed here, in one process, on the same arguments.

#include "python/python_bridge.h"

#include <tjit/triton_jit_function.h>

#include <ATen/ops/empty.h>
#include <gtest/gtest.h>
#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <variant>

namespace py = pybind11;

namespace {

const char* test_kernels() {
  const char* path = std::getenv("TJIT_TEST_KERNELS");
  return path != nullptr ? path : "tests/cpp/kernels/runtime_test_kernels.py";
}

// Python Triton's own derivation: the adapter's triton_specialization runs Triton's JITFunction.run
// up to the point where it would compile, on the same arguments (the adapter is where tjit keeps
// what differs between Triton versions).
constexpr const char* kPythonSide = R"py(
import importlib.util, torch
import tjit_triton_adapter

def _load(path, name):
    spec = importlib.util.spec_from_file_location("tjit_spec_test_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
           "float8_e4m3fn": torch.float8_e4m3fn, "float64": torch.float64}

def tensor(spec):
    dtype, offset = spec
    base = torch.empty(64, dtype=_DTYPES[dtype])
    return base[offset:]

def derive(path, name, args):
    return tjit_triton_adapter.triton_specialization(_load(path, name), args, ("cuda", 90, 32))
)py";

struct TensorSpec {
  c10::ScalarType dtype;
  const char* python_dtype;
  int64_t offset;  // elements into a fresh 64-element allocation: decides the alignment
};

struct Case {
  std::string label;
  TensorSpec ptr{at::kFloat, "float32", 0};
  TensorSpec ptr_dnsoa{at::kFloat, "float32", 0};
  TensorSpec const_ptr{at::kFloat, "float32", 0};
  std::variant<int64_t, uint64_t> n = int64_t{1024};
  int64_t n_dns = 1024;
  int64_t n_dnsoa = 32;
  int64_t n_i64 = 16;
  double f = 2.5;
  double f64 = 1.5;
  bool flag = true;
  bool has_maybe_ptr = true;
  int64_t c_int = 128;
  bool c_bool = true;
  double c_float = 0.5;
};

at::Tensor make_tensor(const TensorSpec& s) {
  return at::empty({64}, at::TensorOptions().dtype(s.dtype)).narrow(0, s.offset, 64 - s.offset);
}

class SpecializationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The Python side below needs tjit's embedded interpreter (this binary links libpython).
    // Loading a kernel no longer starts it when the kernel store has the signature: start it here.
    tjit::detail::python_bridge();
    fn_ = &tjit::TritonJitFunction::get_instance(test_kernels(), "everything_kernel");
  }
  static tjit::TritonJitFunction* fn_;
};
tjit::TritonJitFunction* SpecializationTest::fn_ = nullptr;

py::object to_python(const tjit::ConstexprValue& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return py::none();
        } else if constexpr (std::is_same_v<T, tjit::Dtype>) {
          return py::module_::import("triton.language").attr("dtype")(x.name());
        } else {
          return py::cast(x);
        }
      },
      v);
}

// That tjit's specialisation `mine` is Triton's (`theirs`, from the adapter's triton_specialization):
// types, constexprs and divisibility, inside tuples too.
void expect_same(const tjit::Specialization& mine, const py::tuple& theirs) {
  EXPECT_EQ(mine.types, theirs[0].cast<std::vector<std::string>>());
  py::list constants;
  for (const auto& [index, value] : mine.constexprs) {
    constants.append(py::make_tuple(index, to_python(value)));
  }
  EXPECT_TRUE(constants.equal(theirs[1])) << "tjit: " << py::str(constants).cast<std::string>()
                                          << "\ntriton: " << py::str(theirs[1]).cast<std::string>();
  EXPECT_EQ(mine.divisible_by_16, theirs[2].cast<std::vector<int>>());
  py::list tuple_constants;
  for (const auto& [path, value] : mine.tuple_constexprs) {
    tuple_constants.append(py::make_tuple(py::cast(path), to_python(value)));
  }
  EXPECT_TRUE(tuple_constants.equal(theirs[3])) << "tjit: " << py::str(tuple_constants).cast<std::string>()
                                                << "\ntriton: " << py::str(theirs[3]).cast<std::string>();
  EXPECT_EQ(mine.tuple_divisible_by_16, theirs[4].cast<std::vector<std::vector<int>>>());
}

void expect_same_as_python(const Case& c) {
  SCOPED_TRACE(c.label);
  const at::Tensor ptr = make_tensor(c.ptr);
  const at::Tensor ptr_dnsoa = make_tensor(c.ptr_dnsoa);
  const at::Tensor const_ptr = make_tensor(c.const_ptr);
  const at::Tensor maybe = make_tensor({at::kFloat, "float32", 0});
  const std::optional<at::Tensor> maybe_ptr = c.has_maybe_ptr ? std::optional<at::Tensor>(maybe) : std::nullopt;

  auto& fn = tjit::TritonJitFunction::get_instance(test_kernels(), "everything_kernel");
  const tjit::Specialization mine = std::visit(
      [&](auto n) {
        return fn.specialize(ptr, ptr_dnsoa, const_ptr, n, c.n_dns, c.n_dnsoa, c.n_i64, c.f, c.f64, c.flag,
                             maybe_ptr, c.c_int, c.c_bool, c.c_float, std::nullopt);
      },
      c.n);

  py::gil_scoped_acquire gil;
  py::dict scope;
  py::exec(kPythonSide, scope);
  auto tensor = [&](const TensorSpec& s) { return scope["tensor"](py::make_tuple(s.python_dtype, s.offset)); };
  py::object n = std::visit([](auto v) { return py::object(py::int_(v)); }, c.n);
  py::list args;
  args.append(tensor(c.ptr));
  args.append(tensor(c.ptr_dnsoa));
  args.append(tensor(c.const_ptr));
  args.append(n);
  args.append(c.n_dns);
  args.append(c.n_dnsoa);
  args.append(c.n_i64);
  args.append(c.f);
  args.append(c.f64);
  args.append(c.flag);
  args.append(c.has_maybe_ptr ? tensor({at::kFloat, "float32", 0}) : py::none());
  args.append(c.c_int);
  args.append(c.c_bool);
  args.append(c.c_float);
  args.append(py::none());
  expect_same(mine, scope["derive"](test_kernels(), "everything_kernel", args));
}

TEST_F(SpecializationTest, AlignedDefaults) { expect_same_as_python(Case{"aligned defaults"}); }

TEST_F(SpecializationTest, MisalignedPointers) {
  Case c{"misaligned"};
  c.ptr.offset = 1;
  c.ptr_dnsoa.offset = 2;
  c.const_ptr.offset = 3;
  expect_same_as_python(c);
}

TEST_F(SpecializationTest, PointerAlignedOnlyAtSixteenBytes) {
  Case c{"offset 4 floats = 16 bytes"};
  c.ptr.offset = 4;
  c.const_ptr.offset = 2;  // 8 bytes: not aligned
  expect_same_as_python(c);
}

TEST_F(SpecializationTest, ValuesEqualToOne) {
  Case c{"ones"};
  c.n = int64_t{1};
  c.n_dns = 1;
  c.n_dnsoa = 1;
  c.n_i64 = 1;
  c.c_int = 1;
  expect_same_as_python(c);
}

TEST_F(SpecializationTest, IntegerWidthsAndDivisibility) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{17}, int64_t{-16}, int64_t{2147483647}, int64_t{2147483648},
                    int64_t{-2147483648}, int64_t{-2147483649}, int64_t{1} << 40, (int64_t{1} << 40) + 3}) {
    Case c{"n=" + std::to_string(v)};
    c.n = v;
    c.n_dns = v;
    c.n_dnsoa = v;
    c.n_i64 = v;
    expect_same_as_python(c);
  }
}

TEST_F(SpecializationTest, UnsignedAboveInt64IsU64) {
  for (uint64_t v : {uint64_t{1} << 63, ~uint64_t{0}, (uint64_t{1} << 63) + 16}) {
    Case c{"n=" + std::to_string(v)};
    c.n = v;
    expect_same_as_python(c);
  }
}

TEST_F(SpecializationTest, NoneAndFlags) {
  Case c{"None, false"};
  c.has_maybe_ptr = false;
  c.flag = false;
  c.c_bool = false;
  c.f = 1.0;  // a float equal to one stays fp32
  expect_same_as_python(c);
}

TEST_F(SpecializationTest, PointerDtypes) {
  for (const TensorSpec& s :
       {TensorSpec{at::kHalf, "float16", 0}, TensorSpec{at::kBFloat16, "bfloat16", 8}, TensorSpec{at::kLong, "int64", 1},
        TensorSpec{at::kByte, "uint8", 16}, TensorSpec{at::kBool, "bool", 3},
        TensorSpec{at::kFloat8_e4m3fn, "float8_e4m3fn", 0}, TensorSpec{at::kDouble, "float64", 2}}) {
    Case c{std::string("dtype ") + s.python_dtype};
    c.ptr = s;
    c.const_ptr = s;
    expect_same_as_python(c);
  }
}

// String and dtype constexprs: the constexpr values Triton compiles ("leaky_relu", tl.bfloat16),
// from each C++ form of them.
TEST_F(SpecializationTest, StringAndDtypeConstexprs) {
  auto& fn = tjit::TritonJitFunction::get_instance(test_kernels(), "activation_kernel");
  const at::Tensor x = make_tensor({at::kFloat, "float32", 0});
  const at::Tensor out = make_tensor({at::kBFloat16, "bfloat16", 1});
  const std::string relu = "relu";
  const std::vector<tjit::Specialization> mine{
      fn.specialize(x, out, int64_t{1000}, "leaky_relu", tjit::Dtype(at::kBFloat16), int64_t{256}),
      fn.specialize(x, out, int64_t{1000}, relu, at::kFloat, int64_t{256}),
      fn.specialize(x, out, int64_t{1000}, std::string_view("it's \"quoted\", with\na newline"),
                    tjit::Dtype::named("fp8e4b15"), int64_t{256}),
      fn.specialize(x, out, int64_t{1000}, "", tjit::Dtype::named("float8e5"), int64_t{256})};

  py::gil_scoped_acquire gil;
  py::dict scope;
  py::exec(kPythonSide, scope);
  py::module_ tl = py::module_::import("triton.language");
  const std::vector<std::pair<py::object, py::object>> python_values{
      {py::str("leaky_relu"), tl.attr("bfloat16")},
      {py::str("relu"), tl.attr("float32")},
      {py::str("it's \"quoted\", with\na newline"), tl.attr("float8e4b15")},
      {py::str(""), tl.attr("float8e5")}};
  for (size_t i = 0; i < mine.size(); ++i) {
    SCOPED_TRACE(i);
    py::list args;
    args.append(scope["tensor"](py::make_tuple("float32", 0)));
    args.append(scope["tensor"](py::make_tuple("bfloat16", 1)));
    args.append(1000);
    args.append(python_values[i].first);
    args.append(python_values[i].second);
    args.append(256);
    expect_same(mine[i], scope["derive"](test_kernels(), "activation_kernel", args));
  }
  EXPECT_EQ(mine[0].describe(tjit::parameter_names(fn.params())),
            "x_ptr: *fp32:16, out_ptr: *bf16, n: i32, ACTIVATION='leaky_relu', OUT_DTYPE=tl.bfloat16, BLOCK=256");
}

// A string or a dtype only goes to a tl.constexpr parameter, as in Python; a name Triton lacks is
// refused with Triton's names.
TEST_F(SpecializationTest, StringsAndDtypesOnlyForConstexprs) {
  auto& fn = tjit::TritonJitFunction::get_instance(test_kernels(), "activation_kernel");
  const at::Tensor x = make_tensor({at::kFloat, "float32", 0});
  auto message = [](const auto& call) {
    try {
      call();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message([&] { fn.specialize(x, x, "1000", "relu", at::kFloat, int64_t{256}); })
                .find("activation_kernel: parameter 'n' got a string, which only a tl.constexpr parameter takes"),
            std::string::npos);
  EXPECT_NE(message([&] { fn.specialize(x, x, at::kInt, "relu", at::kFloat, int64_t{256}); })
                .find("parameter 'n' got the dtype tl.int32, which only a tl.constexpr parameter takes"),
            std::string::npos);
  EXPECT_NE(message([] { tjit::Dtype::named("float"); }).find("'float' is not a Triton dtype (Triton's: int1, int8"),
            std::string::npos);
  EXPECT_NE(message([] { tjit::Dtype(at::kComplexFloat); }).find("torch dtype ComplexFloat has no Triton type"),
            std::string::npos);
}

// Trailing parameters left out take the kernel's defaults, as Triton's binder applies them.
TEST_F(SpecializationTest, LeftOutParametersTakeTheirDefaults) {
  auto& fn = tjit::TritonJitFunction::get_instance(test_kernels(), "defaults_kernel");
  std::vector<std::string> defaults;
  for (const auto& p : fn.params()) {
    defaults.push_back(p.default_value ? tjit::constexpr_text(*p.default_value) : "-");
  }
  EXPECT_EQ(defaults, (std::vector<std::string>{"-", "-", "-", "2.0", "128", "'relu'", "tl.float32", "None"}));
  const at::Tensor x = make_tensor({at::kFloat, "float32", 0});
  const std::vector<tjit::Specialization> mine{
      fn.specialize(x, x, int64_t{1000}), fn.specialize(x, x, int64_t{1000}, 3.0),
      fn.specialize(x, x, int64_t{1000}, 3.0, int64_t{64}, "none"),
      fn.specialize(x, x, int64_t{1000}, 3.0, int64_t{64}, "none", at::kHalf, x)};

  py::gil_scoped_acquire gil;
  py::dict scope;
  py::exec(kPythonSide, scope);
  for (size_t i = 0; i < mine.size(); ++i) {
    SCOPED_TRACE(i);
    py::list args;
    args.append(scope["tensor"](py::make_tuple("float32", 0)));
    args.append(scope["tensor"](py::make_tuple("float32", 0)));
    args.append(1000);
    if (i >= 1) args.append(3.0);
    if (i >= 2) {
      args.append(64);
      args.append("none");
    }
    if (i >= 3) {
      args.append(py::module_::import("triton.language").attr("float16"));
      args.append(scope["tensor"](py::make_tuple("float32", 0)));
    }
    expect_same(mine[i], scope["derive"](test_kernels(), "defaults_kernel", args));
  }
}

TEST_F(SpecializationTest, OnlyParametersWithDefaultsMayBeLeftOut) {
  auto& fn = tjit::TritonJitFunction::get_instance(test_kernels(), "defaults_kernel");
  const at::Tensor x = make_tensor({at::kFloat, "float32", 0});
  try {
    fn.specialize(x, x);
    ADD_FAILURE() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace())
                  .find("tjit: kernel defaults_kernel takes 8 arguments (x_ptr, out_ptr, n, scale, BLOCK, "
                        "ACTIVATION, OUT_DTYPE, bias_ptr), but 2 were given; n has no default"),
              std::string::npos)
        << e.what_without_backtrace();
  }
}

// Tuple arguments: the tuple's type as Triton writes it, and its elements' constexprs (None, an int
// 1) and divisibility by path, as Triton's binder derives them.
TEST_F(SpecializationTest, TupleArguments) {
  auto& fn = tjit::TritonJitFunction::get_instance(test_kernels(), "tuple_kernel");
  const at::Tensor aligned = make_tensor({at::kFloat, "float32", 0});
  const at::Tensor misaligned = make_tensor({at::kHalf, "float16", 1});
  const std::vector<tjit::Specialization> mine{
      fn.specialize(std::make_tuple(aligned, aligned), std::make_tuple(2.0, std::make_tuple(int64_t{16}, int64_t{1})),
                    int64_t{1000}, int64_t{256}),
      fn.specialize(std::make_pair(misaligned, aligned), std::make_tuple(0.5f, std::make_tuple(3, int64_t{1} << 40)),
                    int64_t{1}, int64_t{256}),
      fn.specialize(std::make_tuple(aligned, std::nullopt), std::make_tuple(true, std::make_tuple(uint64_t{1} << 63, 7)),
                    int64_t{32}, int64_t{256}),
      fn.specialize(std::make_tuple(), std::make_tuple(std::make_tuple()), int64_t{0}, int64_t{256})};

  py::gil_scoped_acquire gil;
  py::dict scope;
  py::exec(kPythonSide, scope);
  auto tensor = [&](const char* dtype, int offset) { return scope["tensor"](py::make_tuple(dtype, offset)); };
  const std::vector<std::vector<py::object>> python_args{
      {py::make_tuple(tensor("float32", 0), tensor("float32", 0)),
       py::make_tuple(2.0, py::make_tuple(16, 1)), py::int_(1000), py::int_(256)},
      {py::make_tuple(tensor("float16", 1), tensor("float32", 0)),
       py::make_tuple(0.5, py::make_tuple(3, py::int_(int64_t{1} << 40))), py::int_(1), py::int_(256)},
      {py::make_tuple(tensor("float32", 0), py::none()),
       py::make_tuple(true, py::make_tuple(py::int_(uint64_t{1} << 63), 7)), py::int_(32), py::int_(256)},
      {py::make_tuple(), py::make_tuple(py::make_tuple()), py::int_(0), py::int_(256)}};
  for (size_t i = 0; i < mine.size(); ++i) {
    SCOPED_TRACE(i);
    py::list args;
    for (const py::object& a : python_args[i]) {
      args.append(a);
    }
    expect_same(mine[i], scope["derive"](test_kernels(), "tuple_kernel", args));
  }
  EXPECT_EQ(mine[0].types[0], "[*fp32,*fp32]");
  EXPECT_EQ(mine[0].types[1], "[fp32,[i32,constexpr]]");
  EXPECT_EQ(mine[0].describe(tjit::parameter_names(fn.params())),
            "pair: (*fp32:16, *fp32:16), scales: (fp32, (i32:16, 1)), n: i32, BLOCK=256");
  EXPECT_EQ(mine[2].describe(tjit::parameter_names(fn.params())),
            "pair: (*fp32:16, None), scales: (u1, (u64:16, i32)), n: i32:16, BLOCK=256");
  EXPECT_EQ(mine[3].describe(tjit::parameter_names(fn.params())), "pair: (), scales: (()), n: i32:16, BLOCK=256");
}

TEST_F(SpecializationTest, TuplesOnlyForRuntimeParameters) {
  auto& fn = tjit::TritonJitFunction::get_instance(test_kernels(), "tuple_kernel");
  const at::Tensor x = make_tensor({at::kFloat, "float32", 0});
  try {
    fn.specialize(std::make_tuple(x, x), std::make_tuple(1.0, std::make_tuple(1, 2)), 10, std::make_tuple(256));
    ADD_FAILURE() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace())
                  .find("tuple_kernel: parameter 'BLOCK' is a tl.constexpr and got a tuple; tjit passes tuples to "
                        "runtime parameters"),
              std::string::npos)
        << e.what_without_backtrace();
  }
  try {
    fn.specialize(std::make_tuple(x, std::string_view("relu")), std::make_tuple(1.0, std::make_tuple(1, 2)), 10, 256);
    ADD_FAILURE() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("parameter 'pair' got a string"), std::string::npos)
        << e.what_without_backtrace();
  }
}

TEST_F(SpecializationTest, DtypeNamesRoundTripThroughTriton) {
  py::gil_scoped_acquire gil;
  py::module_ tl = py::module_::import("triton.language");
  for (uint8_t i = 0;; ++i) {
    std::optional<tjit::Dtype> d;
    try {
      d = tjit::Dtype::from_index(i);
    } catch (const c10::Error&) {
      EXPECT_EQ(i, 18);  // every Triton element type
      break;
    }
    EXPECT_EQ(tl.attr(d->attribute_name()).attr("name").cast<std::string>(), d->name());
    EXPECT_EQ(tjit::Dtype::named(d->name()), *d);
    EXPECT_EQ(tjit::Dtype::named(d->attribute_name()), *d);
  }
  EXPECT_EQ(tjit::Dtype(at::kBFloat16).name(), std::string("bf16"));
  EXPECT_EQ(tjit::Dtype(at::kFloat8_e4m3fn).name(), std::string("fp8e4nv"));
  EXPECT_EQ(tjit::Dtype(at::kBool).name(), std::string("int1"));
}

TEST_F(SpecializationTest, DescribeNamesEveryParameter) {
  const at::Tensor t = make_tensor({at::kFloat, "float32", 0});
  const tjit::Specialization s = fn_->specialize(t, t, t, int64_t{1}, int64_t{7}, int64_t{32}, int64_t{16}, 1.0,
                                                 2.0, true, std::nullopt, int64_t{64}, false, 0.25, std::nullopt);
  std::vector<std::string> names;
  for (const auto& p : fn_->params()) {
    names.push_back(p.name);
  }
  EXPECT_EQ(s.describe(names),
            "ptr: *fp32:16, ptr_dnsoa: *fp32, const_ptr: *kfp32:16, n=1, n_dns: i32, n_dnsoa: i32, "
            "n_i64: i64:16, f: fp32, f64: fp64, flag: u1, maybe_ptr=None, C_INT=64, C_BOOL=False, "
            "C_FLOAT=0.25, C_NONE=None");
}

// A float constexpr never describes like an integer one: they compile differently, and the kernel
// store's key is built from this text.
TEST(ConstexprText, FloatsNeverReadAsIntegers) {
  EXPECT_EQ(tjit::constexpr_text(int64_t{1}), "1");
  EXPECT_EQ(tjit::constexpr_text(1.0), "1.0");
  EXPECT_EQ(tjit::constexpr_text(-2.0), "-2.0");
  EXPECT_EQ(tjit::constexpr_text(0.25), "0.25");
  EXPECT_EQ(tjit::constexpr_text(1e20), "1e+20");
  EXPECT_EQ(tjit::constexpr_text(true), "True");
  EXPECT_EQ(tjit::constexpr_text(std::monostate{}), "None");
  const tjit::Specialization as_int{{"constexpr"}, {{0, int64_t{1}}}, {}};
  const tjit::Specialization as_float{{"constexpr"}, {{0, 1.0}}, {}};
  EXPECT_EQ(as_int.describe({"C"}), "C=1");
  EXPECT_EQ(as_float.describe({"C"}), "C=1.0");
  // Strings as Python's repr writes them; a dtype as tl's attribute.
  EXPECT_EQ(tjit::constexpr_text(std::string("relu")), "'relu'");
  EXPECT_EQ(tjit::constexpr_text(std::string("it's")), "\"it's\"");
  EXPECT_EQ(tjit::constexpr_text(std::string("a'b\"c\\\n\x01")), "'a\\'b\"c\\\\\\n\\x01'");
  EXPECT_EQ(tjit::constexpr_text(std::string("1")), "'1'");
  EXPECT_EQ(tjit::constexpr_text(tjit::Dtype(at::kBFloat16)), "tl.bfloat16");
}

}  // namespace
