#include "common/model/family.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/model/families/families.h"

namespace mobius::model {
namespace {

// The table: one line per family.
const FamilyDescriptor* const kFamilies[] = {
    &kGpt2Family,  &kLlamaFamily,    &kMistralFamily, &kQwen2Family,
    &kQwen3Family, &kQwen3MoeFamily, &kMixtralFamily, &kGptOssFamily,
};

}  // namespace

absl::Span<const FamilyDescriptor* const> Families() { return kFamilies; }

const FamilyDescriptor& FamilyOf(Family family) {
  for (const FamilyDescriptor* d : kFamilies) {
    if (d->family == family) return *d;
  }
  std::fprintf(stderr, "model::FamilyOf: family %d has no descriptor\n", static_cast<int>(family));
  std::abort();
}

const FamilyDescriptor* FindFamily(absl::string_view model_type) {
  for (const FamilyDescriptor* d : kFamilies) {
    if (model_type == d->model_type) return d;
  }
  return nullptr;
}

std::string SupportedModelTypes() {
  std::string out;
  for (const FamilyDescriptor* d : kFamilies)
    absl::StrAppend(&out, out.empty() ? "" : ", ", d->model_type);
  return out;
}

const char* FamilyName(Family family) { return FamilyOf(family).model_type; }

}  // namespace mobius::model
