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
#include <utility>
#include <vector>

#include "common/init.h"
#include "worker/verb_help.h"
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

constexpr char kDevicesUsage[] = "mobius-worker devices";

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

// The usage line of each verb this build has (its command header's).
std::vector<std::pair<std::string, std::string>> Usages() {
  std::vector<std::pair<std::string, std::string>> u = {
      {"devices", kDevicesUsage}, {"init-model", mobius::checkpoint::kInitModelUsage}};
#ifdef MOBIUS_WORKER_HAVE_TRAIN
  u.emplace_back("train", mobius::train::kTrainUsage);
#endif
#ifdef MOBIUS_WORKER_HAVE_RUN
  u.emplace_back("run", mobius::runtime::kRunUsage);
#endif
#ifdef MOBIUS_WORKER_HAVE_TOKENIZE
  u.emplace_back("tokenize", mobius::data::kTokenizeUsage);
#endif
  u.emplace_back("merge-adapter", mobius::checkpoint::kMergeAdapterUsage);
#ifdef MOBIUS_WORKER_HAVE_GENERATE
  u.emplace_back("generate", mobius::generate::kGenerateUsage);
#endif
#ifdef MOBIUS_WORKER_HAVE_PROFILE
  u.emplace_back("profile", mobius::profile::kProfileUsage);
#endif
  return u;
}

// `mobius-worker --help`: the verbs; `mobius-worker VERB --help`: the verb's usage and flags.
int PrintHelp(const std::string& verb) {
  std::vector<std::string> lines;
  for (const auto& [name, usage] : Usages()) {
    if (name == verb) {
      std::cout << *mobius::worker::VerbHelp(verb, usage);
      return 0;
    }
    lines.push_back(usage);
  }
  std::cout << mobius::worker::GlobalHelp(lines);
  return verb.empty() ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  // absl's own --help lists the flags of a file named like the binary (none): answered here.
  mobius::HelpRequest help = mobius::TakeHelpFlags(argc, argv);
  std::string usage;
  for (const auto& [name, u] : Usages()) usage += "\n  " + u;
  std::vector<std::string> args = mobius::InitProcess(
      static_cast<int>(help.argv.size()) - 1, help.argv.data(),
      "mobius-worker: runs one GPU's part of a Mobius job.\nUsage:" + usage);
  if (help.asked) return PrintHelp(args.size() >= 2 ? args[1] : "");
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
  std::cerr << "usage:" << usage << "\n(mobius-worker VERB --help: the verb's flags)\n";
  return 2;
}
