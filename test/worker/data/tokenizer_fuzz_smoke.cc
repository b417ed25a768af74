// Loads mutated tokenizer.json fixtures and encodes/decodes with whatever parses: must never
// crash. Deterministic. Usage: tokenizer_fuzz_smoke ITERATIONS FILE...
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "worker/data/hf_tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int iterations = std::atoi(argv[1]);
  std::vector<std::string> corpus;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    corpus.push_back(ss.str());
  }
  std::mt19937_64 rng(42);
  int parsed = 0;
  for (int it = 0; it < iterations; ++it) {
    std::string s = corpus[rng() % corpus.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0 && !s.empty(); --k) {
      size_t p = rng() % s.size();
      switch (rng() % 5) {
        case 0: s.resize(p); break;
        case 1: s[p] ^= static_cast<char>(1u << (rng() % 8)); break;
        case 2: s.erase(p, 1 + rng() % 200); break;
        case 3: s.insert(p, s.substr(rng() % s.size(), 1 + rng() % 100)); break;
        default: s[p] = "{}[]\",:\\0-9"[rng() % 12]; break;
      }
    }
    auto tok = mobius::data::ParseHfTokenizer(s, "fuzz");
    if (!tok.ok()) continue;
    ++parsed;
    std::string text = "Hello wörld 123 <|endoftext|> 👋 \xff";
    auto ids = (*tok)->Encode(text.substr(0, rng() % text.size()), true);
    if (ids.ok()) (void)(*tok)->Decode(*ids, rng() % 2);
    (void)(*tok)->Decode({0, 1, static_cast<int32_t>(rng() % 100000) - 5}, false);
  }
  std::cout << "tokenizer_fuzz_smoke: " << iterations << " mutated inputs (" << parsed
            << " parsed), no crash\n";
  return 0;
}
