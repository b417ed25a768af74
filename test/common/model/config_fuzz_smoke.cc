// Runs the config.json fuzz target (config_fuzzer.cc) over every file given on the command line
// and over deterministic mutations of them: truncation, bit flips, deleted and duplicated runs,
// numbers replaced by edge values (huge, negative, fractional, overflowing, wrong types), and
// structural characters. Exits 0 unless the target crashes (or ctest's timeout sees a hang).
//   config_fuzz_smoke ITERATIONS FILE...
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

constexpr const char* kEdgeValues[] = {
    "0", "-1", "-0", "1.5", "4096.0", "1e309", "-1e309", "1e-400", "NaN", "131072", "131073",
    "2147483648", "4294967297", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "null", "true", "\"7\"", "[]", "{}", "[1, 2]", "16384", "3"};

void Run(const std::string& s) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string Mutate(const std::string& in, std::mt19937_64& rng) {
  std::string s = in;
  if (s.empty()) return s;
  auto pos = [&](size_t n) { return static_cast<size_t>(rng() % (n ? n : 1)); };
  switch (rng() % 7) {
    case 0: s.resize(pos(s.size())); break;                                    // truncate
    case 1: s[pos(s.size())] ^= static_cast<char>(1u << (rng() % 8)); break;   // flip a bit
    case 2: s.erase(pos(s.size()), 1 + rng() % 64); break;                     // delete a run
    case 3: {                                                                  // duplicate a run
      size_t a = pos(s.size());
      s.insert(pos(s.size()), s.substr(a, 1 + rng() % 256));
      break;
    }
    case 4:
    case 5: {  // replace a number (or a literal) with an edge value
      size_t p = s.find_first_of("0123456789tfn", pos(s.size()));
      if (p == std::string::npos) break;
      size_t end = s.find_first_of(",}]\n", p);
      if (end == std::string::npos) end = s.size();
      s.replace(p, end - p, kEdgeValues[rng() % std::size(kEdgeValues)]);
      break;
    }
    default: s[pos(s.size())] = "{}[]\",: \n\0"[rng() % 10]; break;            // structural char
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: config_fuzz_smoke ITERATIONS FILE...\n";
    return 2;
  }
  const int iterations = std::atoi(argv[1]);
  std::vector<std::string> corpus;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "config_fuzz_smoke: cannot read " << argv[i] << "\n";
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    corpus.push_back(ss.str());
    Run(corpus.back());
  }
  std::mt19937_64 rng(20261130);
  double slowest_ms = 0;
  for (int i = 0; i < iterations; ++i) {
    std::string s = corpus[rng() % corpus.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) s = Mutate(s, rng);
    auto start = std::chrono::steady_clock::now();
    Run(s);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (ms > slowest_ms) slowest_ms = ms;
  }
  std::cout << "config_fuzz_smoke: " << iterations << " mutated inputs, no crash; slowest "
            << slowest_ms << " ms\n";
  return 0;
}
