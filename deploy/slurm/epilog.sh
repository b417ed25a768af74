#!/usr/bin/env bash
# Slurm Epilog snippet: removes host model stores (/dev/shm/mobius-store-<job>-<pid>) whose
# creating daemon is gone, as mobiusd itself does when it starts. Runs as root on the node after
# every job; harmless on nodes without Mobius. Install as (or call from) slurm.conf's Epilog.
set -u
SHM_DIR=${MOBIUS_SHM_DIR:-/dev/shm}   # tests point it elsewhere
for store in "$SHM_DIR"/mobius-store-*; do
  [ -e "$store" ] || continue
  pid=${store##*-}
  case $pid in
    ''|*[!0-9]*) continue ;;
  esac
  if ! kill -0 "$pid" 2>/dev/null; then
    rm -f -- "$store"
  fi
done
exit 0
