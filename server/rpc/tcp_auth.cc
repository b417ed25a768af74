#include "server/rpc/tcp_auth.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"

namespace mobius {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr size_t kMaxFileBytes = 1 << 20;  // certificates, keys and token files are far smaller

std::string FileError(absl::string_view flag, const std::string& path, absl::string_view what) {
  return absl::StrCat(flag, " ", path, ": ", what);
}

// The whole file, or INVALID_ARGUMENT naming the flag. `private_file`: refuse group/other access.
absl::StatusOr<std::string> ReadSmallFile(absl::string_view flag, const std::string& path,
                                          bool private_file) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " is empty"));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        FileError(flag, path, absl::StrCat("cannot open: ", std::strerror(errno))));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(FileError(flag, path, "not a regular file"));
  }
  if (private_file && (st.st_mode & 077) != 0) {
    close(fd);
    return absl::InvalidArgumentError(FileError(
        flag, path,
        absl::StrFormat("readable or writable by group or others (mode %04o); it holds secrets: "
                        "chmod 600 %s",
                        st.st_mode & 07777, path)));
  }
  if (static_cast<size_t>(st.st_size) > kMaxFileBytes) {
    close(fd);
    return absl::InvalidArgumentError(
        FileError(flag, path, absl::StrCat("larger than ", kMaxFileBytes, " bytes")));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      close(fd);
      return absl::InvalidArgumentError(
          FileError(flag, path, absl::StrCat("read failed: ", n == 0 ? "short read" : std::strerror(e))));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return data;
}

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// Parses the PEM so that a bad file is reported here, by flag and file, rather than by gRPC as a
// failed server start. Returns the first certificate (for the key check).
absl::StatusOr<X509*> CheckCertificates(absl::string_view flag, const std::string& path,
                                        const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* first = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (first == nullptr) {
    return absl::InvalidArgumentError(
        FileError(flag, path, absl::StrCat("not a PEM certificate (", OpenSslError(), ")")));
  }
  return first;
}

absl::Status CheckKey(const std::string& key_path, const std::string& key_pem,
                      const std::string& cert_path, X509* cert) {
  BIO* bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) {
    return absl::InvalidArgumentError(FileError(
        "--tls_key", key_path,
        absl::StrCat("not an unencrypted PEM private key (", OpenSslError(), ")")));
  }
  const bool match = X509_check_private_key(cert, key) == 1;
  EVP_PKEY_free(key);
  ERR_clear_error();
  if (!match) {
    return absl::InvalidArgumentError(FileError(
        "--tls_key", key_path, absl::StrCat("does not match the certificate in ", cert_path)));
  }
  return absl::OkStatus();
}

std::array<uint8_t, 32> Sha256(absl::string_view text) {
  std::array<uint8_t, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

bool VisibleAscii(absl::string_view s) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// Calls on the TCP port reach the services only through here.
class TokenGate final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenGate(std::shared_ptr<const TcpAuthenticator> auth) : auth_(std::move(auth)) {}

  // Blocking: a certificate CN is looked up in passwd (NSS may go to the network).
  bool IsBlocking() const override { return true; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) override {
    std::vector<absl::string_view> authorization;
    auto range = metadata.equal_range("authorization");
    for (auto it = range.first; it != range.second; ++it) {
      authorization.emplace_back(it->second.data(), it->second.size());
    }
    std::vector<absl::string_view> cns;
    for (const grpc::string_ref& cn : context->FindPropertyValues("x509_common_name")) {
      cns.emplace_back(cn.data(), cn.size());
    }
    absl::StatusOr<RemoteIdentity> who = auth_->Authenticate(authorization, cns);
    if (!who.ok()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(who.status().message()));
    }
    return grpc::Status::OK;
  }

 private:
  std::shared_ptr<const TcpAuthenticator> auth_;
};

}  // namespace

absl::StatusOr<RemoteIdentity> LookupLocalUser(absl::string_view name_or_uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* out = nullptr;
  RemoteIdentity id;
  uint32_t uid = 0;
  if (!name_or_uid.empty() && absl::ascii_isdigit(name_or_uid[0]) &&
      absl::SimpleAtoi(name_or_uid, &uid)) {
    id.uid = uid;
    if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) == 0 && out != nullptr) {
      id.user = out->pw_name;
      id.gid = out->pw_gid;
    } else {
      id.user = absl::StrCat("uid ", uid);
    }
    return id;
  }
  const std::string name(name_or_uid);
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &out) != 0 || out == nullptr) {
    return absl::NotFoundError(absl::StrCat("no user named \"", absl::CEscape(name),
                                            "\" on this server (give a user name or a uid)"));
  }
  id.uid = out->pw_uid;
  id.gid = out->pw_gid;
  id.user = out->pw_name;
  return id;
}

absl::StatusOr<std::vector<std::pair<std::string, RemoteIdentity>>> ReadTokenFile(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile("--token_file", path, /*private_file=*/true);
  if (!text.ok()) return text.status();
  std::vector<std::pair<std::string, RemoteIdentity>> out;
  std::map<std::array<uint8_t, 32>, int> seen;  // digest -> line
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = absl::StrCat(path, ":", line_no, ": ");
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::ByAnyChar(" \t"),
                                                           absl::SkipEmpty());
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--token_file ", where, "expected 'TOKEN USER' (two fields), found ", fields.size()));
    }
    const absl::string_view token = fields[0];
    if (token.size() < kMinTokenLength || !VisibleAscii(token)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--token_file ", where, "the token must be at least ", kMinTokenLength,
          " visible ASCII characters (e.g. openssl rand -hex 32)"));
    }
    const std::array<uint8_t, 32> digest = Sha256(token);
    if (auto it = seen.find(digest); it != seen.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--token_file ", where,
                                                     "the same token as line ", it->second));
    }
    seen[digest] = line_no;
    absl::StatusOr<RemoteIdentity> who = LookupLocalUser(fields[1]);
    if (!who.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token_file ", where, who.status().message()));
    }
    who->method = "token";
    out.emplace_back(std::string(token), *std::move(who));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token_file ", path, ": no tokens (lines 'TOKEN USER')"));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<TcpAuthenticator>> TcpAuthenticator::Create(
    const TcpSecurityOptions& options) {
  auto a = std::unique_ptr<TcpAuthenticator>(new TcpAuthenticator());
  a->options_ = options;
  if (options.cert_file.empty() || options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--listen_tcp needs --tls_cert and --tls_key: mobiusd never serves gRPC over plaintext "
        "TCP");
  }
  if (options.client_ca_file.empty() && options.token_file.empty()) {
    return absl::InvalidArgumentError(
        "--listen_tcp needs --tls_client_ca (client certificates) and/or --token_file (bearer "
        "tokens): every TCP caller must authenticate");
  }
  absl::StatusOr<std::string> cert = ReadSmallFile("--tls_cert", options.cert_file, false);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadSmallFile("--tls_key", options.key_file, false);
  if (!key.ok()) return key.status();
  absl::StatusOr<X509*> x509 = CheckCertificates("--tls_cert", options.cert_file, *cert);
  if (!x509.ok()) return x509.status();
  absl::Status key_ok = CheckKey(options.key_file, *key, options.cert_file, *x509);
  X509_free(*x509);
  if (!key_ok.ok()) return key_ok;
  a->cert_pem_ = *std::move(cert);
  a->key_pem_ = *std::move(key);
  if (!options.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadSmallFile("--tls_client_ca", options.client_ca_file, false);
    if (!ca.ok()) return ca.status();
    absl::StatusOr<X509*> ca_cert = CheckCertificates("--tls_client_ca", options.client_ca_file, *ca);
    if (!ca_cert.ok()) return ca_cert.status();
    X509_free(*ca_cert);
    a->client_ca_pem_ = *std::move(ca);
  }
  if (!options.token_file.empty()) {
    auto tokens = ReadTokenFile(options.token_file);
    if (!tokens.ok()) return tokens.status();
    for (auto& [token, identity] : *tokens) {
      a->tokens_.push_back({Sha256(token), std::move(identity)});
      std::fill(token.begin(), token.end(), '\0');
    }
  }
  return a;
}

absl::StatusOr<RemoteIdentity> TcpAuthenticator::Authenticate(
    absl::Span<const absl::string_view> authorization,
    absl::Span<const absl::string_view> certificate_cns) const {
  if (!authorization.empty()) {
    if (tokens_.empty()) {
      return absl::UnauthenticatedError(
          "this daemon accepts no bearer tokens on TCP (no --token_file); use a client "
          "certificate");
    }
    if (authorization.size() != 1) {
      return absl::UnauthenticatedError("more than one authorization header");
    }
    absl::string_view value = authorization[0];
    if (!absl::ConsumePrefix(&value, "Bearer ") && !absl::ConsumePrefix(&value, "bearer ")) {
      return absl::UnauthenticatedError("authorization is not a bearer token ('Bearer TOKEN')");
    }
    value = absl::StripAsciiWhitespace(value);
    // Every entry is compared, matching or not, in constant time over fixed-size digests: neither
    // the position of a match nor a common prefix shows in the timing.
    const std::array<uint8_t, 32> digest = Sha256(value);
    const RemoteIdentity* match = nullptr;
    for (const Token& t : tokens_) {
      const bool equal = CRYPTO_memcmp(digest.data(), t.digest.data(), digest.size()) == 0;
      match = equal ? &t.identity : match;
    }
    if (match == nullptr) return absl::UnauthenticatedError("bearer token not recognised");
    return *match;
  }
  if (!certificate_cns.empty() && !options_.client_ca_file.empty()) {
    absl::StatusOr<RemoteIdentity> who = LookupLocalUser(certificate_cns[0]);
    if (!who.ok()) {
      return absl::UnauthenticatedError(
          absl::StrCat("client certificate: subject CN: ", who.status().message()));
    }
    who->method = "certificate";
    return who;
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "no credentials: TCP calls need ",
      options_.client_ca_file.empty() ? "" : "a client certificate from the daemon's client CA",
      !options_.client_ca_file.empty() && !tokens_.empty() ? " or " : "",
      tokens_.empty() ? "" : "a bearer token"));
}

std::shared_ptr<grpc::ServerCredentials> TcpAuthenticator::ServerCredentials(
    std::shared_ptr<const TcpAuthenticator> self) {
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({self->key_pem_, self->cert_pem_});
  if (self->client_ca_pem_.empty()) {
    ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  } else {
    ssl.pem_root_certs = self->client_ca_pem_;
    // With tokens a certificate is optional, but one that is presented must verify.
    ssl.client_certificate_request = self->tokens_.empty()
                                         ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                         : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::SslServerCredentials(ssl);
  creds->SetAuthMetadataProcessor(std::make_shared<TokenGate>(std::move(self)));
  return creds;
}

std::string TcpAuthenticator::Describe() const {
  std::string s;
  if (!options_.client_ca_file.empty()) {
    absl::StrAppend(&s, "client certificates (CA ", options_.client_ca_file, ")");
  }
  if (!tokens_.empty()) {
    absl::StrAppend(&s, s.empty() ? "" : " and ", tokens_.size(), " bearer token(s) (",
                    options_.token_file, ")");
  }
  return s;
}

absl::StatusOr<RemoteIdentity> AuthenticateCall(const TcpAuthenticator& auth,
                                                const grpc::ServerContext& context) {
  std::vector<absl::string_view> authorization;
  const auto& md = context.client_metadata();
  auto range = md.equal_range("authorization");
  for (auto it = range.first; it != range.second; ++it) {
    authorization.emplace_back(it->second.data(), it->second.size());
  }
  std::vector<absl::string_view> cns;
  std::shared_ptr<const grpc::AuthContext> ac = context.auth_context();
  if (ac == nullptr) return absl::UnauthenticatedError("not a TLS connection");
  {
    bool tls = false;
    for (const grpc::string_ref& t : ac->FindPropertyValues("transport_security_type")) {
      tls = tls || t == "ssl";
    }
    if (!tls) return absl::UnauthenticatedError("not a TLS connection");
    for (const grpc::string_ref& cn : ac->FindPropertyValues("x509_common_name")) {
      cns.emplace_back(cn.data(), cn.size());
    }
  }
  return auth.Authenticate(authorization, cns);
}

}  // namespace mobius
