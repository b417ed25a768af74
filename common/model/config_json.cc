#include "common/model/config_json.h"

#include <nlohmann/json.hpp>

#include "common/model/family.h"

namespace mobius::model {
namespace {

using Json = nlohmann::ordered_json;

Json TokenId(int64_t id) { return id >= 0 ? Json(id) : Json(nullptr); }

}  // namespace

std::string ModelConfigJson(const ModelConfig& c, absl::string_view torch_dtype) {
  const FamilyDescriptor& family = FamilyOf(c.family);
  Json j = Json::object();
  j["architectures"] = {family.architecture};
  j["model_type"] = family.model_type;
  j["vocab_size"] = c.vocab_size;
  family.write(c, j);
  j["initializer_range"] = 0.02;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = TokenId(c.bos_token_id);
  j["eos_token_id"] = TokenId(c.eos_token_id);
  j["use_cache"] = true;
  j["torch_dtype"] = std::string(torch_dtype);
  return j.dump(2) + "\n";
}

}  // namespace mobius::model
