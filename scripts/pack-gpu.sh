#!/usr/bin/env bash
# Build, here, what a GPU machine without a Rust toolchain needs, into .gpu/ (git-ignored):
# the devpool command, the C ABI library, the GPU test executables of devpool-cuda and
# devpool-ring, and
# the Python package's wheel (.whl/).
# Then on the GPU machine: scripts/gpu-run.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu
cargo build --release -p devpool-cli -p devpool-ffi
target=${CARGO_TARGET_DIR:-target}
cp "$target/release/devpool" "$target/release/libdevpool_ffi.so" .gpu/
cargo test --release -p devpool-cuda -p devpool-ring --no-run --message-format=json 2>/dev/null | python3 -c '
import json, shutil, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("gpu", "gpu_strategies", "multi_gpu", "ring_gpu"):
        shutil.copy2(m["executable"], ".gpu/test-" + m["target"]["name"])
        print(".gpu/test-" + m["target"]["name"])
'
strip .gpu/* 2>/dev/null || true
du -sh .gpu
# The Python package as a wheel (.whl/, git-ignored), for `pip install` there.
rm -rf .whl && mkdir -p .whl
python3 -m pip wheel -q ./python -w .whl && ls .whl
