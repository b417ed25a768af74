#include "worker/train/train_command.h"

#include <iostream>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "common/init.h"
#include "glog/logging.h"
#include "worker/checkpoint/worker_flags.h"
#include "worker/train/standalone_trainer.h"

namespace mobius::train {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Usage(absl::string_view message) {
  std::cerr << "mobius-worker train: " << message << "\nusage: " << kTrainUsage << "\n";
  return kExitUsage;
}

// Input the user can fix (exit 2) versus a failure while running (exit 1).
bool IsBadInput(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsResourceExhausted(s) ||
         absl::IsPermissionDenied(s) || absl::IsFailedPrecondition(s) || absl::IsOutOfRange(s);
}

// --lora_rank 0: no adapter (the other --lora_* flags are ignored). A negative rank is kept as
// "lora" so that ValidateTrainerOptions names it rather than training the whole model.
AdapterOptions AdapterFromFlags() {
  AdapterOptions a;
  const int64_t rank = absl::GetFlag(FLAGS_lora_rank);
  if (rank == 0) return a;
  a.type = "lora";
  a.rank = rank;
  a.alpha = absl::GetFlag(FLAGS_lora_alpha);
  a.dropout = absl::GetFlag(FLAGS_lora_dropout);
  a.target_modules = absl::StrSplit(absl::GetFlag(FLAGS_lora_targets), ',', absl::SkipEmpty());
  a.init_dir = absl::GetFlag(FLAGS_lora_init);
  const std::string base = absl::GetFlag(FLAGS_lora_base);
  a.base_quantization = base == "bf16" ? "" : base;
  return a;
}

TrainerOptions OptionsFromFlags() {
  TrainerOptions o;
  o.model_dir = absl::GetFlag(FLAGS_model);
  o.data_path = absl::GetFlag(FLAGS_data);
  o.data_raw_bytes = absl::GetFlag(FLAGS_data_raw_bytes);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.microbatch = absl::GetFlag(FLAGS_microbatch);
  o.seq = absl::GetFlag(FLAGS_seq);
  o.lr = absl::GetFlag(FLAGS_lr);
  o.min_lr = absl::GetFlag(FLAGS_min_lr);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  o.schedule = absl::GetFlag(FLAGS_schedule);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.grad_clip = absl::GetFlag(FLAGS_grad_clip);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.eval_fraction = absl::GetFlag(FLAGS_eval_fraction);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.device_memory_bytes = absl::GetFlag(FLAGS_device_memory_bytes);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.recompute = absl::GetFlag(FLAGS_recompute);
  o.optimizer_staleness = absl::GetFlag(FLAGS_optimizer_staleness);
  o.chunk_tokens = absl::GetFlag(FLAGS_chunk_tokens);
  o.precision = absl::GetFlag(FLAGS_precision);
  o.loss_scale_init = absl::GetFlag(FLAGS_loss_scale_init);
  o.loss_scale_window = absl::GetFlag(FLAGS_loss_scale_window);
  o.adapter = AdapterFromFlags();
  return o;
}

}  // namespace

int RunTrainCommand(const std::vector<std::string>& args) {
  if (args.size() != 2) return Usage("unexpected positional arguments");
  if (!absl::GetFlag(FLAGS_standalone)) {
    return Usage("only --standalone training exists so far (the pipeline runtime comes later)");
  }
  LOG(INFO) << "train configuration:\n" << EffectiveFlags("worker/checkpoint/worker_flags");
  auto trainer = StandaloneTrainer::Create(OptionsFromFlags());
  if (!trainer.ok()) {
    if (IsBadInput(trainer.status())) return Usage(trainer.status().message());
    std::cerr << "mobius-worker train: " << trainer.status().message() << "\n";
    return kExitFailure;
  }
  LOG(INFO) << "train: " << (*trainer)->Describe();
  if ((*trainer)->done()) {
    std::cout << "nothing to do: step " << (*trainer)->step() << " of --steps "
              << absl::GetFlag(FLAGS_steps) << " is already done\n";
    return kExitOk;
  }
  while (!(*trainer)->done()) {
    absl::StatusOr<StepStats> st = (*trainer)->Step();
    if (!st.ok()) {
      std::cerr << "mobius-worker train: " << st.status().message() << "\n";
      return kExitFailure;
    }
    std::cout << FormatStepLine(*st) << "\n";
    if (!st->checkpoint.empty()) std::cout << "checkpoint " << st->checkpoint << "\n";
    std::cout.flush();
  }
  return kExitOk;
}

}  // namespace mobius::train
