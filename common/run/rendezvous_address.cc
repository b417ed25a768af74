// HOST:PORT text (rendezvous.h): MOBIUS_RENDEZVOUS and the addresses in messages.
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/run/rendezvous.h"

namespace mobius::runtime {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("rendezvous address '", text, "': ", what,
                                                 " (expected HOST:PORT, e.g. node1:29560 or "
                                                 "[::1]:29560)"));
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text) {
  absl::string_view host;
  absl::string_view rest;  // ":PORT" or "" when the port is missing
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return Bad(text, "'[' without its ']'");
    host = text.substr(1, close - 1);
    rest = text.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return Bad(text, "text after ']' that is not ':PORT'");
  } else {
    const size_t colon = text.rfind(':');
    host = colon == absl::string_view::npos ? text : text.substr(0, colon);
    rest = colon == absl::string_view::npos ? "" : text.substr(colon);
    if (absl::StrContains(host, ':')) {
      return Bad(text, "an IPv6 address needs brackets, as in [::1]:29560");
    }
  }
  if (host.empty()) return Bad(text, "empty host");
  if (rest.size() <= 1) return Bad(text, "missing port");
  const absl::string_view port_text = rest.substr(1);
  int port = 0;
  // SimpleAtoi accepts a sign and surrounding spaces; a port is digits only.
  const bool digits = port_text.find_first_not_of("0123456789") == absl::string_view::npos;
  if (!digits || !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return Bad(text, absl::StrCat("port '", port_text, "' is not a number in 1..65535"));
  }
  return HostPort{std::string(host), port};
}

std::string FormatHostPort(absl::string_view host, int port) {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::string> RendezvousKeyPrefix(absl::string_view token,
                                                absl::string_view job_key) {
  if (token.size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat(kRendezvousTokenVariable, " is ", token.size(),
                                                   " bytes long (at most 256)"));
  }
  for (char c : token) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          kRendezvousTokenVariable, " may hold only letters, digits, '.', '_' and '-'"));
    }
  }
  return token.empty() ? absl::StrCat(job_key, "/") : absl::StrCat(token, "/", job_key, "/");
}

}  // namespace mobius::runtime
