#!/usr/bin/env bash
# Record the inference and streaming traces of traces/ on a GPU machine, and measure
# PyTorch's default allocator, its expandable segments and the driver's pool
# (cudaMallocAsync) on the same workloads.
#   scripts/record-traces.sh OUT_DIR [workload...]   (default: llama-generate bert-serve image-stream)
# Writes OUT_DIR/NAME.csv.gz (recorded under PyTorch's default allocator) and one JSON
# line per run into OUT_DIR/peers.jsonl; a table at the end.
set -u
out=$1; shift
workloads=${*:-llama-generate bert-serve image-stream}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
for w in $workloads; do
    name=${w//-/_}
    echo "== $w: default (recording)"
    timeout 300 python3 examples/torch_workloads.py "$w" --allocator default \
        --record "$out/$name.csv.gz" --json-out "$out/$name.default.json" | tail -2
    for a in expandable async; do
        echo "== $w: $a"
        timeout 300 python3 examples/torch_workloads.py "$w" --allocator "$a" \
            --json-out "$out/$name.$a.json" | tail -1
    done
done
cat "$out"/*.json > "$out/peers.jsonl" 2>/dev/null
python3 - "$out/peers.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
g = lambda b: f"{b / 2**30:7.3f}" if isinstance(b, (int, float)) else "      -"
print(f"{'workload':16} {'allocator':11} {'median s':>9} {'peak held':>9} {'peak alloc':>10} {'ratio':>6} {'driver':>8}")
for r in rows:
    held, live = r.get("peak_reserved_bytes"), r.get("peak_requested_bytes") or r.get("peak_allocated_bytes")
    ratio = f"{held / live:6.3f}" if held and live else "     -"
    print(f"{r['workload']:16} {r['allocator']:11} {r['median_step_s']:9.4f} {g(held)} {g(r.get('peak_allocated_bytes'))}  {ratio} {g(r.get('peak_driver_used_bytes'))}")
PY
