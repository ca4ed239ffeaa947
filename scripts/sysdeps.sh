#!/usr/bin/env bash
# System packages the sandbox needs. Installs them when it can (root + apt); otherwise says so plainly.
# LibreOffice is optional: spreadsheet scoring recalculates with it where installed, else with the
# Python `formulas` engine.
set -u

can_apt() {
  [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1
}

apt_install() {
  apt-get install -y -q "$@" >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$@" >/dev/null 2>&1)
}

bubblewrap() {
  if command -v bwrap >/dev/null 2>&1; then
    return 0
  fi
  if can_apt; then
    echo "installing bubblewrap (the local sandbox) with apt-get ..."
    if apt_install bubblewrap; then
      echo "bubblewrap installed: $(bwrap --version)"
      return 0
    fi
    echo "WARNING: apt-get could not install bubblewrap."
  else
    echo "WARNING: bubblewrap (bwrap) is missing and this user cannot install it (needs root and apt-get)."
  fi
  echo "WARNING: sandboxed tests will be SKIPPED and \`unscaffold run\` needs --sandbox none or docker."
  echo "         Install it with: sudo apt-get install -y bubblewrap"
}

libreoffice() {
  if command -v soffice >/dev/null 2>&1 || command -v libreoffice >/dev/null 2>&1; then
    return 0
  fi
  if can_apt; then
    echo "installing libreoffice-calc-nogui (spreadsheet recalculation) with apt-get ..."
    if apt_install --no-install-recommends libreoffice-calc-nogui; then
      echo "LibreOffice installed: $(soffice --version 2>/dev/null | head -n 1)"
      return 0
    fi
    echo "WARNING: apt-get could not install libreoffice-calc-nogui; spreadsheet scoring will use the Python formulas engine."
  else
    echo "WARNING: LibreOffice (soffice) is missing; spreadsheet scoring will use the Python formulas engine."
  fi
}

bubblewrap
libreoffice
exit 0
