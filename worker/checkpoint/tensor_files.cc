#include "worker/checkpoint/tensor_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/numeric/bf16.h"
#include "common/status_macros.h"

namespace mobius::checkpoint {
namespace {

using Json = nlohmann::ordered_json;

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// One shard's tensors, converted to the output dtype (the buffers must outlive the write).
absl::Status WriteShard(const std::string& path, const reference::Parameters& tensors,
                        const TensorShapes& entries, io::DType dtype) {
  std::vector<io::TensorToWrite> out;
  std::vector<std::vector<uint16_t>> bf16_buffers;
  bf16_buffers.reserve(entries.size());
  for (const auto& [name, shape] : entries) {
    auto it = tensors.tensors.find(name);
    if (it == tensors.tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": no tensor named ", name));
    }
    const reference::Tensor& t = it->second;
    if (t.shape != shape || t.numel() != NumElements(shape)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor ", name, " has shape ",
                                                     ShapeText(t.shape), ", expected ",
                                                     ShapeText(shape)));
    }
    io::TensorToWrite w{name, dtype, shape, t.data.data(), t.data.size() * sizeof(float)};
    if (dtype == io::DType::kBF16) {
      bf16_buffers.emplace_back(t.data.size());
      numeric::Fp32ToBf16(t.data.data(), bf16_buffers.back().data(), t.data.size());
      w.data = bf16_buffers.back().data();
      w.nbytes = t.data.size() * sizeof(uint16_t);
    }
    out.push_back(std::move(w));
  }
  return io::WriteSafetensors(path, out, {{"format", "pt"}});
}

// Reads the index of a sharded set: tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ReadIndex(const std::string& path) {
  MOBIUS_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, int64_t{64} << 20));
  Json index = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") ||
      !index["weight_map"].is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a safetensors index (JSON object with a \"weight_map\" object)"));
  }
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": weight_map[\"", name, "\"] is not a string"));
    }
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map[\"", name, "\"]: bad shard name \"", f, "\""));
    }
    map[name] = f;
  }
  return map;
}

absl::Status CheckTensor(const std::string& file, const io::TensorView& view,
                         const std::vector<int64_t>& shape,
                         std::optional<io::DType> required_dtype) {
  if (view.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": tensor ", view.name, " has shape ",
                                                   ShapeText(view.shape), ", expected ",
                                                   ShapeText(shape)));
  }
  if (required_dtype && view.dtype != *required_dtype) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": tensor ", view.name, " is ",
                                                   io::DTypeName(view.dtype), ", expected ",
                                                   io::DTypeName(*required_dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

TensorSetPlan PlanTensorSet(const std::string& base, const TensorShapes& order, io::DType dtype,
                            int64_t max_shard_bytes) {
  return PlanTensorSet(base, order, std::vector<io::DType>(order.size(), dtype), max_shard_bytes);
}

TensorSetPlan PlanTensorSet(const std::string& base, const TensorShapes& order,
                            const std::vector<io::DType>& dtypes, int64_t max_shard_bytes) {
  std::vector<TensorShapes> shards(1);
  int64_t total_bytes = 0, shard_bytes = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& entry = order[i];
    const int64_t bytes =
        NumElements(entry.second) * static_cast<int64_t>(io::DTypeSize(dtypes.at(i)));
    if (shard_bytes > 0 && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(entry);
    shard_bytes += bytes;
    total_bytes += bytes;
  }
  TensorSetPlan plan;
  if (shards.size() == 1) {
    plan.shards.push_back({base + ".safetensors", std::move(shards[0])});
    return plan;
  }
  Json weight_map = Json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file =
        absl::StrFormat("%s-%05d-of-%05d.safetensors", base, i + 1, shards.size());
    for (const auto& entry : shards[i]) weight_map[entry.first] = file;
    plan.shards.push_back({file, std::move(shards[i])});
  }
  Json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
  plan.index_file = base + ".safetensors.index.json";
  plan.index_json = index.dump(2) + "\n";
  return plan;
}

absl::StatusOr<std::vector<std::string>> WriteTensorSet(const std::string& dir,
                                                        const std::string& base,
                                                        const reference::Parameters& tensors,
                                                        const TensorShapes& order,
                                                        io::DType dtype,
                                                        int64_t max_shard_bytes) {
  if (dtype != io::DType::kF32 && dtype != io::DType::kBF16) {
    return absl::InvalidArgumentError("WriteTensorSet: dtype must be F32 or BF16");
  }
  const TensorSetPlan plan = PlanTensorSet(base, order, dtype, max_shard_bytes);
  std::vector<std::string> files;
  for (const TensorSetShard& shard : plan.shards) {
    MOBIUS_RETURN_IF_ERROR(WriteShard(dir + "/" + shard.file, tensors, shard.tensors, dtype));
    files.push_back(shard.file);
  }
  if (!plan.index_file.empty()) {
    MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + plan.index_file, plan.index_json));
    files.push_back(plan.index_file);
  }
  return files;
}

absl::StatusOr<std::unique_ptr<TensorSetReader>> TensorSetReader::Open(
    const std::string& dir, const std::string& base, const TensorShapes& expected_parts,
    std::optional<io::DType> required_dtype, const std::vector<model::FusedTensor>& fused) {
  // What the files hold: every fused tensor whole, where its first part is expected.
  std::map<std::string, const model::FusedTensor*> fused_by_part;
  for (const model::FusedTensor& f : fused) {
    for (const std::string& part : f.parts) fused_by_part[part] = &f;
  }
  TensorShapes expected;
  for (const auto& entry : expected_parts) {
    auto f = fused_by_part.find(entry.first);
    if (f == fused_by_part.end()) {
      expected.push_back(entry);
    } else if (entry.first == f->second->parts.front()) {
      expected.emplace_back(f->second->name, f->second->shape);
    }
  }
  // Which file holds each tensor.
  std::map<std::string, std::string> where;
  const std::string single = base + ".safetensors";
  const std::string index_name = base + ".safetensors.index.json";
  const std::string index_path = dir + "/" + index_name;
  std::unique_ptr<TensorSetReader> reader(new TensorSetReader());
  if (access((dir + "/" + single).c_str(), F_OK) == 0) {
    for (const auto& entry : expected) where[entry.first] = single;
  } else if (access(index_path.c_str(), F_OK) == 0) {
    MOBIUS_ASSIGN_OR_RETURN(where, ReadIndex(index_path));
    reader->index_file_ = index_name;
  } else {
    return absl::NotFoundError(
        absl::StrCat(dir, ": neither ", single, " nor ", index_name, " exists"));
  }
  // Any tensor of the set by name, its file opened on first use (nullptr: not in the set).
  const bool single_file = reader->index_file_.empty();
  const FindTensor find = [&](const std::string& name) -> absl::StatusOr<const io::TensorView*> {
    std::string file_name = single;
    if (!single_file) {
      auto w = where.find(name);
      if (w == where.end()) return nullptr;
      file_name = w->second;
    }
    std::unique_ptr<io::SafetensorsFile>& file = reader->files_[file_name];
    if (file == nullptr) {
      MOBIUS_ASSIGN_OR_RETURN(file, io::SafetensorsFile::Open(dir + "/" + file_name));
    }
    return file->Find(name);
  };
  std::set<std::string> wanted;
  // Fused tensors stored as MXFP4 (blocks + scales instead of the tensor): their parts decode.
  for (const model::FusedTensor& f : fused) {
    if (std::none_of(expected.begin(), expected.end(),
                     [&](const auto& e) { return e.first == f.name; })) {
      continue;
    }
    const std::string path = dir + "/" + (single_file ? single : index_name);
    if (single_file) {
      MOBIUS_ASSIGN_OR_RETURN(const io::TensorView* plain, find(f.name));
      if (plain != nullptr) continue;
      where[f.name + "_blocks"] = where[f.name + "_scales"] = single;
    } else if (where.contains(f.name) || !where.contains(f.name + "_blocks")) {
      continue;
    }
    MOBIUS_ASSIGN_OR_RETURN(std::optional<Mxfp4Tensor> q, FindMxfp4(find, f.name, f.shape, path));
    if (!q) continue;
    reader->mxfp4_.push_back(*std::move(q));
    const Mxfp4Tensor* t = &reader->mxfp4_.back();
    wanted.insert(f.name + "_blocks");
    wanted.insert(f.name + "_scales");
    for (size_t e = 0; e < f.parts.size(); ++e) {
      io::TensorView part;
      part.name = f.parts[e];
      part.dtype = io::DType::kBF16;
      part.shape.assign(f.shape.begin() + 1, f.shape.end());
      part.nbytes = (t->blocks->nbytes + t->scales->nbytes) / f.parts.size();
      reader->slices_.push_back(std::move(part));
      reader->views_[f.parts[e]] = &reader->slices_.back();
      reader->mxfp4_parts_[f.parts[e]] = {t, static_cast<int64_t>(e)};
    }
    expected.erase(std::find_if(expected.begin(), expected.end(),
                                [&](const auto& e) { return e.first == f.name; }));
    where.erase(f.name);
  }
  for (const auto& [name, shape] : expected) {
    wanted.insert(name);
    auto w = where.find(name);
    if (w == where.end()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": missing tensor ", name));
    }
    const std::string path = dir + "/" + w->second;
    MOBIUS_ASSIGN_OR_RETURN(const io::TensorView* view, find(name));
    if (view == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": missing tensor ", name));
    }
    MOBIUS_ASSIGN_OR_RETURN(std::optional<Bnb4bitWeight> bnb, FindBnb4bit(find, name, shape, path));
    if (bnb) {
      if (required_dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": tensor ", name, " is a bitsandbytes 4-bit weight, expected ",
            io::DTypeName(*required_dtype)));
      }
      for (const std::string& suffix :
           {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
            ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"}) {
        wanted.insert(name + suffix);
      }
      reader->bnb_.emplace(name, *std::move(bnb));
    } else if (view->dtype == io::DType::kU8) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", name, " is U8 without a bitsandbytes quant state (",
          name, ".quant_state.bitsandbytes__nf4); only bitsandbytes 4-bit checkpoints are read"));
    } else {
      MOBIUS_RETURN_IF_ERROR(CheckTensor(path, *view, shape, required_dtype));
    }
    reader->views_[name] = view;
  }
  // The parts of each fused tensor: slices of its view along the first dimension.
  for (const model::FusedTensor& f : fused) {
    auto whole = reader->views_.find(f.name);
    if (whole == reader->views_.end()) continue;
    if (reader->bnb_.contains(f.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": tensor ", f.name, " is a bitsandbytes 4-bit weight: not read "
                       "for a tensor of every expert"));
    }
    const io::TensorView& w = *whole->second;
    const size_t part_bytes = w.nbytes / f.parts.size();
    for (size_t e = 0; e < f.parts.size(); ++e) {
      io::TensorView part;
      part.name = f.parts[e];
      part.dtype = w.dtype;
      part.shape.assign(f.shape.begin() + 1, f.shape.end());
      part.data = static_cast<const uint8_t*>(w.data) + e * part_bytes;
      part.nbytes = part_bytes;
      reader->slices_.push_back(std::move(part));
      reader->views_[f.parts[e]] = &reader->slices_.back();
    }
    reader->views_.erase(whole);
  }
  // Tensors the files hold beyond the expected ones mean a different model.
  for (const auto& [file_name, file] : reader->files_) {
    for (const io::TensorView& view : file->tensors()) {
      if (!wanted.contains(view.name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(dir, "/", file_name, ": unexpected tensor ", view.name));
      }
    }
  }
  for (const auto& [name, file] : where) {
    if (!wanted.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": unexpected tensor ", name));
    }
  }
  return reader;
}

const io::TensorView& TensorSetReader::view(const std::string& name) const {
  auto it = views_.find(name);
  if (it == views_.end()) {  // a programmer error: callers ask for the names they opened
    std::fprintf(stderr, "TensorSetReader: no tensor %s\n", name.c_str());
    std::abort();
  }
  return *it->second;
}

const Bnb4bitWeight* TensorSetReader::quantized(const std::string& name) const {
  auto it = bnb_.find(name);
  return it == bnb_.end() ? nullptr : &it->second;
}

std::optional<numeric::Nf4Tensor> TensorSetReader::ReadNf4(const std::string& name) const {
  const Bnb4bitWeight* w = quantized(name);
  return w == nullptr ? std::nullopt : w->AsNf4();
}

void TensorSetReader::ReadF32(const std::string& name, int64_t begin, int64_t n,
                              float* out) const {
  if (auto m = mxfp4_parts_.find(name); m != mxfp4_parts_.end()) {
    m->second.first->Dequantize(m->second.second, begin, n, out);
    return;
  }
  if (const Bnb4bitWeight* w = quantized(name); w != nullptr) {
    w->Dequantize(begin, n, out);
    return;
  }
  const io::TensorView& whole = view(name);
  const size_t element = io::DTypeSize(whole.dtype);
  // 1 Mi elements per chunk: the pages ahead are being read while this chunk converts.
  constexpr int64_t kChunk = int64_t{1} << 20;
  for (int64_t done = 0; done < n; done += kChunk) {
    io::TensorView part;
    part.dtype = whole.dtype;
    part.shape = {std::min(kChunk, n - done)};
    part.data = static_cast<const uint8_t*>(whole.data) + (begin + done) * element;
    part.nbytes = static_cast<size_t>(part.shape[0]) * element;
    if (done + kChunk < n) {
      io::TensorView next = part;
      next.data = static_cast<const uint8_t*>(part.data) + part.nbytes;
      next.shape = {std::min(kChunk, n - done - kChunk)};
      next.nbytes = static_cast<size_t>(next.shape[0]) * element;
      io::WillNeed(next);
    }
    io::CopyToF32(part, out + done);
    io::Release(part);
  }
}

void TensorSetReader::ReadF32(const std::string& name, float* out) const {
  const Bnb4bitWeight* w = quantized(name);
  ReadF32(name, 0, w != nullptr ? w->numel : view(name).num_elements(), out);
}

std::vector<std::string> TensorSetReader::files() const {
  std::vector<std::string> names;
  for (const auto& [name, file] : files_) names.push_back(name);
  if (!index_file_.empty()) names.push_back(index_file_);
  return names;
}

absl::StatusOr<reference::Parameters> ReadTensorSet(const std::string& dir, const std::string& base,
                                                    const TensorShapes& expected,
                                                    std::optional<io::DType> required_dtype,
                                                    const std::set<std::string>* only) {
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<TensorSetReader> reader,
                          TensorSetReader::Open(dir, base, expected, required_dtype));
  reference::Parameters out;
  for (const auto& [name, shape] : expected) {
    if (only != nullptr && only->count(name) == 0) continue;
    reference::Tensor& t = out.tensors[name];
    t.shape = shape;
    t.data.resize(static_cast<size_t>(NumElements(shape)));
    reader->ReadF32(name, t.data.data());
  }
  return out;
}

absl::StatusOr<FileDigest> DigestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MOBIUS_ERRNO_ERROR(absl::StrCat("open ", path));
  FileDigest digest;
  uint64_t h = 0xcbf29ce484222325ull;
  constexpr uint64_t kPrime = 0x100000001b3ull;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    // Chunks are a multiple of 8 bytes except the last, so the word/tail split matches the doc.
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      std::memcpy(&word, buffer.data() + i, 8);
      h = (h ^ word) * kPrime;
    }
    for (; i < n; ++i) h = (h ^ static_cast<unsigned char>(buffer[i])) * kPrime;
    digest.bytes += n;
  }
  if (in.bad()) return MOBIUS_ERRNO_ERROR(absl::StrCat("read ", path));
  digest.fnv1a64 = h;
  return digest;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("create ", tmp));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("write ", tmp));
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("fsync ", tmp));
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("rename ", tmp, " to ", path));
    unlink(tmp.c_str());
    return s;
  }
  const size_t slash = path.rfind('/');
  return SyncDirectory(slash == std::string::npos ? "." : path.substr(0, slash));
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MOBIUS_ERRNO_ERROR(absl::StrCat("open ", path));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("seek ", path));
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
  }
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  if (!in) return MOBIUS_ERRNO_ERROR(absl::StrCat("read ", path));
  return text;
}

absl::Status SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("open directory ", dir));
  const int rc = fsync(fd);
  const int saved = errno;
  close(fd);
  if (rc != 0) return ErrnoError(saved, absl::StrCat("fsync directory ", dir), __FILE__, __LINE__);
  return absl::OkStatus();
}

}  // namespace mobius::checkpoint
