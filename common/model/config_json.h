// Writing a ModelConfig as a Hugging Face config.json (the inverse of model_config_parse.h).
//
// The text has the real transformers field names and values of the config's family (family.h:
// architectures, model_type, sizes, eps, rope, biases, tie_word_embeddings, token ids), the given
// torch_dtype, and dropout probabilities written as 0 so that transformers in train mode computes
// what we compute. ParseModelConfig of the result gives the config back.
//
// Thread-safe: a pure function.
#ifndef MOBIUS_COMMON_MODEL_CONFIG_JSON_H_
#define MOBIUS_COMMON_MODEL_CONFIG_JSON_H_

#include <string>

#include "absl/strings/string_view.h"
#include "common/model/model_config.h"

namespace mobius::model {

// `torch_dtype`: "bfloat16" or "float32". Two-space indented, with a trailing newline.
std::string ModelConfigJson(const ModelConfig& config, absl::string_view torch_dtype);

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_CONFIG_JSON_H_
