// mobius-worker: the per-GPU worker process. Verbs:
//   mobius-worker devices      lists the compute devices and the backend it would use.
//   mobius-worker init-model   writes a seeded, randomly initialised Hugging Face model directory
//                              (worker/checkpoint/init_model_command.h; flags in worker_flags.cc).
//   mobius-worker train --standalone
//                              trains a model directory on a token file in this process, whole
//                              model resident on the CPU backend (worker/train/train_command.h).
//   mobius-worker run CONFIG RANK
//                              one rank of a pipeline run, started by the launcher
//                              (worker/runtime/run_command.h).
//   mobius-worker tokenize REQUEST.json
//                              tokenizes a text dataset into a token file, SentencePiece included
//                              (worker/data/tokenize_verb.h).
//   mobius-worker merge-adapter --adapter DIR --out DIR [--base DIR] [--dtype bf16|fp32|auto]
//                              merges a PEFT LoRA adapter into its base model, writing a Hugging
//                              Face model directory (worker/checkpoint/merge_adapter_command.h).
//   mobius-worker generate MODEL_DIR (--prompt TEXT | --prompt_ids 1,2,3) --max_new_tokens N
//                              text from a model directory (and a PEFT adapter) with a KV cache
//                              (worker/generate/generate_command.h).
//   mobius-worker profile --model DIR --microbatch B --seq T
//                              measures the model's layer units and the copy bandwidths on the
//                              backend for the planner, cached (worker/profile/profile_command.h).
// Exit codes: 0 ok, 1 failure, 2 usage.
#include <iostream>
#include <string>
#include <vector>

#include "common/init.h"
#include "glog/logging.h"
#include "common/device/device_probe.h"
#include "worker/checkpoint/init_model_command.h"
#include "worker/checkpoint/merge_adapter_command.h"
#ifdef MOBIUS_WORKER_HAVE_TRAIN
#include "worker/train/train_command.h"
#endif
#ifdef MOBIUS_WORKER_HAVE_CUDA_BACKEND
#include "worker/runtime/cuda_rank_backend.h"
#endif
#ifdef MOBIUS_WORKER_HAVE_RUN
#include "worker/runtime/run_command.h"
#endif
#ifdef MOBIUS_WORKER_HAVE_TOKENIZE
#include "worker/data/tokenize_verb.h"
#endif
#ifdef MOBIUS_WORKER_HAVE_PROFILE
#include "worker/profile/profile_command.h"
#endif
#ifdef MOBIUS_WORKER_HAVE_GENERATE
#include "worker/generate/generate_command.h"
#endif

namespace {

constexpr char kUsage[] =
    "mobius-worker: runs one GPU's part of a Mobius job.\n"
    "Usage:\n"
    "  mobius-worker devices\n"
    "  ";

int RunDevices() {
  mobius::DeviceProbe probe = mobius::ProbeDevices();
  LOG(INFO) << mobius::DescribeBackendChoice(probe);
  std::cout << "cuda_built: " << (probe.cuda_built ? "yes" : "no") << "\n";
  std::cout << "cuda_devices: " << probe.cuda_devices.size() << "\n";
  for (const auto& d : probe.cuda_devices) {
    std::cout << "  " << d.ordinal << ": " << d.name << " " << d.pci_bus_id << " sm_"
              << d.compute_capability << " " << (d.memory_bytes >> 20) << " MiB\n";
  }
  std::cout << "backend: " << (probe.cuda_devices.empty() ? "cpu" : "cuda") << "\n";
  if (probe.cuda_devices.empty()) std::cout << "reason: " << probe.cuda_error << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string usage = std::string(kUsage) + mobius::checkpoint::kInitModelUsage;
#ifdef MOBIUS_WORKER_HAVE_TRAIN
  usage += std::string("\n  ") + mobius::train::kTrainUsage;
#endif
  usage += std::string("\n  ") + mobius::checkpoint::kMergeAdapterUsage;
#ifdef MOBIUS_WORKER_HAVE_GENERATE
  usage += std::string("\n  ") + mobius::generate::kGenerateUsage;
#endif
  std::vector<std::string> args = mobius::InitProcess(argc, argv, usage);
#ifdef MOBIUS_WORKER_HAVE_CUDA_BACKEND
  // Every verb may then use the GPU (run, train --backend, profile --backend); CPU otherwise.
  mobius::runtime::RegisterCudaBackendForRanks();
#endif
  if (args.size() == 2 && args[1] == "devices") return RunDevices();
  if (args.size() >= 2 && args[1] == "init-model") {
    return mobius::checkpoint::RunInitModelCommand(args);
  }
  if (args.size() >= 2 && args[1] == "merge-adapter") {
    return mobius::checkpoint::RunMergeAdapterCommand(args);
  }
#ifdef MOBIUS_WORKER_HAVE_TRAIN
  if (args.size() >= 2 && args[1] == "train") return mobius::train::RunTrainCommand(args);
#endif
#ifdef MOBIUS_WORKER_HAVE_RUN
  if (args.size() >= 2 && args[1] == "run") return mobius::runtime::RunWorkerCommand(args);
#endif
#ifdef MOBIUS_WORKER_HAVE_TOKENIZE
  if (args.size() >= 2 && args[1] == "tokenize") return mobius::data::RunTokenizeVerb(args);
#endif
#ifdef MOBIUS_WORKER_HAVE_GENERATE
  if (args.size() >= 2 && args[1] == "generate") return mobius::generate::RunGenerateCommand(args);
#endif
#ifdef MOBIUS_WORKER_HAVE_PROFILE
  if (args.size() >= 2 && args[1] == "profile") return mobius::profile::RunProfileCommand(args);
#endif
  std::cerr << "usage: mobius-worker devices\n       " << mobius::checkpoint::kInitModelUsage
            << "\n";
#ifdef MOBIUS_WORKER_HAVE_TRAIN
  std::cerr << "       " << mobius::train::kTrainUsage << "\n";
#endif
  std::cerr << "       " << mobius::checkpoint::kMergeAdapterUsage << "\n";
#ifdef MOBIUS_WORKER_HAVE_GENERATE
  std::cerr << "       " << mobius::generate::kGenerateUsage << "\n";
#endif
  return 2;
}
