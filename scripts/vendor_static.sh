#!/usr/bin/env bash
# Copy the front-end libraries our pages serve out of node_modules into the static
# folders Django serves, so no page loads a script from a CDN. The versions are pinned in
# package.json / package-lock.json; `npm ci` runs when the lock changed (the stamp is the
# one tests/contract/test_generated_clients.py keeps). The copies are built, not committed
# (.gitignore), as the translations' .mo files are. Idempotent and quiet; fails loudly
# without npm.
#   bash scripts/vendor_static.sh               # what scripts/bootstrap.sh runs
#   bash scripts/vendor_static.sh --omit=dev    # the image: the served libraries only
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Each line: a file in node_modules, and where Django serves it from.
VENDORED=(
    "chart.js/dist/chart.umd.min.js analytics/static/analytics/vendor/chart.umd.min.js"
    "chart.js/dist/chart.umd.min.js.map analytics/static/analytics/vendor/chart.umd.min.js.map"
    "chart.js/LICENSE.md analytics/static/analytics/vendor/chart.js.LICENSE.md"
)

die() {
    echo "vendor_static: $*" >&2
    exit 1
}

stamp=node_modules/.notify-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ $# -gt 0 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    command -v npm >/dev/null 2>&1 ||
        die "npm is missing: install Node.js 20 or later with npm (the admin's charts serve Chart.js from package-lock.json)"
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    npm ci --no-audit --no-fund "$@" >"$log" 2>&1 || {
        cat "$log" >&2
        die "npm ci failed (output above)"
    }
    # Only a full install answers for every pinned tool.
    [ $# -gt 0 ] || printf '%s' "$want" >"$stamp"
fi

for line in "${VENDORED[@]}"; do
    read -r source target <<<"$line"
    source=node_modules/$source
    [ -f "$source" ] || die "$source is missing after npm ci"
    if ! cmp -s "$source" "$target"; then
        mkdir -p "$(dirname "$target")"
        cp "$source" "$target.partial"
        mv "$target.partial" "$target" # a server never serves half a file
    fi
done
