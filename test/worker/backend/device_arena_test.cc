// DeviceArena (the CUDA backend's one-allocation device memory bookkeeping): alignment, best fit,
// coalescing, exhaustion without side effects, and a randomized check against a brute-force
// occupancy map.
#include "worker/backend/device_arena.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace mobius::backend {
namespace {

TEST(DeviceArenaTest, AlignsAndCountsRoundedBytes) {
  DeviceArena arena(4096, 256);
  uint64_t a = 1, b = 1;
  ASSERT_TRUE(arena.Allocate(1, &a));
  ASSERT_TRUE(arena.Allocate(300, &b));
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 256u);
  EXPECT_EQ(arena.used(), 256u + 512u);
  uint64_t none = 7;
  EXPECT_FALSE(arena.Allocate(0, &none));
  EXPECT_EQ(none, 7u);
}

TEST(DeviceArenaTest, ExhaustionChangesNothing) {
  DeviceArena arena(1024, 256);
  uint64_t a, b;
  ASSERT_TRUE(arena.Allocate(768, &a));
  EXPECT_FALSE(arena.Allocate(512, &b));
  EXPECT_EQ(arena.used(), 768u);
  EXPECT_EQ(arena.largest_free(), 256u);
  EXPECT_FALSE(arena.Allocate(2048, &b));
  ASSERT_TRUE(arena.Allocate(256, &b));
  EXPECT_EQ(arena.used(), 1024u);
  EXPECT_EQ(arena.peak(), 1024u);
}

TEST(DeviceArenaTest, BestFitAndCoalescing) {
  DeviceArena arena(8 * 256, 256);
  std::vector<uint64_t> at(8);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(arena.Allocate(256, &at[i]));
  // Holes of 2 blocks at 1..2 and 1 block at 5: a 1-block request takes the exact fit.
  ASSERT_TRUE(arena.Free(at[1]));
  ASSERT_TRUE(arena.Free(at[2]));
  ASSERT_TRUE(arena.Free(at[5]));
  EXPECT_EQ(arena.free_blocks(), 2);
  uint64_t one;
  ASSERT_TRUE(arena.Allocate(200, &one));
  EXPECT_EQ(one, at[5]);
  // Freeing the neighbours of the 2-block hole merges them into one 4-block block.
  ASSERT_TRUE(arena.Free(at[0]));
  ASSERT_TRUE(arena.Free(at[3]));
  EXPECT_EQ(arena.free_blocks(), 1);
  EXPECT_EQ(arena.largest_free(), 4u * 256u);
  EXPECT_FALSE(arena.Free(at[3]));  // double free is refused
  EXPECT_FALSE(arena.Free(12345));
  for (uint64_t o : {one, at[4], at[6], at[7]}) ASSERT_TRUE(arena.Free(o));
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(arena.free_blocks(), 1);
  EXPECT_EQ(arena.largest_free(), arena.capacity());
}

TEST(DeviceArenaTest, RandomizedNeverOverlapsAndAlwaysCoalescesBack) {
  constexpr uint64_t kCap = 1 << 20;
  DeviceArena arena(kCap, 256);
  std::vector<uint8_t> owner(kCap / 256, 0);
  std::vector<std::pair<uint64_t, uint64_t>> live;  // offset, bytes
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    if (live.empty() || rng() % 3 != 0) {
      const uint64_t bytes = 1 + rng() % 40000;
      uint64_t off;
      if (!arena.Allocate(bytes, &off)) continue;
      ASSERT_EQ(off % 256, 0u);
      ASSERT_LE(off + bytes, kCap);
      for (uint64_t b = off / 256; b < (off + bytes + 255) / 256; ++b) {
        ASSERT_EQ(owner[b], 0) << "overlap at block " << b;
        owner[b] = 1;
      }
      live.push_back({off, bytes});
    } else {
      const size_t k = rng() % live.size();
      auto [off, bytes] = live[k];
      live.erase(live.begin() + k);
      ASSERT_TRUE(arena.Free(off));
      for (uint64_t b = off / 256; b < (off + bytes + 255) / 256; ++b) owner[b] = 0;
    }
  }
  for (auto [off, bytes] : live) ASSERT_TRUE(arena.Free(off));
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(arena.free_blocks(), 1);
  EXPECT_GT(arena.peak(), kCap / 2);
}

}  // namespace
}  // namespace mobius::backend
