#!/usr/bin/env bash
# Starts a three-master Redis Cluster on 127.0.0.1 for the store and engine
# tests (ports REALM_TEST_CLUSTER_PORTS, default 7001 7002 7003; no
# persistence; state in a temporary folder), unless one already serves every
# slot there. Prints the addresses for REDIS_CLUSTER_ADDRS on stdout.
# Installs redis-server (with redis-cli) from the distribution's packages
# when it is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	echo "redis cluster: redis-server or redis-cli is not installed; installing them from the distribution's packages (apt-get install redis-server)" >&2
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi

read -r -a ports <<<"${REALM_TEST_CLUSTER_PORTS:-7001 7002 7003}"
host=127.0.0.1
addrs=()
for p in "${ports[@]}"; do addrs+=("$host:$p"); done
joined=$(IFS=,; echo "${addrs[*]}")

cluster_ok() {
	[[ $(redis-cli -h "$host" -p "${ports[0]}" cluster info 2>/dev/null | tr -d '\r' | grep -c '^cluster_state:ok$') == 1 ]]
}

if cluster_ok; then
	echo "redis cluster: already serving on $joined" >&2
	echo "$joined"
	exit 0
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/realm-redis-cluster.XXXXXX")
for p in "${ports[@]}"; do
	if [[ $(redis-cli -h "$host" -p "$p" ping 2>/dev/null) == PONG ]]; then
		# A node left over from an earlier start that never formed a
		# cluster: empty it so it can join this one.
		redis-cli -h "$host" -p "$p" flushall >/dev/null
		redis-cli -h "$host" -p "$p" cluster reset hard >/dev/null
		continue
	fi
	redis-server --daemonize yes --bind "$host" --port "$p" --cluster-enabled yes \
		--cluster-config-file "$dir/nodes-$p.conf" --dir "$dir" --logfile "$dir/$p.log" \
		--save "" --appendonly no >/dev/null
done
for p in "${ports[@]}"; do
	for _ in $(seq 1 50); do
		[[ $(redis-cli -h "$host" -p "$p" ping 2>/dev/null) == PONG ]] && break
		sleep 0.1
	done
done
echo "redis cluster: forming on $joined" >&2
redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
for _ in $(seq 1 100); do
	if cluster_ok; then
		echo "$joined"
		exit 0
	fi
	sleep 0.1
done
echo "redis cluster: formed, but not serving every slot on $joined (logs in $dir)" >&2
exit 1
