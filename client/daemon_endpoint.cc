#include "client/daemon_endpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/paths.h"

namespace mobius::cli {
namespace {

constexpr char kTcpScheme[] = "tcp://";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

absl::Status CheckTcpAddress(absl::string_view where, absl::string_view address) {
  absl::string_view rest = address;
  absl::ConsumePrefix(&rest, kTcpScheme);
  const size_t colon = rest.rfind(':');
  uint32_t port = 0;
  const absl::string_view host = colon == absl::string_view::npos ? "" : rest.substr(0, colon);
  if (host.empty() || colon == absl::string_view::npos ||
      !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port == 0 || port > 65535 ||
      (absl::StrContains(host, ':') && host.front() != '[')) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " '", address, "' is not tcp://HOST:PORT (e.g. tcp://gpu7.example.org:7465)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token_file ", path, ": cannot open: ", std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 16)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("--token_file ", path, ": not a regular file of at most 64 KiB"));
  }
  if ((st.st_mode & 077) != 0) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrFormat(
        "--token_file %s: readable or writable by group or others (mode %04o); it holds a "
        "secret: chmod 600 %s",
        path, st.st_mode & 07777, path));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  const ssize_t n = read(fd, data.data(), data.size());
  close(fd);
  if (n < 0 || static_cast<size_t>(n) != data.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--token_file ", path, ": read failed"));
  }
  for (absl::string_view line : absl::StrSplit(data, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    if (absl::StrContains(line, ' ') || absl::StrContains(line, '\t')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--token_file ", path, ": the token line has spaces (the file holds only the token)"));
    }
    return std::string(line);
  }
  return absl::InvalidArgumentError(absl::StrCat("--token_file ", path, ": no token in it"));
}

}  // namespace

bool DaemonEndpoint::is_tcp() const { return absl::StartsWith(address, kTcpScheme); }

std::string DaemonEndpoint::target() const {
  absl::string_view a = address;
  absl::ConsumePrefix(&a, kTcpScheme);
  return std::string(a);
}

DaemonEndpoint UnixEndpoint(const std::string& path) {
  DaemonEndpoint e;
  e.address = path;
  return e;
}

absl::StatusOr<DaemonEndpoint> ResolveDaemonEndpoint(const EndpointFlags& f) {
  if (!f.daemon.empty() && !f.socket.empty()) {
    return absl::InvalidArgumentError("give --daemon or --socket, not both");
  }
  DaemonEndpoint e;
  std::string where;
  if (!f.daemon.empty()) {
    e.address = f.daemon;
    where = "--daemon";
  } else if (!f.socket.empty()) {
    e.address = f.socket;
    where = "--socket";
  } else if (std::string env = Env(kDaemonEnvVar); !env.empty()) {
    e.address = env;
    where = absl::StrCat("$", kDaemonEnvVar);
  } else if (std::string sock = Env(kSocketEnvVar); !sock.empty()) {
    e.address = sock;
    where = absl::StrCat("$", kSocketEnvVar);
  } else {
    e.address = kDefaultSocketPath;
  }
  absl::string_view a = e.address;
  if (absl::ConsumePrefix(&a, "unix:")) e.address = std::string(a);
  if (!e.is_tcp()) {
    if (absl::StrContains(e.address, "://")) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " '", e.address, "': the only schemes are tcp:// and unix:"));
    }
    return e;
  }
  if (where == "--socket" || where == absl::StrCat("$", kSocketEnvVar)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " names a unix socket; give a tcp:// address with --daemon or $",
                     kDaemonEnvVar));
  }
  if (absl::Status s = CheckTcpAddress(where, e.address); !s.ok()) return s;
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together (the client certificate and its key)");
  }
  e.tls_ca_file = f.tls_ca;
  e.tls_cert_file = f.tls_cert;
  e.tls_key_file = f.tls_key;
  e.tls_server_name = f.tls_server_name;
  if (!f.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(f.token_file);
    if (!token.ok()) return token.status();
    e.token = *std::move(token);
  } else {
    e.token = std::string(absl::StripAsciiWhitespace(Env(kTokenEnvVar)));
  }
  return e;
}

}  // namespace mobius::cli
