// Feeds mutated JSONL lines of every format to the dataset line parser: must never crash.
// Deterministic. Usage: jsonl_fuzz_smoke ITERATIONS
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "worker/data/documents.h"

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 1000;
  using mobius::data::DatasetFormat;
  const std::vector<std::pair<DatasetFormat, std::string>> corpus = {
      {DatasetFormat::kJsonlText, R"({"text": "Hello \"world\" \u00e9\ud83d\udc4b", "id": 7})"},
      {DatasetFormat::kJsonlPromptCompletion, R"({"prompt": "Q: 2+2?", "completion": " 4"})"},
      {DatasetFormat::kJsonlChat,
       R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})"},
  };
  std::mt19937_64 rng(7);
  int ok = 0;
  for (int it = 0; it < iterations; ++it) {
    const auto& [format, base] = corpus[rng() % corpus.size()];
    std::string s = base;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0 && !s.empty(); --k) {
      size_t p = rng() % s.size();
      switch (rng() % 5) {
        case 0: s.resize(p); break;
        case 1: s[p] ^= static_cast<char>(1u << (rng() % 8)); break;
        case 2: s.erase(p, 1 + rng() % 8); break;
        case 3: s.insert(p, s.substr(rng() % s.size(), 1 + rng() % 16)); break;
        default: s[p] = "{}[]\":,\\u0"[rng() % 11]; break;
      }
    }
    mobius::data::DatasetSpec spec;
    spec.format = format;
    if (mobius::data::ParseDocumentLine(s, spec).ok()) ++ok;
  }
  std::cout << "jsonl_fuzz_smoke: " << iterations << " mutated lines (" << ok
            << " parsed), no crash\n";
  return 0;
}
