#!/bin/sh
# Installs Debian's neovim (the real editor driven headless by tests/test_editor_nvim.py) when it
# is missing and we may. Never fails setup: without nvim that test skips and says why.
command -v nvim >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends neovim >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends neovim >/dev/null 2>&1; }
fi
command -v nvim >/dev/null 2>&1 || echo "leanrig setup: neovim not installed; the headless editor test will skip" >&2
exit 0
