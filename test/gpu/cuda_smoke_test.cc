// GPU smoke test (ctest label `gpu`): skipped, and reported as skipped, without a usable device.
#include <vector>

#include "gtest/gtest.h"
#include "worker/backend/cuda/smoke_kernel.cuh"
#include "common/device/device_probe.h"

namespace mobius {
namespace {

TEST(CudaSmoke, ProbeSeesDevicesWithSaneProperties) {
  DeviceProbe probe = ProbeDevices();
  ASSERT_TRUE(probe.cuda_built);
  if (probe.cuda_devices.empty()) GTEST_SKIP() << "no CUDA device: " << probe.cuda_error;
  for (const CudaDeviceInfo& d : probe.cuda_devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.compute_capability, 70);
    EXPECT_GT(d.memory_bytes, 1ull << 30);
    EXPECT_EQ(d.pci_bus_id.size(), 12u) << d.pci_bus_id;
  }
}

TEST(CudaSmoke, KernelRoundTripMatchesCpu) {
  DeviceProbe probe = ProbeDevices();
  if (probe.cuda_devices.empty()) GTEST_SKIP() << "no CUDA device: " << probe.cuda_error;
  const int n = 100003;  // not a multiple of the block size
  std::vector<float> x(n), y(n), out;
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * static_cast<float>(i % 977);
    y[i] = -1.0f * static_cast<float>(i % 131);
  }
  ASSERT_EQ(cuda::SaxpyOnDevice(0, 3.0f, x, y, &out), "");
  ASSERT_EQ(out.size(), x.size());
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.0f * x[i] + y[i]) << "at " << i;  // exact in fp32
}

}  // namespace
}  // namespace mobius
