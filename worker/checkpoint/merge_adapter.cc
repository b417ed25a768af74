#include "worker/checkpoint/merge_adapter.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/model/lora.h"
#include "common/model/model_config_parse.h"
#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/checkpoint/adapter_config.h"
#include "common/numeric/nf4.h"
#include "common/run/unit_params.h"
#include "worker/checkpoint/bnb4bit.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/tensor_set_writer.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kCopyPieceBytes = uint64_t{64} << 20;  // unchanged tensors, per pwrite
constexpr int64_t kSliceElements = int64_t{1} << 20;      // conversions: 4 MiB of fp32

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Elements [begin, begin + n) of a view, as a view (for page advice and CopyToF32 on a slice).
io::TensorView Slice(const io::TensorView& t, int64_t begin, int64_t n) {
  io::TensorView part;
  part.name = t.name;
  part.dtype = t.dtype;
  part.shape = {n};
  part.data = static_cast<const uint8_t*>(t.data) + begin * io::DTypeSize(t.dtype);
  part.nbytes = static_cast<size_t>(n) * io::DTypeSize(t.dtype);
  return part;
}

// The adapter's two matrices of one base weight.
struct Adapted {
  const model::LoraModule* module = nullptr;
  const io::TensorView* a = nullptr;  // [r, in]
  const io::TensorView* b = nullptr;  // [out, r]
};

absl::StatusOr<std::string> ResolveBase(const MergeAdapterOptions& o, const LoraAdapterConfig& c,
                                        const std::string& config_path) {
  const bool from_flag = !o.base_dir.empty();
  const std::string base = from_flag ? o.base_dir : c.base_model_name_or_path;
  if (base.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        config_path, " has no base_model_name_or_path: name the base model directory (--base)"));
  }
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    return absl::NotFoundError(
        absl::StrCat("base model ", base,
                     from_flag ? " (--base)"
                               : absl::StrCat(" (base_model_name_or_path of ", config_path,
                                              "; a Hub name needs a local copy: pass --base DIR)"),
                     ": not a directory"));
  }
  return base;
}

// ALREADY_EXISTS unless `out` is missing or an empty directory.
absl::Status CheckOut(const std::string& out) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out, ec);
  if (!fs::exists(st)) return absl::OkStatus();
  if (!fs::is_directory(st)) {
    return absl::AlreadyExistsError(absl::StrCat(out, " exists and is not a directory"));
  }
  if (!fs::is_empty(out, ec) || ec) {
    return absl::AlreadyExistsError(
        absl::StrCat(out, " exists and is not empty: name a new directory"));
  }
  return absl::OkStatus();
}

// Pairs every adapter tensor with its module and checks ranks and shapes against the base's
// config. Keyed by the base weight's name.
absl::StatusOr<std::map<std::string, Adapted>> MatchAdapter(
    const io::SafetensorsFile& file, const std::string& path,
    const std::vector<model::LoraModule>& modules, const LoraAdapterConfig& c) {
  std::map<std::string, std::pair<const model::LoraModule*, bool>> by_name;  // bool: is lora_B
  for (const model::LoraModule& m : modules) {
    by_name[m.a_name()] = {&m, false};
    by_name[m.b_name()] = {&m, true};
  }
  std::map<std::string, Adapted> adapted;
  for (const io::TensorView& t : file.tensors()) {
    auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor ", t.name, " matches no module of target_modules [",
                       absl::StrJoin(c.target_modules, ", "),
                       "] in the base model (expected PEFT's "
                       "base_model.model.<module>.lora_A.weight / .lora_B.weight)"));
    }
    Adapted& a = adapted[it->second.first->weight];
    a.module = it->second.first;
    (it->second.second ? a.b : a.a) = &t;
  }
  for (const model::LoraModule& m : modules) {
    auto it = adapted.find(m.weight);
    if (it == adapted.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": module ", m.path, " (target_modules \"", m.target,
                       "\") has no tensors (", m.a_name(), ", ", m.b_name(), ")"));
    }
    const Adapted& a = it->second;
    for (const auto& [view, which, name] :
         {std::tuple{a.a, "lora_A", m.a_name()}, std::tuple{a.b, "lora_B", m.b_name()}}) {
      if (view == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", which, " missing for module ",
                                                       m.path, " (no tensor ", name, ")"));
      }
      if (view->shape.size() != 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": tensor ", name, " has shape ", ShapeText(view->shape), ", expected a matrix"));
      }
    }
    const int64_t rank_a = a.a->shape[0], rank_b = a.b->shape[1];
    if (rank_a != c.r || rank_b != c.r) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": module ", m.path, " has rank ", rank_a != c.r ? rank_a : rank_b,
                       " (", rank_a != c.r ? m.a_name() : m.b_name(), " is ",
                       ShapeText(rank_a != c.r ? a.a->shape : a.b->shape),
                       "), adapter_config.json says r = ", c.r));
    }
    const std::vector<int64_t> want_a = {c.r, m.in}, want_b = {m.out, c.r};
    for (const auto& [view, want, name] :
         {std::tuple{a.a, want_a, m.a_name()}, std::tuple{a.b, want_b, m.b_name()}}) {
      if (view->shape != want) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor ", name, " has shape ", ShapeText(view->shape),
                         ", expected ", ShapeText(want), " for the base's ", m.path, " (", m.in,
                         " -> ", m.out, " features): shape mismatch with the base model"));
      }
    }
  }
  return adapted;
}

absl::Status CheckBaseWeights(const io::SafetensorsModel& base, const std::string& base_dir,
                              const std::map<std::string, Adapted>& adapted,
                              const std::map<std::string, Bnb4bitWeight>& bnb) {
  for (const auto& [weight, a] : adapted) {
    if (bnb.contains(weight)) continue;  // its shape was checked against config.json's
    const io::TensorView* w = base.Find(weight);
    if (w == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("base model ", base_dir, ": missing tensor ",
                                                     weight, " (the weight of adapted module ",
                                                     a.module->path, ")"));
    }
    const std::vector<int64_t> want = a.module->in_out
                                          ? std::vector<int64_t>{a.module->in, a.module->out}
                                          : std::vector<int64_t>{a.module->out, a.module->in};
    if (w->shape != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "base model ", base_dir, ": tensor ", weight, " has shape ", ShapeText(w->shape),
          ", expected ", ShapeText(want), " (config.json's sizes; the adapter's lora_A is ",
          ShapeText(a.a->shape), ", lora_B ", ShapeText(a.b->shape), ")"));
    }
  }
  return absl::OkStatus();
}

// Widens a mapped tensor to fp32, dropping its pages once converted.
void ReadF32(const io::TensorView& t, float* out) {
  const int64_t n = t.num_elements();
  for (int64_t done = 0; done < n; done += kSliceElements) {
    const io::TensorView part = Slice(t, done, std::min(kSliceElements, n - done));
    if (done + kSliceElements < n) {
      io::WillNeed(
          Slice(t, done + kSliceElements, std::min(kSliceElements, n - done - kSliceElements)));
    }
    io::CopyToF32(part, out + done);
    io::Release(part);
  }
}

// Writes fp32 values [n] as elements [begin, begin + n) of `name` in `dtype`.
absl::Status WriteF32As(TensorSetWriter& writer, const std::string& name, io::DType dtype,
                        const float* values, int64_t begin, int64_t n) {
  const uint64_t element = io::DTypeSize(dtype);
  if (dtype == io::DType::kF32) {
    return writer.Write(name, begin * element, values, n * element);
  }
  std::vector<uint16_t> narrow(static_cast<size_t>(std::min(n, kSliceElements)));
  for (int64_t done = 0; done < n; done += kSliceElements) {
    const int64_t k = std::min(kSliceElements, n - done);
    if (dtype == io::DType::kBF16) {
      numeric::Fp32ToBf16(values + done, narrow.data(), static_cast<size_t>(k));
    } else {
      numeric::Fp32ToF16(values + done, narrow.data(), static_cast<size_t>(k));
    }
    MOBIUS_RETURN_IF_ERROR(
        writer.Write(name, (begin + done) * element, narrow.data(), k * element));
  }
  return absl::OkStatus();
}

// An unchanged tensor: its bytes as they are, or converted slice by slice.
absl::Status CopyTensor(TensorSetWriter& writer, const io::TensorView& t, io::DType dtype) {
  const int64_t n = t.num_elements();
  if (dtype == t.dtype) {
    const int64_t piece = static_cast<int64_t>(kCopyPieceBytes / io::DTypeSize(t.dtype));
    for (int64_t done = 0; done < n; done += piece) {
      const io::TensorView part = Slice(t, done, std::min(piece, n - done));
      if (done + piece < n) io::WillNeed(Slice(t, done + piece, std::min(piece, n - done - piece)));
      MOBIUS_RETURN_IF_ERROR(
          writer.Write(t.name, done * io::DTypeSize(dtype), part.data, part.nbytes));
      io::Release(part);
    }
    return absl::OkStatus();
  }
  std::vector<float> slice(static_cast<size_t>(std::min(n, kSliceElements)));
  for (int64_t done = 0; done < n; done += kSliceElements) {
    const io::TensorView part = Slice(t, done, std::min(kSliceElements, n - done));
    io::CopyToF32(part, slice.data());
    io::Release(part);
    MOBIUS_RETURN_IF_ERROR(WriteF32As(writer, t.name, dtype, slice.data(), done, part.shape[0]));
  }
  return absl::OkStatus();
}

// w += scale * (B A), or its transpose for a Conv1D weight [in, out], as PEFT's
// get_delta_weight: (B @ A) in fp32 summed over r in order, times the scaling, then added.
void AddDelta(float* w, const Adapted& a, float scale) {
  const int64_t r = a.a->shape[0], in = a.module->in, out = a.module->out;
  std::vector<float> A(static_cast<size_t>(r * in)), B(static_cast<size_t>(out * r));
  io::CopyToF32(*a.a, A.data());
  io::CopyToF32(*a.b, B.data());
  std::vector<float> row(static_cast<size_t>(in));  // row o of B A
  for (int64_t o = 0; o < out; ++o) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t k = 0; k < r; ++k) {
      const float bk = B[o * r + k];
      const float* ak = A.data() + k * in;
      for (int64_t i = 0; i < in; ++i) row[i] += bk * ak[i];
    }
    if (a.module->in_out) {
      for (int64_t i = 0; i < in; ++i) w[i * out + o] += row[i] * scale;
    } else {
      float* wo = w + o * in;
      for (int64_t i = 0; i < in; ++i) wo[i] += row[i] * scale;
    }
  }
}

absl::Status CopySmallFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::none, ec);
  if (ec)
    return ErrnoError(ec.value(), absl::StrCat("copy ", from, " to ", to), __FILE__, __LINE__);
  const int fd = open(to.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("open ", to));
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("fsync ", to));
  return absl::OkStatus();
}

struct Inputs {
  LoraAdapterConfig config;
  std::string base_dir;
  std::vector<model::LoraModule> modules;
  std::unique_ptr<io::SafetensorsFile> adapter;
  std::unique_ptr<io::SafetensorsModel> base;
  std::map<std::string, Adapted> adapted;  // by base weight name
  // A bitsandbytes 4-bit base (bnb4bit.h): its quantised weights by name, merged into their
  // dequantised values and written 16-bit; their companion tensors are not written.
  std::map<std::string, Bnb4bitWeight> bnb;
  // An adapter trained over an NF4 base (its checkpoint's trainer_state.json says
  // "base_quantization": "nf4") merged into a 16-bit base: the base's NF4 weights, each quantised
  // and dequantised as training saw it before the delta is added.
  std::set<std::string> nf4;
  std::vector<std::string> warnings;
};

// Whether the adapter directory is an NF4 run's checkpoint (adapter_checkpoint.h).
bool TrainedOverNf4(const std::string& adapter_dir) {
  absl::StatusOr<std::string> text =
      ReadSmallFile(adapter_dir + "/trainer_state.json", int64_t{1} << 20);
  if (!text.ok()) return false;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("base_quantization") && j["base_quantization"] == "nf4";
}

// The 4-bit weights of a bitsandbytes base, checked against config.json's shapes.
absl::Status FindBnbWeights(Inputs& in, const model::ModelConfig& model) {
  const FindTensor find = [&](const std::string& name) -> absl::StatusOr<const io::TensorView*> {
    return in.base->Find(name);
  };
  for (const auto& [name, shape] : reference::ParameterShapes(model)) {
    MOBIUS_ASSIGN_OR_RETURN(std::optional<Bnb4bitWeight> w,
                            FindBnb4bit(find, name, shape, "base model " + in.base_dir));
    if (w) in.bnb.emplace(name, *std::move(w));
  }
  if (!in.bnb.empty()) {
    in.warnings.push_back(absl::StrCat(
        "base model ", in.base_dir, " is a bitsandbytes 4-bit checkpoint: its ", in.bnb.size(),
        " quantised weights are merged into their dequantised values and written 16-bit (bf16 "
        "unless --dtype fp32); config.json is written without its quantization_config"));
  }
  return absl::OkStatus();
}

// Reads and checks everything before anything is written.
absl::StatusOr<std::unique_ptr<Inputs>> OpenInputs(const MergeAdapterOptions& o) {
  auto in = std::make_unique<Inputs>();
  std::error_code ec;
  if (!fs::is_directory(o.adapter_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("adapter ", o.adapter_dir, ": not a directory"));
  }
  const std::string config_path = o.adapter_dir + "/" + kAdapterConfigFile;
  MOBIUS_ASSIGN_OR_RETURN(in->config, LoadLoraAdapterConfig(o.adapter_dir));
  MOBIUS_ASSIGN_OR_RETURN(in->base_dir, ResolveBase(o, in->config, config_path));
  MOBIUS_ASSIGN_OR_RETURN(model::ModelConfig model, model::LoadModelConfig(in->base_dir));
  absl::StatusOr<std::vector<model::LoraModule>> modules =
      model::LoraModules(model, in->config.target_modules, "target_modules");
  if (!modules.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": ", modules.status().message(),
                                                   " (base model ", in->base_dir, ")"));
  }
  in->modules = *std::move(modules);
  const bool conv1d = !in->modules.empty() && in->modules.front().in_out;
  if (conv1d != in->config.fan_in_fan_out) {
    in->warnings.push_back(absl::StrCat(
        config_path, ": fan_in_fan_out is ", in->config.fan_in_fan_out ? "true" : "false",
        " but the base's weights are ", conv1d ? "Conv1D [in, out]" : "nn.Linear [out, in]",
        "; merged as the base stores them (as PEFT does)"));
  }
  const std::string adapter_path = o.adapter_dir + "/" + kAdapterModelFile;
  MOBIUS_ASSIGN_OR_RETURN(in->adapter, io::SafetensorsFile::Open(adapter_path));
  MOBIUS_ASSIGN_OR_RETURN(in->adapted,
                          MatchAdapter(*in->adapter, adapter_path, in->modules, in->config));
  MOBIUS_ASSIGN_OR_RETURN(in->base, io::SafetensorsModel::Open(in->base_dir));
  MOBIUS_RETURN_IF_ERROR(FindBnbWeights(*in, model));
  if (TrainedOverNf4(o.adapter_dir)) {
    MOBIUS_ASSIGN_OR_RETURN(std::vector<std::string> names, units::Nf4BaseWeights(model));
    for (std::string& name : names) {
      if (!in->bnb.contains(name)) in->nf4.insert(std::move(name));
    }
    if (!in->nf4.empty()) {
      in->warnings.push_back(absl::StrCat(
          "adapter ", o.adapter_dir, " was trained over an NF4 base: the base's ",
          in->nf4.size(), " linear weights are quantised and dequantised as training saw them "
          "(from their bf16 values) before the adapters are merged in"));
    }
  }
  MOBIUS_RETURN_IF_ERROR(CheckBaseWeights(*in->base, in->base_dir, in->adapted, in->bnb));
  return in;
}

// The model files of `dir`, tensor by tensor.
absl::StatusOr<std::vector<std::string>> WriteModel(const std::string& dir, const Inputs& in,
                                                    const MergeAdapterOptions& o,
                                                    MergeAdapterSummary& summary) {
  const std::vector<std::string> names = in.base->names();
  std::vector<TensorSetWriter::Tensor> plan;
  for (const std::string& name : names) {
    if (auto q = in.bnb.find(name); q != in.bnb.end()) {
      plan.push_back({name, o.dtype.value_or(io::DType::kBF16), q->second.shape});
      continue;
    }
    const size_t dot = name.find(".weight.");
    if (dot != std::string::npos && IsBnb4bitCompanion(name) &&
        in.bnb.contains(name.substr(0, dot + 7))) {
      continue;  // an absmax, quant map or quant state of a 4-bit weight
    }
    const io::TensorView* t = in.base->Find(name);
    plan.push_back({name, o.dtype.value_or(t->dtype), t->shape});
  }
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<TensorSetWriter> writer,
                          TensorSetWriter::Create(dir, "model", plan, o.max_shard_bytes));
  const float scale = static_cast<float>(in.config.scaling());
  for (const TensorSetWriter::Tensor& out : plan) {
    const io::TensorView& t = *in.base->Find(out.name);
    auto adapted = in.adapted.find(out.name);
    auto quantized = in.bnb.find(out.name);
    const bool nf4 = in.nf4.contains(out.name);
    if (adapted == in.adapted.end() && quantized == in.bnb.end() && !nf4) {
      MOBIUS_RETURN_IF_ERROR(CopyTensor(*writer, t, out.dtype));
      continue;
    }
    const int64_t n = quantized != in.bnb.end() ? quantized->second.numel : t.num_elements();
    std::vector<float> w(static_cast<size_t>(n));
    summary.largest_buffer_bytes =
        std::max<uint64_t>(summary.largest_buffer_bytes, w.size() * sizeof(float));
    if (quantized != in.bnb.end()) {
      // As bitsandbytes' dequantize_4bit gives it: rounded to the weight's dtype.
      quantized->second.Dequantize(0, n, w.data());
      const bool f16 = quantized->second.dtype == "float16";
      for (float& x : w) x = f16 ? numeric::F16ToFp32(numeric::Fp32ToF16(x))
                                 : numeric::Bf16ToFp32(numeric::Fp32ToBf16(x));
    } else {
      ReadF32(t, w.data());
    }
    if (nf4) {
      std::vector<uint16_t> bits(w.size());
      numeric::Fp32ToBf16(w.data(), bits.data(), bits.size());
      const numeric::Nf4Tensor q = numeric::QuantizeNf4(bits.data(), n);
      numeric::DequantizeNf4ToBf16(q, bits.data());
      numeric::Bf16ToFp32(bits.data(), w.data(), bits.size());
    }
    if (adapted != in.adapted.end()) {
      AddDelta(w.data(), adapted->second, scale);
      ++summary.merged_modules;
    }
    MOBIUS_RETURN_IF_ERROR(WriteF32As(*writer, out.name, out.dtype, w.data(), 0, n));
  }
  summary.tensors = static_cast<int64_t>(plan.size());
  return writer->Finish();
}

// Everything of OUT into the empty directory `dir`.
absl::Status WriteDirectory(const std::string& dir, const Inputs& in, const MergeAdapterOptions& o,
                            MergeAdapterSummary& summary) {
  MOBIUS_ASSIGN_OR_RETURN(summary.files, WriteModel(dir, in, o, summary));
  std::vector<std::string> copies;
  if (in.bnb.empty()) {
    copies.push_back(in.base_dir + "/config.json");
  } else {  // the merged model is 16-bit: a loader must not take it for a 4-bit one
    MOBIUS_ASSIGN_OR_RETURN(std::string text,
                            ReadSmallFile(in.base_dir + "/config.json", int64_t{16} << 20));
    nlohmann::ordered_json config =
        nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("base model ", in.base_dir, "/config.json: not a JSON object"));
    }
    config.erase("quantization_config");
    MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(dir + "/config.json", config.dump(2) + "\n"));
    summary.files.push_back("config.json");
  }
  std::error_code ec;
  if (fs::is_regular_file(in.base_dir + "/generation_config.json", ec)) {
    copies.push_back(in.base_dir + "/generation_config.json");
  }
  std::vector<std::string> tokenizer = TokenizerFiles(o.adapter_dir);
  if (tokenizer.empty()) tokenizer = TokenizerFiles(in.base_dir);
  copies.insert(copies.end(), tokenizer.begin(), tokenizer.end());
  for (const std::string& from : copies) {
    const std::string name = fs::path(from).filename().string();
    MOBIUS_RETURN_IF_ERROR(CopySmallFile(from, dir + "/" + name));
    summary.files.push_back(name);
  }
  return SyncDirectory(dir);
}

}  // namespace

absl::StatusOr<std::optional<io::DType>> ParseMergeDType(const std::string& name) {
  if (name == "auto") return std::optional<io::DType>();
  if (name == "bf16") return std::optional<io::DType>(io::DType::kBF16);
  if (name == "fp32") return std::optional<io::DType>(io::DType::kF32);
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype must be bf16, fp32 or auto (got \"", name, "\")"));
}

absl::StatusOr<MergeAdapterSummary> MergeAdapter(const MergeAdapterOptions& o) {
  if (o.adapter_dir.empty() || o.out_dir.empty()) {
    return absl::InvalidArgumentError("merge: the adapter and output directories are required");
  }
  if (o.dtype.has_value() && *o.dtype != io::DType::kF32 && *o.dtype != io::DType::kBF16) {
    return absl::InvalidArgumentError("merge: the output dtype must be F32, BF16 or auto");
  }
  MOBIUS_RETURN_IF_ERROR(CheckOut(o.out_dir));
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<Inputs> in, OpenInputs(o));
  MergeAdapterSummary summary;
  summary.base_dir = in->base_dir;
  summary.scaling = in->config.scaling();
  summary.warnings = in->warnings;

  std::error_code ec;
  const fs::path out = fs::absolute(o.out_dir, ec).lexically_normal();
  const fs::path parent = out.parent_path();
  fs::create_directories(parent, ec);
  if (ec)
    return ErrnoError(ec.value(), absl::StrCat("create ", parent.string()), __FILE__, __LINE__);
  const std::string tmp = absl::StrCat(out.string(), ".tmp-", getpid());
  fs::remove_all(tmp, ec);  // a leftover of an earlier run with this pid
  if (!fs::create_directory(tmp, ec) || ec) {
    return ErrnoError(ec.value(), absl::StrCat("create ", tmp), __FILE__, __LINE__);
  }
  absl::Status st = WriteDirectory(tmp, *in, o, summary);
  if (st.ok() && rename(tmp.c_str(), out.c_str()) != 0) {
    st = (errno == ENOTEMPTY || errno == EEXIST || errno == ENOTDIR)
             ? absl::AlreadyExistsError(absl::StrCat(out.string(), " appeared while merging"))
             : MOBIUS_ERRNO_ERROR(absl::StrCat("rename ", tmp, " to ", out.string()));
  }
  if (st.ok()) st = SyncDirectory(parent.string());
  if (!st.ok()) {
    fs::remove_all(tmp, ec);
    return st;
  }
  return summary;
}

}  // namespace mobius::checkpoint
