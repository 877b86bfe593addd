#!/usr/bin/env bash
# make vuln: govulncheck (pinned in tools/go.mod) on every module of go.work,
# against the Go vulnerability database, built locally from the OSV files of
# the golang.org/x/vulndb module as the Go module proxy serves it (so no host
# but the proxy is needed). VULNDB_VERSION picks a version of that module
# (default: its latest, so the database is as fresh as the proxy's copy). The
# database is kept in ${XDG_CACHE_HOME:-~/.cache}/realm/vulndb/<version>.
#
# Fails when govulncheck finds a vulnerability that the code reaches,
# including one in the standard library of the Go that runs it (fixed only by
# a newer Go). When no database can be had (no proxy, and vuln.go.dev not
# reachable either), it says that the check was SKIPPED and exits 0:
# that is not a pass.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
root=$(repo_root)
cd "$root"

govulncheck=$(cd tools && GOWORK=off go tool -n govulncheck)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/realm/vulndb
version=${VULNDB_VERSION:-latest}

# build_db prints the file:// URL of a local database built from
# golang.org/x/vulndb@$version, or fails.
build_db() {
	local tmp info dir resolved db
	tmp=$(mktemp -d)
	# Outside any module: this asks the proxy about vulndb, not about us.
	if ! info=$(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "golang.org/x/vulndb@$version" 2>&1); then
		echo "vuln: cannot download golang.org/x/vulndb@$version: $info" >&2
		rm -rf "$tmp"
		return 1
	fi
	resolved=$(sed -nE 's/^\t"Version": "([^"]+)",?$/\1/p' <<<"$info")
	dir=$(sed -nE 's/^\t"Dir": "([^"]+)",?$/\1/p' <<<"$info")
	db="$cache/$resolved"
	if [[ ! -f $db/index/modules.json ]]; then
		echo "vuln: building the database from golang.org/x/vulndb@$resolved ($(find "$dir/data/osv" -name '*.json' | wc -l) OSV entries)" >&2
		rm -rf "$tmp/db"
		(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod go run "golang.org/x/vulndb/cmd/indexdb@$resolved" -vulns "$dir/data/osv" -out "$tmp/db") >&2
		mkdir -p "$cache"
		rm -rf "$db"
		mv "$tmp/db" "$db"
	fi
	rm -rf "$tmp"
	echo "vuln: database from golang.org/x/vulndb@$resolved (the version names its commit's date)" >&2
	echo "file://$db"
}

if ! db=$(build_db); then
	if curl -fsS --max-time 10 -o /dev/null https://vuln.go.dev/index/db.json 2>/dev/null; then
		db=https://vuln.go.dev
		echo "vuln: using $db"
	else
		echo "vuln: SKIPPED: no vulnerability database could be had (golang.org/x/vulndb through the Go module proxy, or vuln.go.dev). govulncheck did not run; this is not a pass." >&2
		exit 0
	fi
fi

status=0
affected=()
while IFS= read -r dir; do
	rel=${dir#"$root"/}
	echo "govulncheck: $rel"
	set +e
	"$govulncheck" -db "$db" -C "$dir" ./...
	code=$?
	set -e
	case $code in
	0) ;;
	3) affected+=("$rel"); status=1 ;;
	*) echo "govulncheck: $rel: failed to run (exit $code)" >&2; status=1 ;;
	esac
done < <(go list -m -f '{{.Dir}}')

if [[ ${#affected[@]} -gt 0 ]]; then
	echo >&2
	echo "govulncheck: vulnerabilities reached from: ${affected[*]} (with $(go env GOVERSION)); see above." >&2
	echo "  Those 'Found in: <package>@go1...' are in the standard library: a newer Go fixes them." >&2
fi
[[ $status -eq 0 ]] && echo "govulncheck: ok"
exit "$status"
