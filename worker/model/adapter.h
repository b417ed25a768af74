// LoRA adapters on the device, per layer unit (common/model/lora.h says which modules, their
// shapes and PEFT's names). A unit's adapters live in one fp32 buffer: per adapted module of the
// unit (model::LoraModules order), A [rank, in] then B [out, rank], row-major; their gradients in
// a buffer of the same layout. With adapters the unit's base weights are frozen: the runner
// computes no gradient for them (no weight-gradient GEMMs, no embedding scatter), only the input
// gradients through them and the adapters' gradients.
//
// Value types; internal to worker/ (the runner, the resident model, the pipeline).
#ifndef MOBIUS_WORKER_MODEL_ADAPTER_H_
#define MOBIUS_WORKER_MODEL_ADAPTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/model/lora.h"
#include "worker/backend/backend.h"

namespace mobius::units {

// The model's LoRA: every adapted module of the model (model::LoraModules), rank r and the
// scale alpha / r its output term carries.
struct LoraSpec {
  int64_t rank = 0;
  float scale = 0;
  float dropout = 0;  // on the adapters' input in training passes (worker/kernels/dropout_mask.h)
  std::vector<model::LoraModule> modules;
  // QLoRA: the frozen base's linear weights held as NF4 blobs (common/run/unit_params.h), each
  // dequantised before its GEMMs (linear.h).
  bool base_nf4 = false;
};

// One unit's adapters: its modules with element offsets into the unit's adapter buffer.
struct UnitAdapter {
  struct Module {
    model::LoraModule module;
    int64_t a = 0, b = 0;  // element offsets of A [rank, in] and B [out, rank]
    int64_t index = 0;     // in LoraSpec::modules (its dropout key)
    int64_t h_slot = 0;    // its forward-to-backward state's first slot (model::LoraStateSlots)
  };
  int64_t rank = 0;
  float scale = 0;
  float dropout = 0;
  std::vector<Module> modules;
  int64_t h_slots = 0, gh_slots = 0;  // model::LoraStateSlots count and scratch
  int64_t num_elements = 0;
  bool empty() const { return modules.empty(); }
  uint64_t bytes() const { return 4 * static_cast<uint64_t>(num_elements); }
  // The module whose base weight is `weight` (HF tensor name); nullptr when not adapted.
  const Module* Find(const std::string& weight) const;
  std::map<std::string, int64_t> by_weight;  // Find's index into modules
};

// The adapters of layer unit `unit` (decoder block i is unit i + 1; the embedding and the head
// carry none); experts_per_token: the model's K (0 without experts).
UnitAdapter MakeUnitAdapter(const LoraSpec& lora, int64_t unit, int64_t experts_per_token);

// A unit's adapter buffers for one call: the fp32 parameters and (backward) their gradients,
// accumulated (+=) like every gradient.
struct AdapterBuffers {
  const backend::DeviceBuffer* params = nullptr;
  const backend::DeviceBuffer* grads = nullptr;
};

}  // namespace mobius::units

#endif  // MOBIUS_WORKER_MODEL_ADAPTER_H_
