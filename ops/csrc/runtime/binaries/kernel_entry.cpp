#include "binaries/kernel_entry.h"

#include "binaries/constexpr_json.h"

#include <c10/util/hash.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace tjit::detail {
namespace {

using nlohmann::json;

// Frame: magic (8) | format (u32 LE) | header bytes (u32 LE) | binary bytes (u64 LE) |
//        SHA-1 of header + binary (40 hex digits) | header (JSON) | binary
constexpr size_t kMagicSize = 8;
constexpr size_t kChecksumSize = 40;
constexpr size_t kFrameSize = kMagicSize + 4 + 4 + 8 + kChecksumSize;
constexpr char kEntryMagic[] = "TJITKRNL";
constexpr char kSignatureMagic[] = "TJITSIGN";
constexpr char kDecisionMagic[] = "TJITDCSN";
constexpr char kBundleMagic[] = "TJITBNDL";

template <typename T>
void put_le(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff));
  }
}

template <typename T>
T get_le(std::string_view in, size_t offset) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= uint64_t(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  }
  return static_cast<T>(v);
}

std::string frame(const char* magic, const std::string& header, const std::string& binary) {
  std::string contents = header + binary;
  std::string out(magic, kMagicSize);
  put_le<uint32_t>(out, kStoreFormatVersion);
  put_le<uint32_t>(out, static_cast<uint32_t>(header.size()));
  put_le<uint64_t>(out, binary.size());
  out += c10::sha1(contents).str();
  out += contents;
  return out;
}

// Splits a frame into (header, binary) after checking magic, version, sizes and checksum.
std::pair<std::string, std::string> unframe(const char* magic, const std::string& bytes) {
  if (bytes.size() < kFrameSize) {
    throw CorruptStoreFile("shorter (" + std::to_string(bytes.size()) + " bytes) than its frame");
  }
  if (std::memcmp(bytes.data(), magic, kMagicSize) != 0) {
    throw CorruptStoreFile("not a tjit store file (wrong magic)");
  }
  const auto format = get_le<uint32_t>(bytes, 8);
  if (format != kStoreFormatVersion) {
    throw CorruptStoreFile("store format " + std::to_string(format) + ", this tjit reads " +
                           std::to_string(kStoreFormatVersion));
  }
  const uint64_t header_size = get_le<uint32_t>(bytes, 12);
  const uint64_t binary_size = get_le<uint64_t>(bytes, 16);
  const uint64_t expected = kFrameSize + header_size + binary_size;
  if (binary_size > bytes.size() || header_size > bytes.size() || expected != bytes.size()) {
    throw CorruptStoreFile("size " + std::to_string(bytes.size()) + " bytes, its frame says " +
                           std::to_string(expected));
  }
  std::string contents = bytes.substr(kFrameSize);
  if (c10::sha1(contents).str() != bytes.substr(kMagicSize + 16, kChecksumSize)) {
    throw CorruptStoreFile("checksum mismatch");
  }
  return {contents.substr(0, header_size), contents.substr(header_size)};
}

json parse_header(const std::string& header) {
  try {
    json j = json::parse(header);
    if (!j.is_object()) {
      throw CorruptStoreFile("header is not a JSON object");
    }
    return j;
  } catch (const json::exception& e) {
    throw CorruptStoreFile(std::string("header is not valid JSON: ") + e.what());
  }
}

ConstexprValue constexpr_from_json(const json& j) {
  if (auto value = constexpr_value_from_json(j)) {
    return *value;
  }
  throw CorruptStoreFile("constexpr value " + j.dump() + " is not None, a bool, an int, a float, a string or a dtype");
}

json params_to_json(const std::vector<KernelParam>& params) {
  json out = json::array();
  for (const KernelParam& p : params) {
    out.push_back({{"name", p.name},
                   {"constexpr", p.is_constexpr},
                   {"const", p.is_const},
                   {"do_not_specialize", p.do_not_specialize},
                   {"do_not_specialize_on_alignment", p.do_not_specialize_on_alignment},
                   {"annotation", p.annotation_type}});
    if (p.default_value) {
      out.back()["default"] = constexpr_value_json<json>(*p.default_value);
    }
  }
  return out;
}

std::vector<KernelParam> params_from_json(const json& j) {
  std::vector<KernelParam> params;
  for (const json& p : j) {
    KernelParam param;
    param.name = p.at("name").get<std::string>();
    param.is_constexpr = p.at("constexpr").get<bool>();
    param.is_const = p.at("const").get<bool>();
    param.do_not_specialize = p.at("do_not_specialize").get<bool>();
    param.do_not_specialize_on_alignment = p.at("do_not_specialize_on_alignment").get<bool>();
    param.annotation_type = p.at("annotation").get<std::string>();
    if (p.contains("default")) {
      param.default_value = constexpr_from_json(p.at("default"));
    }
    params.push_back(std::move(param));
  }
  return params;
}

json signature_to_json(const KernelSignature& s) {
  json sources = json::array();
  for (const SourceFile& f : s.sources) {
    sources.push_back({{"path", f.path}, {"fingerprint", f.fingerprint}});
  }
  return {{"file", s.file},
          {"function", s.function},
          {"params", params_to_json(s.params)},
          {"sources", sources},
          {"triton", s.triton_version},
          {"tuning", s.tuning},
          {"param_defaults", true}};  // its params carry their defaults
}

// `tuning` is optional in kernel entries and bundles (older ones have none; the runtime reads a
// kernel's configs from its signature record or bundle index), required in signature records, so
// a record from before autotune support is not taken as "not autotuned".
KernelSignature signature_from_json(const json& j, bool tuning_required = false) {
  KernelSignature s;
  s.file = j.at("file").get<std::string>();
  s.function = j.at("function").get<std::string>();
  s.params = params_from_json(j.at("params"));
  for (const json& f : j.at("sources")) {
    s.sources.push_back({f.at("path").get<std::string>(), f.at("fingerprint").get<std::string>()});
  }
  s.triton_version = j.at("triton").get<std::string>();
  if (tuning_required && !j.contains("tuning")) {
    throw OutdatedStoreFile("written by an earlier tjit, without the kernel's autotune description");
  }
  if (tuning_required && !j.contains("param_defaults")) {
    throw OutdatedStoreFile("written by an earlier tjit, without the parameters' defaults");
  }
  if (j.contains("tuning")) {
    s.tuning = j.at("tuning").get<std::string>();
  }
  return s;
}

Specialization specialization_from_json(const json& spec) {
  Specialization s;
  s.types = spec.at("types").get<std::vector<std::string>>();
  for (const json& c : spec.at("constexprs")) {
    s.constexprs.emplace_back(c.at(0).get<int>(), constexpr_from_json(c.at(1)));
  }
  s.divisible_by_16 = spec.at("divisible_by_16").get<std::vector<int>>();
  if (spec.contains("tuple_constexprs")) {  // written only for calls with tuples
    for (const json& c : spec.at("tuple_constexprs")) {
      s.tuple_constexprs.emplace_back(c.at(0).get<std::vector<int>>(), constexpr_from_json(c.at(1)));
    }
  }
  if (spec.contains("tuple_divisible_by_16")) {
    s.tuple_divisible_by_16 = spec.at("tuple_divisible_by_16").get<std::vector<std::vector<int>>>();
  }
  // The runtime lists both by parameter index; a hand-made file may not.
  std::sort(s.constexprs.begin(), s.constexprs.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::sort(s.divisible_by_16.begin(), s.divisible_by_16.end());
  return s;
}

LaunchOptions options_from_json(const json& o) {
  LaunchOptions options;
  options.num_warps = o.at("num_warps").get<int>();
  options.num_stages = o.at("num_stages").get<int>();
  options.num_ctas = o.at("num_ctas").get<int>();
  options.enable_fp_fusion = o.at("enable_fp_fusion").get<bool>();
  options.launch_cooperative_grid = o.at("launch_cooperative_grid").get<bool>();
  options.launch_pdl = o.at("launch_pdl").get<bool>();
  options.maxnreg = o.value("maxnreg", 0);  // written only when set
  return options;
}

CompileTarget target_from_json(const json& t) {
  CompileTarget target;
  target.backend = t.at("backend").get<std::string>();
  target.arch = t.at("arch").get<int>();
  target.warp_size = t.at("warp_size").get<int>();
  return target;
}

template <typename F>
auto decoding(F&& f) {
  try {
    return f();
  } catch (const json::exception& e) {
    throw CorruptStoreFile(std::string("header misses or mistypes a field: ") + e.what());
  }
}

}  // namespace

std::string encode_entry(const KernelEntry& e) {
  json constexprs = json::array();
  for (const auto& [index, value] : e.specialization.constexprs) {
    constexprs.push_back(json::array({index, constexpr_value_json<json>(value)}));
  }
  const CompiledKernel& c = e.compiled;
  json specialization = {{"types", e.specialization.types},
                         {"constexprs", constexprs},
                         {"divisible_by_16", e.specialization.divisible_by_16}};
  if (!e.specialization.tuple_constexprs.empty() || !e.specialization.tuple_divisible_by_16.empty()) {
    json tuple_constexprs = json::array();
    for (const auto& [path, value] : e.specialization.tuple_constexprs) {
      tuple_constexprs.push_back(json::array({path, constexpr_value_json<json>(value)}));
    }
    specialization["tuple_constexprs"] = tuple_constexprs;
    specialization["tuple_divisible_by_16"] = e.specialization.tuple_divisible_by_16;
  }
  json header = {
      {"key", e.key},
      {"kernel", signature_to_json(e.kernel)},
      {"specialization", specialization},
      {"options",
       {{"num_warps", e.options.num_warps},
        {"num_stages", e.options.num_stages},
        {"num_ctas", e.options.num_ctas},
        {"enable_fp_fusion", e.options.enable_fp_fusion},
        {"launch_cooperative_grid", e.options.launch_cooperative_grid},
        {"launch_pdl", e.options.launch_pdl}}},
      {"target", {{"backend", c.target.backend}, {"arch", c.target.arch}, {"warp_size", c.target.warp_size}}},
      {"launch",
       {{"symbol", c.name},
        {"shared_memory", c.shared_memory},
        {"num_warps", c.num_warps},
        {"num_ctas", c.num_ctas},
        {"global_scratch_size", c.global_scratch_size},
        {"global_scratch_align", c.global_scratch_align},
        {"profile_scratch_size", c.profile_scratch_size},
        {"profile_scratch_align", c.profile_scratch_align},
        {"launch_cooperative_grid", c.launch_cooperative_grid},
        {"launch_pdl", c.launch_pdl}}},
      {"binary_format", "cubin"},
  };
  if (e.options.maxnreg != 0) {
    header["options"]["maxnreg"] = e.options.maxnreg;
  }
  if (!c.tensor_descriptors.empty()) {  // only kernels with tensor-descriptor parameters have it
    json descriptors = json::array();
    for (const DescriptorLaunch& d : c.tensor_descriptors) {
      descriptors.push_back(d.tma ? json{{"tma", true},
                                         {"swizzle", d.swizzle},
                                         {"elem_size", d.elem_size},
                                         {"elem_type", d.elem_type},
                                         {"block_size", d.block_size},
                                         {"fp4_padded", d.fp4_padded}}
                                  : json{{"tma", false}, {"flags", d.flags}});
    }
    header["launch"]["tensor_descriptors"] = std::move(descriptors);
  }
  return frame(kEntryMagic, header.dump(), c.binary);
}

KernelEntry decode_entry(const std::string& bytes) {
  auto [header, binary] = unframe(kEntryMagic, bytes);
  const json j = parse_header(header);
  return decoding([&] {
    KernelEntry e;
    e.key = j.at("key").get<std::string>();
    e.kernel = signature_from_json(j.at("kernel"));
    e.specialization = specialization_from_json(j.at("specialization"));
    e.options = options_from_json(j.at("options"));
    CompiledKernel& c = e.compiled;
    c.target = target_from_json(j.at("target"));
    const json& l = j.at("launch");
    c.name = l.at("symbol").get<std::string>();
    c.shared_memory = l.at("shared_memory").get<int>();
    c.num_warps = l.at("num_warps").get<int>();
    c.num_ctas = l.at("num_ctas").get<int>();
    c.global_scratch_size = l.at("global_scratch_size").get<int64_t>();
    c.global_scratch_align = l.at("global_scratch_align").get<int64_t>();
    c.profile_scratch_size = l.at("profile_scratch_size").get<int64_t>();
    c.profile_scratch_align = l.at("profile_scratch_align").get<int64_t>();
    c.launch_cooperative_grid = l.at("launch_cooperative_grid").get<bool>();
    c.launch_pdl = l.at("launch_pdl").get<bool>();
    if (const auto it = l.find("tensor_descriptors"); it != l.end()) {
      for (const json& d : *it) {
        DescriptorLaunch launch;
        launch.tma = d.at("tma").get<bool>();
        if (launch.tma) {
          launch.swizzle = d.at("swizzle").get<int>();
          launch.elem_size = d.at("elem_size").get<int>();
          launch.elem_type = d.at("elem_type").get<int>();
          launch.block_size = d.at("block_size").get<std::vector<int>>();
          launch.fp4_padded = d.at("fp4_padded").get<bool>();
        } else {
          launch.flags = d.at("flags").get<int>();
        }
        c.tensor_descriptors.push_back(std::move(launch));
      }
    }
    if (j.at("binary_format").get<std::string>() != "cubin") {
      throw CorruptStoreFile("binary format " + j.at("binary_format").dump() + " is not cubin");
    }
    const auto descriptor_params = std::count_if(e.specialization.types.begin(), e.specialization.types.end(),
                                                 [](const std::string& t) { return t.rfind("tensordesc<", 0) == 0; });
    if (c.name.empty() || binary.empty() || c.num_warps <= 0 || c.num_ctas <= 0 || c.shared_memory < 0 ||
        e.kernel.params.size() != e.specialization.types.size() ||
        static_cast<size_t>(descriptor_params) != c.tensor_descriptors.size()) {
      throw CorruptStoreFile("inconsistent launch metadata");
    }
    c.binary = std::move(binary);
    return e;
  });
}

std::string encode_signature(const KernelSignature& signature) {
  return frame(kSignatureMagic, signature_to_json(signature).dump(), std::string());
}

KernelSignature decode_signature(const std::string& bytes) {
  auto [header, binary] = unframe(kSignatureMagic, bytes);
  if (!binary.empty()) {
    throw CorruptStoreFile("a signature record carries no binary");
  }
  const json j = parse_header(header);
  return decoding([&] { return signature_from_json(j, /*tuning_required=*/true); });
}

std::string encode_decision_record(const DecisionRecord& record) {
  return frame(kDecisionMagic, json{{"key", record.key}, {"value", json::parse(record.value)}}.dump(), std::string());
}

DecisionRecord decode_decision_record(const std::string& bytes) {
  auto [header, binary] = unframe(kDecisionMagic, bytes);
  if (!binary.empty()) {
    throw CorruptStoreFile("a decision record carries no binary");
  }
  const json j = parse_header(header);
  return decoding([&] { return DecisionRecord{j.at("key").get<std::string>(), j.at("value").dump()}; });
}

BundleIndex decode_bundle_index(std::string_view bytes) {
  // Frame: magic (8) | format (u32 LE) | index bytes (u32 LE) | payload bytes (u64 LE) |
  //        SHA-1 of the index (40 hex digits) | index | payload
  //        (the checksum covers the index's JSON)
  // Index: JSON bytes (u32 LE) | JSON | records (u32 LE) | per record: kernel (u32 LE),
  //        key bytes (u32 LE), offset (u64 LE), size (u64 LE), key
  if (bytes.size() < kFrameSize) {
    throw CorruptStoreFile("shorter (" + std::to_string(bytes.size()) + " bytes) than a bundle's frame");
  }
  if (std::memcmp(bytes.data(), kBundleMagic, kMagicSize) != 0) {
    throw CorruptStoreFile("not a tjit kernel bundle (wrong magic)");
  }
  const auto format = get_le<uint32_t>(bytes, 8);
  if (format != kBundleFormatVersion) {
    throw CorruptStoreFile("bundle format " + std::to_string(format) + ", this tjit reads " +
                           std::to_string(kBundleFormatVersion) + "; rebuild it with this tjit's python -m tjit aot build");
  }
  const uint64_t index_size = get_le<uint32_t>(bytes, 12);
  const uint64_t payload_size = get_le<uint64_t>(bytes, 16);
  if (payload_size > bytes.size() || kFrameSize + index_size + payload_size != bytes.size()) {
    throw CorruptStoreFile("size " + std::to_string(bytes.size()) + " bytes, its frame says " +
                           std::to_string(kFrameSize + index_size + payload_size));
  }
  const std::string_view index = bytes.substr(kFrameSize, index_size);
  size_t at = 0;
  const auto need = [&](uint64_t n, const char* what) {
    if (n > index.size() - at) {
      throw CorruptStoreFile(std::string("its index ends inside ") + what);
    }
  };
  need(4, "the JSON size");
  const uint64_t json_size = get_le<uint32_t>(index, at);
  at += 4;
  need(json_size, "the JSON");
  // The checksum covers the JSON; records are checked when used (an entry's own checksum, and its
  // key against its header), which saves hashing them all (~2 ms for the operators' 1018) here.
  const std::string json_text(index.substr(at, json_size));
  if (c10::sha1(json_text).str() != bytes.substr(kMagicSize + 16, kChecksumSize)) {
    throw CorruptStoreFile("index checksum mismatch");
  }
  const json j = parse_header(json_text);
  at += json_size;
  BundleIndex b;
  b.payload_offset = kFrameSize + index_size;
  decoding([&] {
    // Index version 2 adds decisions of kind "descriptor_hook" (config pre_hooks' effects).
    const int version = j.at("version").get<int>();
    if (j.at("format").get<std::string>() != "tjit kernel bundle" || (version != 1 && version != 2)) {
      throw CorruptStoreFile("its index is not a version 1 or 2 tjit kernel bundle index");
    }
    b.triton_version = j.at("created_by").at("triton").get<std::string>();
    b.targets = j.at("targets").get<std::vector<std::string>>();
    for (const json& k : j.at("kernels")) {
      b.kernels.push_back({k.at("file_name").get<std::string>(), signature_from_json(k.at("signature")), {}});
      for (const json& d : k.value("decisions", json::array())) {
        b.kernels.back().decisions.emplace(
            bundle_decision_key(d.at("kind").get<std::string>(), d.at("key").get<std::string>()), d.at("value").dump());
      }
      if (b.kernels.back().signature.function != k.at("function").get<std::string>()) {
        throw CorruptStoreFile("kernel " + k.at("function").dump() + " has the signature of another function");
      }
    }
    return 0;
  });
  need(4, "the record count");
  const uint64_t count = get_le<uint32_t>(index, at);
  at += 4;
  b.entries.reserve(std::min<uint64_t>(count, index.size() / 24));
  for (uint64_t i = 0; i < count; ++i) {
    need(24, "a record");
    BundleIndex::Entry r;
    r.kernel = get_le<uint32_t>(index, at);
    const uint64_t key_size = get_le<uint32_t>(index, at + 4);
    r.offset = get_le<uint64_t>(index, at + 8);
    r.size = get_le<uint64_t>(index, at + 16);
    at += 24;
    need(key_size, "a record's key");
    r.key = std::string(index.substr(at, key_size));
    at += key_size;
    if (r.kernel >= b.kernels.size() || r.offset > payload_size || r.size > payload_size - r.offset) {
      throw CorruptStoreFile("record " + std::to_string(i) + " of its index is inconsistent");
    }
    b.entries.push_back(std::move(r));
  }
  if (at != index.size()) {
    throw CorruptStoreFile("its index has " + std::to_string(index.size() - at) + " bytes after its records");
  }
  return b;
}

std::string bundle_key(const std::string& function, const std::string& file_name, const Specialization& spec,
                       const LaunchOptions& o, const CompileTarget& target) {
  std::string key = function;
  key += '\n';
  key += file_name;
  key += '\n';
  for (const std::string& t : spec.types) {
    key += t;
    key += ',';
  }
  key += '\n';
  const auto append_value = [&key](const ConstexprValue& value) {
    std::visit(
        [&key](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::monostate>) {
            key += "none";
          } else if constexpr (std::is_same_v<T, bool>) {
            key += v ? "bool:1" : "bool:0";
          } else if constexpr (std::is_same_v<T, double>) {
            uint64_t bits = 0;
            std::memcpy(&bits, &v, sizeof(bits));
            key += "float:" + std::to_string(bits);
          } else if constexpr (std::is_same_v<T, std::string>) {
            key += "str:" + std::to_string(v.size()) + ':' + v;  // by length: a string may hold ',' or '\n'
          } else if constexpr (std::is_same_v<T, Dtype>) {
            key += std::string("dtype:") + v.name();
          } else {
            key += "int:" + std::to_string(v);
          }
        },
        value);
  };
  // A path inside a tuple parameter: "2.0.1".
  const auto append_path = [&key](const std::vector<int>& path) {
    for (size_t i = 0; i < path.size(); ++i) {
      key += (i == 0 ? "" : ".") + std::to_string(path[i]);
    }
  };
  for (const auto& [index, value] : spec.constexprs) {
    key += std::to_string(index);
    key += '=';
    append_value(value);
    key += ',';
  }
  for (const auto& [path, value] : spec.tuple_constexprs) {  // only calls with tuples have these
    append_path(path);
    key += '=';
    append_value(value);
    key += ',';
  }
  key += '\n';
  for (int d : spec.divisible_by_16) {
    key += std::to_string(d);
    key += ',';
  }
  for (const auto& path : spec.tuple_divisible_by_16) {
    append_path(path);
    key += ',';
  }
  key += '\n';
  for (int v : {o.num_warps, o.num_stages, o.num_ctas, int(o.enable_fp_fusion), int(o.launch_cooperative_grid),
                int(o.launch_pdl)}) {
    key += std::to_string(v);
    key += ',';
  }
  if (o.maxnreg != 0) {  // only when set, as in ops/aot/keys.py
    key += "maxnreg=" + std::to_string(o.maxnreg) + ',';
  }
  key += '\n';
  key += target.to_string();
  return key;
}

bool entry_matches_index(const KernelEntry& entry, const BundleIndex::Entry& record, const BundleIndex::Kernel& kernel) {
  return entry.kernel.function == kernel.signature.function && entry.kernel.params == kernel.signature.params &&
         bundle_key(kernel.signature.function, kernel.file_name, entry.specialization, entry.options,
                    entry.compiled.target) == record.key;
}

}  // namespace tjit::detail
