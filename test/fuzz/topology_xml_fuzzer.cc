// libFuzzer target for the topology loader (our checks + hwloc's XML parser + our conversion).
// Built with -DMOBIUS_FUZZ=ON under clang:
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DMOBIUS_FUZZ=ON -DMOBIUS_CUDA=OFF
//   ninja -C build-fuzz topology_xml_fuzzer
//   build-fuzz/bin/topology_xml_fuzzer test/data/topology -max_total_time=60
// Without clang the same entry point is driven by test/testing/fuzz_smoke_main.cc as a ctest
// (mutations of the committed fixtures, deterministic seed).
#include <cstddef>
#include <cstdint>
#include <string>

#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"
#include "host/topology/render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string xml(reinterpret_cast<const char*>(data), size);
  auto loaded = mobius::topology::LoadHwlocXml(xml, "fuzz input");
  if (loaded.ok()) {
    // Whatever hwloc accepts must analyse and render without crashing.
    auto facts = mobius::topology::Analyze(loaded->topology);
    (void)mobius::topology::RenderTopology(loaded->topology, facts);
  }
  return 0;
}
