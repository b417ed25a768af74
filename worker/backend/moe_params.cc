#include "worker/backend/moe_params.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mobius::backend {
namespace {

// The shape rules every MoE op shares, then null pointers named.
absl::Status Shape(absl::string_view op, int64_t n, int64_t k, int64_t c_or_e, bool k_le_e,
                   int64_t experts) {
  if (n < 0 || k < 1 || c_or_e < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": n = ", n, ", k = ", k, ", width = ", c_or_e, ": want n >= 0, k >= 1, width >= 1"));
  }
  if (k > kMaxMoeTopK) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": k = ", k, " > ", kMaxMoeTopK));
  }
  if (k_le_e && k > experts) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": k = ", k, " > experts = ", experts));
  }
  if (n * k > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": n * k = ", n * k, " exceeds int32"));
  }
  return absl::OkStatus();
}

absl::Status NotNull(absl::string_view op, bool used,
                     std::initializer_list<std::pair<absl::string_view, const void*>> ptrs) {
  if (!used) return absl::OkStatus();
  for (const auto& [name, ptr] : ptrs) {
    if (ptr == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " is null"));
  }
  return absl::OkStatus();
}

absl::Status Half(absl::string_view op, DType dtype) {
  if (IsHalf(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": dtype must be bf16 or fp16, not ", DTypeName(dtype)));
}

}  // namespace

absl::Status ValidateMoeRoute(const MoeRouteParams& p) {
  if (absl::Status s = Shape("moe_route", p.n, p.k, p.experts, true, p.experts); !s.ok()) return s;
  return NotNull("moe_route", p.n > 0,
                 {{"logits", p.logits}, {"probs", p.probs}, {"ids", p.ids},
                  {"weights", p.weights}, {"order", p.order}, {"pos", p.pos},
                  {"offsets", p.offsets}});
}

absl::Status ValidateMoeRouteBackward(const MoeRouteBackwardParams& p) {
  if (absl::Status s = Shape("moe_route_backward", p.n, p.k, p.experts, true, p.experts); !s.ok()) {
    return s;
  }
  return NotNull("moe_route_backward", p.n > 0,
                 {{"dweights", p.dweights}, {"probs", p.probs}, {"ids", p.ids},
                  {"weights", p.weights}, {"dlogits", p.dlogits}});
}

absl::Status ValidateMoeGather(const MoeGatherParams& p) {
  if (absl::Status s = Shape("moe_gather", p.n, p.k, p.c, false, 0); !s.ok()) return s;
  if (absl::Status s = Half("moe_gather", p.dtype); !s.ok()) return s;
  return NotNull("moe_gather", p.n > 0, {{"order", p.order}, {"src", p.src}, {"dst", p.dst}});
}

absl::Status ValidateMoeCombine(const MoeCombineParams& p) {
  if (absl::Status s = Shape("moe_combine", p.n, p.k, p.c, false, 0); !s.ok()) return s;
  if (absl::Status s = Half("moe_combine", p.dtype); !s.ok()) return s;
  return NotNull("moe_combine", p.n > 0,
                 {{"pos", p.pos}, {"weights", p.weights}, {"y", p.y}, {"out", p.out}});
}

absl::Status ValidateMoeCombineBackward(const MoeCombineBackwardParams& p) {
  if (absl::Status s = Shape("moe_combine_backward", p.n, p.k, p.c, false, 0); !s.ok()) return s;
  if (absl::Status s = Half("moe_combine_backward", p.dtype); !s.ok()) return s;
  return NotNull("moe_combine_backward", p.n > 0,
                 {{"pos", p.pos}, {"weights", p.weights}, {"dout", p.dout}, {"y", p.y},
                  {"dy", p.dy}, {"dweights", p.dweights}});
}

absl::Status ValidateMoeScatterAdd(const MoeScatterAddParams& p) {
  if (absl::Status s = Shape("moe_scatter_add", p.n, p.k, p.c, false, 0); !s.ok()) return s;
  return NotNull("moe_scatter_add", p.n > 0, {{"pos", p.pos}, {"src", p.src}, {"dst", p.dst}});
}

}  // namespace mobius::backend
