#include "host/topology/hwloc_source.h"

#include <fcntl.h>
#include <hwloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "host/topology/hwloc_convert.h"

namespace mobius::topology {
namespace {

// Owns an hwloc topology handle.
struct HwlocDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocPtr = std::unique_ptr<hwloc_topology, HwlocDeleter>;

absl::StatusOr<HwlocPtr> NewHwloc() {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return MOBIUS_HWLOC_ERROR("hwloc_topology_init");
  HwlocPtr owned(t);
  // Keep every I/O object: bridges are what tells us about switches and root complexes.
  if (hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL) != 0) {
    return MOBIUS_HWLOC_ERROR("hwloc_topology_set_io_types_filter");
  }
  return owned;
}

absl::StatusOr<std::string> ExportXml(hwloc_topology_t t) {
  char* buf = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(t, &buf, &len, 0) != 0) {
    return MOBIUS_HWLOC_ERROR("hwloc_topology_export_xmlbuffer");
  }
  // len includes the terminating NUL.
  std::string xml(buf, len > 0 ? static_cast<size_t>(len - 1) : 0);
  hwloc_free_xmlbuffer(t, buf);
  return xml;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("topology file ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("topology file ", path));
    close(fd);
    return s;
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("topology file ", path, ": is a directory"));
  }
  std::string data;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("topology file ", path));
      close(fd);
      return s;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > (64u << 20)) {
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat("topology file ", path, ": larger than 64 MiB, not an hwloc topology"));
    }
  }
  close(fd);
  return data;
}

constexpr rlim_t kProbeCpuSeconds = 5;
constexpr rlim_t kProbeMemoryBytes = rlim_t{4} << 30;
// No machine has a million CPUs or NUMA nodes; larger indices are corruption, and hwloc would size
// bitmaps by them.
constexpr uint64_t kMaxOsIndex = (1u << 20) - 1;

absl::Status CheckIndices(const std::string& xml) {
  size_t pos = 0;
  static constexpr absl::string_view kKey = "os_index=\"";
  while ((pos = xml.find(kKey.data(), pos, kKey.size())) != std::string::npos) {
    pos += kKey.size();
    size_t end = xml.find('"', pos);
    if (end == std::string::npos) break;
    absl::string_view value(xml.data() + pos, end - pos);
    uint64_t v = 0;
    if (value.size() > 10 || (absl::SimpleAtoi(value, &v) && v > kMaxOsIndex)) {
      return absl::InvalidArgumentError(
          absl::StrCat("os_index=\"", value.substr(0, 24), "\" is out of range (max ", kMaxOsIndex, ")"));
    }
  }
  return absl::OkStatus();
}

// Objects without an os_index get hwloc's "unknown" index (2^32-1), which would make every bitmap
// and its XML export gigabytes long.
absl::Status CheckLoadedIndices(hwloc_topology_t t) {
  hwloc_obj_t root = hwloc_get_root_obj(t);
  for (hwloc_const_bitmap_t set : {root->complete_cpuset, root->complete_nodeset}) {
    if (set == nullptr) continue;
    int last = hwloc_bitmap_last(set);
    if (last < 0 && !hwloc_bitmap_iszero(set)) {
      return absl::InvalidArgumentError("a cpuset or nodeset is infinite");
    }
    if (last > static_cast<int>(kMaxOsIndex)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a CPU or NUMA index is out of range (", last, " > ", kMaxOsIndex,
          "); is an os_index attribute missing?"));
    }
  }
  return absl::OkStatus();
}

absl::Status SetXml(hwloc_topology_t t, const std::string& xml) {
  // hwloc reads the buffer including its terminating NUL.
  if (hwloc_topology_set_xmlbuffer(t, xml.c_str(), static_cast<int>(xml.size()) + 1) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("hwloc rejected it as XML (", strerror(errno), ")"));
  }
  return absl::OkStatus();
}

// The most telling line hwloc printed: its own "hwloc..." lines first, else the first non-banner.
std::string HwlocMessage(const std::string& err) {
  std::string fallback;
  for (absl::string_view line : absl::StrSplit(err, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '*') {
      line = absl::StripLeadingAsciiWhitespace(absl::StripPrefix(line, "*"));
      if (line.empty() || absl::StartsWith(line, "*")) continue;
    }
    if (absl::StartsWithIgnoreCase(line, "hwloc")) return std::string(line);
    if (fallback.empty()) fallback = std::string(line);
  }
  return fallback;
}

absl::Status ProbeInChild(const std::string& xml, const std::string& origin) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("topology ", origin, ": ", why));
  };
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return MOBIUS_ERRNO_ERROR("pipe2");
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return MOBIUS_ERRNO_ERROR("fork");
  }
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    // A hostile or corrupt file must not pin a core or exhaust memory (hwloc sizes bitmaps by the
    // largest index it reads).
    struct rlimit cpu = {kProbeCpuSeconds, kProbeCpuSeconds + 1};
    struct rlimit mem = {kProbeMemoryBytes, kProbeMemoryBytes};
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_AS, &mem);
    hwloc_topology_t t = nullptr;
    int rc = 3;
    if (hwloc_topology_init(&t) == 0 &&
        hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL) == 0 &&
        hwloc_topology_set_xmlbuffer(t, xml.c_str(), static_cast<int>(xml.size()) + 1) == 0 &&
        hwloc_topology_load(t) == 0) {
      rc = 0;
    } else {
      fprintf(stderr, "hwloc_topology_load() failed (%s)\n", strerror(errno));
    }
    fflush(stderr);
    _exit(rc);
  }
  close(pipe_fds[1]);
  std::string err;
  char buf[4096];
  for (;;) {
    ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (err.size() < (1 << 16)) err.append(buf, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  std::string msg = HwlocMessage(err);
  if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGXCPU) {
    return invalid(absl::StrCat("hwloc could not load it within ", kProbeCpuSeconds,
                                " s of CPU time (corrupt indices or sizes?)"));
  }
  if (WIFSIGNALED(wstatus)) {
    return invalid(absl::StrCat("hwloc could not load it: it aborts on this input (",
                                msg.empty() ? strsignal(WTERMSIG(wstatus)) : msg,
                                "); check it with `lstopo --input FILE`"));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return invalid(absl::StrCat("hwloc could not load it: malformed, truncated or unsupported "
                                "hwloc XML (", msg, "); check it with `lstopo --input FILE`"));
  }
  if (!msg.empty()) {
    return invalid(absl::StrCat("hwloc could not load it cleanly, the topology is inconsistent (",
                                msg, "); check it with `lstopo --input FILE`"));
  }
  return absl::OkStatus();
}

class LiveSource : public TopologySource {
 public:
  absl::StatusOr<LoadedTopology> Load() override {
    MOBIUS_ASSIGN_OR_RETURN(HwlocPtr t, NewHwloc());
    if (hwloc_topology_load(t.get()) != 0) return MOBIUS_HWLOC_ERROR("hwloc_topology_load");
    internal::AddSysfsLinkInfos(t.get(), "/sys/bus/pci/devices");
    LoadedTopology out;
    MOBIUS_ASSIGN_OR_RETURN(out.topology, internal::ConvertHwloc(t.get(), Describe()));
    MOBIUS_ASSIGN_OR_RETURN(out.hwloc_xml, ExportXml(t.get()));
    return out;
  }
  std::string Describe() const override { return "hwloc discovery"; }
};

class XmlFileSource : public TopologySource {
 public:
  explicit XmlFileSource(std::string path) : path_(std::move(path)) {}

  absl::StatusOr<LoadedTopology> Load() override {
    MOBIUS_ASSIGN_OR_RETURN(std::string xml, ReadFile(path_));
    return LoadHwlocXml(xml, Describe());
  }
  std::string Describe() const override { return absl::StrCat("file ", path_); }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<TopologySource> MakeHwlocLiveSource() { return std::make_unique<LiveSource>(); }

std::unique_ptr<TopologySource> MakeHwlocXmlFileSource(std::string path) {
  return std::make_unique<XmlFileSource>(std::move(path));
}

absl::StatusOr<LoadedTopology> LoadHwlocXml(const std::string& xml, const std::string& origin) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("topology ", origin, ": ", why));
  };
  absl::string_view body = absl::StripLeadingAsciiWhitespace(xml);
  if (body.empty()) return invalid("is empty, expected hwloc XML");
  if (body.front() != '<') return invalid("is not XML (does not start with '<')");
  if (body.find("<topology") == absl::string_view::npos) {
    return invalid("is XML but not an hwloc topology (no <topology> element)");
  }
  if (xml.size() > static_cast<size_t>(INT32_MAX)) return invalid("is too large");
  // hwloc abort()s on some inconsistent topologies and prints warnings for others, so untrusted
  // XML is first loaded in a child process; only XML that hwloc loads silently is loaded here.
  if (absl::Status s = CheckIndices(xml); !s.ok()) return invalid(s.message());
  MOBIUS_RETURN_IF_ERROR(ProbeInChild(xml, origin));
  MOBIUS_ASSIGN_OR_RETURN(HwlocPtr t, NewHwloc());
  if (absl::Status s = SetXml(t.get(), xml); !s.ok()) return invalid(s.message());
  if (hwloc_topology_load(t.get()) != 0) {
    return invalid(absl::StrCat("hwloc could not load it (", strerror(errno), ")"));
  }
  if (absl::Status s = CheckLoadedIndices(t.get()); !s.ok()) return invalid(s.message());
  LoadedTopology out;
  MOBIUS_ASSIGN_OR_RETURN(out.topology, internal::ConvertHwloc(t.get(), origin));
  MOBIUS_ASSIGN_OR_RETURN(out.hwloc_xml, ExportXml(t.get()));
  return out;
}

}  // namespace mobius::topology
