#!/usr/bin/env bash
# Ours and the peer (django-ai-assistant 0.4), one after the other, on the same scripted model server
# (the peer bench's scripted_llm.py, in its own process) and the same turn shape: 2 rounds of 2 tool
# calls, each tool one small query on both sides, then the answer. Prints both sides' non-model time
# per round at 20-92 and about 400 stored messages, and the ratios.
#
#   bench/versus_peer.sh                 # TURNS=100 (ours, per chat length; the peer's run), RUNS=1
#   PREPARED=1 bench/versus_peer.sh      # ours a second time with DATABASE_PREPARED_STATEMENTS=true
#
# The peer's venv and project live under /tmp (its setup.sh, run once when missing); the figures and
# both sides' full output go to $RESULTS (default /tmp/versus-peer). Ours uses the bench defaults of
# bench/README.md unless DATABASE_URL, REDIS_URL and CELERY_BROKER_URL are set.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER=${PEER_BENCH:-$(cd "$ROOT/.." && pwd)/shared/peer-bench}
PEER_VENV=/tmp/peer-venv
PEER_PROJ=/tmp/peer-proj
PORT=${PORT:-18932}
TURNS=${TURNS:-100}
RUNS=${RUNS:-1}
PREPARED=${PREPARED:-0}
RESULTS=${RESULTS:-${TMPDIR:-/tmp}/versus-peer}
PY="$ROOT/.venv/bin/python"
mkdir -p "$RESULTS"

if [ ! -x "$PEER_VENV/bin/python" ] || [ ! -d "$PEER_PROJ" ]; then
  PEER_RESULTS="$RESULTS" bash "$PEER/setup.sh"
fi

"$PY" "$PEER/scripted_llm.py" --port "$PORT" --tool-rounds 2 --calls-per-round 2 --max-seconds 3600 \
  > "$RESULTS/scripted_llm.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -s --noproxy '*' "http://127.0.0.1:$PORT/__health" > /dev/null && break
  sleep 0.1
done

ours() {  # $1: the name of its figures ($RESULTS/$1-$run.*); the rest: the run's environment
  local name=$1
  shift
  "$PY" "$PEER/wait_idle.py" --max-busy 0.5 --timeout 120 || true
  echo "== $name, run $run"
  (cd "$ROOT" && env "$@" "$PY" bench/turn_overhead.py --server "http://127.0.0.1:$PORT/v1" --turns "$TURNS" \
    --json "$RESULTS/$name-$run.json") | tee "$RESULTS/$name-$run.txt" | grep -E "^(ran|tool calls|non-model|  round|turn's|  with)"
}

for run in $(seq "$RUNS"); do
  ours ours
  rm -f "$RESULTS/ours-prepared-$run.json"
  if [ "$PREPARED" = 1 ]; then
    ours ours-prepared DATABASE_PREPARED_STATEMENTS=true
  fi
  "$PY" "$PEER/wait_idle.py" --max-busy 0.5 --timeout 120 || true
  echo "== the peer, run $run"
  (cd "$PEER_PROJ" && timeout 1800 "$PEER_VENV/bin/python" "$PEER/bench.py" --llm-port "$PORT" \
    --label "versus-$run" --turns "$TURNS" --warmup 10 --seed-messages 20 --capture-check 0 --out "$RESULTS") \
    > "$RESULTS/peer-$run.txt"
  grep -E "^(==|turns_|loadavg)" "$RESULTS/peer-$run.txt" | cut -c1-160
done

"$PY" - "$RESULTS" "$RUNS" << 'EOF'
"""Both sides' medians and p95 per round, by chat length, and the ratios."""
import json
import math
import os
import statistics
import sys

results, runs = sys.argv[1], int(sys.argv[2])


def pct(values, p):
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


def ms(value):
    return f"{value * 1000:7.2f}"


ours = [json.load(open(f"{results}/ours-{n}.json")) for n in range(1, runs + 1)]
peer = [json.load(open(f"{results}/versus-{n}.json")) for n in range(1, runs + 1)]
prepared = [
    json.load(open(f"{results}/ours-prepared-{n}.json"))
    for n in range(1, runs + 1)
    if os.path.exists(f"{results}/ours-prepared-{n}.json")
]
bands = {"short": (20, 92), "long": (380, 452)}
print(f"\nnon-model time per round (ms), {runs} run(s) each, same scripted server and turn shape")
print(
    "  ours 'per round': each round timed; ours 'turn / 3' and the peer: a turn's non-model time / 3 "
    "(the peer's turn includes what our start() does, so ours is shown with start() too)"
)
head = f"{'':34}{'p50':>8}{'p95':>8}"
measured = {}
for name, (low, high) in bands.items():
    side = [o[name] for o in ours]
    peer_rows = [r for p in peer for r in p["rows"] if low <= r["history_len"] <= high]
    peer_values = [r["ovh_vs_http_per_round"] for r in peer_rows]
    figures = {
        "ours, per round": [v for s in side for v in s["per_round"]],
        "ours, turn / 3": [v for s in side for v in s["per_turn_over_3"]],
        "ours with start(), turn / 3": [v for s in side for v in s["with_start_over_3"]],
        "the peer, turn / 3": peer_values,
    }
    if prepared:
        figures["ours prepared, per round"] = [v for o in prepared for v in o[name]["per_round"]]
        figures["ours prepared, turn / 3"] = [v for o in prepared for v in o[name]["per_turn_over_3"]]
    earlier = side[0]["earlier_messages"]
    print(f"\n{name} chats: ours {earlier[0]}-{earlier[1]} earlier messages, the peer {low}-{high} stored "
          f"({len(peer_values)} turns)")
    print(head)
    for label, values in figures.items():
        if values:
            print(f"  {label:32}{ms(statistics.median(values))}{ms(pct(values, 95))}")
        else:  # the peer's one thread grows 8 messages a turn: 452 stored takes TURNS >= 55
            print(f"  {label:32}  none: the peer's thread never had {low}-{high} messages (TURNS >= 55 reaches 452)")
    for label in ("ours, turn / 3", "ours with start(), turn / 3", "ours prepared, turn / 3"):
        if peer_values and figures.get(label):
            ratio = statistics.median(peer_values) / statistics.median(figures[label])
            print(f"  the peer's p50 / {label:27}{ratio:7.1f}×")
    measured[name] = figures

short, long = measured["short"], measured["long"]
per_round = [v for o in ours for s in ("short", "long") for v in o[s]["per_round"]]
p50_short, p50_long = statistics.median(short["ours, per round"]), statistics.median(long["ours, per round"])


def peer_ratio(figures):
    if not figures["the peer, turn / 3"]:
        return None
    return statistics.median(figures["the peer, turn / 3"]) / statistics.median(figures["ours, turn / 3"])


def times(ratio, at_least):
    return "n/a (no turns of the peer)" if ratio is None else f"{'yes' if ratio >= at_least else 'NO'} ({ratio:.1f}×)"


ratio_short, ratio_long = peer_ratio(short), peer_ratio(long)
busy = [o.get("busy_cores", float("nan")) for o in ours]
peer_busy = [p.get("machine_busy_cores_during_batch", float("nan")) for p in peer]
calls = {}
for o in ours:
    for s in ("short", "long"):
        for name, outcome, error, count in o[s].get("tool_calls", []):
            key = f"{name} {outcome}" + (f" ({error})" if error else "")
            calls[key] = calls.get(key, 0) + count
print(f"\nours' tool calls, as the server made them: {', '.join(f'{k} × {n}' for k, n in sorted(calls.items()))}")
print("\ntargets:")
print(f"  ours p50 ≤ 6 ms per round:       {'yes' if statistics.median(per_round) <= 0.006 else 'NO'} "
      f"({ms(statistics.median(per_round)).strip()} ms)")
print(f"  ours p95 ≤ 40 ms per round:      {'yes' if pct(per_round, 95) <= 0.040 else 'NO'} "
      f"({ms(pct(per_round, 95)).strip()} ms)")
print(f"  ≥ 3× lower than the peer, short: {times(ratio_short, 3)}")
print(f"  ≥ 20× lower at ~400 messages:    {times(ratio_long, 20)}")
flat = p50_long - p50_short <= max(0.001, 0.2 * p50_short)
print(f"  ours flat with chat length:      {'yes' if flat else 'NO'} "
      f"({ms(p50_short).strip()} → {ms(p50_long).strip()} ms per round)")
print(f"  machine's busy cores during the runs: ours {', '.join(f'{b:.2f}' for b in busy)}; "
      f"the peer {', '.join(f'{b:.2f}' for b in peer_busy)} (of 2; other work shares the machine)")
EOF
