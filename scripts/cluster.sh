#!/usr/bin/env bash
# A replicated venue on loopback (docs/replication.md): three nats-server nodes (one JetStream
# cluster, R3) and three Rialto nodes of the demo venue: nodes 1 and 2 `--role auto` (one
# leads, the other is its hot standby) and node 3 `--role replica` (a read replica: market
# data and public REST from the log; it never leads).
#
#   scripts/cluster.sh up            # start everything; prints the leader's console URL
#   scripts/cluster.sh status        # which processes run, each Rialto node's role
#   scripts/cluster.sh kill-leader   # SIGKILL the leading node, time the fail-over (SIGKILL to
#                                    # the first order the new leader acknowledges), restart the
#                                    # killed node as a standby
#   scripts/cluster.sh measure 20    # kill-leader 20 times; fail-over p50 and max
#   scripts/cluster.sh down          # stop every process this script started (by its PID)
#   scripts/cluster.sh clean         # down, then delete the state directory
#
# State (NATS stores, data directories, logs, PIDs) is kept in $RIALTO_CLUSTER_DIR
# (/tmp/rialto-cluster by default), so `up` after `down` resumes the same venue. The `rialto`
# binary is $RIALTO, else `rialto` on PATH, else target/release/rialto; `nats-server` is found
# on PATH or in ~/go/bin (`go install github.com/nats-io/nats-server/v2@v2.15.2`).
#
# Ports (fixed, loopback): NATS clients 4222-4224, NATS routes 6222-6224; Rialto node 1: orders
# 9100, admin 9101, FIX 9878, web 8080; node 2: 9200, 9201, 9879, 8081; node 3 (the replica):
# web 8082 only. A standby opens no listener: of nodes 1 and 2, only the leader's ports answer.
set -euo pipefail

cd "$(dirname "$0")/.."
STATE="${RIALTO_CLUSTER_DIR:-/tmp/rialto-cluster}"
RIALTO="${RIALTO:-$(command -v rialto || echo target/release/rialto)}"
NATS_SERVER="$(command -v nats-server || echo "$HOME/go/bin/nats-server")"
NATS_URLS="nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224"
LEASE_MS="${RIALTO_LEASE_MS:-1500}"
# Order, admin, FIX and web ports of Rialto nodes 1 and 2.
NODE_PORTS=("" "9100 9101 9878 8080" "9200 9201 9879 8081")
# The read replica's web port.
REPLICA_WEB=8082

die() { echo "cluster.sh: $*" >&2; exit 1; }

pid_of() { cat "$STATE/pids/$1.pid" 2>/dev/null || true; }

alive() {
    local pid
    pid="$(pid_of "$1")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

now_ms() { date +%s%3N; }

web_port() { local p; read -r -a p <<<"${NODE_PORTS[$1]}"; echo "${p[3]}"; }

start_nats() {
    local i="$1"
    local client=$((4222 + i)) route=$((6222 + i))
    mkdir -p "$STATE/nats/n$i"
    "$NATS_SERVER" -a 127.0.0.1 -p "$client" -n "n$i" -js -sd "$STATE/nats/n$i" \
        --cluster_name rialto --cluster "nats://127.0.0.1:$route" \
        --routes nats://127.0.0.1:6222,nats://127.0.0.1:6223,nats://127.0.0.1:6224 \
        >"$STATE/logs/nats$i.log" 2>&1 </dev/null &
    echo $! >"$STATE/pids/nats$i.pid"
}

start_node() {
    local i="$1" p
    read -r -a p <<<"${NODE_PORTS[$i]}"
    mkdir -p "$STATE/node$i"
    "$RIALTO" serve --demo --log jetstream --role auto --nats "$NATS_URLS" \
        --data "$STATE/node$i" --set "log.lease_ms=$LEASE_MS" \
        --listen "127.0.0.1:${p[0]}" --admin-listen "127.0.0.1:${p[1]}" \
        --fix-listen "127.0.0.1:${p[2]}" --web-listen "127.0.0.1:${p[3]}" \
        >>"$STATE/logs/node$i.log" 2>&1 </dev/null &
    echo $! >"$STATE/pids/node$i.pid"
}

start_replica() {
    mkdir -p "$STATE/node3"
    "$RIALTO" serve --demo --log jetstream --role replica --nats "$NATS_URLS" \
        --data "$STATE/node3" --set "log.lease_ms=$LEASE_MS" \
        --web-listen "127.0.0.1:$REPLICA_WEB" \
        >>"$STATE/logs/node3.log" 2>&1 </dev/null &
    echo $! >"$STATE/pids/node3.pid"
}

# The Rialto node (1 or 2) that leads: the one whose web port answers. Empty if none.
leader() {
    local i
    for i in 1 2; do
        if alive "node$i" && port_open "$(web_port "$i")"; then
            echo "$i"
            return
        fi
    done
}

# Waits up to $2 seconds for a node other than $1 (0: any) to lead; prints it.
wait_leader() {
    local not="$1" deadline=$(($(date +%s) + $2)) l
    while (($(date +%s) < deadline)); do
        l="$(leader)"
        if [[ -n "$l" && "$l" != "$not" ]]; then
            echo "$l"
            return
        fi
        sleep 0.02
    done
    return 1
}

# Places one order at node $1 over REST (user 8, an immediate-or-cancel buy): succeeds once
# the node acknowledged it.
order_at() {
    "$RIALTO" order --web "127.0.0.1:$(web_port "$1")" --data "$STATE/node$1" --user 8 \
        --side buy --price 5000.00 --qty 0.001 --tif ioc >/dev/null 2>&1
}

up() {
    [[ -x "$NATS_SERVER" ]] || die "no nats-server on PATH or in ~/go/bin: go install github.com/nats-io/nats-server/v2@v2.15.2"
    [[ -x "$RIALTO" ]] || die "no rialto binary at $RIALTO: cargo build --release, or set RIALTO"
    mkdir -p "$STATE/pids" "$STATE/logs"
    local i
    for i in 0 1 2; do
        alive "nats$i" || start_nats "$i"
    done
    for i in 0 1 2; do
        local deadline=$(($(date +%s) + 20))
        until port_open $((4222 + i)); do
            (($(date +%s) < deadline)) || die "nats-server n$i did not listen; see $STATE/logs/nats$i.log"
            sleep 0.05
        done
    done
    # Node 1 first, so that it leads; node 2 follows it as a hot standby.
    alive node1 || start_node 1
    local l
    l="$(wait_leader 0 60)" || die "no Rialto node leads within 60 s; see $STATE/logs/node*.log"
    alive node2 || start_node 2
    alive node3 || start_replica
    local deadline=$(($(date +%s) + 60))
    until port_open "$REPLICA_WEB"; do
        (($(date +%s) < deadline)) || die "the read replica does not serve within 60 s; see $STATE/logs/node3.log"
        sleep 0.05
    done
    echo "cluster up in $STATE: 3 nats-server nodes ($NATS_URLS), 3 Rialto nodes"
    echo "leader: node $l; console: http://127.0.0.1:$(web_port "$l")/"
    echo "read replica: node 3; console (market data only): http://127.0.0.1:$REPLICA_WEB/"
}

status() {
    local name l role
    l="$(leader)"
    for name in nats0 nats1 nats2 node1 node2 node3; do
        if ! alive "$name"; then
            echo "$name: stopped"
            continue
        fi
        case "$name" in
            node3) role=", read replica (web http://127.0.0.1:$REPLICA_WEB/)" ;;
            "node$l") role=", leader (console http://127.0.0.1:$(web_port "$l")/)" ;;
            node*) role=", hot standby" ;;
            *) role="" ;;
        esac
        echo "$name: running (pid $(pid_of "$name"))$role"
    done
    [[ -n "$l" ]] || echo "leader: none"
}

# SIGKILLs the leader, waits for the other node to acknowledge an order, restarts the killed
# node as a standby. Prints and records the fail-over time in ms.
kill_leader() {
    local old
    old="$(leader)"
    [[ -n "$old" ]] || die "no node leads (scripts/cluster.sh status)"
    local other=$((3 - old))
    alive "node$other" || die "node $other is not running: no standby to take over"
    local killed_at
    killed_at="$(now_ms)"
    kill -9 "$(pid_of "node$old")"
    local deadline=$((killed_at + 60000))
    until order_at "$other"; do
        (($(now_ms) < deadline)) || die "node $other acknowledged no order within 60 s; see $STATE/logs/node$other.log"
        sleep 0.01
    done
    local took=$(($(now_ms) - killed_at))
    echo "killed node $old; node $other acknowledged an order $took ms after the SIGKILL"
    echo "$took" >>"$STATE/failover-ms"
    local lines
    lines="$(wc -l <"$STATE/logs/node$old.log")"
    start_node "$old"
    # A kill before it follows the log would find no standby to take over.
    local follows=$(($(date +%s) + 30))
    until tail -n +"$((lines + 1))" "$STATE/logs/node$old.log" | grep -q "following the log as a hot standby"; do
        (($(date +%s) < follows)) || die "the restarted node $old does not follow the log; see $STATE/logs/node$old.log"
        sleep 0.05
    done
    echo "node $old restarted as a hot standby; console: http://127.0.0.1:$(web_port "$other")/"
}

measure() {
    local cycles="$1" i
    [[ "$cycles" =~ ^[1-9][0-9]*$ ]] || die "measure: give a number of cycles"
    : >"$STATE/failover-ms"
    for ((i = 1; i <= cycles; i++)); do
        kill_leader
    done
    sort -n "$STATE/failover-ms" | awk '
        { t[NR] = $1 }
        END {
            p50 = t[int((NR + 1) / 2)];
            printf "fail-over (SIGKILL of the leader to the first order acknowledged by the new leader), %d cycles, lease %s ms: p50 %d ms, max %d ms\n", NR, ENVIRON["LEASE_MS"], p50, t[NR]
        }'
}

down() {
    local name pid
    for name in node1 node2 node3 nats0 nats1 nats2; do
        pid="$(pid_of "$name")"
        if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            local deadline=$(($(date +%s) + 10))
            while kill -0 "$pid" 2>/dev/null && (($(date +%s) < deadline)); do sleep 0.05; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
            echo "stopped $name (pid $pid)"
        fi
        rm -f "$STATE/pids/$name.pid"
    done
}

export LEASE_MS
case "${1:-}" in
    up) up ;;
    status) status ;;
    kill-leader) kill_leader ;;
    measure) measure "${2:-}" ;;
    down) down ;;
    clean) down; rm -rf "$STATE"; echo "removed $STATE" ;;
    *) die "usage: scripts/cluster.sh up|status|kill-leader|measure N|down|clean" ;;
esac
