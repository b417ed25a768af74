// Tokenization throughput of our tokenizer on a text file split into documents (one per blank-line
// separated paragraph), MB/s of UTF-8 text, for a given thread count. Prints one line per
// repetition: "ours <threads> <seconds> <MB/s> <tokens>". Driven by bench/tokenize/run.sh, which
// alternates it with the Hugging Face `tokenizers` library on the same file and thread count.
//   tokenize_bench TOKENIZER_DIR TEXT_FILE THREADS REPS
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/data/sp_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: tokenize_bench TOKENIZER_DIR TEXT_FILE THREADS REPS\n");
    return 2;
  }
  auto tok = mobius::data::LoadTokenizer(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string> docs;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    docs.push_back(text.substr(start, end - start));
    start = end + 2;
  }
  const int threads = std::atoi(argv[3]), reps = std::atoi(argv[4]);
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto ids = (*tok)->EncodeBatch(docs, false, threads);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ids.ok()) return 1;
    size_t n = 0;
    for (const auto& d : *ids) n += d.size();
    std::printf("ours %d %.4f %.2f %zu\n", threads, s, text.size() / 1e6 / s, n);
    std::fflush(stdout);
  }
  return 0;
}
