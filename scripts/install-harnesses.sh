#!/bin/sh
# Installs the pinned agent harnesses (Claude Code, Codex; scripts/harnesses/package-lock.json)
# from the npm registry into leanrig's cache, once per lockfile: `leanrig run --harness` finds
# them there when they are not on PATH. Idempotent. Without node and npm it says so and exits
# 0: the harness tests then skip, naming this script.
set -eu
here=$(cd "$(dirname "$0")/harnesses" && pwd)
cache=${LEANRIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leanrig}
lock_hash=$(sha256sum "$here/package-lock.json" | cut -c1-12)
dest="$cache/harnesses/$lock_hash"
if [ -f "$dest/.installed" ]; then exit 0; fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "leanrig setup: node/npm not found; agent harnesses (Claude Code, Codex) not installed" >&2
  exit 0
fi
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
# Each harness's native binary comes as an optional dependency: nothing is downloaded at run
# time. Install scripts are off but for Claude Code's own, run by name (it links its binary):
# whether npm runs a package's scripts depends on the user's npm policy.
(cd "$dest" && npm ci --silent --no-audit --no-fund --ignore-scripts >/dev/null 2>&1 \
  && node node_modules/@anthropic-ai/claude-code/install.cjs >/dev/null 2>&1) || {
  echo "leanrig setup: npm ci of the agent harnesses failed (run it in $dest to see why)" >&2
  rm -rf "$dest"
  exit 0
}
"$dest/node_modules/.bin/claude" --version >/dev/null 2>&1 && "$dest/node_modules/.bin/codex" --version >/dev/null 2>&1 || {
  echo "leanrig setup: the installed harnesses do not start (see $dest)" >&2
  exit 0
}
touch "$dest/.installed"
