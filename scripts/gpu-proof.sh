#!/usr/bin/env bash
# devpool on a real GPU, end to end, through its C ABI:
#
#   1. the C example on the CUDA backend (with data checks through the CUDA
#      runtime when its header and library are found);
#   2. GPT-2 small trained three times on the same seed and data, with PyTorch's
#      caching allocator, with expandable segments, and with devpool; the losses
#      must match step for step;
#   3. the CuPy example with CuPy's memory pool and with devpool; the checksums
#      must match;
#   4. a summary: summary.json and summary.md in the output directory.
#
# Usage: scripts/gpu-proof.sh OUT_DIR
#
# The GPU machine needs PyTorch, transformers, CuPy and a C compiler, not Rust:
# build the library where Rust is, and copy it here:
#   cargo build --release -p devpool-ffi
#   mkdir -p .gpu && cp target/release/libdevpool_ffi.so .gpu/
#
# Settings (environment):
#   DEVPOOL_LIB      the library (default .gpu/libdevpool_ffi.so)
#   DEVPOOL_SETTINGS devpool configuration for the runs (default strategy=hybrid)
#   STEPS            training steps (default 30)     SEED   seed (default 0)
#   CUPY_ITERS       CuPy math iterations (300)      CUPY_CHURN  CuPy allocations (20000)
#   LOSS_RTOL        relative tolerance of the loss comparison (default 0: exact)
#   PYTHON, CC       interpreter and C compiler (python3, cc)
#
# Exits 0 when every step ran and every comparison holds.
set -uo pipefail

if [ $# -ne 1 ]; then
    sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
OUT=$1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.." || exit 2

LIB=${DEVPOOL_LIB:-.gpu/libdevpool_ffi.so}
if [ ! -f "$LIB" ]; then
    echo "no devpool library at $LIB: build it with 'cargo build --release -p devpool-ffi'" >&2
    echo "and copy target/release/libdevpool_ffi.so there, or set DEVPOOL_LIB" >&2
    exit 2
fi
LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")
export DEVPOOL_LIB=$LIB
SETTINGS=${DEVPOOL_SETTINGS:-strategy=hybrid}
STEPS=${STEPS:-30}
SEED=${SEED:-0}
CUPY_ITERS=${CUPY_ITERS:-300}
CUPY_CHURN=${CUPY_CHURN:-20000}
PY=${PYTHON:-python3}
CC=${CC:-cc}
export PYTHONUNBUFFERED=1
unset DEVPOOL_CONFIG PYTORCH_CUDA_ALLOC_CONF

say() { printf '\n== %s\n' "$*"; }
# run NAME CMD...: run a step, its output into NAME.log, its status into NAME.rc.
run() {
    local name=$1
    shift
    say "$name: $*"
    local t0=$SECONDS
    "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "$rc" >"$OUT/$name.rc"
    tail -n 4 "$OUT/$name.log"
    echo "-> exit $rc in $((SECONDS - t0)) s"
}

say "library $LIB, settings '$SETTINGS', steps $STEPS, seed $SEED"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# 1. The C example, with the CUDA runtime's data checks when it can be built so.
LIBDIR=$(dirname "$LIB")
LINK=(-L"$LIBDIR" -l:"$(basename "$LIB")" -Wl,-rpath,"$LIBDIR")
SRC=examples/c/devpool_example.c
INC=crates/devpool-ffi/include
CUDA_DIR=""
for d in "${CUDA_HOME:-}" /usr/local/cuda "$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")")"; do
    if [ -n "$d" ] && [ -f "$d/include/cuda_runtime.h" ]; then CUDA_DIR=$d; break; fi
done
built=""
if [ -n "$CUDA_DIR" ] && "$CC" -std=c11 -O2 -Wall -Wextra -DDEVPOOL_EXAMPLE_CUDART -I"$INC" -I"$CUDA_DIR/include" \
    "$SRC" -o "$OUT/devpool_example" "${LINK[@]}" -L"$CUDA_DIR/lib64" -lcudart -Wl,-rpath,"$CUDA_DIR/lib64" \
    2>"$OUT/c_build.log"; then
    built="with CUDA runtime data checks"
elif "$CC" -std=c11 -O2 -Wall -Wextra -I"$INC" "$SRC" -o "$OUT/devpool_example" "${LINK[@]}" 2>>"$OUT/c_build.log"; then
    built="without the CUDA runtime"
fi
if [ -n "$built" ]; then
    echo "C example built $built"
    echo "$built" >"$OUT/c_example.build"
    run c_example "$OUT/devpool_example" cuda
else
    echo "the C example did not build:"
    cat "$OUT/c_build.log"
    echo 1 >"$OUT/c_example.rc"
fi

# 2. PyTorch: the same training three times.
for a in default expandable devpool; do
    if [ "$a" = expandable ]; then
        run "pytorch_$a" env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
            "$PY" examples/pytorch_pluggable.py --allocator "$a" --steps "$STEPS" --seed "$SEED"
    else
        run "pytorch_$a" "$PY" examples/pytorch_pluggable.py --allocator "$a" --steps "$STEPS" \
            --seed "$SEED" --devpool-config "$SETTINGS"
    fi
done

# 3. CuPy: its pool, then devpool.
for a in default devpool; do
    run "cupy_$a" "$PY" examples/cupy_devpool.py --allocator "$a" --iters "$CUPY_ITERS" \
        --churn "$CUPY_CHURN" --seed "$SEED" --devpool-config "$SETTINGS"
done

# 4. The summary.
say summary
OUT="$OUT" LOSS_RTOL="${LOSS_RTOL:-0}" SETTINGS="$SETTINGS" "$PY" - <<'EOF'
import json, os

out = os.environ["OUT"]
rtol = float(os.environ["LOSS_RTOL"])


def rc(name):
    try:
        return int(open(os.path.join(out, name + ".rc")).read().strip())
    except (OSError, ValueError):
        return None


def result(name):
    try:
        lines = open(os.path.join(out, name + ".log")).read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


summary = {"settings": os.environ["SETTINGS"], "checks": {}}
checks = summary["checks"]
checks["c_example"] = rc("c_example") == 0
c_build = os.path.join(out, "c_example.build")
summary["c_example"] = {
    "exit": rc("c_example"),
    "build": open(c_build).read().strip() if os.path.exists(c_build) else None,
}

torch_runs = {a: result("pytorch_" + a) for a in ("default", "expandable", "devpool")}
summary["pytorch"] = torch_runs
for a, r in torch_runs.items():
    checks["pytorch_" + a] = rc("pytorch_" + a) == 0 and r is not None
base = torch_runs["default"]
diffs = {}
for a in ("expandable", "devpool"):
    r = torch_runs[a]
    if base and r and len(base["losses"]) == len(r["losses"]):
        d = [abs(x - y) for x, y in zip(base["losses"], r["losses"])]
        ok = all(abs(x - y) <= rtol * abs(x) for x, y in zip(base["losses"], r["losses"]))
        diffs[a] = {"max_abs_diff": max(d) if d else 0.0, "identical": max(d, default=0.0) == 0.0}
        checks["losses_" + a + "_match_default"] = ok
    else:
        checks["losses_" + a + "_match_default"] = False
summary["loss_comparison"] = {"rtol": rtol, "against_default": diffs}

cupy_runs = {a: result("cupy_" + a) for a in ("default", "devpool")}
summary["cupy"] = cupy_runs
for a, r in cupy_runs.items():
    checks["cupy_" + a] = rc("cupy_" + a) == 0 and r is not None
if all(cupy_runs.values()):
    a, b = cupy_runs["default"]["checksum"], cupy_runs["devpool"]["checksum"]
    checks["cupy_checksums_match"] = abs(a - b) <= 1e-9 * max(1.0, abs(a))
else:
    checks["cupy_checksums_match"] = False
summary["ok"] = all(checks.values())

with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2)

gib = lambda b: f"{b / 2**30:.2f}" if isinstance(b, (int, float)) else "-"
ratio = lambda x, y: f"{x / y:.3f}" if x and y else "-"
md = ["# devpool GPU proof", ""]
gpu = next((r.get("gpu") for r in list(torch_runs.values()) + list(cupy_runs.values()) if r), "?")
md += [f"GPU: {gpu}. devpool settings: `{summary['settings']}`.", ""]
md += ["## PyTorch: GPT-2 small, fp32, variable batch and sequence length", ""]
md += ["| allocator | steps | median step (s) | peak reserved (GiB) | vs default | peak allocated (GiB) | losses vs default |",
       "|---|---|---|---|---|---|---|"]
for a, r in torch_runs.items():
    if not r:
        md.append(f"| {a} | failed | | | | | |")
        continue
    cmp = "reference" if a == "default" else (
        ("identical" if diffs.get(a, {}).get("identical") else f"max diff {diffs[a]['max_abs_diff']:.3g}")
        if a in diffs else "not comparable")
    md.append(f"| {a} | {r['steps']} | {r['median_step_s']:.4f} | {gib(r['peak_reserved_bytes'])} | "
              f"{ratio(r['peak_reserved_bytes'], base and base['peak_reserved_bytes'])} | "
              f"{gib(r.get('peak_allocated_bytes'))} | {cmp} |")
md += ["", "## CuPy: array math and allocation churn", ""]
md += ["| allocator | math (ms/iter) | churn (µs/alloc) | peak held (GiB) | checksum |", "|---|---|---|---|---|"]
for a, r in cupy_runs.items():
    if not r:
        md.append(f"| {a} | failed | | | |")
        continue
    md.append(f"| {a} | {r['math_ms_per_iter']:.3f} | {r['churn_us_per_alloc']:.2f} | "
              f"{gib(r['peak_reserved_bytes'])} | {r['checksum']!r} |")
md += ["", "## Checks", ""] + [f"- {k}: {'pass' if v else 'FAIL'}" for k, v in checks.items()]
md += ["", f"All checks pass: {summary['ok']}"]
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write("\n".join(md) + "\n")
print("\n".join(md))
raise SystemExit(0 if summary["ok"] else 1)
EOF
