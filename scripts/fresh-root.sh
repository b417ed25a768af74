#!/usr/bin/env bash
# Runs commands in a pristine minimal Debian 12 root: the proof that the README's two commands set
# up a truly fresh machine (issue 17), and that the GPU kit loads on a machine with nothing of ours.
#
# The root is `debootstrap --variant=minbase bookworm` (packages from the Debian registry only),
# with the host's CUDA toolkit bind-mounted read-only at the same path and /usr/local/cuda linked
# to it, and the environment of our machines (CUDA_HOME, LIBRARY_PATH=<cuda>/lib64/stubs,
# PATH with <cuda>/bin). It runs in a private mount namespace, so every mount goes away with it.
#
#   scripts/fresh-root.sh                       # a clean clone of HEAD; scripts/test.sh, then
#                                               # scripts/demo.sh, as root inside; the time each took
#   scripts/fresh-root.sh --kit KITDIR          # a bare root (no development packages): every ELF of
#                                               # the GPU kit finds its libraries (libcuda.so.1
#                                               # aside), then `OUT=/out KITDIR/run.sh` exits 0
#   scripts/fresh-root.sh --run 'CMD'           # CMD instead (in /src, the clone)
#
# Options:
#   --root DIR    where the root is made (default /var/tmp/mobius-fresh-root[-kit]); removed first
#   --base DIR    copy this pristine debootstrap result instead of running debootstrap (same
#                 contents, minutes faster when proving twice; make one with --make-base DIR)
#   --make-base DIR   only debootstrap into DIR and exit
#   --reuse       keep an existing --root as it is (iterating on a failure; not a proof)
#   --cuda DIR    the toolkit to mount (default: /usr/local/cuda, resolved)
#   --keep        leave the root on disk afterwards (default: removed when the run passed)
# Log: everything goes to stdout; the exit status is the commands'.
# The whole script is one { } block, so bash reads it entirely before running it: editing the file
# during an hour-long run cannot change what the run does.
{
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
ROOT=""
BASE=""
MAKE_BASE=""
REUSE=0
KEEP=0
KIT=""
RUN_CMD=""
CUDA_DIR=$(readlink -f /usr/local/cuda 2>/dev/null || true)
MIRROR=${MOBIUS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --root) ROOT="$2"; shift 2 ;;
    --base) BASE="$2"; shift 2 ;;
    --make-base) MAKE_BASE="$2"; shift 2 ;;
    --reuse) REUSE=1; shift ;;
    --keep) KEEP=1; shift ;;
    --kit) KIT=$(cd "$2" && pwd); shift 2 ;;
    --run) RUN_CMD="$2"; shift 2 ;;
    --cuda) CUDA_DIR=$(readlink -f "$2"); shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "fresh-root: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "fresh-root: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-root: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
say() { printf '\n==> [fresh-root %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

bootstrap() {  # DIR
  say "debootstrap --variant=minbase bookworm $1 ($MIRROR)"
  debootstrap --variant=minbase bookworm "$1" "$MIRROR" >"$1.debootstrap.log" 2>&1 \
    || { tail -20 "$1.debootstrap.log"; return 1; }
  # A Debian installation's sources: the release, its updates and the security archive.
  cat >"$1/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
}

if [[ -n "$MAKE_BASE" ]]; then
  rm -rf "$MAKE_BASE"; mkdir -p "$MAKE_BASE"
  bootstrap "$MAKE_BASE"
  say "base ready: $MAKE_BASE"
  exit 0
fi

[[ -n "$ROOT" ]] || ROOT=/var/tmp/mobius-fresh-root${KIT:+-kit}
if [[ $REUSE -eq 0 || ! -d "$ROOT/usr" ]]; then
  rm -rf "$ROOT"; mkdir -p "$ROOT"
  if [[ -n "$BASE" ]]; then
    say "copying the pristine base $BASE"
    cp -a "$BASE/." "$ROOT/"
  else
    bootstrap "$ROOT"
  fi
fi
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# debootstrap writes no /etc/hosts; every installed Debian has one (the installer, cloud and
# container images write it), and without it "localhost" goes to DNS.
if [[ ! -e "$ROOT/etc/hosts" ]]; then
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"
fi
# The site's own certificate authorities (e.g. a TLS-intercepting egress proxy's), as the host
# trusts them: a setting of this network, not one of our dependencies. ca-certificates, which
# install-deps pulls in, adds them to the root's store; without them pip cannot reach PyPI here.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
fi

# What runs inside: the clone, or the kit.
if [[ -n "$KIT" ]]; then
  rm -rf "$ROOT/kit" "$ROOT/out"; mkdir -p "$ROOT/out"
  cp -a "$KIT" "$ROOT/kit"
  INNER=${RUN_CMD:-/kit/run.sh --check-libs && OUT=/out /kit/run.sh}
  WORKDIR=/kit
else
  if [[ $REUSE -eq 0 || ! -d "$ROOT/src" ]]; then
    rm -rf "$ROOT/src"
    say "cloning $(git -C "$SRC" rev-parse --short HEAD) into the root (committed files only, as CI)"
    git clone -q "$SRC" "$ROOT/src"
  fi
  INNER=${RUN_CMD:-'t0=$(date +%s); scripts/test.sh; t1=$(date +%s); scripts/demo.sh; t2=$(date +%s);
    echo "fresh-root: scripts/test.sh $((t1 - t0)) s, scripts/demo.sh $((t2 - t1)) s"'}
  WORKDIR=/src
fi

mkdir -p "$ROOT$CUDA_DIR"
if [[ -n "$CUDA_DIR" && -d "$CUDA_DIR" ]]; then
  ln -sfn "$CUDA_DIR" "$ROOT/usr/local/cuda"
fi
say "running in $ROOT (CUDA ${CUDA_DIR:-none} read-only): $INNER"
start=$(date +%s)
set +e
unshare --mount --propagation private --fork bash -euo pipefail -c '
  root=$1; cuda=$2; workdir=$3; inner=$4
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
  if [[ -n "$cuda" && -d "$cuda" ]]; then
    mount --bind "$cuda" "$root$cuda"
    mount -o remount,bind,ro "$root$cuda"
  fi
  exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CUDA_HOME=/usr/local/cuda LIBRARY_PATH=/usr/local/cuda/lib64/stubs \
    /bin/bash -euo pipefail -c "cd $workdir && $inner"
' fresh-root "$ROOT" "$CUDA_DIR" "$WORKDIR" "$INNER"
rc=$?
set -e
say "exit status $rc after $(( $(date +%s) - start )) s"
if [[ $rc -eq 0 && $KEEP -eq 0 ]]; then rm -rf "$ROOT"; fi
exit $rc
}
