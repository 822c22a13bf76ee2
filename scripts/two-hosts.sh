#!/usr/bin/env bash
# two-hosts.sh: a deployment across two network namespaces of this machine
# acting as two hosts (Linux, root). Host A (10.77.0.1) runs a NATS server,
# the front end (serve --nats), replica 0 of the small model and the large
# model; host B (10.77.0.2) runs replica 1 of the small model. bench run --url
# measures it from host A; with KILL=1, host B's replica is killed (SIGKILL)
# halfway through the window. Usage: scripts/two-hosts.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-20}
work=$(mktemp -d)
bin=$work/tokenrouter
go build -o "$bin" ./cmd/tokenrouter
go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
cleanup() {
  for ns in trA trB; do ip netns pids $ns 2>/dev/null | xargs -r kill -9 2>/dev/null || true; ip netns del $ns 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
exec 2> >(grep -v ' Killed ' >&2)
ip netns add trA && ip netns add trB
ip link add vethA netns trA type veth peer name vethB netns trB
ip -n trA addr add 10.77.0.1/24 dev vethA && ip -n trA link set vethA up && ip -n trA link set lo up
ip -n trB addr add 10.77.0.2/24 dev vethB && ip -n trB link set vethB up && ip -n trB link set lo up
export TOKENROUTER_NATS_TOKEN=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
export TOKENROUTER_BUS_KEY=$(head -c 32 /dev/urandom | base64)
url=nats://10.77.0.1:4222
common=(--models slm,llm --replicas slm=2 --engine sim --profile paper-r2r-batched
  --algorithm r2r-random --param p=0.1 --thresholds 1,1 --max-wait 0 --nats "$url" --log-level warn)
ip netns exec trA "$work/nats-server" -a 10.77.0.1 -p 4222 --auth "$TOKENROUTER_NATS_TOKEN" >"$work/nats.log" 2>&1 &
sleep 1
ip netns exec trA "$bin" subserver "${common[@]}" --index 0 --replica 0 >"$work/a-slm0.log" 2>&1 &
ip netns exec trA "$bin" subserver "${common[@]}" --index 1 --replica 0 >"$work/a-llm.log" 2>&1 &
ip netns exec trB "$bin" subserver "${common[@]}" --index 0 --replica 1 >"$work/b-slm1.log" 2>&1 &
bpid=$!
ip netns exec trA "$bin" serve --engine sim --profile paper-r2r-batched --algorithm r2r-random --param p=0.1 \
  --replicas slm=2 --thresholds 1,1 --max-wait 0 --nats "$url" --host 10.77.0.1 --port 30000 --allow-no-key \
  --log-level warn >"$work/front.log" 2>&1 &
for _ in $(seq 60); do ip netns exec trA curl -fsS http://10.77.0.1:30000/v1/models >/dev/null 2>&1 && break; sleep 0.5; done
if [ "${KILL:-0}" = 1 ]; then (sleep $((dur / 2 + 2)); echo "killing host B's replica"; ip netns pids trB | xargs -r kill -9) & fi
ip netns exec trA "$bin" bench compare --systems "two-hosts=http://10.77.0.1:30000" --concurrency 16 \
  --profile paper-r2r-batched --p 0.1 \
  --max-tokens 64 --duration "${dur}s" --rounds 1
echo "== the front end's metrics"
ip netns exec trA curl -fsS http://10.77.0.1:30000/metrics | grep -E '^tokenrouter_(model_replicas_up|model_placements_total|requests_total|model_unavailable)' || true
echo "== the front end's log"; cat "$work/front.log"
