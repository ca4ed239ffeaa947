#!/usr/bin/env bash
# System packages the sandbox needs. Installs them when it can (root + apt); otherwise says so plainly.
set -u
if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing bubblewrap (the local sandbox) with apt-get ..."
  if (apt-get install -y -q bubblewrap >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1)); then
    echo "bubblewrap installed: $(bwrap --version)"
    exit 0
  fi
  echo "WARNING: apt-get could not install bubblewrap."
else
  echo "WARNING: bubblewrap (bwrap) is missing and this user cannot install it (needs root and apt-get)."
fi
echo "WARNING: sandboxed tests will be SKIPPED and \`unscaffold run\` needs --sandbox none or docker."
echo "         Install it with: sudo apt-get install -y bubblewrap"
exit 0
