#!/usr/bin/env python3
"""Real PyTorch programs under PyTorch's allocator, its expandable segments, the driver's
pool (cudaMallocAsync) or devpool, with what each held; optionally recording the
allocation trace in RMM's log format for `devpool compare`.

    python3 examples/torch_workloads.py WORKLOAD --allocator {default,expandable,async,devpool}
            [--steps N] [--seed S] [--record traces/NAME.csv.gz] [--devpool-strategy hybrid]

Workloads (random weights, no download; seeded):
  gpt2-train      transformers GPT-2 small, fp32, AdamW, batch 4..16, sequence 64..1024
  llama-generate  a Llama-style 1.3B decoder (random weights, bf16) generating with
                  growing KV caches for a stream of requests of varying batch, prompt
                  and output length (the inference server shape)
  bert-serve      a BERT-base encoder (bf16) serving batches of 1..64 requests of
                  16..512 tokens, no grad (the encoder serving shape)
  image-stream    a streaming image pipeline: pinned host batches uploaded, normalised,
                  run through ResNet-50 (bf16, channels-last) and downloaded, three
                  batches in flight, freed in order
  vit-train       timm ViT-B/16 training with bf16 autocast, batch 64
  resnet50-train  torchvision ResNet-50 training, fp32, SGD with momentum, batch 64

Prints one line per step, then one JSON line: step times, losses (training), peak bytes
held by the allocator (its own reserved peak), peak live bytes (allocated and requested,
as the allocator counts them), and the peak of device memory in use as the driver sees
it (NVML, sampled every millisecond in a thread; includes the CUDA context). Under
`torchrun` (gpt2-train only) each rank trains data-parallel over NCCL on its own GPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import sys
import threading
import time

ALLOCATORS = ("default", "expandable", "async", "devpool")
WORKLOADS = ("gpt2-train", "llama-generate", "bert-serve", "image-stream", "vit-train", "resnet50-train")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workload", choices=WORKLOADS)
    p.add_argument("--allocator", choices=ALLOCATORS, default="default")
    p.add_argument("--steps", type=int, default=None, help="steps (or requests); a default per workload")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--record", default=None, help="write the allocation trace (RMM CSV, .gz) here")
    p.add_argument("--devpool-strategy", default=None, help="devpool strategy (default: hybrid)")
    p.add_argument("--json-out", default=None, help="also write the JSON result here")
    return p.parse_args()


def prepare_environment(allocator):
    """What must be set before torch touches CUDA."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    conf = {"expandable": "expandable_segments:True", "async": "backend:cudaMallocAsync"}.get(allocator)
    if conf:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
    else:
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)


class DriverPeak:
    """The peak of device memory in use as the driver reports it, sampled in a thread."""

    def __init__(self, device):
        self.peak = 0
        self._stop = threading.Event()
        self._read = None
        try:
            import pynvml

            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(device)
            self._read = lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used
        except Exception:  # noqa: BLE001 - fall back to the runtime's view
            import torch

            self._read = lambda: (lambda f, t: t - f)(*torch.cuda.mem_get_info(device))
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, int(self._read()))
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.001)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, int(self._read()))


def snapshot_to_rmm_csv(snapshot, path, device):
    """Write a PyTorch memory snapshot's trace of `device` as RMM's CSV (allocations as
    requested, frees when completed)."""
    trace = snapshot["device_traces"][device]
    rows = ["Thread,Time,Action,Pointer,Size,Stream"]
    for e in trace:
        action = {"alloc": "allocate", "free_completed": "free"}.get(e["action"])
        if action is None:
            continue
        us = int(e.get("time_us", 0))
        t = time.localtime(us // 1_000_000)
        stamp = f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{us % 1_000_000:06d}"
        rows.append(f"0,{stamp},{action},{e['addr']:#x},{e['size']},{e.get('stream', 0):#x}")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt") as f:
        f.write("\n".join(rows) + "\n")
    return len(rows) - 1


# ---------------------------------------------------------------- workloads


def gpt2_train(torch, dev, steps, seed, ddp):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config()
    cfg._attn_implementation = "eager"  # deterministic backward
    model = GPT2LMHeadModel(cfg).to(dev).train()
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    rng = random.Random(seed + (torch.distributed.get_rank() if ddp else 0))
    for step in range(steps):
        batch, seq = rng.choice((4, 8, 12, 16)), 64 * rng.randint(1, 16)
        g = torch.Generator().manual_seed(rng.getrandbits(63))
        tokens = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g).to(dev)
        out = model(input_ids=tokens, labels=tokens)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        yield {"loss": out.loss.item(), "batch": batch, "seq": seq}


def llama_generate(torch, dev, steps, seed):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        hidden_size=2048, intermediate_size=5504, num_hidden_layers=24, num_attention_heads=16,
        num_key_value_heads=16, vocab_size=32000, max_position_embeddings=2048,
    )
    with torch.device(dev):  # weights made on the GPU, in bf16, directly
        model = LlamaForCausalLM._from_config(cfg, torch_dtype=torch.bfloat16).eval()
    rng = random.Random(seed)
    for _ in range(steps):
        batch = rng.choice((1, 2, 4, 8, 16))
        prompt, new = rng.randint(16, 512), rng.randint(16, 128)
        g = torch.Generator().manual_seed(rng.getrandbits(63))
        ids = torch.randint(3, cfg.vocab_size, (batch, prompt), generator=g).to(dev)
        with torch.no_grad():
            out = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                min_new_tokens=new, do_sample=False, pad_token_id=0,
            )
        yield {"batch": batch, "prompt": prompt, "new_tokens": out.shape[1] - prompt}


def bert_serve(torch, dev, steps, seed):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    with torch.device(dev):
        model = BertModel._from_config(BertConfig(), torch_dtype=torch.bfloat16).eval()
    rng = random.Random(seed)
    for _ in range(steps):
        batch, seq = rng.randint(1, 64), rng.randint(16, 512)
        g = torch.Generator().manual_seed(rng.getrandbits(63))
        ids = torch.randint(1000, 30000, (batch, seq), generator=g).to(dev)
        mask = torch.ones_like(ids)
        with torch.no_grad():
            pooled = model(input_ids=ids, attention_mask=mask).pooler_output
        emb = pooled.float().cpu()
        yield {"batch": batch, "seq": seq, "checksum": float(emb.sum())}


def image_stream(torch, dev, steps, seed):
    import torchvision

    torch.manual_seed(seed)
    model = torchvision.models.resnet50().to(dev, dtype=torch.bfloat16, memory_format=torch.channels_last).eval()
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1) * 255
    rng = random.Random(seed)
    sizes = [(32, 224), (64, 224), (16, 288), (48, 256)]
    host = {}
    for b, hw in sizes:
        host[(b, hw)] = torch.randint(0, 256, (b, 3, hw, hw), dtype=torch.uint8).pin_memory()
    in_flight = []
    for _ in range(steps):
        key = rng.choice(sizes)
        x = host[key].to(dev, non_blocking=True)  # upload
        x = ((x.float() - mean) / std).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            logits = model(x)
        del x
        probs = torch.softmax(logits.float(), dim=1)
        out = torch.empty(probs.shape, dtype=torch.float32, pin_memory=True)
        out.copy_(probs, non_blocking=True)  # download
        in_flight.append((probs, logits, out))
        if len(in_flight) > 3:  # results retire in order
            p, lg, o = in_flight.pop(0)
            torch.cuda.current_stream().synchronize()
            del p, lg
        yield {"batch": key[0], "size": key[1]}
    in_flight.clear()


def vit_train(torch, dev, steps, seed):
    import timm

    torch.manual_seed(seed)
    model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=1000).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device=dev).manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(64, 3, 224, 224, device=dev, generator=g)
        y = torch.randint(0, 1000, (64,), device=dev, generator=g)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        yield {"loss": loss.item()}


def resnet50_train(torch, dev, steps, seed):
    import torchvision

    torch.manual_seed(seed)
    model = torchvision.models.resnet50().to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator(device=dev).manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(64, 3, 224, 224, device=dev, generator=g)
        y = torch.randint(0, 1000, (64,), device=dev, generator=g)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        yield {"loss": loss.item()}


DEFAULT_STEPS = {
    "gpt2-train": 16, "llama-generate": 8, "bert-serve": 120, "image-stream": 150,
    "vit-train": 12, "resnet50-train": 6,
}


def main():
    args = parse_args()
    prepare_environment(args.allocator)
    ddp = "LOCAL_RANK" in os.environ
    local = int(os.environ.get("LOCAL_RANK", 0))
    if args.allocator == "devpool":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        import devpool.torch

        devpool.torch.enable(strategy=args.devpool_strategy)
    import torch

    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    if ddp:
        torch.distributed.init_process_group("nccl", device_id=dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.workload == "gpt2-train":
        torch.use_deterministic_algorithms(True, warn_only=True)
    steps = args.steps or DEFAULT_STEPS[args.workload]
    if args.record:
        torch.cuda.memory._record_memory_history(max_entries=20_000_000, context=None, stacks="python")
    gen = {
        "gpt2-train": lambda: gpt2_train(torch, dev, steps, args.seed, ddp),
        "llama-generate": lambda: llama_generate(torch, dev, steps, args.seed),
        "bert-serve": lambda: bert_serve(torch, dev, steps, args.seed),
        "image-stream": lambda: image_stream(torch, dev, steps, args.seed),
        "vit-train": lambda: vit_train(torch, dev, steps, args.seed),
        "resnet50-train": lambda: resnet50_train(torch, dev, steps, args.seed),
    }[args.workload]()
    times, infos = [], []
    with DriverPeak(local) as driver:
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        for step, info in enumerate(gen):
            torch.cuda.synchronize(dev)
            t1 = time.perf_counter()
            times.append(t1 - t0)
            t0 = t1
            infos.append(info)
            if local == 0:
                print(f"step {step:4d} {json.dumps(info)} {times[-1] * 1e3:9.1f} ms", flush=True)
    torch.cuda.synchronize(dev)
    m = torch.cuda.memory_stats(dev)
    result = {
        "workload": args.workload,
        "allocator": args.allocator,
        "rank": int(os.environ.get("RANK", 0)),
        "world_size": int(os.environ.get("WORLD_SIZE", 1)),
        "steps": len(times),
        "median_step_s": statistics.median(times[1:] if len(times) > 1 else times),
        "total_s": sum(times),
        "step_s": times,
        "losses": [i["loss"] for i in infos if "loss" in i],
        "peak_reserved_bytes": m.get("reserved_bytes.all.peak"),
        "peak_allocated_bytes": m.get("allocated_bytes.all.peak"),
        "peak_requested_bytes": m.get("requested_bytes.all.peak"),
        "peak_driver_used_bytes": driver.peak,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(dev),
    }
    if args.allocator == "devpool":
        import devpool

        s = devpool.stats(local)
        result["devpool"] = {
            "config": s.get("config"),
            "peak_backend_bytes": s.get("peak_reserved_bytes"),
            "backend_counters": s.get("backend_counters"),
            "driver_calls": s.get("driver_calls"),
        }
    if args.record and local == 0:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        result["trace_events"] = snapshot_to_rmm_csv(snap, args.record, local)
        result["trace"] = args.record
    line = json.dumps(result)
    print(line, flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(line + "\n")
    if ddp:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
