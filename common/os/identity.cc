#include "common/os/identity.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"

namespace mobius {

absl::StatusOr<Identity> LookUpIdentity(uid_t uid) {
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  passwd pw;
  passwd* found = nullptr;
  int rc;
  while ((rc = getpwuid_r(uid, &pw, buf.data(), buf.size(), &found)) == ERANGE) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0 || found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("uid ", uid,
                     " has no passwd entry on this node: jobs run as the user who submitted them, "
                     "and an unknown uid has no primary group or groups to run with"));
  }
  Identity id;
  id.uid = uid;
  id.gid = pw.pw_gid;
  id.name = pw.pw_name;
  id.home = pw.pw_dir != nullptr && pw.pw_dir[0] != '\0' ? pw.pw_dir : "/";
  int n = 32;
  std::vector<gid_t> groups(n);
  while (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n) + 1);
    n = static_cast<int>(groups.size());
  }
  groups.resize(static_cast<size_t>(n));
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  id.groups = std::move(groups);
  return id;
}

Identity ProcessIdentity() {
  Identity id;
  id.uid = getuid();
  id.gid = getgid();
  const int n = getgroups(0, nullptr);
  if (n > 0) {
    id.groups.resize(static_cast<size_t>(n));
    id.groups.resize(static_cast<size_t>(std::max(0, getgroups(n, id.groups.data()))));
  }
  if (std::find(id.groups.begin(), id.groups.end(), id.gid) == id.groups.end()) {
    id.groups.push_back(id.gid);
  }
  std::sort(id.groups.begin(), id.groups.end());
  if (absl::StatusOr<Identity> known = LookUpIdentity(id.uid); known.ok()) {
    id.name = known->name;
    id.home = known->home;
  } else {
    id.name = absl::StrCat("uid ", id.uid);
    id.home = "/";
  }
  return id;
}

bool CanSwitchIdentity() { return geteuid() == 0; }

absl::Status CheckCanActAs(const Identity& who) {
  if (who.uid == getuid() || CanSwitchIdentity()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("this process runs unprivileged as uid ",
                                                  getuid(), " and cannot run a job as uid ",
                                                  who.uid, " (", who.name, ")"));
}

bool ModeAllows(const Identity& who, uid_t owner, gid_t group, mode_t mode, int access_mask) {
  mode_t bits;
  if (who.uid == owner) {
    bits = (mode >> 6) & 7;
  } else if (std::find(who.groups.begin(), who.groups.end(), group) != who.groups.end() ||
             who.gid == group) {
    bits = (mode >> 3) & 7;
  } else {
    bits = mode & 7;
  }
  return (bits & static_cast<mode_t>(access_mask)) == static_cast<mode_t>(access_mask);
}

}  // namespace mobius
