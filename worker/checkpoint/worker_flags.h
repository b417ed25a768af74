// mobius-worker's knobs, all in one place (defined in worker_flags.cc with help text and
// defaults): the `init-model`, `train`, `merge-adapter` and `generate` subcommands'; `devices`
// takes none.
// --seed is shared (init-model: initialisation; train: data shuffle), so are --out and --dtype
// (init-model, merge-adapter).
#ifndef MOBIUS_WORKER_CHECKPOINT_WORKER_FLAGS_H_
#define MOBIUS_WORKER_CHECKPOINT_WORKER_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, family);
ABSL_DECLARE_FLAG(std::string, preset);
ABSL_DECLARE_FLAG(int64_t, layers);
ABSL_DECLARE_FLAG(int64_t, hidden);
ABSL_DECLARE_FLAG(int64_t, heads);
ABSL_DECLARE_FLAG(int64_t, kv_heads);
ABSL_DECLARE_FLAG(int64_t, head_dim);
ABSL_DECLARE_FLAG(int64_t, intermediate);
ABSL_DECLARE_FLAG(int64_t, experts);
ABSL_DECLARE_FLAG(int64_t, experts_per_token);
ABSL_DECLARE_FLAG(int64_t, expert_intermediate);
ABSL_DECLARE_FLAG(int64_t, vocab);
ABSL_DECLARE_FLAG(int64_t, max_positions);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, dtype);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(bool, force);
ABSL_DECLARE_FLAG(bool, generation_config);

// train --standalone (worker/train/train_command.h).
ABSL_DECLARE_FLAG(bool, standalone);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::string, data);
ABSL_DECLARE_FLAG(int32_t, data_raw_bytes);
ABSL_DECLARE_FLAG(int64_t, steps);
ABSL_DECLARE_FLAG(int64_t, batch);
ABSL_DECLARE_FLAG(int64_t, microbatch);
ABSL_DECLARE_FLAG(int64_t, seq);
ABSL_DECLARE_FLAG(double, lr);
ABSL_DECLARE_FLAG(double, min_lr);
ABSL_DECLARE_FLAG(int64_t, warmup);
ABSL_DECLARE_FLAG(std::string, schedule);
ABSL_DECLARE_FLAG(double, weight_decay);
ABSL_DECLARE_FLAG(double, grad_clip);
ABSL_DECLARE_FLAG(int64_t, eval_every);
ABSL_DECLARE_FLAG(double, eval_fraction);
ABSL_DECLARE_FLAG(std::string, checkpoint_dir);
ABSL_DECLARE_FLAG(int64_t, checkpoint_every);
ABSL_DECLARE_FLAG(bool, resume);
ABSL_DECLARE_FLAG(uint64_t, device_memory_bytes);
ABSL_DECLARE_FLAG(int32_t, threads);
ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(bool, recompute);
ABSL_DECLARE_FLAG(int32_t, optimizer_staleness);
ABSL_DECLARE_FLAG(int64_t, chunk_tokens);
ABSL_DECLARE_FLAG(std::string, precision);
ABSL_DECLARE_FLAG(double, loss_scale_init);
ABSL_DECLARE_FLAG(int64_t, loss_scale_window);
ABSL_DECLARE_FLAG(int64_t, lora_rank);
ABSL_DECLARE_FLAG(double, lora_alpha);
ABSL_DECLARE_FLAG(double, lora_dropout);
ABSL_DECLARE_FLAG(std::string, lora_targets);
ABSL_DECLARE_FLAG(std::string, lora_init);
ABSL_DECLARE_FLAG(std::string, lora_base);

// merge-adapter (worker/checkpoint/merge_adapter_command.h); also --out, --dtype.
ABSL_DECLARE_FLAG(std::string, adapter);
ABSL_DECLARE_FLAG(std::string, base);
ABSL_DECLARE_FLAG(int64_t, max_shard_bytes);

// generate (worker/generate/generate_command.h); also --adapter, --seed, --backend, --threads,
// --device_memory_bytes.
ABSL_DECLARE_FLAG(std::string, prompt);
ABSL_DECLARE_FLAG(std::string, prompt_ids);
ABSL_DECLARE_FLAG(bool, chat);
ABSL_DECLARE_FLAG(std::string, system);
ABSL_DECLARE_FLAG(std::string, chat_template_kwargs);
ABSL_DECLARE_FLAG(int64_t, max_new_tokens);
ABSL_DECLARE_FLAG(std::string, expert_residency);
ABSL_DECLARE_FLAG(uint64_t, expert_cache_bytes);
ABSL_DECLARE_FLAG(double, temperature);
ABSL_DECLARE_FLAG(double, top_p);

#endif  // MOBIUS_WORKER_CHECKPOINT_WORKER_FLAGS_H_
