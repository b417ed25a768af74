#include "worker/backend/backend.h"

#include "absl/strings/str_cat.h"

namespace mobius::backend {

absl::string_view QueueKindName(QueueKind kind) {
  switch (kind) {
    case QueueKind::kCompute: return "compute";
    case QueueKind::kHostToDevice: return "h2d";
    case QueueKind::kDeviceToHost: return "d2h";
  }
  return "unknown";
}

absl::string_view CopyDirectionName(CopyDirection direction) {
  switch (direction) {
    case CopyDirection::kHostToDevice: return "h2d";
    case CopyDirection::kDeviceToHost: return "d2h";
    case CopyDirection::kDeviceToDevice: return "d2d";
  }
  return "unknown";
}

namespace {

absl::Status NotImplemented(const Backend& backend, absl::string_view op) {
  return absl::UnimplementedError(absl::StrCat(op, " is not implemented by backend ", backend.name()));
}

}  // namespace

absl::Status Backend::Zero(Queue&, const ZeroParams&) { return NotImplemented(*this, "Zero"); }
absl::Status Backend::Cast(Queue&, const CastParams&) { return NotImplemented(*this, "Cast"); }
absl::Status Backend::EmbeddingForward(Queue&, const EmbeddingParams&) { return NotImplemented(*this, "EmbeddingForward"); }
absl::Status Backend::EmbeddingBackward(Queue&, const EmbeddingBackwardParams&) { return NotImplemented(*this, "EmbeddingBackward"); }
absl::Status Backend::NormForward(Queue&, const NormParams&) { return NotImplemented(*this, "NormForward"); }
absl::Status Backend::NormBackward(Queue&, const NormBackwardParams&) { return NotImplemented(*this, "NormBackward"); }
absl::Status Backend::GeluForward(Queue&, const GeluParams&) { return NotImplemented(*this, "GeluForward"); }
absl::Status Backend::GeluBackward(Queue&, const GeluBackwardParams&) { return NotImplemented(*this, "GeluBackward"); }
absl::Status Backend::SwiGluForward(Queue&, const SwiGluParams&) { return NotImplemented(*this, "SwiGluForward"); }
absl::Status Backend::SwiGluBackward(Queue&, const SwiGluBackwardParams&) { return NotImplemented(*this, "SwiGluBackward"); }
absl::Status Backend::ClampedSwiGluForward(Queue&, const ClampedSwiGluParams&) { return NotImplemented(*this, "ClampedSwiGluForward"); }
absl::Status Backend::ClampedSwiGluBackward(Queue&, const ClampedSwiGluBackwardParams&) { return NotImplemented(*this, "ClampedSwiGluBackward"); }
absl::Status Backend::AttentionSinkForward(Queue&, const AttentionSinkParams&) { return NotImplemented(*this, "AttentionSinkForward"); }
absl::Status Backend::AttentionSinkBackward(Queue&, const AttentionSinkBackwardParams&) { return NotImplemented(*this, "AttentionSinkBackward"); }
absl::Status Backend::RopeTables(Queue&, const RopeTablesParams&) { return NotImplemented(*this, "RopeTables"); }
absl::Status Backend::RopeForward(Queue&, const RopeParams&) { return NotImplemented(*this, "RopeForward"); }
absl::Status Backend::RopeBackward(Queue&, const RopeBackwardParams&) { return NotImplemented(*this, "RopeBackward"); }
absl::Status Backend::AttentionForward(Queue&, const AttentionParams&) { return NotImplemented(*this, "AttentionForward"); }
absl::Status Backend::AttentionBackward(Queue&, const AttentionBackwardParams&) { return NotImplemented(*this, "AttentionBackward"); }
absl::Status Backend::CachedAttentionForward(Queue&, const CachedAttentionParams&) { return NotImplemented(*this, "CachedAttentionForward"); }
absl::Status Backend::CrossEntropyForward(Queue&, const CrossEntropyParams&) { return NotImplemented(*this, "CrossEntropyForward"); }
absl::Status Backend::CrossEntropyBackward(Queue&, const CrossEntropyBackwardParams&) { return NotImplemented(*this, "CrossEntropyBackward"); }
absl::Status Backend::ResidualAdd(Queue&, const ResidualParams&) { return NotImplemented(*this, "ResidualAdd"); }
absl::Status Backend::BiasAdd(Queue&, const BiasAddParams&) { return NotImplemented(*this, "BiasAdd"); }
absl::Status Backend::BiasBackward(Queue&, const BiasBackwardParams&) { return NotImplemented(*this, "BiasBackward"); }
absl::Status Backend::AdamW(Queue&, const AdamWParams&) { return NotImplemented(*this, "AdamW"); }
absl::Status Backend::SumSquares(Queue&, const SumSquaresParams&) { return NotImplemented(*this, "SumSquares"); }
absl::Status Backend::Dropout(Queue&, const DropoutParams&) { return NotImplemented(*this, "Dropout"); }
absl::Status Backend::DequantizeNf4(Queue&, const DequantizeNf4Params&) { return NotImplemented(*this, "DequantizeNf4"); }
absl::Status Backend::MoeRoute(Queue&, const MoeRouteParams&) { return NotImplemented(*this, "MoeRoute"); }
absl::Status Backend::MoeRouteBackward(Queue&, const MoeRouteBackwardParams&) { return NotImplemented(*this, "MoeRouteBackward"); }
absl::Status Backend::MoeGather(Queue&, const MoeGatherParams&) { return NotImplemented(*this, "MoeGather"); }
absl::Status Backend::MoeCombine(Queue&, const MoeCombineParams&) { return NotImplemented(*this, "MoeCombine"); }
absl::Status Backend::MoeCombineBackward(Queue&, const MoeCombineBackwardParams&) { return NotImplemented(*this, "MoeCombineBackward"); }
absl::Status Backend::MoeScatterAdd(Queue&, const MoeScatterAddParams&) { return NotImplemented(*this, "MoeScatterAdd"); }

}  // namespace mobius::backend
