#!/usr/bin/env bash
# make images: build one image per service and per handler runner from the
# repository root, tagged $REALM_IMAGE_PREFIX/<name>:$VERSION (default
# realm/<name>:<git describe>). Needs a Docker engine (BuildKit, for the
# per-Dockerfile .dockerignore files). Push with REALM_IMAGE_PUSH=1.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${REALM_IMAGE_PREFIX:-realm}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)}
DOCKER=${DOCKER:-docker}

if ! command -v "$DOCKER" >/dev/null 2>&1; then
	echo "images: no '$DOCKER' command; install Docker (or set DOCKER=podman)" >&2
	exit 1
fi
if ! "$DOCKER" info >/dev/null 2>&1; then
	echo "images: '$DOCKER' cannot reach a container engine; start it and retry" >&2
	exit 1
fi
export DOCKER_BUILDKIT=1

built=()
build() { # build NAME DOCKERFILE [docker build args...]
	local name=$1 file=$2
	shift 2
	echo "images: $PREFIX/$name:$VERSION (from $file)"
	"$DOCKER" build -f "$file" --build-arg "VERSION=$VERSION" "$@" -t "$PREFIX/$name:$VERSION" .
	built+=("$PREFIX/$name:$VERSION")
}

for svc in engine-svc mcp-svc agent-svc listen-svc console-svc notify-svc; do
	if [[ ! -d $svc/cmd/$svc ]]; then
		echo "images: skipping $svc: $svc/cmd/$svc does not exist yet"
		continue
	fi
	build "$svc" "deploy/docker/$svc.Dockerfile"
done
shopt -s nullglob
for dir in services/*/cmd/*/; do
	dir=${dir%/}
	runner=$(basename "$dir")
	build "$runner" deploy/docker/runner.Dockerfile --build-arg "RUNNER=$runner" --build-arg "CMD=${dir#services/}"
done

if [[ ${REALM_IMAGE_PUSH:-0} == 1 ]]; then
	for image in "${built[@]}"; do
		"$DOCKER" push "$image"
	done
fi
printf 'images: built %s\n' "${built[@]}"
