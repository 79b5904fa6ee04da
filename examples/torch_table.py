#!/usr/bin/env python3
"""Real PyTorch programs under PyTorch's allocator, expandable segments and devpool, in
one run, as one table (the table of docs/BENCHMARKS.md).

    python3 examples/torch_table.py OUT_DIR [--workloads gpt2-train,llama-generate,vit-train]
                                    [--allocators default,expandable,devpool] [--ddp]
                                    [--steps N] [--rounds R]

Each (workload, allocator) runs in its own process through examples/torch_workloads.py;
with --ddp and at least two GPUs, GPT-2 also trains data-parallel over NCCL on two GPUs
under torchrun. Writes OUT_DIR/runs.jsonl and OUT_DIR/table.md and prints the table:
median step time (and its ratio to the faster PyTorch mode), peak device memory in use
as the driver sees it, peak held by the allocator, peak live bytes, and whether the
training losses are identical to PyTorch's default allocator's.

Step times of one process vary by 10% and more from one process to the next on the
same machine, more than the allocators differ, so with ``--rounds R`` every
(workload, allocator) runs R times, the allocators in turn and in reverse order every
other round (A B C, C B A, ...). The step time is then the mean of every step but the
first (warm-up) over all rounds: each allocator runs the same steps (same shapes, same
seed) as many times, so the ratio compares like with like. Memory figures are the
highest of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 2**30


def run(cmd, env_extra, log):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **env_extra)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    with open(log, "w") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=900)
    rows = []
    for line in open(log):
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return p.returncode, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--workloads", default="gpt2-train,llama-generate,vit-train")
    ap.add_argument("--allocators", default="default,expandable,devpool")
    ap.add_argument("--ddp", action="store_true", help="also GPT-2 over two GPUs with torchrun")
    ap.add_argument("--rounds", type=int, default=1, help="runs of every (workload, allocator), in alternating order")
    ap.add_argument("--steps", default=None,
                    help="steps for every workload (N), or per workload (gpt2-train=10,llama-generate=4)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    script = os.path.join(HERE, "torch_workloads.py")
    results = []
    allocs = args.allocators.split(",")
    jobs = []
    for w in args.workloads.split(","):
        for k in range(max(1, args.rounds)):
            jobs += [(w, a, False, k) for a in (allocs if k % 2 == 0 else allocs[::-1])]
    if args.ddp:
        jobs += [("gpt2-train", a, True, 0) for a in allocs]
    per = {}
    if args.steps:
        for item in args.steps.split(","):
            k, _, v = item.rpartition("=")
            per[k or "*"] = int(v)
    for w, a, ddp, k in jobs:
        tag = f"{w}{'-ddp' if ddp else ''}.{a}" + (f".r{k}" if args.rounds > 1 else "")
        n = per.get(w, per.get("*"))
        steps = ["--steps", str(n)] if n else []
        if ddp:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                   script, w, "--allocator", a, *steps]
        else:
            cmd = [sys.executable, script, w, "--allocator", a, *steps]
        rc, rows = run(cmd, {}, os.path.join(args.out, tag + ".log"))
        for r in rows:
            r["ddp"] = ddp
            r["exit"] = rc
            r["round"] = k
        if not rows:
            rows = [{"workload": w, "allocator": a, "ddp": ddp, "exit": rc, "round": k, "failed": True}]
        print(f"{tag}: exit {rc}", flush=True)
        results += rows
    with open(os.path.join(args.out, "runs.jsonl"), "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    table = render(results)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    print(table)


def merge(rows):
    """One row per allocator from its rounds: step times pooled (every step but each
    run's first), memory the highest, losses those of the first round."""
    out = {}
    for r in rows:
        a = r.get("allocator")
        m = out.get(a)
        if m is None:
            m = out[a] = dict(r, steps_pooled=[], rounds=0)
        if r.get("failed"):
            m["failed"] = True
            continue
        m["rounds"] += 1
        steps = r.get("step_s") or [r["median_step_s"]]
        m["steps_pooled"] += steps[1:] if len(steps) > 1 else steps
        for key in ("peak_driver_used_bytes", "peak_reserved_bytes", "peak_requested_bytes", "peak_allocated_bytes"):
            if isinstance(r.get(key), (int, float)):
                m[key] = max(m.get(key) or 0, r[key])
    for m in out.values():
        if m["steps_pooled"]:
            s = sorted(m["steps_pooled"])
            m["mean_step_s"] = sum(s) / len(s)
            m["median_step_s"] = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    return list(out.values())


def render(results):
    g = lambda b: f"{b / GIB:.2f}" if isinstance(b, (int, float)) and b else "-"
    lines = [
        "| program | allocator | runs | mean step (s) | median step (s) | mean vs faster PyTorch mode | peak device use, driver (GiB) | peak held by allocator (GiB) | peak live (GiB) | losses vs default |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = []
    for r in results:
        k = (r["workload"], r.get("ddp", False))
        if k not in keys:
            keys.append(k)
    for w, ddp in keys:
        rows = merge([r for r in results if r["workload"] == w and r.get("ddp", False) == ddp and r.get("rank", 0) == 0])
        pt = [r["mean_step_s"] for r in rows if r.get("allocator") in ("default", "expandable") and "mean_step_s" in r]
        best = min(pt) if pt else None
        base = next((r for r in rows if r.get("allocator") == "default"), None)
        name = w + (" (DDP, 2 GPUs, rank 0)" if ddp else "")
        for r in rows:
            if r.get("failed"):
                lines.append(f"| {name} | {r['allocator']} | failed (exit {r['exit']}) | | | | | | | |")
                continue
            vs = f"{r['mean_step_s'] / best:.3f}" if best else "-"
            if r.get("losses") and base and base.get("losses"):
                same = r["losses"] == base["losses"]
                diff = max((abs(x - y) for x, y in zip(r["losses"], base["losses"])), default=0.0)
                loss = "identical" if same else f"max diff {diff:.3g}"
            else:
                loss = "-"
            live = r.get("peak_requested_bytes") or r.get("peak_allocated_bytes")
            lines.append(
                f"| {name} | {r['allocator']} | {r['rounds']} | {r['mean_step_s']:.4f} | {r['median_step_s']:.4f} | {vs} | {g(r.get('peak_driver_used_bytes'))} | "
                f"{g(r.get('peak_reserved_bytes'))} | {g(live)} | {loss} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
