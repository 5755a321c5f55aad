#!/bin/sh
# Installs Debian's Emacs with lsp-mode and eglot (the real editors driven in batch by
# tests/test_editor_emacs.py) when they are missing and we may. Never fails setup: without
# them that test skips and says why.
PACKAGES="emacs-nox elpa-lsp-mode elpa-eglot"
have() {
  command -v emacs >/dev/null 2>&1 || return 1
  for p in elpa-lsp-mode elpa-eglot; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
  done
}
have && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PACKAGES >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PACKAGES >/dev/null 2>&1; }
fi
have || echo "leanrig setup: emacs (emacs-nox, elpa-lsp-mode, elpa-eglot) not installed; the Emacs editor tests will skip" >&2
exit 0
