// Test helper: locating files of the source and build trees. ctest sets MOBIUS_SOURCE_DIR and
// MOBIUS_BINARY_DIR (mobius_cc_test); when a test binary runs by hand the compile-time defaults
// are used.
#ifndef MOBIUS_TEST_TESTING_PATHS_H_
#define MOBIUS_TEST_TESTING_PATHS_H_

#include <cstdlib>
#include <string>

namespace mobius::testing {

inline std::string SourcePath(const std::string& relative) {
  const char* dir = std::getenv("MOBIUS_SOURCE_DIR");
  return std::string(dir ? dir : MOBIUS_DEFAULT_SOURCE_DIR) + "/" + relative;
}

inline std::string BinaryPath(const std::string& relative) {
  const char* dir = std::getenv("MOBIUS_BINARY_DIR");
  return std::string(dir ? dir : MOBIUS_DEFAULT_BINARY_DIR) + "/" + relative;
}

inline std::string TopologyFixture(const std::string& name) {
  return SourcePath("test/data/topology/" + name);
}

}  // namespace mobius::testing

#endif  // MOBIUS_TEST_TESTING_PATHS_H_
