#!/usr/bin/env bash
# make fuzz: runs every Fuzz target of every module for FUZZTIME (default 30s) each.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$(repo_root)"

fuzztime=${FUZZTIME:-30s}
found=0
while IFS=: read -r file name; do
	found=1
	pkg="./$(dirname "$file")"
	echo "fuzz $name in $pkg for $fuzztime"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"
done < <(grep -rHoE --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' . | sed -E 's/:func /:/' | sed -E 's#^\./##' | sort -u)
if [[ $found -eq 0 ]]; then
	echo "no fuzz targets yet"
fi
