// Runs the safetensors fuzz entry point (safetensors_fuzzer.cc) on every file given and on
// deterministic mutations of them, so the parser is fuzzed in every ctest run, also without
// clang/libFuzzer. Mutations target the format: the 8-byte header length is overwritten with
// random, off-by-a-little and boundary values; numbers inside the JSON are mangled; plus the usual
// truncations, bit flips and deleted/duplicated runs. Each input is copied into an exact-size heap
// buffer, so a sanitizer build catches any read past its end. Exits 0 unless the target crashes.
//   safetensors_fuzz_smoke ITERATIONS FILE...
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "worker/io/safetensors_internal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// Returns whether the input was accepted as a safetensors file (to report how deep mutations go).
bool Run(const std::string& s) {
  std::unique_ptr<uint8_t[]> exact(new uint8_t[s.size()]);
  std::memcpy(exact.get(), s.data(), s.size());
  LLVMFuzzerTestOneInput(exact.get(), s.size());
  return mobius::io::internal::ParseSafetensors(exact.get(), s.size(), "smoke").ok();
}

uint64_t HeaderLength(const std::string& s) {
  uint64_t n = 0;
  for (int i = 7; i >= 0 && static_cast<size_t>(i) < s.size(); --i) {
    n = (n << 8) | static_cast<uint8_t>(s[i]);
  }
  return n;
}

void SetHeaderLength(std::string& s, uint64_t n) {
  if (s.size() < 8) s.resize(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
}

std::string Mutate(const std::string& in, std::mt19937_64& rng) {
  std::string s = in;
  auto pos = [&](size_t n) { return static_cast<size_t>(rng() % (n ? n : 1)); };
  switch (rng() % 9) {
    case 0:  // truncate
      s.resize(pos(s.size()));
      break;
    case 1:  // flip a bit
      if (!s.empty()) s[pos(s.size())] ^= static_cast<char>(1u << (rng() % 8));
      break;
    case 2:  // delete a run
      if (!s.empty()) s.erase(pos(s.size()), 1 + rng() % 64);
      break;
    case 3: {  // duplicate a run
      if (s.empty()) break;
      const size_t from = pos(s.size());
      s.insert(pos(s.size()), s.substr(from, 1 + rng() % 256));
      break;
    }
    case 4: {  // header length: random, boundary, or the real one nudged
      const uint64_t real = HeaderLength(s);
      const uint64_t choices[] = {rng(),
                                  rng() % 4096,
                                  s.size() - 8,
                                  s.size() - 7,
                                  s.size(),
                                  real + 1,
                                  real - 1,
                                  real + 8,
                                  real - 8,
                                  uint64_t{100} << 20,
                                  (uint64_t{100} << 20) + 1,
                                  ~uint64_t{0},
                                  0};
      SetHeaderLength(s, choices[rng() % (sizeof choices / sizeof choices[0])]);
      break;
    }
    case 5: {  // mangle a number in the JSON: replace a digit run with another number
      const size_t p = s.find_first_of("0123456789", 8 + pos(s.size() > 8 ? s.size() - 8 : 1));
      if (p == std::string::npos) break;
      size_t end = s.find_first_not_of("0123456789", p);
      if (end == std::string::npos) end = s.size();
      static const char* kNumbers[] = {"0",
                                       "1",
                                       "-1",
                                       "4",
                                       "7",
                                       "18446744073709551615",
                                       "18446744073709551616",
                                       "9223372036854775807",
                                       "9223372036854775808",
                                       "1e3",
                                       "2.5",
                                       "-0",
                                       "4294967296"};
      std::string number = rng() % 3 == 0 ? std::to_string(rng() % 100000)
                                          : kNumbers[rng() % (sizeof kNumbers / sizeof *kNumbers)];
      s.replace(p, end - p, number);
      break;
    }
    case 6: {  // replace a dtype name
      static const char* kDTypes[] = {"F32", "BF16", "F16", "I64", "F64", "U8", "", "F3"};
      const size_t p = s.find("\"dtype\":\"", pos(s.size()));
      const size_t q = p == std::string::npos ? p : s.find('"', p + 9);
      if (q != std::string::npos) s.replace(p + 9, q - p - 9, kDTypes[rng() % 8]);
      break;
    }
    case 7:  // structural JSON character
      if (!s.empty()) s[pos(s.size())] = "{}[],:\" \\\0"[rng() % 10];
      break;
    default:  // append garbage to the data section
      s.append(rng() % 16, static_cast<char>(rng()));
      break;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: safetensors_fuzz_smoke ITERATIONS FILE...\n";
    return 2;
  }
  const int iterations = std::atoi(argv[1]);
  std::vector<std::string> corpus;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "cannot read " << argv[i] << "\n";
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    corpus.push_back(ss.str());
    Run(corpus.back());
  }
  std::mt19937_64 rng(20250611);
  double slowest_ms = 0;
  int accepted = 0;
  for (int i = 0; i < iterations; ++i) {
    std::string s = corpus[rng() % corpus.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) s = Mutate(s, rng);
    const auto start = std::chrono::steady_clock::now();
    accepted += Run(s) ? 1 : 0;
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (ms > slowest_ms) slowest_ms = ms;
  }
  std::cout << "safetensors_fuzz_smoke: " << corpus.size() << " files, " << iterations
            << " mutated inputs (" << accepted << " accepted), no crash; slowest " << slowest_ms
            << " ms\n";
  return 0;
}
