#!/bin/sh
# Installs Debian's bubblewrap (the sandbox for every Lean process) when it is missing and we may.
# Never fails setup: without bwrap leanrig still runs, with rlimits only, and says so in `doctor`.
command -v bwrap >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap libseccomp2 >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap libseccomp2 >/dev/null 2>&1; }
fi
command -v bwrap >/dev/null 2>&1 || echo "leanrig setup: bubblewrap not installed; Lean processes will run with rlimits only" >&2
exit 0
