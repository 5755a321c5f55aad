#!/bin/sh
# Installs Debian's Chromium (headless, for tests/test_inspect_view.py's look at `inspect view`)
# when it is missing and we may. Never fails setup: without it that test skips and says why.
have() { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }
have && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }
fi
have || echo "leanrig setup: chromium not installed; the browser check of \`inspect view\` will skip" >&2
exit 0
