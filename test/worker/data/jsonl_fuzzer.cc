// libFuzzer entry point for the dataset line parser, every JSONL format. Built with
// -DMOBIUS_FUZZ=ON under clang; jsonl_fuzz_smoke.cc drives the same parser in every ctest run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "worker/data/documents.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string line(reinterpret_cast<const char*>(data), size);
  for (auto format : {mobius::data::DatasetFormat::kJsonlText,
                      mobius::data::DatasetFormat::kJsonlPromptCompletion,
                      mobius::data::DatasetFormat::kJsonlChat}) {
    mobius::data::DatasetSpec spec;
    spec.format = format;
    (void)mobius::data::ParseDocumentLine(line, spec);
  }
  return 0;
}
