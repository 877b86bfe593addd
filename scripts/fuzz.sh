#!/usr/bin/env bash
# make fuzz: runs every Fuzz target of every module for FUZZTIME (default
# 30s) each. Every target must have a committed seed corpus in
# <package>/testdata/fuzz/<FuzzName>/ (which make test also runs, as plain
# tests); one without fails this before any fuzzing. New inputs that widen
# coverage go to Go's fuzz cache, not to the repository: copy the good ones
# into testdata/fuzz by hand. A failing input is written there by go test.
# FUZZMINIMIZETIME (default 10s) bounds the minimising of each new input, so
# a target with slow inputs still fuzzes within FUZZTIME.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$(repo_root)"

fuzztime=${FUZZTIME:-30s}
minimize=${FUZZMINIMIZETIME:-10s}
targets=()
while IFS= read -r t; do targets+=("$t"); done < <(
	git ls-files --cached --others --exclude-standard '*_test.go' 2>/dev/null | xargs grep -HoE '^func (Fuzz[A-Za-z0-9_]+)' | sed -E 's/:func /:/' | sort -u)
if [[ ${#targets[@]} -eq 0 ]]; then
	echo "no fuzz targets yet"
	exit 0
fi

missing=0
for t in "${targets[@]}"; do
	file=${t%%:*} name=${t##*:}
	corpus="$(dirname "$file")/testdata/fuzz/$name"
	if [[ -z $(git ls-files "$corpus" 2>/dev/null) && -z $(find "$corpus" -type f 2>/dev/null | head -1) ]]; then
		echo "fuzz: $name ($file) has no seed corpus in $corpus" >&2
		missing=1
	fi
done
[[ $missing -eq 0 ]] || exit 1

for t in "${targets[@]}"; do
	file=${t%%:*} name=${t##*:}
	pkg="./$(dirname "$file")"
	echo "fuzz $name in $pkg for $fuzztime ($(find "$pkg/testdata/fuzz/$name" -type f | wc -l) seed file(s))"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg"
done
echo "fuzz: ${#targets[@]} target(s) fuzzed for $fuzztime each"
