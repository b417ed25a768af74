#include "server/topology/hwloc_source.h"

#include <fcntl.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "server/topology/hwloc_convert.h"

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
  MOBIUS_ASSIGN_OR_RETURN(HwlocPtr t, NewHwloc());
  // hwloc reads the buffer including its terminating NUL.
  if (hwloc_topology_set_xmlbuffer(t.get(), xml.c_str(), static_cast<int>(xml.size()) + 1) != 0) {
    return invalid(absl::StrCat("hwloc rejected it as XML (", strerror(errno), ")"));
  }
  if (hwloc_topology_load(t.get()) != 0) {
    return invalid(absl::StrCat(
        "hwloc could not load it: malformed, truncated or unsupported hwloc XML (", strerror(errno),
        "); check it with `lstopo --input FILE`"));
  }
  LoadedTopology out;
  MOBIUS_ASSIGN_OR_RETURN(out.topology, internal::ConvertHwloc(t.get(), origin));
  MOBIUS_ASSIGN_OR_RETURN(out.hwloc_xml, ExportXml(t.get()));
  return out;
}

}  // namespace mobius::topology
