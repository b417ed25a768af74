// The units the planner places, with their parameters, memory and FLOPs. Pure arithmetic on a
// ModelConfig; no I/O, no tensors.
//
// A model of L decoder blocks has L + 2 units, in execution order:
//   unit 0       embedding: token embedding (GPT-2: also the learned position embedding)
//   units 1..L   decoder block i = unit - 1
//   unit L+1     head: final norm + LM head + cross-entropy loss
// With tied embeddings the head owns no LM head weight: it reads unit 0's token embedding.
// LayerUnit::shares_parameters_with_unit says so (= 0), the tensor is listed in the head's
// `shared_params`, and it is counted once, in unit 0, in every model total.
//
// Parameter lists use the Hugging Face tensor names and shapes as the checkpoint stores them:
// nn.Linear weights are [out, in]; GPT-2's Conv1D weights are [in, out] (c_attn: [C, 3C]).
//
// Weight decay (ParamSpec::weight_decay): on matmul weights and on embeddings (token and position);
// not on norm weights/biases nor on linear biases. This is what Hugging Face Trainer does by
// default (it excludes biases and norm parameters only); embeddings keep decay, as in nanoGPT/llm.c
// which decay every 2-D tensor.
//
// Notation below: C hidden size, A = heads * head_dim (attention width; = C except Qwen3-0.6B-like
// configs), K = kv_heads * head_dim, I intermediate size, V vocab, H heads, T sequence length.
//
// Thread-safety: values are immutable after DescribeModel; all functions are pure.
#ifndef MOBIUS_COMMON_MODEL_LAYER_UNITS_H_
#define MOBIUS_COMMON_MODEL_LAYER_UNITS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace mobius::model {

enum class UnitKind { kEmbedding, kDecoderBlock, kHead };
const char* UnitKindName(UnitKind kind);  // "embedding", "block", "head"

// How the unit uses the tensor (the same tied tensor is kEmbedding in unit 0 and kMatmulWeight in
// the head).
enum class ParamRole { kEmbedding, kMatmulWeight, kBias, kNormWeight, kNormBias };

struct ParamSpec {
  std::string name;              // HF tensor name, e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;    // as stored in the checkpoint
  int64_t num_elements = 0;      // product of shape
  ParamRole role = ParamRole::kMatmulWeight;
  bool weight_decay = false;     // AdamW applies decay to it (see above)
  // A mixture-of-experts layer's expert weight: its expert's index (a token uses k of the E
  // experts, ModelConfig::moe); -1 for every other tensor (the router included).
  int64_t expert = -1;
};

struct LayerUnit {
  int64_t index = 0;             // 0 .. L+1
  UnitKind kind = UnitKind::kEmbedding;
  int64_t layer = -1;            // decoder block index (unit - 1) for kDecoderBlock, else -1
  std::vector<ParamSpec> params;         // owned by this unit, in HF module order
  int64_t shares_parameters_with_unit = -1;  // tied head: 0; otherwise -1
  std::vector<ParamSpec> shared_params;  // read by this unit, owned (and counted) by that unit

  int64_t num_parameters() const;        // owned elements only
};

struct ModelDescription {
  ModelConfig config;
  std::vector<LayerUnit> units;  // L + 2, index == position

  int64_t num_units() const { return static_cast<int64_t>(units.size()); }
  const LayerUnit& embedding() const { return units.front(); }
  const LayerUnit& head() const { return units.back(); }
};

// INVALID_ARGUMENT when ValidateModelConfig rejects `config`.
absl::StatusOr<ModelDescription> DescribeModel(const ModelConfig& config);

// ---- Parameters ----------------------------------------------------------------------------------

int64_t TotalParameters(const ModelDescription& model);         // every tensor once (tied: once)
// What one token computes with: the total less, in every mixture-of-experts layer, the experts it
// is not routed to ((E - k) / E of the expert weights). == TotalParameters for a dense model.
int64_t ActiveParameters(const ModelDescription& model);
// Total minus the token embedding, the position embedding (GPT-2) and an untied lm_head: the
// "non-embedding" count of Kaplan et al. and of the Qwen model cards.
int64_t NonEmbeddingParameters(const ModelDescription& model);
int64_t ModelParameterBytes(const ModelDescription& model, int64_t bytes_per_element = 2);

// A checkpoint tensor holding one slice per expert along its first dimension (gpt-oss:
// "model.layers.<i>.mlp.experts.gate_up_proj" [E, C, 2I], ..._bias [E, 2I], down_proj [E, I, C],
// down_proj_bias [E, C]): the units use per-expert tensors (ParamSpec::expert), `parts` in expert
// order, each of shape shape[1:] and contiguous in the fused tensor. Empty for the other families.
struct FusedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<std::string> parts;
};
std::vector<FusedTensor> FusedExpertTensors(const ModelConfig& config);
// Checkpoint order: `order` (name, shape) with every part of a fused tensor replaced by the fused
// tensor, once, where its first part was.
std::vector<std::pair<std::string, std::vector<int64_t>>> FuseExpertTensors(
    const ModelConfig& config, const std::vector<std::pair<std::string, std::vector<int64_t>>>& order);

// Bytes of the parameters the unit owns (bf16 = 2 bytes per element by default).
int64_t UnitParameterBytes(const LayerUnit& unit, int64_t bytes_per_element = 2);
// Bytes that must be resident on the device running the unit: owned + shared (the tied head needs
// the token embedding even though unit 0 owns it).
int64_t UnitResidentParameterBytes(const LayerUnit& unit, int64_t bytes_per_element = 2);

// ---- Activations ---------------------------------------------------------------------------------

struct ActivationOptions {
  int64_t activation_bytes = 2;  // per element of hidden states and intermediates (bf16)
  bool flash_attention = true;   // keep the per-head logsumexp, not the [H, T, T] probabilities
  int64_t logits_bytes = 4;      // per logit kept for the loss backward (fp32); 0 = fused loss
};

// Per token of a sequence (multiply by B * T for a microbatch).
//
// (a) boundary_bytes_per_token: the unit's input, what a stage boundary checkpoint holds:
//     unit 0: the token id (int32, 4 bytes); units 1..L+1: the hidden state, C * activation_bytes.
// (b) saved state the unit keeps for its backward without recompute, beyond its input (a):
//     block:  norm1 out C, q A, k K, v K (after RoPE), attention out A (o_proj input),
//             residual after attention C (norm2 input), norm2 out C,
//             MLP: GELU: fc out I + gelu out I; SwiGLU: gate I, up I, silu(gate)*up I;
//             mixture of experts: the router's fp32 probabilities E and, per routed expert
//             (k), gate, up and silu(gate)*up of its width instead of the dense MLP's;
//             Qwen3 qk_norm: pre-norm q A and k K, plus an fp32 rstd per head (4 * (H + KVH));
//             norm statistics in fp32 (LayerNorm mean + rstd: 8 bytes per norm; RMSNorm: 4);
//             flash attention: fp32 logsumexp per head, 4 * H bytes;
//             materialized attention instead: softmax probabilities H * T * activation_bytes per
//             token (the whole T x T matrix, as eager kernels store it: no causal halving).
//     head:   final norm out C + its stats, logits V * logits_bytes, labels (int32, 4 bytes).
//     embedding: nothing (its backward is a scatter-add by the token ids of (a)).
//     Biases, dropout (none in fine-tuning) and RoPE cos/sin tables (per position, shared) are
//     not counted.
struct UnitActivationBytes {
  int64_t boundary_bytes_per_token = 0;
  int64_t saved_bytes_per_token = 0;            // T-independent part of (b)
  int64_t saved_bytes_per_token_per_position = 0;  // coefficient of T in (b) (materialized only)

  int64_t SavedBytesPerToken(int64_t seq_len) const {
    return saved_bytes_per_token + saved_bytes_per_token_per_position * seq_len;
  }
};

// REQUIRES: 0 <= unit_index < model.num_units().
UnitActivationBytes UnitActivations(const ModelDescription& model, int64_t unit_index,
                                    const ActivationOptions& options = {});

// ---- FLOPs ---------------------------------------------------------------------------------------
//
// 2 FLOPs per multiply-accumulate. Per token at sequence length T:
//   matmuls:    2 * (elements of the matmul weights the unit uses), i.e. per block
//               2 * (C*A + 2*C*K + A*C + {2,3}*C*I), head 2 * V * C (tied or not), embedding 0;
//               a mixture-of-experts block counts its router [E, C] and k / E of its expert
//               weights (each token runs k experts);
//   attention:  per block, scores Q K^T and the weighted sum P V each cost H * head_dim MACs per
//               key attended: 2 * 2 * H * head_dim * keys(T) FLOPs, where keys(T) is the mean
//               number of keys a query attends to: causal, so (T + 1) / 2 (the causal halving; PaLM
//               and Megatron formulas use T), and with a sliding window W < T:
//               (W * (W + 1) / 2 + (T - W) * W) / T;
//   not counted: norms, biases, activations, RoPE, softmax, loss (O(C) or O(V) elementwise work).
// Backward = 2 x forward (input gradient + weight gradient), for attention as well; the embedding's
// backward (a scatter-add) is 0. Recompute, if the engine does it, is the caller's to add.
struct UnitFlopsPerToken {
  double forward_flops = 0;
  double backward_flops = 0;
};

double AttentionKeysPerQuery(int64_t seq_len, int64_t sliding_window);

// REQUIRES: 0 <= unit_index < model.num_units(), seq_len >= 1.
UnitFlopsPerToken UnitFlops(const ModelDescription& model, int64_t unit_index, int64_t seq_len);
// The block's MLP output projection (down_proj; GPT-2's mlp.c_proj): a backward's recompute of the
// block leaves it out, since nothing in the backward reads its output (worker/model). nullptr for
// other units. Its forward FLOPs per token are 2 x its elements.
const ParamSpec* MlpOutputProjection(const ModelDescription& model, int64_t unit_index);
// The T-dependent attention part of a block's forward FLOPs per token (0 for other units).
double UnitAttentionForwardFlopsPerToken(const ModelDescription& model, int64_t unit_index,
                                         int64_t seq_len);
// Sums over all units.
UnitFlopsPerToken ModelFlops(const ModelDescription& model, int64_t seq_len);

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_LAYER_UNITS_H_
