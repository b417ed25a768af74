#include "worker/backend/backend.h"

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

}  // namespace mobius::backend
