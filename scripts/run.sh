#!/usr/bin/env bash
# make run: build, start the whole stack that exists on the embedded store,
# register examples/, say where each front door listens, and stop every
# child cleanly on Ctrl-C, SIGTERM or SIGHUP.
#
#   REALM_ENGINE_ADDR  engine-svc's gRPC address   (default 127.0.0.1:7070)
#   REALM_DATA_DIR     the embedded store's folder (default ~/.realm)
#   REALM_AGENT_ADDR   agent-svc's gRPC address    (default 127.0.0.1:7071)
#   REALM_MCP_ADDR     mcp-svc's HTTP address      (default 127.0.0.1:8080)
#   REALM_LISTEN_ADDR  listen-svc's HTTP address   (default 127.0.0.1:8090)
#   REALM_CONSOLE_ADDR console-svc's HTTP address  (default 127.0.0.1:8070)
#   REALM_{ENGINE,AGENT,MCP,EXAMPLE_RUNNER,ADAPTER_RUNNER}_METRICS_ADDR
#                      the /metrics ports          (default 127.0.0.1:9090-9093)
#   REALM_NOTIFY_MANIFEST  a realm.yaml with notifiers.slack_gate: starts
#                      notify-svc, which posts every gate to Slack (docs/notifications.md)
#   REALM_RUN_SKIP_BUILD=1 uses the binaries already in bin/ (tests)
#
# Every gRPC connection is mutual TLS: on first start `realm tls dev` makes
# a development CA and a certificate per service (and the operator's, which
# the CLI finds by itself) in $REALM_DATA_DIR/tls, and renews them there.
#
# No Redis of the shell's is passed on: `make run` is the laptop stack, on
# the embedded store, whatever REDIS_URL, REDIS_CLUSTER_ADDRS or
# REDIS_SENTINEL_* a developer's shell (or make test) has set.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$(repo_root)"
unset REDIS_URL REDIS_CLUSTER_ADDRS REDIS_SENTINEL_ADDRS REDIS_SENTINEL_MASTER REDIS_CA REDIS_PASSWORD

ENGINE_ADDR=${REALM_ENGINE_ADDR:-127.0.0.1:7070}
DATA_DIR=${REALM_DATA_DIR:-$HOME/.realm}
# The gRPC services serve /metrics on a port of their own.
ENGINE_METRICS_ADDR=${REALM_ENGINE_METRICS_ADDR:-127.0.0.1:9090}
AGENT_METRICS_ADDR=${REALM_AGENT_METRICS_ADDR:-127.0.0.1:9091}
EXAMPLE_RUNNER_METRICS_ADDR=${REALM_EXAMPLE_RUNNER_METRICS_ADDR:-127.0.0.1:9092}
ADAPTER_RUNNER_METRICS_ADDR=${REALM_ADAPTER_RUNNER_METRICS_ADDR:-127.0.0.1:9093}
MCP_METRICS_ADDR=${REALM_MCP_METRICS_ADDR:-127.0.0.1:9094}
export REALM_ENGINE_ADDR=$ENGINE_ADDR

if [[ ${REALM_RUN_SKIP_BUILD:-0} != 1 ]]; then
	make --no-print-directory build
	# examples/go-runner is a module of its own (as a user's runner is):
	# built outside the workspace, into bin/ with the others.
	(cd examples/go-runner && GOWORK=off go build -trimpath -o ../../bin/go-runner .)
fi

pids=()
names=()

# start NAME ARGS...: run bin/NAME in its own process group, so a Ctrl-C
# reaches only this script, which then stops each child once, in order.
start() {
	local name=$1
	shift
	if command -v setsid >/dev/null 2>&1; then
		setsid "bin/$name" "$@" &
	else
		"bin/$name" "$@" &
	fi
	pids+=("$!")
	names+=("$name")
}

stopping=0
stop_all() {
	[[ $stopping -eq 1 ]] && return
	stopping=1
	# A second signal (make forwards SIGTERM to this script as well as
	# the sender's own, a supervisor repeats it) must not cut the stop
	# short: its trap would exit from inside this one, before the waits.
	trap '' INT TERM HUP
	local i
	# Front doors first, the engine last: reverse start order. Each child
	# leads a session of its own, so signal its group explicitly.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		if kill -0 "${pids[i]}" 2>/dev/null; then
			echo "stopping ${names[i]} (pid ${pids[i]})" || true
			kill -TERM -- "-${pids[i]}" 2>/dev/null || kill -TERM "${pids[i]}" 2>/dev/null || true
		fi
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	echo "stopped." || true
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mkdir -p "$DATA_DIR"

# Development certificates: the CA, one per service, one per runner
# granting exactly what the runner serves (it says so with --capabilities),
# and the operator's for the CLI.
TLS_DIR=$DATA_DIR/tls
caps() { "bin/$1" "${@:2}" --capabilities | paste -sd, -; }
bin/realm tls dev --dir "$TLS_DIR" \
	--runner "example-runner=$(caps example-runner)" \
	--runner "adapter-runner=$(caps adapter-runner --filesystem-root "$PWD")" \
	--runner "go-runner=$(caps go-runner)"
# tls NAME: TLS holds the TLS flags of the service with certificate NAME.
tls() { TLS=(--tls-cert "$TLS_DIR/$1.crt" --tls-key "$TLS_DIR/$1.key" --tls-ca "$TLS_DIR/ca.crt"); }
# The CLI as the operator (it would find the certificate by itself only
# when the caller's REALM_DATA_DIR is this one).
realm() {
	local TLS
	tls operator
	bin/realm "${TLS[@]}" "$@"
}

tls engine-svc
start engine-svc --addr "$ENGINE_ADDR" --data-dir "$DATA_DIR" --metrics-addr "$ENGINE_METRICS_ADDR" "${TLS[@]}"

# Wait until the engine answers (a fresh build of a big store can take a moment).
ready=0
for _ in $(seq 1 100); do
	if ! kill -0 "${pids[0]}" 2>/dev/null; then
		echo "engine-svc exited before it answered; see its output above." >&2
		exit 1
	fi
	if realm workflow list >/dev/null 2>&1; then
		ready=1
		break
	fi
	sleep 0.2
done
if [[ $ready -ne 1 ]]; then
	echo "engine-svc did not answer on $ENGINE_ADDR within 20s." >&2
	exit 1
fi

# The example handler runner (order_total and the contract's other example
# handlers): it registers with the engine's capability registry, retrying
# until the engine accepts it, and deregisters when stopped.
tls example-runner
start example-runner --engine-addr "$ENGINE_ADDR" --metrics-addr "$EXAMPLE_RUNNER_METRICS_ADDR" "${TLS[@]}"

# The built-in service adapters (http, filesystem below the repository, named
# explicitly: it has no default root) for uses_service steps; a workflow's
# auth.token_env may name only REALM_SECRET_* variables, each sent only to the
# hosts a --secret-host binds it to, and the http adapter reaches no loopback
# or private address unless an --allow-host allows it (docs/adapters.md).
tls adapter-runner
start adapter-runner --engine-addr "$ENGINE_ADDR" --metrics-addr "$ADAPTER_RUNNER_METRICS_ADDR" --filesystem-root "$PWD" "${TLS[@]}"

# The handlers of examples/go-runner/workflow.yaml (shipping), from the
# example runner module built above.
tls go-runner
start go-runner --engine-addr "$ENGINE_ADDR" "${TLS[@]}"

# The MCP front door, in dev mode (no token) on loopback only.
MCP_ADDR=${REALM_MCP_ADDR:-127.0.0.1:8080}
tls mcp-svc
start mcp-svc --addr "$MCP_ADDR" --engine-addr "$ENGINE_ADDR" --dev --metrics-addr "$MCP_METRICS_ADDR" "${TLS[@]}"

# The agent driver; without --redis-url its drive limit is this process's own.
AGENT_ADDR=${REALM_AGENT_ADDR:-127.0.0.1:7071}
tls agent-svc
start agent-svc --addr "$AGENT_ADDR" --engine-addr "$ENGINE_ADDR" --metrics-addr "$AGENT_METRICS_ADDR" "${TLS[@]}"

# The webhook front door: serves the trigger: blocks of every registered
# workflow (one registered later is served without a restart) and hands
# each accepted delivery's run to agent-svc. REALM_LISTEN_MODEL names the
# model its drives use; delivery ids stay in its memory (no Redis here).
LISTEN_ADDR=${REALM_LISTEN_ADDR:-127.0.0.1:8090}
# examples/github-issues.yaml verifies GitHub signatures with this secret;
# a local stack uses a fixed one unless you set your own.
export REALM_WEBHOOK_SECRET=${REALM_WEBHOOK_SECRET:-realm-dev-secret}
# The model each accepted delivery's drive asks (agent-svc reads the key
# from ANTHROPIC_API_KEY; without one the drive records its failure on the
# run, which stays open for realm agent --run-id).
export REALM_LISTEN_MODEL=${REALM_LISTEN_MODEL:-claude-sonnet-4-5}
tls listen-svc
start listen-svc --addr "$LISTEN_ADDR" --engine-addr "$ENGINE_ADDR" --agent-addr "$AGENT_ADDR" "${TLS[@]}"

# The web console, in dev mode: loopback only, no sign-in (every page says
# so); answers are recorded under $USER.
CONSOLE_ADDR=${REALM_CONSOLE_ADDR:-127.0.0.1:8070}
tls console-svc
start console-svc --addr "$CONSOLE_ADDR" --engine-addr "$ENGINE_ADDR" --dev "${TLS[@]}"

# The Slack gate notifier, when a manifest configures it: it reads the
# gate outbox in the embedded store (engine-svc writes the store's URL to
# store.url in the data folder) and keeps its timers there.
if [[ -n ${REALM_NOTIFY_MANIFEST:-} ]]; then
	tls notify-svc
	start notify-svc --manifest "$REALM_NOTIFY_MANIFEST" --engine-addr "$ENGINE_ADDR" \
		--redis-url "$(cat "$DATA_DIR/store.url")" "${TLS[@]}"
fi

shopt -s nullglob
for wf in examples/*.yaml examples/*/workflow.yaml; do
	realm workflow register "$wf" || echo "(not registered: $wf)"
done
shopt -u nullglob

echo
echo "Realm is running (store: $DATA_DIR). Front doors:"
echo "  engine-svc (gRPC): $ENGINE_ADDR"
echo "  mcp-svc (MCP, streamable HTTP): http://$MCP_ADDR/mcp (dev mode: no token)"
echo "  agent-svc (gRPC): $AGENT_ADDR"
echo "  console-svc (web console): http://$CONSOLE_ADDR (dev mode: loopback only, no sign-in)"
echo "  listen-svc (webhooks): http://$LISTEN_ADDR  (examples/github-issues.yaml at /hooks/github-issues, secret \$REALM_WEBHOOK_SECRET)"
echo "  example-runner: handlers for examples/orders.yaml (registered with engine-svc)"
echo "  go-runner: handlers for examples/go-runner/workflow.yaml (a runner module of its own)"
echo "  adapter-runner: the http and filesystem adapters for uses_service steps"
if [[ -n ${REALM_NOTIFY_MANIFEST:-} ]]; then
	echo "  notify-svc: posts every gate to Slack as $REALM_NOTIFY_MANIFEST's notifiers.slack_gate says"
else
	echo "  (notify-svc not started: set REALM_NOTIFY_MANIFEST to a realm.yaml with notifiers.slack_gate)"
fi
echo "Metrics (Prometheus): http://$ENGINE_METRICS_ADDR/metrics (engine-svc) · http://$AGENT_METRICS_ADDR/metrics (agent-svc)"
echo "  http://$MCP_METRICS_ADDR/metrics (mcp-svc) · http://$LISTEN_ADDR/metrics (listen-svc)"
echo "  http://$EXAMPLE_RUNNER_METRICS_ADDR/metrics (example-runner) · http://$ADAPTER_RUNNER_METRICS_ADDR/metrics (adapter-runner)"
echo
echo "Mutual TLS: certificates in $TLS_DIR (the CLI uses operator.crt there by itself"
echo "  when REALM_DATA_DIR names $DATA_DIR or it is the default ~/.realm)."
echo "Try: bin/realm workflow list    ·    bin/realm run start <workflow>"
echo "Press Ctrl-C to stop."

# Stay up while every child is; if one dies, stop the rest.
while true; do
	for i in "${!pids[@]}"; do
		if ! kill -0 "${pids[i]}" 2>/dev/null; then
			echo "${names[i]} exited; stopping the stack." >&2
			exit 1
		fi
	done
	sleep 1
done
