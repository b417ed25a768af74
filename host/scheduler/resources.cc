#include "host/scheduler/resources.h"

namespace mobius::jobs {

const char* PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kSpread:
      return "spread";
    case Placement::kPack:
      return "pack";
  }
  return "unknown";
}

}  // namespace mobius::jobs
