#!/usr/bin/env bash
# The browser the console's tests drive (console-svc/web, chromedp): prints
# the path of a Chromium, installing Debian's `chromium` package when none is
# on PATH and $CHROMIUM does not name one. make test calls it, as it starts
# Redis, so the browser tests run on a clean machine instead of skipping.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if [[ -n "${CHROMIUM:-}" && -x "${CHROMIUM}" ]]; then
	echo "$CHROMIUM"
	exit 0
fi
for name in chromium chromium-browser google-chrome; do
	if path=$(command -v "$name" 2>/dev/null); then
		echo "$path"
		exit 0
	fi
done
echo "chromium: not installed; installing it from the distribution's packages (apt-get install chromium)" >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
command -v chromium
