// Runs a libFuzzer entry point on every file given on the command line and on deterministic
// mutations of them (truncations, byte flips, deletions, duplications), so the fuzz target runs in
// every ctest even without clang/libFuzzer. Exits 0 unless the target crashes.
//   fuzz_smoke ITERATIONS FILE...
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& s) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string Mutate(const std::string& in, std::mt19937_64& rng) {
  std::string s = in;
  if (s.empty()) return s;
  auto pos = [&](size_t n) { return static_cast<size_t>(rng() % (n ? n : 1)); };
  switch (rng() % 6) {
    case 0: s.resize(pos(s.size())); break;                              // truncate
    case 1: s[pos(s.size())] ^= static_cast<char>(1u << (rng() % 8)); break;  // flip a bit
    case 2: s.erase(pos(s.size()), 1 + rng() % 64); break;                // delete a run
    case 3: {                                                             // duplicate a run
      size_t a = pos(s.size());
      s.insert(pos(s.size()), s.substr(a, 1 + rng() % 256));
      break;
    }
    case 4: {                                                             // mangle a number
      size_t p = s.find_first_of("0123456789", pos(s.size()));
      if (p != std::string::npos) s.insert(p, std::to_string(rng()));
      break;
    }
    default: s[pos(s.size())] = "<>\"=/ \n\0x"[rng() % 10]; break;         // structural char
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: fuzz_smoke ITERATIONS FILE...\n";
    return 2;
  }
  const int iterations = std::atoi(argv[1]);
  std::vector<std::string> corpus;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    corpus.push_back(ss.str());
    Run(corpus.back());
  }
  std::mt19937_64 rng(20261130);
  double slowest_ms = 0;
  std::string slowest;
  for (int i = 0; i < iterations; ++i) {
    std::string s = corpus[rng() % corpus.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) s = Mutate(s, rng);
    auto start = std::chrono::steady_clock::now();
    Run(s);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (ms > slowest_ms) {
      slowest_ms = ms;
      slowest = s;
    }
  }
  if (const char* out = std::getenv("FUZZ_SMOKE_SLOWEST")) std::ofstream(out, std::ios::binary) << slowest;
  std::cout << "fuzz_smoke: " << iterations << " mutated inputs, no crash; slowest " << slowest_ms
            << " ms\n";
  return 0;
}
