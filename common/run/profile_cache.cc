#include "common/run/profile_cache.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/run/profile_json.h"

namespace mobius::planner {

absl::StatusOr<std::string> ResolveProfileCacheDir(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] != '\0') return absl::StrCat(xdg, "/mobius/profiles");
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return absl::StrCat(home, "/.cache/mobius/profiles");
  return absl::FailedPreconditionError(
      "no profile cache directory: set --profile_cache_dir, XDG_CACHE_HOME or HOME");
}

std::string ProfileCachePath(const std::string& dir, const std::string& key) {
  return absl::StrCat(dir, "/", key, ".json");
}

std::string CacheKeyOf(const MeasuredProfile& p) {
  return ProfileCacheKey(p.model_hash, p.shape, p.backend, p.device, p.build_version,
                         p.precision);
}

absl::StatusOr<MeasuredProfile> ReadProfileFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("profile ", path, ": no such file"));
    return absl::InvalidArgumentError(
        absl::StrCat("profile ", path, ": cannot read: ", std::strerror(err)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat("profile ", path, ": read error"));
  return MeasuredProfileFromJson(text.str(), path);
}

absl::StatusOr<std::optional<MeasuredProfile>> LookupCachedProfile(const std::string& dir,
                                                                   const std::string& key) {
  const std::string path = ProfileCachePath(dir, key);
  absl::StatusOr<MeasuredProfile> p = ReadProfileFile(path);
  if (absl::IsNotFound(p.status())) return std::optional<MeasuredProfile>();
  if (!p.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(p.status().message(), " (a damaged cache entry: delete it to profile again)"));
  }
  return std::optional<MeasuredProfile>(*std::move(p));
}

absl::Status WriteProfileFile(const std::string& path, const MeasuredProfile& profile) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create ", target.parent_path().string(), ": ", ec.message()));
    }
  }
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << MeasuredProfileToJson(profile);
    out.close();
    if (!out) {
      const int err = errno;
      fs::remove(tmp, ec);
      return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(err)));
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace mobius::planner
