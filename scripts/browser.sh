#!/usr/bin/env bash
# Make Debian's Chromium available for the browser tests (Playwright drives it through
# executable_path; Playwright's own browser download cannot work on a closed network).
# Idempotent; installs with apt-get when missing and we may (root), else fails loudly.
set -euo pipefail

browser=${NOTIFY_TEST_CHROMIUM:-/usr/bin/chromium}
if [ -x "$browser" ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "browser: $browser is missing; install Debian's chromium package (apt-get install chromium)" >&2
    exit 1
fi
echo "browser: installing Debian's chromium (once)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq chromium >/tmp/notify-chromium-install.log 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -qq chromium >/tmp/notify-chromium-install.log 2>&1 || {
        cat /tmp/notify-chromium-install.log >&2
        echo "browser: could not install chromium" >&2
        exit 1
    }
fi
[ -x "$browser" ] || { echo "browser: chromium installed but $browser is missing" >&2; exit 1; }
