#include "worker/checkpoint/worker_flags.h"

#include "absl/flags/flag.h"

// Sizes: 0 keeps the preset's value.
ABSL_FLAG(std::string, family, "",
          "init-model: gpt2 | llama | mistral | qwen2 | qwen3 | qwen3_moe | mixtral.");
ABSL_FLAG(std::string, preset, "tiny",
          "init-model: size preset, tiny or small (also \"<family>-<preset>\").");
ABSL_FLAG(int64_t, layers, 0, "init-model: decoder blocks (0: the preset's).");
ABSL_FLAG(int64_t, hidden, 0, "init-model: hidden size (0: the preset's).");
ABSL_FLAG(int64_t, heads, 0, "init-model: attention heads (0: the preset's).");
ABSL_FLAG(int64_t, kv_heads, 0, "init-model: key/value heads, GQA (0: the preset's).");
ABSL_FLAG(int64_t, head_dim, 0,
          "init-model: per-head width (0: the preset's, or hidden/heads when those change).");
ABSL_FLAG(int64_t, intermediate, 0, "init-model: MLP width (0: the preset's).");
ABSL_FLAG(int64_t, experts, 0,
          "init-model (qwen3_moe, mixtral): experts per MoE layer (0: the preset's).");
ABSL_FLAG(int64_t, experts_per_token, 0,
          "init-model (qwen3_moe, mixtral): experts routed per token, top k (0: the preset's).");
ABSL_FLAG(int64_t, expert_intermediate, 0,
          "init-model (qwen3_moe): an expert's MLP width, moe_intermediate_size (0: a quarter of "
          "--intermediate; Mixtral's experts are --intermediate wide).");
ABSL_FLAG(int64_t, vocab, 0,
          "init-model: vocabulary size; match the tokenizer you will use (0: the preset's).");
ABSL_FLAG(int64_t, max_positions, 0, "init-model: max_position_embeddings (0: the preset's).");
ABSL_FLAG(uint64_t, seed, 0,
          "init-model: initialisation seed; same seed, same bytes. train: data shuffle seed. "
          "generate: sampling seed.");
ABSL_FLAG(std::string, dtype, "",
          "init-model: dtype of model.safetensors, bf16 (empty: bf16) or fp32. merge-adapter: "
          "bf16, fp32 or auto (empty: auto, each tensor in the base's dtype as stored).");
ABSL_FLAG(std::string, out, "",
          "init-model: output directory (created if missing). merge-adapter: the merged model's "
          "directory (must not exist, or be empty).");
ABSL_FLAG(bool, force, false,
          "init-model: write into a non-empty --out directory, replacing the model files.");
ABSL_FLAG(bool, generation_config, true, "init-model: also write generation_config.json.");

// train --standalone: one process, the whole model resident on the CPU backend.
ABSL_FLAG(bool, standalone, false, "train: single process, whole model resident (required today).");
ABSL_FLAG(std::string, model, "", "train: Hugging Face model directory (bf16 or fp32 safetensors).");
ABSL_FLAG(std::string, data, "", "train: token file (mobius-worker's format, or see --data_raw_bytes).");
ABSL_FLAG(int32_t, data_raw_bytes, 0,
          "train: 2 or 4 for a headerless llm.c-style file of u16/u32 ids; 0: our header format.");
ABSL_FLAG(int64_t, steps, 0, "train: optimizer steps in total (including resumed ones).");
ABSL_FLAG(int64_t, batch, 8, "train: sequences per optimizer step (B).");
ABSL_FLAG(int64_t, microbatch, 0,
          "train: sequences per forward/backward (MB); B must be a multiple; 0: = --batch.");
ABSL_FLAG(int64_t, seq, 256, "train: tokens per sequence (T).");
ABSL_FLAG(double, lr, 3e-4, "train: peak learning rate.");
ABSL_FLAG(double, min_lr, 0.0, "train: final learning rate of the cosine schedule.");
ABSL_FLAG(int64_t, warmup, 0, "train: linear warmup steps.");
ABSL_FLAG(std::string, schedule, "cosine", "train: cosine | constant (after the warmup).");
ABSL_FLAG(double, weight_decay, 0.0,
          "train: AdamW decoupled weight decay (matmul weights and embeddings; never norms/biases).");
ABSL_FLAG(double, grad_clip, 1.0, "train: max global gradient norm; 0: no clipping.");
ABSL_FLAG(int64_t, eval_every, 0, "train: eval loss every K steps and at the end; 0: never.");
ABSL_FLAG(double, eval_fraction, 0.0, "train: share of the sequences held out for eval, [0, 0.5].");
ABSL_FLAG(std::string, checkpoint_dir, "", "train: checkpoint root; empty: no checkpoints.");
ABSL_FLAG(int64_t, checkpoint_every, 0,
          "train: checkpoint every K steps (and always at the end when --checkpoint_dir is set).");
ABSL_FLAG(bool, resume, false,
          "train: continue from the latest complete checkpoint in --checkpoint_dir (bit-exact).");
ABSL_FLAG(uint64_t, device_memory_bytes, 0, "train: cap of the CPU backend's memory; 0: RAM.");
ABSL_FLAG(int32_t, threads, 0, "train: op, BLAS and optimizer threads; 0: all cores.");
ABSL_FLAG(std::string, backend, "cpu",
          "train, profile, generate: compute backend: cpu | cuda "
          "(device 0 after CUDA_VISIBLE_DEVICES; "
          "fails without a usable GPU) | auto (cuda where usable, else cpu, logged).");
ABSL_FLAG(bool, recompute, false,
          "train: recompute activations in the backward even when memory holds them all (same "
          "gradients, less memory, one more forward per block).");
ABSL_FLAG(int64_t, chunk_tokens, 0,
          "train: tokens per chunk of the LM head and the MLP (0: sized from memory, the default; "
          "< 0: unchunked; common/model/unit_workspace.h)");
ABSL_FLAG(std::string, precision, "bf16",
          "train: weights and activations in bf16 (fp32 accumulation) or fp16 (dynamic loss "
          "scaling: overflowing steps are skipped; TrainerOptions::precision). profile: the "
          "units measured in that format (the cache key names fp16).");
ABSL_FLAG(double, loss_scale_init, 65536.0,
          "train, fp16: the initial loss scale, a power of two in [1, 2^24]");
ABSL_FLAG(int64_t, loss_scale_window, 2000,
          "train, fp16: good steps in a row after which the loss scale doubles");
ABSL_FLAG(int32_t, optimizer_staleness, 0,
          "train: 1 = the asynchronous optimizer's reference: step k computes with the weights "
          "after update k-2 (after a checkpoint, eval or the first step: the newest); 0 = "
          "synchronous.");
// train: LoRA (PEFT's low-rank adapters on a frozen base model: common/model/lora.h).
ABSL_FLAG(int64_t, lora_rank, 0,
          "train: LoRA rank r; > 0 trains adapters on the frozen model instead of the whole model; "
          "0: full fine-tuning.");
ABSL_FLAG(double, lora_alpha, 8.0,
          "train: LoRA alpha (the adapters' update is scaled by alpha / rank); PEFT's default 8.");
ABSL_FLAG(double, lora_dropout, 0.0, "train: dropout on the adapters' input, [0, 1).");
ABSL_FLAG(std::string, lora_targets, "",
          "train: comma-separated PEFT target_modules names (q_proj,v_proj; c_attn for GPT-2); "
          "empty: the family's PEFT default.");
ABSL_FLAG(std::string, lora_init, "",
          "train: a PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to "
          "start from; empty: PEFT's initialisation from --seed.");
ABSL_FLAG(std::string, lora_base, "bf16",
          "train: the frozen base's format: bf16 (the run's 16-bit precision) or nf4 (QLoRA: its "
          "linear weights in 4-bit NormalFloat, dequantised before each GEMM). generate: the base "
          "the --adapter was trained over (nf4: its linears quantised as training saw them); "
          "an adapter checkpoint of an NF4 run says so itself.");

// merge-adapter: a PEFT LoRA adapter merged into its base (worker/checkpoint/merge_adapter.h).
ABSL_FLAG(std::string, adapter, "",
          "merge-adapter, generate: PEFT adapter directory (adapter_config.json, "
          "adapter_model.safetensors).");
ABSL_FLAG(std::string, base, "",
          "merge-adapter: base model directory; empty: adapter_config.json's "
          "base_model_name_or_path.");
ABSL_FLAG(int64_t, max_shard_bytes, 5'000'000'000,
          "merge-adapter: largest model file before the model is sharded (transformers' 5GB).");

// generate: text from a model directory with a KV cache (worker/generate/generate_command.h);
// also --adapter, --seed (sampling), --backend, --threads,
// --device_memory_bytes.
ABSL_FLAG(std::string, prompt, "",
          "generate: the prompt text, encoded with the model directory's tokenizer.");
ABSL_FLAG(std::string, prompt_ids, "",
          "generate: the prompt as comma-separated token ids (no tokenizer needed).");
ABSL_FLAG(bool, chat, false,
          "generate: --prompt is a user message rendered with the model's chat template (with "
          "the generation prompt); its end-of-turn token stops generation too.");
ABSL_FLAG(std::string, system, "", "generate --chat: a system message before the prompt.");
ABSL_FLAG(std::string, chat_template_kwargs, "",
          "generate --chat: extra chat template variables, NAME=VALUE,...");
ABSL_FLAG(int64_t, max_new_tokens, 0, "generate: tokens to generate at most (>= 1).");
ABSL_FLAG(std::string, expert_residency, "auto",
          "generate, a mixture of experts: resident (every expert on the device), routed (the "
          "experts in host memory, a step uploads only those its tokens are routed to), auto "
          "(routed when the resident model does not fit the device).");
ABSL_FLAG(uint64_t, expert_cache_bytes, 0,
          "generate --expert_residency routed: device bytes for experts (0: what the device has "
          "left; at least one block's experts).");
ABSL_FLAG(double, temperature, 0.0,
          "generate: 0 greedy; > 0 sampling from softmax(logits / temperature) with --top_p.");
ABSL_FLAG(double, top_p, 1.0,
          "generate: nucleus sampling: the smallest set of likeliest tokens holding this share "
          "of the probability, in (0, 1].");
