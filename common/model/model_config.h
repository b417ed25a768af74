// The architecture of a decoder-only transformer, as read from a Hugging Face config.json.
//
// One struct for every supported family; family-specific switches are explicit fields, so the
// reference model, the backends and the planner never look at the family name to decide math.
// Families: GPT-2 ("gpt2"), Llama 2/3 ("llama"), Mistral ("mistral"), Qwen2 ("qwen2"),
// Qwen3 ("qwen3"), and the mixtures of experts Qwen3-MoE ("qwen3_moe"), Mixtral ("mixtral") and
// gpt-oss ("gpt_oss"), which every backend trains (with the load-balancing loss where config.json
// asks for it; gpt-oss without it).
//
// Value type; thread-compatible. Parsing lives in model_config_parse.h.
#ifndef MOBIUS_COMMON_MODEL_MODEL_CONFIG_H_
#define MOBIUS_COMMON_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mobius::model {

enum class Family { kGpt2, kLlama, kMistral, kQwen2, kQwen3, kQwen3Moe, kMixtral, kGptOss };

enum class NormKind { kLayerNorm, kRmsNorm };       // GPT-2: LayerNorm with bias; others: RMSNorm
enum class MlpKind { kGeluTanh, kSwiGlu };          // GPT-2: fc -> gelu(tanh) -> proj; others: SwiGLU
enum class PositionKind { kLearned, kRope };        // GPT-2: learned wpe; others: RoPE

// RoPE frequency scaling ("rope_scaling" in config.json).
struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3, kYarn } type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;            // llama3
  double high_freq_factor = 4.0;           // llama3
  int64_t original_max_position_embeddings = 0;  // llama3, yarn (0: max_position_embeddings)
  // yarn (transformers' _compute_yarn_parameters): the ramp between beta_fast and beta_slow
  // rotations, truncated to whole dimensions when `truncate`; cos and sin are multiplied by
  // attention_factor (config.json's, else 0.1 ln(factor) + 1, or the mscale ratio when
  // mscale and mscale_all_dim are given: computed when parsed).
  double beta_fast = 32.0, beta_slow = 1.0;
  bool truncate = true;
  double attention_factor = 1.0;
};

// A sparse mixture-of-experts MLP (transformers' Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock):
// a router linear [E, C] scores the experts per token, the top k (softmax, then renormalised over
// the k when norm_topk_prob) weight the outputs of k SwiGLU experts of width
// expert_intermediate_size. num_experts 0: every layer's MLP is dense.
struct MoeConfig {
  int64_t num_experts = 0;               // E: num_experts (Qwen3-MoE), num_local_experts (Mixtral)
  int64_t experts_per_token = 0;         // k: num_experts_per_tok
  int64_t expert_intermediate_size = 0;  // moe_intermediate_size (Mixtral: intermediate_size)
  // Qwen3-MoE: layer i has experts iff i is not in mlp_only_layers and (i + 1) % sparse_step == 0;
  // the others keep a dense MLP of intermediate_size. Mixtral: every layer (step 1, none listed).
  int64_t sparse_step = 1;                // decoder_sparse_step
  std::vector<int64_t> mlp_only_layers;   // ascending, each in [0, num_layers)
  bool norm_topk_prob = true;             // Mixtral, gpt-oss: always (softmax over the top k)
  double router_aux_loss_coef = 0.001;    // the load-balancing loss's weight
  bool output_router_logits = false;      // transformers adds the aux loss to the loss when true
  bool router_bias = false;               // gpt-oss: the router linear has a bias [E]
  // The experts' MLP. kSwiGlu: gate, up [I, C] and down [C, I] ([out, in]), no biases, down(silu(
  // gate x) * up x). kClampedSwiGlu (gpt-oss's GptOssExperts): one gate_up [C, 2I] ([in, out],
  // gate at even columns, up at odd) and down [I, C], both with biases; down((u + 1) * g *
  // sigmoid(alpha g)) with g = min(gate, limit), u = clamp(up, -limit, limit).
  enum class ExpertMlp { kSwiGlu, kClampedSwiGlu } expert_mlp = ExpertMlp::kSwiGlu;
  double swiglu_alpha = 1.702, swiglu_limit = 7.0;

  bool enabled() const { return num_experts > 0; }
  bool IsMoeLayer(int64_t layer) const;
  // Of `num_layers` decoder layers, how many have experts; layer `layer`'s index among them (-1
  // for a dense layer).
  int64_t NumMoeLayers(int64_t num_layers) const;
  int64_t MoeLayerIndex(int64_t layer) const;
  // An expert's share of the tokens under a balanced router: k / E (1 without experts).
  double RoutedShare() const;
};

struct ModelConfig {
  Family family = Family::kGpt2;
  std::string model_type;                  // as written in config.json
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;                 // C
  int64_t num_layers = 0;                  // L (decoder blocks)
  int64_t num_heads = 0;                   // query heads
  int64_t num_kv_heads = 0;                // == num_heads without GQA
  int64_t head_dim = 0;                    // usually hidden_size / num_heads (Qwen3 sets it)
  int64_t intermediate_size = 0;           // MLP hidden width (GPT-2: n_inner or 4*C)
  int64_t max_position_embeddings = 0;

  NormKind norm = NormKind::kLayerNorm;
  double norm_eps = 1e-5;
  MlpKind mlp = MlpKind::kGeluTanh;
  PositionKind position = PositionKind::kLearned;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;

  bool tie_word_embeddings = true;         // LM head shares the token embedding
  bool attention_bias = false;             // biases on q/k/v (Qwen2: true; GPT-2: all linears)
  bool attention_output_bias = false;      // bias on o_proj (GPT-2: true)
  bool mlp_bias = false;                   // biases on MLP linears (GPT-2: true)
  bool qk_norm = false;                    // RMSNorm on q and k per head (Qwen3)

  // Attention window in tokens: each query sees at most this many keys (itself included).
  // 0 = full causal attention. Mistral's "sliding_window"; Qwen's only with use_sliding_window.
  int64_t sliding_window = 0;
  // Which layers use the window (gpt-oss's layer_types: "sliding_attention" or "full_attention");
  // empty: every layer. WindowOf(i): the window of layer i (0 = full).
  std::vector<bool> sliding_layers;
  int64_t WindowOf(int64_t layer) const {
    return sliding_layers.empty() || sliding_layers[layer] ? sliding_window : 0;
  }
  // Attention sinks (gpt-oss): a learned logit per query head joins each row's softmax without a
  // value (self_attn.sinks [H]).
  bool attention_sinks = false;

  int64_t bos_token_id = -1;               // -1 when absent
  int64_t eos_token_id = -1;

  MoeConfig moe;                           // mixture of experts (qwen3_moe, mixtral)
};

// The family's model_type ("llama"); family.h holds everything else about it.
const char* FamilyName(Family family);

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_MODEL_CONFIG_H_
