#!/usr/bin/env bash
# make lint: gofmt, go vet on every module, and buf lint of proto/.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$(repo_root)"

unformatted=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [[ -n "$unformatted" ]]; then
	echo "gofmt: these files need formatting (gofmt -w):" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "gofmt: ok"

mapfile -t patterns < <(module_patterns)
go vet "${patterns[@]}"
echo "go vet: ok"

(cd tools && GOWORK=off go tool buf lint ..)
echo "buf lint: ok"
