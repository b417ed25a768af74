// fp32 parameters of the reference model, keyed by their Hugging Face tensor names.
//
// GPT-2 ("transformer.wte.weight", "transformer.h.{i}.attn.c_attn.weight" [C, 3C] Conv1D layout,
// ...) and the Llama family ("model.embed_tokens.weight",
// "model.layers.{i}.self_attn.q_proj.weight" [out, in] nn.Linear layout, ...). Which names exist
// follows from the ModelConfig fields (biases, qk_norm, tied head); the names themselves are the
// family's (common/model/family.h, the same table the layer units read).
//
// Value types; thread-compatible.
#ifndef MOBIUS_WORKER_REFERENCE_PARAMETERS_H_
#define MOBIUS_WORKER_REFERENCE_PARAMETERS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/reference/ops_linear.h"

namespace mobius::reference {

// A dense fp32 tensor, row-major.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // product(shape) elements
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

// Every parameter of a model (or its gradients, or optimizer moments) by HF name.
struct Parameters {
  std::map<std::string, Tensor> tensors;

  // REQUIRES: `name` is present (a programmer error otherwise: aborts with the name).
  Tensor& at(const std::string& name);
  const Tensor& at(const std::string& name) const;
  float* data(const std::string& name) { return at(name).data.data(); }
  const float* data(const std::string& name) const { return at(name).data.data(); }
  // nullptr when `name` is empty (an absent optional parameter such as a bias).
  float* optional_data(const std::string& name);
  const float* optional_data(const std::string& name) const;
};

// The names of one decoder block's parameters. An empty string means "not in this model".
struct LayerNames {
  std::string norm1_weight, norm1_bias;  // ln_1 / input_layernorm
  std::string qkv_weight, qkv_bias;      // GPT-2 fused c_attn (Conv1D [C, 3C]); else empty
  std::string q_weight, q_bias, k_weight, k_bias, v_weight, v_bias;  // Llama naming; else empty
  std::string q_norm, k_norm;                              // qk_norm: RMSNorm weights [head_dim]
  std::string o_weight, o_bias;                            // c_proj / o_proj
  std::string sinks;                                       // attention sinks [H] (gpt-oss)
  std::string norm2_weight, norm2_bias;                    // ln_2 / post_attention_layernorm
  std::string fc_weight, fc_bias, proj_weight, proj_bias;  // GELU MLP (GPT-2)
  std::string gate_weight, gate_bias, up_weight, up_bias, down_weight, down_bias;  // SwiGLU
  // A mixture-of-experts layer (ModelConfig::moe): the router [E, C] (with router_bias [E]) and
  // each expert's SwiGLU weights (no biases) instead of gate/up/down above, which are then empty.
  // Clamped SwiGLU experts (gpt-oss): gate_up [C, 2I] and down [I, C] ([in, out]) with biases;
  // gate_weight and up_weight empty.
  struct Expert {
    std::string gate_weight, up_weight, down_weight;
    std::string gate_up_weight, gate_up_bias, down_bias;
  };
  std::string router_weight, router_bias;
  std::vector<Expert> experts;
};

struct ModelNames {
  WeightLayout layout = WeightLayout::kOutIn;  // GPT-2: Conv1D kInOut; Llama family: kOutIn
  std::string token_embedding;                 // [V, C]
  std::string position_embedding;              // [P, C] learned positions; else empty
  std::vector<LayerNames> layers;
  std::string final_norm_weight, final_norm_bias;
  std::string lm_head;  // [V, C]; equals token_embedding when tied
};

// Checks that the reference model supports `config` (sizes positive, heads divisible, naming
// scheme and math consistent). INVALID_ARGUMENT / UNIMPLEMENTED with the reason.
absl::Status ValidateConfig(const model::ModelConfig& config);

// REQUIRES: ValidateConfig(config).ok().
ModelNames ParameterNames(const model::ModelConfig& config);

// Every parameter name with its shape, in declaration order (embeddings, blocks, final norm, head).
std::vector<std::pair<std::string, std::vector<int64_t>>> ParameterShapes(
    const model::ModelConfig& config);

// All parameters, zero-filled (also the shape of gradients and Adam moments).
Parameters ZeroParameters(const model::ModelConfig& config);

// Seeded initialisation for tests: weights and embeddings ~ N(0, 0.02), norm weights 1, biases 0.
// Deterministic for a given seed on every platform (own Box-Muller over std::mt19937_64).
Parameters InitParameters(const model::ModelConfig& config, uint64_t seed);

// gpt-oss's checkpoints hold each expert tensor kind as one tensor of all experts
// (model::FusedExpertTensors); the model uses per-expert tensors. SplitFusedTensors replaces every
// fused tensor present in `params` by its parts (INVALID_ARGUMENT naming one of the wrong shape);
// JoinFusedTensors replaces the parts by the fused tensors (REQUIRES: each fused tensor's parts all
// present or all absent; INVALID_ARGUMENT otherwise). No-ops for the other families.
absl::Status SplitFusedTensors(const model::ModelConfig& config, Parameters* params);
absl::StatusOr<Parameters> JoinFusedTensors(const model::ModelConfig& config, Parameters params);

// OK when `params` holds exactly the names of ParameterShapes(config) with those shapes;
// otherwise INVALID_ARGUMENT naming the first missing, unexpected or misshapen tensor.
absl::Status ValidateParameters(const model::ModelConfig& config, const Parameters& params);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_PARAMETERS_H_
