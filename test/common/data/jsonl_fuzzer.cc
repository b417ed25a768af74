// libFuzzer entry point for the dataset line parser, every JSONL format. Built with
// -DMOBIUS_FUZZ=ON under clang; jsonl_fuzz_smoke runs it over mutated test/data/datasets/ in every ctest run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/data/documents.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Each line of the input is one JSONL record.
  std::string input(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    const std::string line = input.substr(start, end - start);
    start = end + 1;
    for (auto format : {mobius::data::DatasetFormat::kJsonlText,
                        mobius::data::DatasetFormat::kJsonlPromptCompletion,
                        mobius::data::DatasetFormat::kJsonlChat}) {
      mobius::data::DatasetSpec spec;
      spec.format = format;
      spec.chat_template = "chatml";  // the built-in templates; the model's: chat_template_test
      (void)mobius::data::ParseDocumentLine(line, spec);
    }
  }
  return 0;
}
