// Helpers shared by the checkpoint tests: temp directories, whole-file reads, bitwise comparison
// of parameter sets.
#ifndef MOBIUS_TEST_WORKER_CHECKPOINT_TEST_UTIL_H_
#define MOBIUS_TEST_WORKER_CHECKPOINT_TEST_UTIL_H_

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "worker/reference/parameters.h"

namespace mobius::checkpoint::testing {

// A fresh directory under the test's temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/mobius_ckpt_XXXXXX";
    path_ = mkdtemp(pattern.data()) ? pattern : "";
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Same names, shapes and bits (memcmp: NaN payloads and signed zeros included).
inline void ExpectBitEqual(const reference::Parameters& a, const reference::Parameters& b,
                    const std::string& what) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (const auto& [name, t] : a.tensors) {
    const reference::Tensor& u = b.at(name);
    ASSERT_EQ(t.shape, u.shape) << what << " " << name;
    ASSERT_EQ(t.data.size(), u.data.size()) << what << " " << name;
    EXPECT_EQ(std::memcmp(t.data.data(), u.data.data(), t.data.size() * sizeof(float)), 0)
        << what << " " << name;
  }
}

}  // namespace mobius::checkpoint::testing

#endif  // MOBIUS_TEST_WORKER_CHECKPOINT_TEST_UTIL_H_
