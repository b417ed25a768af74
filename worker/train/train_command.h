// `mobius-worker train --standalone`: trains a model directory on a token file in this process
// (StandaloneTrainer, standalone_trainer.h) from the flags in worker/checkpoint/worker_flags.h.
//
//   mobius-worker train --standalone --model DIR --data TOKENS.tok [--data_raw_bytes 2|4]
//       --steps N [--batch B --microbatch MB --seq T] [--lr --min_lr --warmup
//       --schedule cosine|constant --weight_decay --grad_clip] [--seed S]
//       [--eval_every K --eval_fraction F] [--checkpoint_dir D --checkpoint_every K --resume]
//       [--device_memory_bytes N] [--threads N]
//       [--lora_rank R [--lora_alpha A] [--lora_dropout P] [--lora_targets q_proj,v_proj]
//        [--lora_init DIR] [--lora_base bf16|nf4]]
//
// --lora_rank > 0 sets TrainerOptions::adapter (type "lora"): adapters trained on the frozen
// model; the other --lora_* flags apply only then.
// stdout: one line per step, FormatStepLine's format
//   step 12/100 | loss 3.4521 | lr 3.00e-04 | grad_norm 1.234 | tok/s 1234 | 456 ms
// (+ " | eval loss X" on eval steps), then "checkpoint DIR" for each checkpoint saved.
// Exit codes: 0 done; 2 bad input (flags, missing model or data, token ids beyond the vocabulary,
// data shorter than one batch, B not a multiple of MB, a device cap too small, no checkpoint to
// resume), reported before any step runs; 1 a failure while training. Errors: one line on stderr.
//
// Call from main() after InitProcess; not thread-safe (reads flags).
#ifndef MOBIUS_WORKER_TRAIN_TRAIN_COMMAND_H_
#define MOBIUS_WORKER_TRAIN_TRAIN_COMMAND_H_

#include <string>
#include <vector>

namespace mobius::train {

inline constexpr char kTrainUsage[] =
    "mobius-worker train --standalone --model DIR --data TOKENS.tok [--data_raw_bytes 2|4] "
    "--steps N [--batch B] [--microbatch MB] [--seq T] [--lr LR] [--min_lr LR] [--warmup N] "
    "[--schedule cosine|constant] [--weight_decay WD] [--grad_clip C] [--seed S] "
    "[--eval_every K --eval_fraction F] [--checkpoint_dir D] [--checkpoint_every K] [--resume] "
    "[--device_memory_bytes N] [--threads N] [--recompute] [--optimizer_staleness 0|1] [--chunk_tokens N] "
    "[--lora_rank R [--lora_alpha A] [--lora_dropout P] [--lora_targets M1,M2,...] "
    "[--lora_init DIR] [--lora_base bf16|nf4]]";

// `args` are the positional arguments, argv[0] first ("train" second). Returns the exit code.
int RunTrainCommand(const std::vector<std::string>& args);

}  // namespace mobius::train

#endif  // MOBIUS_WORKER_TRAIN_TRAIN_COMMAND_H_
