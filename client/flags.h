// The `mobius` CLI's flags, all in one place (defined in flags.cc). Flags may be written with
// dashes or underscores (--topology-file == --topology_file).
#ifndef MOBIUS_CLIENT_FLAGS_H_
#define MOBIUS_CLIENT_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, socket);
ABSL_DECLARE_FLAG(std::string, daemon);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_server_name);
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(double, timeout_seconds);
ABSL_DECLARE_FLAG(double, stream_idle_seconds);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(bool, xml);
ABSL_DECLARE_FLAG(std::string, topology_file);
ABSL_DECLARE_FLAG(std::string, tokenizer);
ABSL_DECLARE_FLAG(std::string, format);
ABSL_DECLARE_FLAG(std::string, text_field);
ABSL_DECLARE_FLAG(std::string, prompt_field);
ABSL_DECLARE_FLAG(std::string, completion_field);
ABSL_DECLARE_FLAG(std::string, messages_field);
ABSL_DECLARE_FLAG(std::string, chat_template);
ABSL_DECLARE_FLAG(bool, skip_bad_lines);
ABSL_DECLARE_FLAG(int, eos_id);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int64_t, batch);
ABSL_DECLARE_FLAG(int64_t, microbatch);
ABSL_DECLARE_FLAG(int64_t, seq);
ABSL_DECLARE_FLAG(std::string, schedule);
ABSL_DECLARE_FLAG(std::string, partitioner);
ABSL_DECLARE_FLAG(std::string, mapper);
ABSL_DECLARE_FLAG(int, optimizer_staleness);
ABSL_DECLARE_FLAG(std::string, dispatch);
ABSL_DECLARE_FLAG(bool, clip);
ABSL_DECLARE_FLAG(bool, lora);
ABSL_DECLARE_FLAG(int64_t, lora_rank);
ABSL_DECLARE_FLAG(std::string, lora_targets);
ABSL_DECLARE_FLAG(std::string, gpus);
ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(double, gpu_memory_gib);
ABSL_DECLARE_FLAG(double, host_memory_gib);
ABSL_DECLARE_FLAG(bool, emulated_gpus);
ABSL_DECLARE_FLAG(bool, resume);
ABSL_DECLARE_FLAG(double, efficiency);
ABSL_DECLARE_FLAG(double, peak_tflops);
ABSL_DECLARE_FLAG(double, mip_time_limit_seconds);
ABSL_DECLARE_FLAG(bool, wait);
ABSL_DECLARE_FLAG(bool, follow);
ABSL_DECLARE_FLAG(bool, f);
ABSL_DECLARE_FLAG(std::string, submission_id);
ABSL_DECLARE_FLAG(std::string, state);
ABSL_DECLARE_FLAG(int32_t, max_gpus);
ABSL_DECLARE_FLAG(int32_t, max_running_jobs);
ABSL_DECLARE_FLAG(double, link_scale);
ABSL_DECLARE_FLAG(std::string, emulate_links);
ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(std::string, transport);
ABSL_DECLARE_FLAG(std::string, run_dir);
ABSL_DECLARE_FLAG(std::string, worker_binary);
ABSL_DECLARE_FLAG(bool, merge);
ABSL_DECLARE_FLAG(std::string, base);
ABSL_DECLARE_FLAG(std::string, dtype);

#endif  // MOBIUS_CLIENT_FLAGS_H_
