#!/usr/bin/env bash
# devpool on a real GPU, end to end, through the C ABI and the Python package:
#
#   1. the C example on the CUDA backend (with data checks through the CUDA runtime
#      when its header and library are found);
#   2. the Python package's GPU tests (python/tests/test_gpu.py): devpool as PyTorch's
#      allocator (record_stream race, stats, empty_cache, out of memory, CUDA graphs,
#      cudnn benchmark, threads, torch.compile reduce-overhead), a MemPool beside
#      PyTorch's allocator, CuPy;
#   3. real programs under PyTorch's allocator, expandable segments and devpool
#      (examples/torch_table.py: GPT-2 training, Llama-style generation, ViT-B training,
#      and GPT-2 DDP over two GPUs when there are two);
#   4. CuPy's pool against devpool (examples/cupy_devpool.py);
#   5. a summary: summary.md in the output directory.
#
# Usage: scripts/gpu-proof.sh OUT_DIR [parts...]   (parts: c pytest table cupy; default all)
#
# The GPU machine needs PyTorch, transformers, timm, CuPy and a C compiler, not Rust:
# where Rust is, build the library and the wheel (scripts/pack-gpu.sh does both), then
# install the wheel there (pip install .whl/devpool-*.whl) or point DEVPOOL_LIB at the
# library. Settings (environment): DEVPOOL_LIB (default .gpu/libdevpool_ffi.so),
# STRATEGY (hybrid), CUPY_ITERS (300), CUPY_CHURN (20000), TABLE_ARGS (extra arguments
# of torch_table.py), PYTHON (python3), CC (cc).
set -uo pipefail

if [ $# -lt 1 ]; then
    sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
OUT=$1
shift
parts=${*:-c pytest table cupy}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
has() { [[ " $parts " == *" $1 "* ]]; }

LIB=${DEVPOOL_LIB:-.gpu/libdevpool_ffi.so}
[ -f "$LIB" ] && export DEVPOOL_LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")
STRATEGY=${STRATEGY:-hybrid}
PY=${PYTHON:-python3}
CC=${CC:-cc}
export PYTHONUNBUFFERED=1
unset DEVPOOL_CONFIG PYTORCH_CUDA_ALLOC_CONF
# Without an installed package, use this checkout's (it finds the library above).
"$PY" -c "import devpool" 2>/dev/null || export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}

say() { printf '\n== %s\n' "$*"; }
summary=$OUT/summary.md
printf '# devpool GPU proof\n\n' >"$summary"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"

if has c; then
    say "C example"
    SRC=examples/c/devpool_example.c
    INC=crates/devpool-ffi/include
    LINK=(-L"$(dirname "$DEVPOOL_LIB")" -l:"$(basename "$DEVPOOL_LIB")" -Wl,-rpath,"$(dirname "$DEVPOOL_LIB")")
    CUDA_DIR=""
    for d in "${CUDA_HOME:-}" /usr/local/cuda; do
        if [ -n "$d" ] && [ -f "$d/include/cuda_runtime.h" ]; then CUDA_DIR=$d; break; fi
    done
    if [ -n "$CUDA_DIR" ] && "$CC" -std=c11 -O2 -Wall -Wextra -DDEVPOOL_EXAMPLE_CUDART -I"$INC" -I"$CUDA_DIR/include" \
        "$SRC" -o "$OUT/devpool_example" "${LINK[@]}" -L"$CUDA_DIR/lib64" -lcudart -Wl,-rpath,"$CUDA_DIR/lib64" 2>"$OUT/c_build.log" ||
        "$CC" -std=c11 -O2 -Wall -Wextra -I"$INC" "$SRC" -o "$OUT/devpool_example" "${LINK[@]}" 2>>"$OUT/c_build.log"; then
        "$OUT/devpool_example" cuda >"$OUT/c_example.log" 2>&1
        rc=$?
    else
        rc=build-failed
    fi
    echo "C example: exit $rc" | tee -a "$summary"
fi

if has pytest; then
    say "Python GPU tests"
    (cd /tmp && timeout 900 "$PY" -m pytest -q -rs -s "$ROOT/python/tests/test_gpu.py") >"$OUT/pytest.log" 2>&1
    echo "pytest: exit $? ($(grep -E '^[0-9]+ (passed|failed)' "$OUT/pytest.log" | tail -1))" | tee -a "$summary"
fi

if has table; then
    say "Real programs"
    ddp=""
    [ "$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null)" -ge 2 ] 2>/dev/null && ddp=--ddp
    timeout 1800 "$PY" examples/torch_table.py "$OUT/table" $ddp ${TABLE_ARGS:-} | tee "$OUT/table.log" | tail -20
    printf '\n## Real programs\n\n' >>"$summary"
    cat "$OUT/table/table.md" >>"$summary" 2>/dev/null
fi

if has cupy; then
    say "CuPy"
    printf '\n## CuPy: array math and allocation churn\n\n| allocator | math (ms/iter) | churn (µs/alloc) | peak held (MiB) | checksum |\n|---|---|---|---|---|\n' >>"$summary"
    for a in default devpool; do
        timeout 600 "$PY" examples/cupy_devpool.py --allocator "$a" --strategy "$STRATEGY" \
            --iters "${CUPY_ITERS:-300}" --churn "${CUPY_CHURN:-20000}" >"$OUT/cupy_$a.log" 2>&1
        "$PY" - "$OUT/cupy_$a.log" >>"$summary" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
if not rows:
    print("| failed | | | | |")
else:
    r = rows[-1]
    print(f"| {r['allocator']} | {r['math_ms_per_iter']:.3f} | {r['churn_us_per_alloc']:.2f} | {r['peak_reserved_bytes'] / 2**20:.1f} | {r['checksum']!r} |")
PY
    done
fi
say summary
cat "$summary"
