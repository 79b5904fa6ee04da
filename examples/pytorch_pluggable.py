#!/usr/bin/env python3
"""Train GPT-2 small through PyTorch's allocator, its expandable segments, or devpool.

    python3 examples/pytorch_pluggable.py --allocator devpool --steps 20

The model is GPT-2 small (124M parameters) built from ``GPT2Config()`` with random
weights (no download), trained in fp32 with AdamW on random tokens, with a batch
size drawn from (4, 8, 12, 16) and a sequence length from 64..1024 (multiples of 64)
at every step. Everything is seeded, and deterministic algorithms are requested, so
the three allocators must print the same losses step for step.

Allocators:
  default     PyTorch's caching allocator
  expandable  the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  devpool     libdevpool_ffi.so through torch.cuda.memory.CUDAPluggableAllocator
              (path: --lib, else $DEVPOOL_LIB, else .gpu/libdevpool_ffi.so)

Prints one line per step (loss, batch, sequence length, step time), then one JSON
line: losses, median step time, peak reserved bytes (PyTorch's
``reserved_bytes.all.peak``; for devpool the device memory its backend held at
peak) and peak allocated bytes.
"""

import argparse
import ctypes
import json
import os
import random
import statistics
import sys
import time

ALLOCATORS = ("default", "expandable", "devpool")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--allocator", choices=ALLOCATORS, default="default")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seq", type=int, default=1024, help="longest sequence (multiple of 64)")
    p.add_argument("--lib", default=os.environ.get("DEVPOOL_LIB", ".gpu/libdevpool_ffi.so"))
    p.add_argument(
        "--devpool-config",
        default="strategy=hybrid",
        help="devpool configuration string (backend=cuda is added)",
    )
    p.add_argument("--device", type=int, default=0)
    return p.parse_args()


def prepare_environment(args):
    """Settings that must be in place before torch touches CUDA."""
    # cuBLAS needs a fixed workspace configuration to be deterministic.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if args.allocator == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    elif os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None) is not None:
        print("note: PYTORCH_CUDA_ALLOC_CONF ignored for this allocator", file=sys.stderr)


class Devpool:
    """The devpool library, loaded with ctypes and configured before any allocation."""

    def __init__(self, path, config):
        if not os.path.exists(path):
            sys.exit(f"devpool library not found at {path} (set --lib or DEVPOOL_LIB)")
        self.path = os.path.abspath(path)
        self.lib = ctypes.CDLL(self.path)
        self.lib.devpool_configure.argtypes = [ctypes.c_char_p]
        self.lib.devpool_configure.restype = ctypes.c_int
        self.lib.devpool_stats_json.argtypes = [ctypes.c_int]
        self.lib.devpool_stats_json.restype = ctypes.c_void_p
        self.lib.devpool_string_free.argtypes = [ctypes.c_void_p]
        self.lib.devpool_last_error.restype = ctypes.c_char_p
        self.lib.devpool_version.restype = ctypes.c_char_p
        full = f"backend=cuda;{config}"
        rc = self.lib.devpool_configure(full.encode())
        if rc != 0:
            sys.exit(f"devpool_configure({full!r}) = {rc}: {self.last_error()}")
        self.config = full

    def last_error(self):
        return self.lib.devpool_last_error().decode(errors="replace")

    def version(self):
        return self.lib.devpool_version().decode()

    def stats(self, device):
        p = self.lib.devpool_stats_json(device)
        if not p:
            raise RuntimeError(f"devpool_stats_json: {self.last_error()}")
        try:
            return json.loads(ctypes.string_at(p).decode())
        finally:
            self.lib.devpool_string_free(p)

    def install(self, torch):
        """Make devpool PyTorch's CUDA allocator (before the first CUDA allocation)."""
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            self.path, "devpool_malloc", "devpool_free"
        )
        torch.cuda.memory.change_current_allocator(alloc)
        self.allocator = alloc  # keep it alive


def build_model(torch, seed):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    # Eager attention: its backward is deterministic, unlike the fused kernels.
    try:
        cfg = GPT2Config(attn_implementation="eager")
    except TypeError:
        cfg = GPT2Config()
    cfg._attn_implementation = "eager"
    return GPT2LMHeadModel(cfg), cfg


def schedule(seed, steps, max_seq):
    """The (batch, sequence length, token seed) of every step, from the seed alone."""
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        batch = rng.choice((4, 8, 12, 16))
        seq = 64 * rng.randint(1, max(1, max_seq // 64))
        out.append((batch, seq, rng.getrandbits(63)))
    return out


def main():
    args = parse_args()
    prepare_environment(args)
    dp = Devpool(args.lib, args.devpool_config) if args.allocator == "devpool" else None

    import torch

    if dp is not None:
        dp.install(torch)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    torch.cuda.manual_seed_all(args.seed)
    model, cfg = build_model(torch, args.seed)
    model = model.to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    print(
        f"allocator={args.allocator} torch={torch.__version__} "
        f"gpu={torch.cuda.get_device_name(dev)} attention={getattr(cfg, '_attn_implementation', '?')}"
        + (f" devpool={dp.version()} config={dp.config}" if dp else ""),
        flush=True,
    )

    losses, times = [], []
    for step, (batch, seq, token_seed) in enumerate(
        schedule(args.seed, args.steps, args.max_seq)
    ):
        g = torch.Generator().manual_seed(token_seed)
        tokens = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g).to(dev)
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        out = model(input_ids=tokens, labels=tokens)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss = out.loss.item()  # waits for the step
        dt = time.perf_counter() - t0
        del out, tokens
        losses.append(loss)
        times.append(dt)
        print(
            f"step {step:4d}  batch {batch:2d}  seq {seq:4d}  loss {loss:.6f}  {dt * 1e3:8.1f} ms",
            flush=True,
        )

    torch.cuda.synchronize(dev)
    result = {
        "allocator": args.allocator,
        "steps": args.steps,
        "seed": args.seed,
        "losses": losses,
        # The first step pays for cuBLAS and kernel set-up: leave it out when there
        # are others.
        "median_step_s": statistics.median(times[1:] if len(times) > 1 else times),
        "first_step_s": times[0] if times else None,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(dev),
    }
    if dp is not None:
        s = dp.stats(args.device)
        result["peak_reserved_bytes"] = s["peak_reserved_bytes"]
        result["reserved_bytes"] = s["reserved_bytes"]
        result["peak_allocated_bytes"] = s["stats"]["allocated_bytes"]["peak"]
        result["devpool"] = {
            "version": dp.version(),
            "config": s["config"],
            "stats": s["stats"],
            "backend_counters": s["backend_counters"],
            "bad_calls": s["bad_calls"],
            "routes": s["routes"],
        }
    else:
        m = torch.cuda.memory_stats(dev)
        result["peak_reserved_bytes"] = m["reserved_bytes.all.peak"]
        result["reserved_bytes"] = m["reserved_bytes.all.current"]
        result["peak_allocated_bytes"] = m["allocated_bytes.all.peak"]
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
