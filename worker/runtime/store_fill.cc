// Filling a rank's share of the host store before step 1, straight from the files: the model
// directory's safetensors (any of F32 / BF16 / F16) or the resume checkpoint's fp32 master and
// moments, memory-mapped and converted tensor by tensor into their places in the store
// (pipeline_state.h: FillStore). Nothing the size of the model is allocated; the input pages are
// dropped from this process's page tables as soon as they are converted (TensorSetReader).
#include <malloc.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "common/numeric/nf4.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/io/safetensors.h"
#include "worker/runtime/pipeline_state.h"

namespace mobius::runtime {

using State = PipelineWorker::State;

namespace {

// Slices of 1 Mi elements: the master slice just written is still in cache when it is rounded
// to the bf16 upload copy.
constexpr int64_t kSlice = int64_t{1} << 20;
static_assert(kSlice % numeric::kNf4BlockSize == 0, "NF4 slices are whole blocks");

void FillTensor(State& s, const TensorSlot& t, const checkpoint::TensorSetReader& master,
                const checkpoint::TensorSetReader* m, const checkpoint::TensorSetReader* v) {
  const uint64_t fp32_bytes = 4 * static_cast<uint64_t>(t.num_elements);
  s.store->Populate(t.master, fp32_bytes);
  if (m != nullptr) s.store->Populate(t.m, fp32_bytes);
  if (v != nullptr) s.store->Populate(t.v, fp32_bytes);
  float* dst = s.store->at<float>(t.master);
  uint16_t* bf16 = WeightOf(s, t.name, t.owner_unit, /*k=*/0);
  for (int64_t begin = 0; begin < t.num_elements; begin += kSlice) {
    const int64_t n = std::min(kSlice, t.num_elements - begin);
    master.ReadF32(t.name, begin, n, dst + begin);
    train::RoundWeights(s.half == backend::DType::kF16, dst + begin, bf16 + begin,
                        static_cast<size_t>(n));
  }
  // Fresh moments are the store's zero pages: left untouched, they are first touched by this
  // rank's optimizer thread, on this rank's NUMA node, like everything else of its stages.
  if (m != nullptr) m->ReadF32(t.name, s.store->at<float>(t.m));
  if (v != nullptr) v->ReadF32(t.name, s.store->at<float>(t.v));
}

// An NF4 base weight (common/run/unit_params.h): its values rounded to the run's 16-bit format, as
// any base weight, then quantised whole (the block scales' offset is their mean over the tensor)
// into its blob in the store. Holds one tensor's 16-bit values at a time.
absl::Status FillNf4Weight(State& s, const checkpoint::TensorSetReader& model,
                           const units::UnitParam& p, int64_t unit, std::vector<float>& slice) {
  // A bitsandbytes checkpoint's NF4 goes into the store as stored: its codes and scales.
  if (std::optional<numeric::Nf4Tensor> t = model.ReadNf4(p.name); t && t->numel == p.num_elements) {
    numeric::WriteNf4Blob(*t, WeightOf(s, p.name, unit, /*k=*/0));
    return absl::OkStatus();
  }
  // Slice by slice (a multiple of 64 values): rounded to the run's 16-bit format in place (a
  // tensor stored in that format already is), then quantised into the blob; the tensor's scales
  // are written once every block's absmax is known.
  const bool fp16 = s.half == backend::DType::kF16;
  const io::DType stored = model.view(p.name).dtype;
  const bool exact = stored == (fp16 ? io::DType::kF16 : io::DType::kBF16);
  numeric::Nf4BlobQuantizer q(p.num_elements, WeightOf(s, p.name, unit, /*k=*/0));
  for (int64_t begin = 0; begin < p.num_elements; begin += kSlice) {
    const int64_t n = std::min(kSlice, p.num_elements - begin);
    model.ReadF32(p.name, begin, n, slice.data());
    if (!exact && fp16) numeric::RoundToF16(slice.data(), static_cast<size_t>(n));
    if (!exact && !fp16) numeric::RoundToBf16(slice.data(), static_cast<size_t>(n));
    q.Add(slice.data(), n);
  }
  q.Finish();
  return absl::OkStatus();
}

// LoRA (store_layout.h): the frozen base's bf16 weights of the rank's backward stages straight
// from the model directory (a resume changes only the adapters), then the adapters of those
// stages: the resume checkpoint's with their moments, an init_dir's, or PEFT's initialisation
// (lora_setup.h; all adapters are small, every rank derives them and writes its own).
absl::Status FillLoraStore(State& s, const Clock::time_point start) {
  const train::TrainerOptions& o = s.run.training;
  const checkpoint::TensorShapes shapes = reference::ParameterShapes(s.start.config);
  MOBIUS_ASSIGN_OR_RETURN(
      std::unique_ptr<checkpoint::TensorSetReader> model,
      checkpoint::TensorSetReader::Open(o.model_dir, "model", shapes, std::nullopt,
                                        model::FusedExpertTensors(s.start.config)));
  std::set<std::string> owned;  // the adapter tensors of this rank's stages
  for (int b : s.backward_stages) {
    for (const TensorSlot* t : OwnedTensors(s, b)) owned.insert(t->name);
  }
  MOBIUS_ASSIGN_OR_RETURN(train::AdapterStart adapters,
                          train::LoadAdapterStart(o, *s.lora, s.start.resume_directory, &owned));
  std::vector<float> slice(static_cast<size_t>(kSlice));
  bool owns_embedding = false;
  uint64_t input_bytes = 0;
  for (int b : s.backward_stages) {
    const StageRange range = s.bwd(b);
    owns_embedding = owns_embedding || range.begin == 0;
    s.store->Populate(s.layout.unit_weights[range.begin], s.layout.stage_weight_bytes(range));
    for (int64_t u = range.begin; u < range.end; ++u) {
      for (const units::UnitParam& p : s.layout.units[u].params) {
        if (p.shared) continue;  // the tied head's embedding: copied below
        if (p.nf4) {  // QLoRA: the whole weight rounded to 16 bits, then quantised into the store
          MOBIUS_RETURN_IF_ERROR(FillNf4Weight(s, *model, p, u, slice));
          input_bytes += model->view(p.name).nbytes;
          continue;
        }
        uint16_t* bf16 = WeightOf(s, p.name, u, /*k=*/0);
        for (int64_t begin = 0; begin < p.num_elements; begin += kSlice) {
          const int64_t n = std::min(kSlice, p.num_elements - begin);
          model->ReadF32(p.name, begin, n, slice.data());
          train::RoundWeights(s.half == backend::DType::kF16, slice.data(), bf16 + begin,
                              static_cast<size_t>(n));
        }
        input_bytes += model->view(p.name).nbytes;
      }
    }
    for (const TensorSlot* t : OwnedTensors(s, b)) {
      const size_t bytes = 4 * static_cast<size_t>(t->num_elements);
      std::memcpy(s.store->at<float>(t->master), adapters.master.data(t->name), bytes);
      if (!adapters.adam_m.tensors.empty()) {
        std::memcpy(s.store->at<float>(t->m), adapters.adam_m.data(t->name), bytes);
        std::memcpy(s.store->at<float>(t->v), adapters.adam_v.data(t->name), bytes);
      }
    }
  }
  if (s.tied && owns_embedding) {
    const int64_t head = s.num_units() - 1;
    for (const units::UnitParam& p : s.layout.units[head].params) {
      if (p.shared) {
        std::memcpy(WeightOf(s, p.name, head, 0), WeightOf(s, p.name, 0, 0), 2 * p.num_elements);
      }
    }
  }
  const double seconds = Since(start);
  LOG(INFO) << absl::StrFormat(
      "rank %d: filled its share of the store: the frozen base from %s (%.1f MB read in %.2f s), "
      "the adapters from %s",
      s.rank, o.model_dir, input_bytes / 1e6, seconds,
      !s.start.resume_directory.empty() ? s.start.resume_directory
      : !o.adapter.init_dir.empty()     ? o.adapter.init_dir
                                        : std::string("PEFT's initialisation"));
  return absl::OkStatus();
}

}  // namespace

absl::Status FillStore(State& s) {
  const Clock::time_point start = Clock::now();
  if (s.lora) {
    const absl::Status filled = FillLoraStore(s, start);
    // The adapters' starting values were thousands of small heap blocks (every module's A and B,
    // a MoE's for each expert: 0.5 GB per worker at 40M adapter parameters); freed, they stay in
    // the process's heap unless it is trimmed, for the whole run.
    malloc_trim(0);
    return filled;
  }
  const train::TrainerOptions& o = s.run.training;
  const checkpoint::TensorShapes shapes = reference::ParameterShapes(s.start.config);
  std::unique_ptr<checkpoint::TensorSetReader> model;
  checkpoint::OpenedCheckpoint resumed;
  const bool resume = !s.start.resume_directory.empty();
  if (resume) {
    MOBIUS_ASSIGN_OR_RETURN(resumed,
                            checkpoint::OpenCheckpoint(s.start.resume_directory, s.start.config));
    // The ranks split the re-hash of the checkpoint's files (any mismatch fails the job).
    MOBIUS_RETURN_IF_ERROR(checkpoint::VerifyCheckpointChecksums(s.start.resume_directory, s.rank,
                                                                 s.run.num_workers));
  } else {
    MOBIUS_ASSIGN_OR_RETURN(model, checkpoint::TensorSetReader::Open(
                                       o.model_dir, "model", shapes, std::nullopt,
                                       model::FusedExpertTensors(s.start.config)));
  }
  const checkpoint::TensorSetReader& master = resume ? *resumed.master : *model;
  bool owns_embedding = false;
  uint64_t input_bytes = 0;  // of the files, read by this rank
  for (int b : s.backward_stages) {
    const StageRange range = s.bwd(b);
    owns_embedding = owns_embedding || range.begin == 0;
    s.store->Populate(s.layout.unit_weights[range.begin], s.layout.stage_weight_bytes(range));
    for (const TensorSlot* t : OwnedTensors(s, b)) {
      FillTensor(s, *t, master, resumed.adam_m.get(), resumed.adam_v.get());
      input_bytes += master.view(t->name).nbytes;
      if (resumed.adam_m != nullptr) input_bytes += 2 * 4 * static_cast<uint64_t>(t->num_elements);
    }
  }
  // A tied head reads its own bf16 copy of the token embedding; the embedding's owner writes it,
  // as its optimizer does after every update.
  if (s.tied && owns_embedding) {
    const int64_t head = s.num_units() - 1;
    for (const units::UnitParam& p : s.layout.units[head].params) {
      if (p.shared) {
        std::memcpy(WeightOf(s, p.name, head, 0), WeightOf(s, p.name, 0, 0), 2 * p.num_elements);
      }
    }
  }
  const double seconds = Since(start);
  LOG(INFO) << absl::StrFormat(
      "rank %d: filled its share of the store from %s: %.1f MB read in %.2f s (%.0f MB/s)",
      s.rank, resume ? s.start.resume_directory : o.model_dir, input_bytes / 1e6, seconds,
      seconds > 0 ? input_bytes / 1e6 / seconds : 0.0);
  return absl::OkStatus();
}

}  // namespace mobius::runtime
