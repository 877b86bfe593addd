#!/usr/bin/env bash
# make lint: gofmt, go vet and staticcheck on every module, the module
# layering rule, go mod tidy -diff on every module, and buf lint of proto/.
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

# staticcheck, pinned in tools/go.mod, built there and run here so that it
# loads the packages through go.work. Its checks: staticcheck.conf.
staticcheck=$(cd tools && GOWORK=off go tool -n staticcheck)
pkglist=$(go list "${patterns[@]}")
mapfile -t pkgs <<<"$pkglist"
"$staticcheck" "${pkgs[@]}"
echo "staticcheck: ok"

# Layers import downwards only: pkg/ (the libraries) may not reach a
# service module or the command line, not even through a test.
up=$(cd pkg && go list -deps -test ./... | grep -E '^github.com/realm-go/realm/(engine-svc|mcp-svc|agent-svc|listen-svc|console-svc|notify-svc|services|cli)(/|$)' || true)
if [[ -n "$up" ]]; then
	echo "layering: pkg/ imports packages above it (arrows must point down):" >&2
	echo "$up" | sed 's/^/  /' >&2
	exit 1
fi
echo "layering: ok"

# Every module's go.mod and go.sum are exactly what go mod tidy makes.
untidy=0
while IFS= read -r dir; do
	if ! diff=$(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -diff 2>&1); then
		echo "go mod tidy: ${dir#"$PWD"/} is not tidy:" >&2
		echo "$diff" | head -40 >&2
		untidy=1
	fi
done < <(go list -m -f '{{.Dir}}')
[[ $untidy -eq 0 ]] || exit 1
echo "go mod tidy: ok"

(cd tools && GOWORK=off go tool buf lint ..)
echo "buf lint: ok"
