// The harness of cuda_backend_test (cuda_backend_test.cc, cuda_backend_moe_test.cc): CudaBackend
// against CpuBackend (the oracle) through the Backend interface on the same seeded inputs, outputs
// compared with docs/gpu.md's per-op tolerances (worst |cuda - cpu| <= tol * max|cpu|; 0 =
// bitwise; a 16-bit output's tolerance is two ulps of its format). `CudaBackendTest::Both` runs
// one op sequence on each backend (`Side`: a backend, its queue, the test's buffers) and compares.
// With MOBIUS_GPU_TEST_SELF_CHECK=1 and no GPU, a second CpuBackend stands in for the GPU.
#ifndef MOBIUS_TEST_GPU_CUDA_BACKEND_TEST_UTIL_H_
#define MOBIUS_TEST_GPU_CUDA_BACKEND_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/gpu/gpu_test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"

namespace mobius::backend::cuda_backend_test {

using gpu_test::ExpectClose;
using kernels::cuda::HalfType;

inline std::vector<uint16_t> Bf16Bits(size_t n, float scale, uint32_t seed) {
  return gpu_test::RandomBf16(n, scale, seed).bits;
}

// Helpers for the two 16-bit formats every op runs in.
inline HalfType Ht(DType dt) { return dt == DType::kF16 ? HalfType::kF16 : HalfType::kBf16; }
inline double Tol(DType dt) { return gpu_test::HalfTol(Ht(dt)); }
inline std::vector<uint16_t> HalfBits(DType dt, size_t n, float scale, uint32_t seed) {
  return gpu_test::RandomHalf(Ht(dt), n, scale, seed).bits;
}
inline std::string Name(const std::string& op, DType dt) {
  return op + " " + std::string(DTypeName(dt));
}

// One backend with its queue and the buffers of one test.
class Side {
 public:
  explicit Side(Backend* b) : b_(b) {
    auto q = b->CreateQueue(QueueKind::kCompute, 1);
    EXPECT_TRUE(q.ok()) << q.status();
    q_ = *std::move(q);
  }
  Backend& b() { return *b_; }
  Queue& q() { return *q_; }

  template <typename T>
  T* Put(const std::vector<T>& v) {
    const uint64_t bytes = std::max<uint64_t>(1, v.size() * sizeof(T));
    auto d = b_->Allocate(bytes, "t");
    EXPECT_TRUE(d.ok()) << d.status();
    auto buf = std::make_unique<DeviceBuffer>(*std::move(d));
    if (!v.empty()) {
      // The copy is asynchronous and `v` may be a temporary: wait for it.
      EXPECT_TRUE(b_->CopyToDevice(*q_, v.data(), *buf, 0, v.size() * sizeof(T)).ok());
      EXPECT_TRUE(b_->Synchronize(*q_).ok());
    }
    T* p = static_cast<T*>(buf->data());
    bufs_[p] = std::move(buf);
    return p;
  }
  template <typename T>
  T* Zeros(size_t n) {
    return Put(std::vector<T>(n, T{}));
  }
  template <typename T>
  std::vector<T> Get(const void* p, size_t n) {
    std::vector<T> out(n);
    auto it = bufs_.find(const_cast<void*>(p));
    EXPECT_NE(it, bufs_.end());
    if (it == bufs_.end()) return out;
    EXPECT_TRUE(b_->CopyToHost(*q_, *it->second, 0, out.data(), n * sizeof(T)).ok());
    EXPECT_TRUE(b_->Synchronize(*q_).ok());
    return out;
  }
  std::vector<float> GetBf16(const void* p, size_t n) { return gpu_test::ToFloat(Get<uint16_t>(p, n)); }
  std::vector<float> GetHalf(DType dt, const void* p, size_t n) {
    return gpu_test::ToFloat(Ht(dt), Get<uint16_t>(p, n));
  }
  absl::Status Sync() { return b_->Synchronize(*q_); }

 private:
  Backend* b_;
  std::unique_ptr<Queue> q_;
  std::map<void*, std::unique_ptr<DeviceBuffer>> bufs_;
};

using Outputs = std::vector<std::vector<float>>;

// Whether the oracle rounds to fp16: the CPU backend's fp16 support is written alongside these
// fp16 cases. Until its Cast gives fp16's 1.0 (0x3c00), the fp16 cases are skipped (reported)
// rather than compared with bf16 arithmetic, or with an fp32 C written into a 16-bit buffer.
inline bool OracleHasFp16(Backend* cpu) {
  Side s(cpu);
  uint16_t* h = s.Zeros<uint16_t>(1);
  const float* one = s.Put(std::vector<float>{1.0f});
  if (!s.b().Cast(s.q(), {.n = 1, .src_type = DType::kFp32, .dst_type = DType::kF16, .src = one,
                          .dst = h}).ok() ||
      !s.Sync().ok()) {
    return false;
  }
  return s.Get<uint16_t>(h, 1)[0] == 0x3c00;
}
inline constexpr char kNoOracleFp16[] = "the CPU backend has no fp16 yet (its Cast to fp16 is not fp16)";

inline void Compare(const std::string& op, const Outputs& cpu, const Outputs& cuda,
             const std::vector<double>& tol) {
  ASSERT_EQ(cpu.size(), cuda.size());
  ASSERT_EQ(cpu.size(), tol.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    ExpectClose(cuda[i], cpu[i], tol[i], op + "[" + std::to_string(i) + "]");
  }
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // MOBIUS_GPU_TEST_SELF_CHECK=1 without a GPU: a second CpuBackend stands in for the GPU, so
    // the test's own arguments (shapes, leading dimensions, buffer sizes) are checked on any
    // machine; the CUDA-specific tests skip.
    self_check_ = !gpu_test::NoDeviceReason().empty() &&
                  std::getenv("MOBIUS_GPU_TEST_SELF_CHECK") != nullptr;
    if (!self_check_) MOBIUS_REQUIRE_GPU();
    auto cpu = CpuBackend::Create({.op_threads = 4});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *std::move(cpu);
    oracle_fp16_ = OracleHasFp16(cpu_.get());
    if (self_check_) {
      auto other = CpuBackend::Create(
          {.backend = {.capacity_bytes = uint64_t{1} << 30}, .op_threads = 2});
      ASSERT_TRUE(other.ok()) << other.status();
      cuda_ = *std::move(other);
      return;
    }
    auto cuda = CreateCudaBackend({.backend = {.capacity_bytes = uint64_t{1} << 30}, .device = 0});
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = *std::move(cuda);
  }
  bool self_check_ = false;
  bool oracle_fp16_ = false;
  // The 16-bit formats to run the ops in: bf16, and fp16 once the oracle has it.
  std::vector<DType> HalfDTypes() const {
    if (!oracle_fp16_) std::printf("  fp16 cases skipped: %s\n", kNoOracleFp16);
    return oracle_fp16_ ? std::vector<DType>{DType::kBf16, DType::kF16}
                        : std::vector<DType>{DType::kBf16};
  }
  // Runs `op` on both backends and compares what it returns.
  template <typename F>
  void Both(const std::string& name, F op, const std::vector<double>& tol) {
    Side cpu(cpu_.get()), cuda(cuda_.get());
    const Outputs a = op(cpu);
    const Outputs b = op(cuda);
    Compare(name, a, b, tol);
  }
  std::unique_ptr<Backend> cuda_;
  std::unique_ptr<CpuBackend> cpu_;
};

#define EXPECT_OK(expr)                              \
  do {                                               \
    const absl::Status mobius_s_ = (expr);           \
    EXPECT_TRUE(mobius_s_.ok()) << #expr << ": " << mobius_s_; \
  } while (0)

}  // namespace mobius::backend::cuda_backend_test

#endif  // MOBIUS_TEST_GPU_CUDA_BACKEND_TEST_UTIL_H_
