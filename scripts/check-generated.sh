#!/usr/bin/env bash
# Regenerates the gRPC code from proto/ into a temporary folder and fails if
# it differs from the committed pkg/gen: the generated code must always be
# what the protos say. Nothing in the work tree is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Same template, output redirected to the temporary folder.
sed "s#\.\./pkg/gen#$tmp/gen#g" tools/buf.gen.yaml >"$tmp/buf.gen.yaml"
(cd tools && GOWORK=off go tool buf generate --template "$tmp/buf.gen.yaml")

if ! diff -ru "$tmp/gen" "$root/pkg/gen" >"$tmp/diff"; then
	echo "Generated code in pkg/gen is stale: run 'make generate' and commit the result." >&2
	head -n 60 "$tmp/diff" >&2
	exit 1
fi
echo "pkg/gen matches proto/."
