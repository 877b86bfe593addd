#!/usr/bin/env bash
# make test: every test of every module in go.work, against a real Redis.
# Redis is started on 127.0.0.1:6379 if nothing answers there (and installed
# from the distribution's packages if it is missing), unless REDIS_URL
# already names one; a three-master Redis Cluster on 127.0.0.1:7001-7003
# likewise (scripts/redis-cluster.sh), unless REDIS_CLUSTER_ADDRS names one;
# and Chromium for the console's browser tests (scripts/chromium.sh), unless
# CHROMIUM names one. Extra arguments go to `go test` (make bench-go uses this).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$(repo_root)"

REDIS_HOST=127.0.0.1
REDIS_PORT=${REALM_TEST_REDIS_PORT:-6379}

# redis_answers is true when a Redis server answers PING on host:port.
redis_answers() {
	if command -v redis-cli >/dev/null 2>&1; then
		[[ $(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
		return
	fi
	# No redis-cli: speak the protocol over bash's /dev/tcp, in a subshell
	# so the descriptor and the silenced stderr do not outlive the probe.
	(
		exec 3<>"/dev/tcp/$REDIS_HOST/$REDIS_PORT"
		printf 'PING\r\n' >&3
		reply=""
		read -r -t 2 reply <&3 || true
		[[ $reply == +PONG* ]]
	) 2>/dev/null
}

ensure_redis() {
	if redis_answers; then
		echo "redis: already running on $REDIS_HOST:$REDIS_PORT"
		return
	fi
	if ! command -v redis-server >/dev/null 2>&1; then
		echo "redis: redis-server is not installed; installing it from the distribution's packages (apt-get install redis-server)"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
	fi
	echo "redis: starting redis-server on $REDIS_HOST:$REDIS_PORT (no persistence)"
	redis-server --daemonize yes --bind "$REDIS_HOST" --port "$REDIS_PORT" --save "" --appendonly no >/dev/null
	for _ in $(seq 1 50); do
		redis_answers && return
		sleep 0.1
	done
	echo "redis: started, but it does not answer on $REDIS_HOST:$REDIS_PORT" >&2
	exit 1
}

if [[ -z "${REDIS_URL:-}" ]]; then
	ensure_redis
	export REDIS_URL="redis://$REDIS_HOST:$REDIS_PORT"
else
	echo "redis: using REDIS_URL=$REDIS_URL"
fi

# The store and engine tests also run on a three-master Redis Cluster.
if [[ -z "${REDIS_CLUSTER_ADDRS:-}" ]]; then
	REDIS_CLUSTER_ADDRS=$("$(dirname "$0")/redis-cluster.sh")
	export REDIS_CLUSTER_ADDRS
else
	echo "redis cluster: using REDIS_CLUSTER_ADDRS=$REDIS_CLUSTER_ADDRS"
fi

# The console's browser tests (console-svc/web) drive headless Chromium:
# Debian's chromium package is installed when there is none, as Redis is.
if [[ -z "${CHROMIUM:-}" ]]; then
	CHROMIUM=$("$(dirname "$0")/chromium.sh")
	export CHROMIUM
fi
echo "chromium: $CHROMIUM"

# TestWorkflowInitRunnerCompiles runs `go mod tidy` on a scaffold offline,
# as a user with a source checkout would; tidy wants the modules that the
# tests of pkg's dependencies import, which no build fetches. pkg's own
# tidy check fetches them (and changes nothing), so a fresh machine has them.
echo "go mod tidy -diff (pkg): filling the module cache for the offline scaffold test"
(cd pkg && GOWORK=off GOFLAGS= go mod tidy -diff >/dev/null)

mapfile -t patterns < <(module_patterns)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# The race detector is on (REALM_TEST_RACE=0 turns it off, e.g. to compare
# timings); make bench-go turns it off, since it slows what it measures.
race=(-race)
if [[ ${REALM_TEST_RACE:-1} == 0 ]]; then
	race=()
fi
echo "go test -count=1 ${race[*]} $* ${patterns[*]}"
set +e
# A module with no packages yet only warns ("matched no packages"); that is fine.
go test -count=1 "${race[@]}" -timeout 14m "$@" "${patterns[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

ok=$(grep -c '^ok ' "$log" || true)
failed=$(grep -cE '^(FAIL|---? FAIL)[[:space:]]' "$log" || true)
notests=$(grep -c '^? ' "$log" || true)
echo
echo "Summary: $ok package(s) passed, $notests without tests, exit status $status, in $((SECONDS / 60))m$((SECONDS % 60))s."
if [[ $status -ne 0 ]]; then
	echo "FAILED ($failed failure line(s) above)."
fi
exit "$status"
