#include "host/launch/cgroup_device_filter.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/errors.h"

namespace mobius::launch {
namespace {

// The registers the program uses; r1 holds the struct bpf_cgroup_dev_ctx pointer on entry.
constexpr uint8_t kR0 = 0, kR1 = 1, kType = 2, kMajor = 3, kMinor = 4;

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn insn;
  std::memset(&insn, 0, sizeof(insn));
  insn.code = code;
  insn.dst_reg = dst;
  insn.src_reg = src;
  insn.off = off;
  insn.imm = imm;
  return insn;
}

bpf_insn LoadWord(uint8_t dst, int16_t offset) {  // dst = *(u32 *)(r1 + offset)
  return Insn(BPF_LDX | BPF_MEM | BPF_W, dst, kR1, offset, 0);
}

bpf_insn JumpIf(uint8_t op, uint8_t reg, uint32_t value, int16_t off) {  // unsigned compare
  return Insn(BPF_JMP | op | BPF_K, reg, 0, off, static_cast<int32_t>(value));
}

// The program, in the verifier's terms: a straight run of compares, each jumping forward to
// "allow" (return 1) when the access is outside the rule; falling through all of them is "deny"
// (return 0). Forward jumps only: no loops for the verifier to bound.
//
//   type  = ctx->access_type & 0xffff;   if type  != CHAR          goto allow
//   major = ctx->major;                  if major != rule.major    goto allow
//   minor = ctx->minor;                  if minor <  first         goto allow
//                                        if minor >  last          goto allow
//   for m in allowed_minors:             if minor == m             goto allow
//   return 0;   allow: return 1;
std::vector<bpf_insn> BuildProgram(const DeviceDenyRule& rule) {
  std::vector<bpf_insn> prog;
  if (rule.first_minor > rule.last_minor) {  // denies nothing
    prog.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, kR0, 0, 0, 1));
    prog.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    return prog;
  }
  std::vector<uint32_t> allowed = rule.allowed_minors;
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());

  // Jumps are filled in with a placeholder and patched once "allow"'s index is known.
  std::vector<size_t> to_allow;
  auto jump_to_allow = [&](uint8_t op, uint8_t reg, uint32_t value) {
    to_allow.push_back(prog.size());
    prog.push_back(JumpIf(op, reg, value, 0));
  };
  prog.push_back(LoadWord(kType, offsetof(bpf_cgroup_dev_ctx, access_type)));
  prog.push_back(Insn(BPF_ALU | BPF_AND | BPF_K, kType, 0, 0, 0xffff));
  jump_to_allow(BPF_JNE, kType, BPF_DEVCG_DEV_CHAR);
  prog.push_back(LoadWord(kMajor, offsetof(bpf_cgroup_dev_ctx, major)));
  jump_to_allow(BPF_JNE, kMajor, rule.major);
  prog.push_back(LoadWord(kMinor, offsetof(bpf_cgroup_dev_ctx, minor)));
  jump_to_allow(BPF_JLT, kMinor, rule.first_minor);
  jump_to_allow(BPF_JGT, kMinor, rule.last_minor);
  for (uint32_t m : allowed) jump_to_allow(BPF_JEQ, kMinor, m);
  prog.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, kR0, 0, 0, 0));  // deny
  prog.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  const size_t allow = prog.size();
  prog.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, kR0, 0, 0, 1));
  prog.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  for (size_t i : to_allow) prog[i].off = static_cast<int16_t>(allow - (i + 1));
  return prog;
}

long Bpf(int cmd, bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof(*attr)); }

// A descriptor of the loaded program (the caller closes it), or why the kernel refused it.
absl::StatusOr<int> LoadProgram(const DeviceDenyRule& rule) {
  const std::vector<bpf_insn> prog = BuildProgram(rule);
  static constexpr char kLicense[] = "GPL";  // no helpers are called: the string is informative
  auto load = [&](char* log, uint32_t log_size) {
    bpf_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    attr.insns = reinterpret_cast<uint64_t>(prog.data());
    attr.insn_cnt = static_cast<uint32_t>(prog.size());
    attr.license = reinterpret_cast<uint64_t>(kLicense);
    std::strncpy(attr.prog_name, "mobius_devices", sizeof(attr.prog_name) - 1);
    if (log != nullptr) {
      attr.log_buf = reinterpret_cast<uint64_t>(log);
      attr.log_size = log_size;
      attr.log_level = 1;
    }
    return static_cast<int>(Bpf(BPF_PROG_LOAD, &attr));
  };
  int fd = load(nullptr, 0);
  if (fd >= 0) return fd;
  const int err = errno;
  if (err == EPERM) {
    return absl::PermissionDeniedError(
        "bpf(BPF_PROG_LOAD) of a cgroup device program: operation not permitted (needs "
        "CAP_SYS_ADMIN, or CAP_BPF with CAP_NET_ADMIN, in the initial user namespace)");
  }
  if (err == EINVAL || err == EACCES) {  // the verifier's verdict: ask again for its log
    std::string log(64 * 1024, '\0');
    fd = load(log.data(), static_cast<uint32_t>(log.size()));
    if (fd >= 0) return fd;  // accepted the second time: nothing to report
    log.resize(std::strlen(log.c_str()));
    return absl::InvalidArgumentError(absl::StrCat(
        "the kernel rejected the cgroup device program (", std::strerror(err), "): ", log));
  }
  return MOBIUS_ERRNO_ERROR(err == ENOSYS ? "bpf(2) (kernel built without CONFIG_BPF_SYSCALL)"
                                          : "bpf(BPF_PROG_LOAD) of a cgroup device program");
}

}  // namespace

DeviceDenyRule NvidiaGpuRule(std::vector<uint32_t> allowed_minors) {
  DeviceDenyRule rule;
  rule.major = kNvidiaMajor;
  rule.first_minor = 0;
  rule.last_minor = kNvidiaLastGpuMinor;
  rule.allowed_minors = std::move(allowed_minors);
  return rule;
}

std::string DescribeRule(const DeviceDenyRule& rule) {
  if (rule.first_minor > rule.last_minor) return "no device denied";
  std::string out =
      absl::StrCat("char ", rule.major, ":[", rule.first_minor, "-", rule.last_minor, "] denied");
  if (!rule.allowed_minors.empty()) {
    std::vector<uint32_t> allowed = rule.allowed_minors;
    std::sort(allowed.begin(), allowed.end());
    absl::StrAppend(&out, " except ", absl::StrJoin(allowed, ", "));
  }
  return out;
}

absl::Status AttachDeviceFilter(const std::string& cgroup_dir, const DeviceDenyRule& rule) {
  const int cgroup_fd = open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cgroup_fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("open ", cgroup_dir));
  absl::StatusOr<int> prog_fd = LoadProgram(rule);
  if (!prog_fd.ok()) {
    close(cgroup_fd);
    return prog_fd.status();
  }
  bpf_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.target_fd = static_cast<uint32_t>(cgroup_fd);
  attr.attach_bpf_fd = static_cast<uint32_t>(*prog_fd);
  attr.attach_type = BPF_CGROUP_DEVICE;
  attr.attach_flags = BPF_F_ALLOW_MULTI;
  const long rc = Bpf(BPF_PROG_ATTACH, &attr);
  const int err = errno;
  // The attachment holds its own reference to the program: both descriptors can go.
  close(*prog_fd);
  close(cgroup_fd);
  if (rc == 0) return absl::OkStatus();
  if (err == EPERM) {
    return absl::PermissionDeniedError(absl::StrCat(
        "bpf(BPF_PROG_ATTACH) of a device program to ", cgroup_dir,
        ": operation not permitted (needs CAP_NET_ADMIN; or an ancestor's device program was "
        "attached without BPF_F_ALLOW_MULTI)"));
  }
  return ErrnoError(err, absl::StrCat("bpf(BPF_PROG_ATTACH) of a device program to ", cgroup_dir),
                    __FILE__, __LINE__);
}

absl::Status ProbeDeviceFilter() {
  absl::StatusOr<int> fd = LoadProgram(NvidiaGpuRule({}));
  if (!fd.ok()) return fd.status();
  close(*fd);
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> NvidiaDeviceMinor(const std::string& pci_bus_id,
                                           const std::string& gpus_dir) {
  const std::string path =
      absl::StrCat(gpus_dir, "/", absl::AsciiStrToLower(pci_bus_id), "/information");
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("GPU ", pci_bus_id, ": the NVIDIA driver lists no ", path));
  }
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "Device Minor:")) continue;
    uint32_t minor = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &minor)) break;
    return minor;
  }
  return absl::NotFoundError(absl::StrCat(path, " has no \"Device Minor: N\" line"));
}

}  // namespace mobius::launch
