// libFuzzer entry point for the config.json parser, and the arithmetic run on what it accepts.
// Built as a libFuzzer binary with -DMOBIUS_FUZZ=ON (clang); config_fuzz_smoke runs it in every
// ctest over deterministic mutations of test/data/models/ (test/testing/fuzz_smoke_main.cc).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/model/layer_units.h"
#include "common/model/model_config_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mobius::model;
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!config.ok()) return 0;
  absl::StatusOr<ModelDescription> model = DescribeModel(*config);
  if (!model.ok()) __builtin_trap();  // the parser accepted what the model rejects: a bug
  const int64_t seq_len = std::min<int64_t>(config->max_position_embeddings, 1 << 16);
  TotalParameters(*model);
  NonEmbeddingParameters(*model);
  ModelFlops(*model, seq_len);
  for (int64_t i = 0; i < model->num_units(); ++i) {
    UnitActivations(*model, i).SavedBytesPerToken(seq_len);
    UnitResidentParameterBytes(model->units[i]);
  }
  return 0;
}
