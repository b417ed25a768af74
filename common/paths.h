// Default locations shared by mobiusd and the mobius CLI.
#ifndef MOBIUS_COMMON_PATHS_H_
#define MOBIUS_COMMON_PATHS_H_

namespace mobius {

// The daemon's unix socket when neither --socket nor MOBIUS_SOCKET says otherwise. The directory is
// created by the service manager (systemd RuntimeDirectory=mobius) or by the administrator.
inline constexpr char kDefaultSocketPath[] = "/run/mobius/mobiusd.sock";

// Environment variable the CLI reads for the socket path (the daemon takes --socket only).
inline constexpr char kSocketEnvVar[] = "MOBIUS_SOCKET";

}  // namespace mobius

#endif  // MOBIUS_COMMON_PATHS_H_
