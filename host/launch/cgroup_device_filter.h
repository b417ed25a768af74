// Which character devices a job's processes may open: the cgroup v2 device controller, as
// Slurm's ConstrainDevices and systemd's DeviceAllow= use it.
//
// cgroup v2 has no devices.allow file: access to a device node (open(2) and mknod(2)) is decided by
// BPF_PROG_TYPE_CGROUP_DEVICE programs attached to the cgroup and its ancestors, all of which must
// allow it. AttachDeviceFilter builds a small program from a DeviceDenyRule (a dozen eBPF
// instructions, assembled here: no libbpf, no clang), loads it with bpf(2) and attaches it with
// BPF_F_ALLOW_MULTI, so that programs a supervisor attached above (systemd's DevicePolicy=) keep
// running too. The attachment lives as long as the cgroup; nothing is to be detached.
//
// What it restricts: opening a denied node fails with EPERM. Descriptors opened before a process
// entered the cgroup are not affected, so a job's processes must enter their cgroup before they
// open a GPU: a forked child before execve (JobCgroup::procs_fd), which is a guarantee; a
// posix_spawn()ed one as soon as the spawn returns (JobCgroup::AddProcess), long before a worker
// gets to initialise CUDA, but strictly a race. NVIDIA specifics (nvidia.ko):
//   - /dev/nvidia<N> is char 195:N, N = the driver's "Device Minor" (NvidiaDeviceMinor), which is
//     not the CUDA index in general: map a GPU by its PCI bus id, never by position;
//   - 195:254 (nvidia-modeset) and 195:255 (nvidiactl, which CUDA needs) stay allowed, as do
//     nvidia-uvm and nvidia-caps (dynamic majors): a job keeps CUDA, and sees only its own GPUs;
//   - MIG instances of one GPU are told apart by nvidia-caps nodes, not by 195:N: this does not
//     isolate MIG instances of one GPU from each other.
//
// Privileges: loading a device program needs CAP_SYS_ADMIN, or CAP_BPF with CAP_NET_ADMIN, in the
// initial user namespace (kernels before 5.8 check CAP_NET_ADMIN again when attaching): a root
// daemon on the host has them; a delegated unprivileged daemon (systemd --user, a rootless
// container) does not, and ProbeDeviceFilter says so.
//
// Thread-safety: all functions are safe to call concurrently.
#ifndef MOBIUS_HOST_LAUNCH_CGROUP_DEVICE_FILTER_H_
#define MOBIUS_HOST_LAUNCH_CGROUP_DEVICE_FILTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::launch {

// Denies character devices major:[first_minor, last_minor] except `allowed_minors`; every other
// device (block devices, other majors, minors outside the range) is allowed. An empty range
// (first_minor > last_minor) denies nothing.
struct DeviceDenyRule {
  uint32_t major = 0;
  uint32_t first_minor = 1;
  uint32_t last_minor = 0;
  std::vector<uint32_t> allowed_minors;
};

inline constexpr uint32_t kNvidiaMajor = 195;
inline constexpr uint32_t kNvidiaLastGpuMinor = 253;  // 254: nvidia-modeset, 255: nvidiactl

// The NVIDIA GPUs a job may open: /dev/nvidia<minor> for `allowed_minors`, no other GPU.
DeviceDenyRule NvidiaGpuRule(std::vector<uint32_t> allowed_minors);

// "char 195:[0-253] denied except 1, 3".
std::string DescribeRule(const DeviceDenyRule& rule);

// Loads the rule's program and attaches it to the cgroup whose directory is `cgroup_dir`.
// PERMISSION_DENIED without the privileges above; INVALID_ARGUMENT with the verifier's log if the
// kernel rejects the program; errors from bpf(2) otherwise (an errno status naming the step).
absl::Status AttachDeviceFilter(const std::string& cgroup_dir, const DeviceDenyRule& rule);

// Whether this process may load a device program at all (loads one, closes it; attaching is
// checked by AttachDeviceFilter). The error says which privilege or kernel feature is missing.
absl::Status ProbeDeviceFilter();

// The minor number of /dev/nvidia<N> for the GPU at `pci_bus_id` ("0000:3b:00.0", as
// topology::PciNode::bus_id), from the driver's `<gpus_dir>/<bus id>/information`
// ("Device Minor: 2"). NOT_FOUND when the driver does not list that GPU.
absl::StatusOr<uint32_t> NvidiaDeviceMinor(
    const std::string& pci_bus_id, const std::string& gpus_dir = "/proc/driver/nvidia/gpus");

}  // namespace mobius::launch

#endif  // MOBIUS_HOST_LAUNCH_CGROUP_DEVICE_FILTER_H_
