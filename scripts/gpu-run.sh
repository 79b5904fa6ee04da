#!/usr/bin/env bash
# Everything that needs a real GPU, in one go, from the executables scripts/pack-gpu.sh
# built into .gpu/. Results go to OUT_DIR:
#   gpu.txt           the device, the host's processor (lscpu), and `devpool info --backend cuda`
#   tests.txt         the GPU tests (one GPU; two-GPU tests too when two are present)
#   bench.json        `devpool bench --backend cuda`: strategies against cuMemAlloc and cuMemAllocAsync
#   live.json         `devpool bench --backend cuda --live ...`: cost per operation with N blocks live
#                     (the caller's table read as LIVE_TABLE says: warm, the default, or cold)
#   compare.json      `devpool compare --backend cuda`: the bundled traces replayed on the GPU
#   summary.json/.md  scripts/gpu-proof.sh: the C example, PyTorch and CuPy through the C ABI
#                     (its logs in \$PROOF_DIR, default OUT_DIR/proof)
# Usage: scripts/gpu-run.sh OUT_DIR [parts...]   (parts: info tests bench live compare proof; default all)
set -u
out=$1; shift
parts=${*:-info tests bench live compare proof}
mkdir -p "$out"
cd "$(dirname "$0")/.."
has() { [[ " $parts " == *" $1 "* ]]; }
if has info; then
    { nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
      lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|MHz|L2|L3"
      .gpu/devpool info --backend cuda; } 2>&1 | tee "$out/gpu.txt"
fi
if has tests; then
    for t in .gpu/test-gpu .gpu/test-gpu_strategies .gpu/test-ring_gpu .gpu/test-multi_gpu; do
        echo "== $t"
        DEVPOOL_MULTI_SECS=${DEVPOOL_MULTI_SECS:-60} timeout 400 "$t" --ignored --test-threads=1 --nocapture 2>&1 | grep -vE '^\s*$' | tail -60
    done 2>&1 | tee "$out/tests.txt" | grep -E "^== |test result|FAILED|panicked|M pairs/s|bytes read back"
fi
if has bench; then
    timeout 300 .gpu/devpool bench --backend cuda --threads 1,4,16 --json \
        --strategies "${BENCH_STRATEGIES:-cuMemAlloc,cuMemAllocAsync,slab,tlsf-virtual,buddy-virtual,hybrid}" > "$out/bench.json"
    python3 - "$out/bench.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
names = list(dict.fromkeys(r["strategy"] for r in rows))
work = ["pair 4 KiB", "pair 1 MiB", "pair 64 MiB", "random op"]
print("%-16s" % "ns/op" + "".join("%13s" % w for w in work) + "   M pairs/s at 1/4/16 threads")
for n in names:
    get = lambda w, t=1: next((r for r in rows if r["strategy"] == n and r["workload"] == w and r["threads"] == t), None)
    # ns_per_op and ops_per_sec are null when no operation completed.
    fig = lambda r, k, scale, prec: "-" if r is None else "failed" if r[k] is None else "%.*f%s" % (prec, r[k] / scale, "*" if r["failures"] else "")
    cells = ["%13s" % fig(get(w), "ns_per_op", 1, 1) for w in work]
    thr = [get("pair 64 KiB, own stream per thread", t) for t in (1, 4, 16)]
    rnd = get("random op")
    mem = "" if rnd is None else "   random op: %s memory calls, held / live %s" % (
        rnd.get("memory_calls", "-"),
        "-" if rnd.get("held_over_live") is None else "%.3f" % rnd["held_over_live"])
    print("%-16s" % n + "".join(cells) + "   " + " / ".join(fig(r, "ops_per_sec", 1e6, 2) for r in thr) + mem)
PY
fi
if has live; then
    timeout 300 .gpu/devpool bench --backend cuda --threads 1 --json --live 1000,10000,100000,1000000 \
        --live-table "${LIVE_TABLE:-warm}" \
        --strategies "${LIVE_STRATEGIES:-cuMemAllocAsync,slab,tlsf-virtual,hybrid}" > "$out/live.json"
    python3 - "$out/live.json" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["workload"].startswith("live ")]
names = list(dict.fromkeys(r["strategy"] for r in rows))
counts = sorted({int(r["workload"].split()[1]) for r in rows})
print("%-22s" % "ns/op, live" + "".join("%10d" % c for c in counts))
for n in names:
    cell = lambda c: next((r["ns_per_op"] for r in rows if r["strategy"] == n and r["workload"] == "live %d" % c), None)
    print("%-22s" % n + "".join("%10s" % ("-" if cell(c) is None else "%.1f" % cell(c)) for c in counts))
PY
fi
if has compare; then
    timeout 300 .gpu/devpool compare --backend cuda --json --plots /tmp/devpool-plots \
        --strategies "${COMPARE_STRATEGIES:-cuMemAlloc,cuMemAllocAsync,slab,tlsf-virtual,buddy-virtual,hybrid}" > "$out/compare.json"
    python3 - "$out/compare.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print("%-20s %-16s %7s %12s %12s %10s %10s %8s" % ("trace", "strategy", "frag", "peak held", "alloc time", "alloc p50", "free p50", "calls/k"))
for r in rows:
    lat = r["latency"]
    total_ms = (lat["alloc"]["mean_ns"] * lat["alloc"]["count"] + lat["free"]["mean_ns"] * lat["free"]["count"]) / 1e6
    print("%-20s %-16s %7.3f %10.2f GiB %9.1f ms %8d ns %8d ns %8.2f" % (r["trace"][:20], r["strategy"], r["fragmentation_ratio"],
          r["peak_reserved_bytes"] / 2**30, total_ms, lat["alloc"]["median_ns"], lat["free"]["median_ns"], r["backend"]["per_1000_ops"]["memory_calls"]))
PY
fi
if has proof; then
    DEVPOOL_LIB=.gpu/libdevpool_ffi.so bash scripts/gpu-proof.sh "${PROOF_DIR:-$out/proof}" 2>&1 | tail -40
    cp "${PROOF_DIR:-$out/proof}"/summary.* "$out/" 2>/dev/null || true
fi
