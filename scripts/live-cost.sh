#!/usr/bin/env bash
# Where the live-block table's time goes: the instructions and the simulated cache
# misses of each operation of `devpool bench --live N`, counted under valgrind's
# callgrind over the timed steps alone (the function `devpool::live::timed_steps`;
# the filling and every other workload are not counted).
#
#   scripts/live-cost.sh [COUNTS] [STRATEGIES] [TABLE]
#   scripts/live-cost.sh 1000,1000000 slab,hybrid warm
#
# Defaults: 1000,10000,100000,1000000; slab,tlsf-virtual,buddy-virtual,hybrid;
# warm. Needs valgrind and a release build (it builds one). The simulated caches: a
# 48 KiB first level and a 32 MiB last level (the development machine's L1d and L3);
# callgrind does not model prefetch hints, so with the warm table the `caller only`
# row's misses are ones the hardware hides. Prints one row per strategy and count:
# instructions, first-level and last-level read misses per operation.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=${1:-1000,10000,100000,1000000}
strategies=${2:-slab,tlsf-virtual,buddy-virtual,hybrid}
table=${3:-warm}
command -v valgrind >/dev/null || { echo "live-cost: valgrind is not installed" >&2; exit 1; }
cargo build --release -q -p devpool-cli
bin=${CARGO_TARGET_DIR:-target}/release/devpool
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-18s %9s %12s %10s %10s\n' strategy live "instr/op" "L1 miss/op" "LL miss/op"
IFS=, read -ra ns <<<"$counts"
for n in "${ns[@]}"; do
    valgrind --tool=callgrind --cache-sim=yes --D1=49152,12,64 --LL=33554432,16,64 \
        --collect-atstart=no --toggle-collect='devpool::live::timed_steps' \
        --dump-after='devpool::live::timed_steps' --callgrind-out-file="$work/cg.$n" \
        "$bin" bench --pairs 1 --steps 1 --threads 1 --live "$n" --live-table "$table" \
        --strategies "$strategies" --json 2>/dev/null >"$work/rows.$n.json"
    # One dump per call of timed_steps, in the order the rows were run.
    python3 - "$work" "$n" <<'EOF'
import glob, json, re, sys
work, n = sys.argv[1], sys.argv[2]
rows = [r for r in json.load(open(f"{work}/rows.{n}.json")) if r["workload"] == f"live {n}"]
dumps = sorted(glob.glob(f"{work}/cg.{n}.*"), key=lambda p: int(p.rsplit(".", 1)[1]))
dumps = [d for d in dumps if re.search(r"^totals: [1-9]", open(d).read(), re.M)]
if len(dumps) != len(rows):
    sys.exit(f"live-cost: {len(rows)} rows but {len(dumps)} counted runs for live {n}")
for r, d in zip(rows, dumps):
    text = open(d).read()
    events = re.search(r"^events: (.*)$", text, re.M).group(1).split()
    totals = [int(x) for x in re.search(r"^totals: (.*)$", text, re.M).group(1).split()]
    t = dict(zip(events, totals + [0] * (len(events) - len(totals))))
    ops = max(r["ops"], 1)
    print(f"{r['strategy']:<18} {n:>9} {t['Ir'] / ops:>12.1f} {t['D1mr'] / ops:>10.2f} {t['DLmr'] / ops:>10.2f}")
EOF
done
