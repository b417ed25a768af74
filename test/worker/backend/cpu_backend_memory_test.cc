// CpuBackend device memory (cap, peak, RAII handles) and pinned/registered host memory.
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace mobius::backend {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<CpuBackend> MakeBackend(uint64_t capacity) {
  CpuBackendOptions options;
  options.backend.capacity_bytes = capacity;
  auto backend = CpuBackend::Create(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(backend).value();
}

TEST(CpuBackendMemoryTest, CapExceededIsResourceExhaustedWithNumbersAndRecoversAfterFree) {
  auto backend = MakeBackend(1000);
  EXPECT_EQ(backend->capacity_bytes(), 1000u);
  auto a = backend->Allocate(600, "stage0.weights");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 64, 0u);
  EXPECT_EQ(a->size_bytes(), 600u);
  EXPECT_EQ(a->tag(), "stage0.weights");

  auto b = backend->Allocate(500, "stage1.weights");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(),
              HasSubstr("device memory cap exceeded: requested 500 bytes for stage1.weights, "
                        "in use 600 of 1000 bytes"));
  EXPECT_EQ(backend->used_bytes(), 600u);  // a failed request changes nothing

  backend->Free(*a);
  EXPECT_TRUE(a->empty());
  EXPECT_EQ(backend->used_bytes(), 0u);
  auto c = backend->Allocate(1000, "stage1.weights");  // exactly the cap
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(backend->used_bytes(), 1000u);
  EXPECT_EQ(backend->Allocate(1, "x").status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(CpuBackendMemoryTest, PeakTracksHighWaterMark) {
  auto backend = MakeBackend(1 << 20);
  {
    auto a = backend->Allocate(300, "a");
    auto b = backend->Allocate(200, "b");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(backend->peak_bytes(), 500u);
  }  // RAII frees both
  EXPECT_EQ(backend->used_bytes(), 0u);
  EXPECT_EQ(backend->peak_bytes(), 500u);
  auto c = backend->Allocate(100, "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(backend->peak_bytes(), 500u);
  auto d = backend->Allocate(450, "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(backend->peak_bytes(), 550u);
}

TEST(CpuBackendMemoryTest, MoveTransfersOwnershipAndZeroBytesIsEmpty) {
  auto backend = MakeBackend(1 << 20);
  auto a = backend->Allocate(128, "a");
  ASSERT_TRUE(a.ok());
  DeviceBuffer moved = std::move(*a);
  EXPECT_TRUE(a->empty());
  EXPECT_EQ(backend->used_bytes(), 128u);
  moved = DeviceBuffer();
  EXPECT_EQ(backend->used_bytes(), 0u);
  auto empty = backend->Allocate(0, "nothing");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(CpuBackendMemoryTest, ManyRandomAllocationsAndFreesKeepExactAccounting) {
  constexpr uint64_t kCap = 1 << 20;
  auto backend = MakeBackend(kCap);
  std::mt19937 rng(7);
  std::vector<DeviceBuffer> live;
  uint64_t expected = 0, peak = 0;
  int refused = 0;
  for (int i = 0; i < 5000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t victim = rng() % live.size();
      expected -= live[victim].size_bytes();
      live.erase(live.begin() + static_cast<long>(victim));
    } else {
      uint64_t bytes = 1 + rng() % 50000;
      auto buffer = backend->Allocate(bytes, "random");
      if (expected + bytes > kCap) {
        EXPECT_EQ(buffer.status().code(), absl::StatusCode::kResourceExhausted);
        ++refused;
      } else {
        ASSERT_TRUE(buffer.ok()) << buffer.status();
        static_cast<char*>(buffer->data())[bytes - 1] = 1;  // writable
        expected += bytes;
        peak = std::max(peak, expected);
        live.push_back(std::move(*buffer));
      }
    }
    ASSERT_EQ(backend->used_bytes(), expected);
  }
  EXPECT_GT(refused, 0);
  EXPECT_EQ(backend->peak_bytes(), peak);
  live.clear();
  EXPECT_EQ(backend->used_bytes(), 0u);
}

TEST(CpuBackendMemoryTest, AllocateHostCountsPinnedBytes) {
  auto backend = MakeBackend(1000);
  {
    auto host = backend->AllocateHost(4096);  // not counted against the device cap
    ASSERT_TRUE(host.ok()) << host.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(host->data()) % 64, 0u);
    EXPECT_EQ(backend->pinned_host_bytes(), 4096u);
    EXPECT_EQ(backend->used_bytes(), 0u);
  }
  EXPECT_EQ(backend->pinned_host_bytes(), 0u);
}

TEST(CpuBackendMemoryTest, HostRegistrationBookkeeping) {
  auto backend = MakeBackend(1000);
  std::vector<char> store(10000);
  char* base = store.data();
  ASSERT_TRUE(backend->RegisterHost(base, 4000).ok());
  ASSERT_TRUE(backend->RegisterHost(base + 6000, 1000).ok());
  EXPECT_EQ(backend->registered_host_bytes(), 5000u);

  // Overlaps at the front, the back, inside, and around a range are refused.
  EXPECT_EQ(backend->RegisterHost(base + 3999, 10).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(backend->RegisterHost(base + 5000, 1001).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(backend->RegisterHost(base + 6500, 10).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(backend->RegisterHost(base + 5999, 2000).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(backend->RegisterHost(base + 4000, 2000).ok());  // exactly the gap
  EXPECT_EQ(backend->registered_host_bytes(), 7000u);

  EXPECT_EQ(backend->RegisterHost(nullptr, 10).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->RegisterHost(base, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->UnregisterHost(base + 1).code(), absl::StatusCode::kNotFound);

  EXPECT_TRUE(backend->UnregisterHost(base + 4000).ok());
  EXPECT_TRUE(backend->UnregisterHost(base).ok());
  EXPECT_EQ(backend->UnregisterHost(base).code(), absl::StatusCode::kNotFound);  // twice
  EXPECT_EQ(backend->registered_host_bytes(), 1000u);
  EXPECT_TRUE(backend->UnregisterHost(base + 6000).ok());
  EXPECT_EQ(backend->registered_host_bytes(), 0u);
}

TEST(CpuBackendMemoryTest, CreateRejectsBadOptionsAndDefaultsCapacity) {
  CpuBackendOptions options;
  options.blas_threads = 0;
  EXPECT_EQ(CpuBackend::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.blas_threads = 1;
  options.backend.copy_chunk_bytes = 0;
  auto backend = CpuBackend::Create(options);
  ASSERT_TRUE(backend.ok());
  EXPECT_GT((*backend)->capacity_bytes(), 0u);  // physical memory
  EXPECT_EQ((*backend)->copy_chunk_bytes(), uint64_t{64} << 20);
}

}  // namespace
}  // namespace mobius::backend
