#!/usr/bin/env python3
"""End-to-end training throughput of PyTorch (resident, FSDP2 CPU offload) and RoundPipe.

    python3 torch_train.py --model gpt2-124m|llama-1b|llama-long|tiny-gpt2|tiny-llama \
        --mode resident|fsdp2-offload|roundpipe --seq 1024 --batch B --microbatch M \
        --steps N --warmup W [--cap-gib 24] [--seed 0] [--device cuda|cpu] --out FILE.jsonl

One (model, mode) per process, so an OOM or a crash cannot take other rows down. Appends one JSON
line to --out (schema in README.md, "End-to-end training"); a mode that cannot run writes a record
with status "not run" or "failed" and a one-line reason and the script still exits 0; only bad
arguments exit 2.

The model is built from a transformers config (no downloads), randomly initialised with --seed;
the data is one seeded random batch of batch x seq tokens reused every step (as RoundPipe's and
FSDP's published harnesses do, so the loss falls as the model memorises it). bf16 compute, fp32
master weights and fp32 AdamW state (lr 1e-4, weight decay 0.1, betas 0.9/0.95, eps 1e-8);
batch/microbatch microbatches of gradient accumulation per optimizer step; causal LM loss.

  resident       model, grads and AdamW state on the GPU: fp32 parameters, torch.autocast bf16,
                 torch.optim.AdamW(fused=True) on CUDA (foreach on CPU).
  fsdp2-offload  fully_shard per decoder block and the root, world size 1 (a one-rank process
                 group over a HashStore: no network), CPUOffloadPolicy(pin_memory=True),
                 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32); torch.optim.AdamW on
                 the CPU shards (PyTorch's default implementation for CPU tensors).
  roundpipe      roundpipe 0.1.1: bf16 model in pinned host memory, fp32 optimizer copies
                 (optim_dtype=float32), its CPU Adam with decoupled weight decay (= AdamW), one
                 forward_backward over batch/microbatch RoundPipe microbatches per step, async
                 model.step. Llama: the packaged sequential preset (wrap_model_to_roundpipe,
                 use_sequential_preset=True); GPT-2 (no preset in 0.1.1): a RoundPipe over an
                 nn.Sequential of embeddings / blocks / head+loss built here. See roundpipe.md.

--cap-gib G caps this process's CUDA caching allocator at G GiB
(torch.cuda.set_per_process_memory_fraction), emulating a G GB consumer GPU; 0 (the default): no
cap. Step time: wall clock between the ends of successive steps, each ended by
torch.cuda.synchronize(), after --warmup untimed steps; tokens/s = batch*seq / median step time.
"""
import argparse
import json
import math
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_flops  # noqa: E402

MODELS = ("gpt2-124m", "llama-1b", "llama-long", "tiny-gpt2", "tiny-llama")
MODES = ("resident", "fsdp2-offload", "roundpipe")
LR, WEIGHT_DECAY, BETAS, EPS = 1e-4, 0.1, (0.9, 0.95), 1e-8


class NotRun(Exception):
    """The mode cannot run here (no CUDA, a missing package): status "not run"."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=MODELS)
    p.add_argument("--mode", required=True, choices=MODES)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, required=True, help="sequences per optimizer step")
    p.add_argument("--microbatch", type=int, required=True,
                   help="sequences per forward/backward; batch/microbatch of them per step")
    p.add_argument("--steps", type=int, required=True, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--cap-gib", type=float, default=0.0,
                   help="cap on this process's GPU memory, GiB (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--out", required=True, help="JSONL file the record is appended to")
    p.add_argument("--act-ckpt", action="store_true",
                   help="resident/fsdp2-offload: activation checkpointing per decoder block "
                        "(RoundPipe always recomputes)")
    p.add_argument("--rp-recompute", default="stage", choices=("stage", "layer"),
                   help="RoundPipe recompute_grain (its harness: stage at 2K-token sequences)")
    p.add_argument("--rp-no-compile", action="store_true",
                   help="set RPP_DISABLE_TORCH_COMPILE=1 (no torch.compile in RoundPipe's loss)")
    p.add_argument("--rp-torch-adamw", action="store_true",
                   help="RoundPipe: torch.optim.AdamW on the CPU instead of RoundPipe's compiled "
                        "CPU Adam (used anyway when that one cannot be built)")
    a = p.parse_args(argv)
    for name in ("seq", "batch", "microbatch", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.warmup < 0 or a.cap_gib < 0:
        p.error("--warmup and --cap-gib must be >= 0")
    if a.batch % a.microbatch:
        p.error(f"--batch {a.batch} is not a multiple of --microbatch {a.microbatch}")
    return a


def model_config(name, seq):
    """The transformers config of a named model shape (no downloads)."""
    import transformers
    if name in ("gpt2-124m", "tiny-gpt2"):
        big = name == "gpt2-124m"
        cfg = transformers.GPT2Config(
            n_layer=12 if big else 2, n_embd=768 if big else 64, n_head=12 if big else 4,
            vocab_size=50257 if big else 512, n_positions=max(1024 if big else 128, seq),
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
            bos_token_id=(50257 if big else 512) - 1, eos_token_id=(50257 if big else 512) - 1)
        layers, hidden = cfg.n_layer, cfg.n_embd
    elif name == "llama-long":
        # Long sequences (issue 30): 2 layers, C 1024, Llama 3's 128,256-token vocabulary with an
        # untied head (293M parameters), as e2e_train_bench's llama-long.
        cfg = transformers.LlamaConfig(
            hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=4,
            intermediate_size=4096, vocab_size=128256, max_position_embeddings=max(32768, seq),
            rope_theta=10000.0, tie_word_embeddings=False, attention_dropout=0.0)
        layers, hidden = cfg.num_hidden_layers, cfg.hidden_size
    else:
        big = name == "llama-1b"
        # ~1.1B parameters: a TinyLlama-1.1B-like shape with a 32000 vocabulary, untied LM head.
        cfg = transformers.LlamaConfig(
            hidden_size=2048 if big else 64, num_hidden_layers=16 if big else 2,
            num_attention_heads=32 if big else 4, num_key_value_heads=8 if big else 2,
            intermediate_size=8192 if big else 128, vocab_size=32000 if big else 512,
            max_position_embeddings=max(2048 if big else 128, seq), rope_theta=10000.0,
            tie_word_embeddings=False, attention_dropout=0.0)
        layers, hidden = cfg.num_hidden_layers, cfg.hidden_size
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    return cfg, layers, hidden


def blocks_of(model):
    """The decoder blocks of a GPT-2 or Llama causal LM."""
    if hasattr(model, "transformer"):
        return list(model.transformer.h)
    return list(model.model.layers)


def build_model(args, cfg, device):
    import torch
    import transformers
    torch.manual_seed(args.seed)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.float()
    model.config.use_cache = False
    return model


def make_batch(args, vocab):
    import torch
    g = torch.Generator().manual_seed(args.seed + 1)
    return torch.randint(0, vocab, (args.batch, args.seq), generator=g, dtype=torch.long)


def apply_act_ckpt(model):
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing)
    blocks = set(id(b) for b in blocks_of(model))
    apply_activation_checkpointing(model, check_fn=lambda m: id(m) in blocks)


def adamw(params, device_type, **extra):
    import torch
    kw = dict(lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    kw.update(extra)
    return torch.optim.AdamW(params, **kw)


# ---------------------------------------------------------------- resident / fsdp2-offload


def torch_step_fn(model, opt, chunks, device, autocast):
    """One optimizer step over the microbatches; returns the mean loss as a 0-d tensor."""
    import torch

    def step():
        opt.zero_grad(set_to_none=True)
        total = None
        for ids in chunks:
            ids = ids.to(device, non_blocking=True)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = model(input_ids=ids, labels=ids).loss
            (loss / len(chunks)).backward()
            total = loss.detach() if total is None else total + loss.detach()
        opt.step()
        return total / len(chunks)
    return step


def setup_resident(args, cfg, device, tokens):
    model = build_model(args, cfg, device)
    model.train()
    if args.act_ckpt:
        apply_act_ckpt(model)
    fused = {"fused": True} if device.type == "cuda" else {"foreach": True}
    opt = adamw(model.parameters(), device.type, **fused)
    notes = ["fp32 params, autocast bf16, AdamW " + ("fused" if fused.get("fused") else "foreach")]
    chunks = list(tokens.split(args.microbatch))
    return torch_step_fn(model, opt, chunks, device, autocast=True), notes, None


def setup_fsdp2(args, cfg, device, tokens):
    import torch
    import torch.distributed as dist
    if device.type != "cuda":
        raise NotRun("fsdp2-offload needs a CUDA device (CPUOffloadPolicy offloads from the GPU)")
    try:
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError as e:
        raise NotRun(f"this torch has no FSDP2 fully_shard: {e}")
    if not dist.is_initialized():
        dist.init_process_group(backend="cuda:nccl,cpu:gloo", store=dist.HashStore(),
                                rank=0, world_size=1)
    mesh = init_device_mesh("cuda", (1,))
    model = build_model(args, cfg, device)  # fp32 on the GPU (fast init); fully_shard moves the
    model.train()                           # shards to pinned host memory
    if args.act_ckpt:
        apply_act_ckpt(model)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    off = CPUOffloadPolicy(pin_memory=True)
    for block in blocks_of(model):
        fully_shard(block, mesh=mesh, mp_policy=mp, offload_policy=off)
    fully_shard(model, mesh=mesh, mp_policy=mp, offload_policy=off)
    torch.cuda.empty_cache()
    opt = adamw(model.parameters(), "cpu")
    notes = ["fully_shard per block + root, CPUOffloadPolicy(pin_memory=True), "
             "MixedPrecisionPolicy(bf16, reduce fp32), torch.optim.AdamW default on CPU shards, "
             "gradient sync every microbatch"]
    chunks = list(tokens.split(args.microbatch))
    return torch_step_fn(model, opt, chunks, device, autocast=False), notes, \
        lambda: dist.destroy_process_group()


# ---------------------------------------------------------------- roundpipe


def cap_mem_get_info(cap_bytes):
    """Make torch.cuda.mem_get_info report a cap_bytes GPU. RoundPipe's planner sizes its stages
    from mem_get_info (free + reserved), which set_per_process_memory_fraction does not change."""
    import torch
    real = torch.cuda.mem_get_info

    def capped(device=None):
        free, total = real(device)
        reserved = torch.cuda.memory_reserved(device)
        return max(0, min(free, cap_bytes - reserved)), min(total, cap_bytes)
    torch.cuda.mem_get_info = capped


def gpt2_sequential(model):
    """GPT-2 as an nn.Sequential RoundPipe can pipeline: embeddings, the blocks, final norm + tied
    LM head + loss. Each stage takes and returns (hidden, labels) so labels reach the last stage."""
    import torch
    import torch.nn as nn
    from transformers.modeling_outputs import CausalLMOutputWithPast
    try:
        from roundpipe.models.function import ChunkedCompileLinearForCausalLMLoss as chunked_loss
    except Exception:  # noqa: BLE001
        chunked_loss = None

    class Prefix(nn.Module):
        def __init__(self, tr):
            super().__init__()
            self.wte, self.wpe = tr.wte, tr.wpe

        def forward(self, input_ids=None, labels=None, **kwargs):
            pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            return self.wte(input_ids) + self.wpe(pos), labels

    class Block(nn.Module):
        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, inp):
            hidden, labels = inp
            out = self.block(hidden)  # attention_mask None: causal SDPA
            return (out[0] if isinstance(out, tuple) else out), labels

    class Postfix(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.ln_f, self.lm_head, self.vocab = m.transformer.ln_f, m.lm_head, m.config.vocab_size

        def forward(self, inp):
            hidden, labels = inp
            hidden = self.ln_f(hidden)
            if chunked_loss is not None:  # what RoundPipe's presets use: no full logits tensor
                loss = chunked_loss(hidden, self.lm_head, labels)
            else:
                logits = self.lm_head(hidden).float()
                loss = nn.functional.cross_entropy(
                    logits[:, :-1].reshape(-1, self.vocab), labels[:, 1:].reshape(-1))
            return CausalLMOutputWithPast(loss=loss)

    tr = model.transformer
    return nn.Sequential(Prefix(tr), *[Block(b) for b in tr.h], Postfix(model))


def shim_roundpipe_masks(notes):
    """RoundPipe 0.1.1's model presets call transformers' create_causal_mask(input_embeds=...,
    cache_position=...); later transformers renamed the first to inputs_embeds (the first GPU run:
    the Llama rows failed on it) and may drop the second. Give the presets a create_causal_mask that
    passes what the installed one takes, so the comparison measures RoundPipe, not the rename."""
    import importlib
    import inspect

    try:
        import transformers.masking_utils as mu
    except ImportError:
        return
    original = mu.create_causal_mask
    params = inspect.signature(original).parameters
    takes_any = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
    if "input_embeds" in params or takes_any:
        return

    def compat(*a, **kw):
        if "input_embeds" in kw:
            kw["inputs_embeds"] = kw.pop("input_embeds")
        return original(*a, **{k: v for k, v in kw.items() if k in params})

    patched = []
    for name in ("llama", "qwen3", "qwen3_moe", "gpt_oss"):
        try:
            mod = importlib.import_module(f"roundpipe.models.{name}")
        except Exception:  # noqa: BLE001  (a preset this roundpipe does not have)
            continue
        if getattr(mod, "create_causal_mask", None) is original:
            mod.create_causal_mask = compat
            patched.append(name)
    if patched:
        notes.append("create_causal_mask(input_embeds=) passed as inputs_embeds for RoundPipe's "
                     f"{', '.join(patched)} presets (this transformers renamed it)")


def setup_roundpipe(args, cfg, device, tokens):
    import torch
    if args.rp_no_compile:
        os.environ["RPP_DISABLE_TORCH_COMPILE"] = "1"
    if device.type != "cuda":
        detail = ""
        try:
            import roundpipe
            from roundpipe import RoundPipe, RoundPipeRunConfig, wrap_model_to_roundpipe  # noqa
            from roundpipe.optim import Adam  # noqa: F401
            detail = f" (roundpipe {getattr(roundpipe, '__version__', '?')} imports)"
        except Exception as e:  # noqa: BLE001
            detail = f" (and it does not import: {type(e).__name__}: {e})"
        raise NotRun("roundpipe needs a CUDA device" + detail)
    if args.cap_gib:
        cap_mem_get_info(int(args.cap_gib * 2**30))
    try:
        import roundpipe
        from roundpipe import RoundPipe, RoundPipeRunConfig, wrap_model_to_roundpipe
    except Exception as e:  # noqa: BLE001
        raise NotRun(f"roundpipe does not import: {type(e).__name__}: {e}")
    notes = [f"roundpipe {getattr(roundpipe, '__version__', '?')}"]
    shim_roundpipe_masks(notes)

    model = build_model(args, cfg, device).to(torch.bfloat16)  # init on the GPU, fast
    model.to("cpu")
    model.train()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

    n_micro = args.batch // args.microbatch
    run_cfg = RoundPipeRunConfig(num_microbatch=n_micro, recompute_grain=args.rp_recompute)
    if args.model in ("llama-1b", "llama-long", "tiny-llama"):
        rp = wrap_model_to_roundpipe(model, optim_dtype=torch.float32,
                                     use_sequential_preset=True, model_run_config=run_cfg)
        notes.append("Llama sequential preset")
        kwargs = {"attention_mask": torch.ones_like(tokens), "return_logits": False}
    else:
        rp = RoundPipe(gpt2_sequential(model), optim_dtype=torch.float32, name="gpt2",
                       model_run_config=run_cfg)
        notes.append("GPT-2 as RoundPipe(nn.Sequential(embed, blocks, head+loss)), built here")
        kwargs = {}
    notes.append(f"num_microbatch={n_micro}, recompute_grain={args.rp_recompute}")

    opt = None
    if not args.rp_torch_adamw:
        try:
            from roundpipe.optim import Adam
            opt = Adam(rp.optim_parameters(), lr=LR, betas=BETAS, eps=EPS,
                       weight_decay=WEIGHT_DECAY, decoupled_weight_decay=True)
            notes.append("roundpipe.optim.Adam(decoupled_weight_decay=True)")
        except Exception as e:  # noqa: BLE001  (its C++ kernel is built with ninja + g++ here)
            notes.append(f"roundpipe.optim.Adam unavailable ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:120] if str(e) else ''}); torch AdamW on CPU")
    if opt is None:
        try:
            opt = adamw(rp.optim_parameters(), "cpu", fused=True)
            notes.append("torch.optim.AdamW(fused=True) on CPU")
        except Exception:  # noqa: BLE001
            opt = adamw(rp.optim_parameters(), "cpu")
            notes.append("torch.optim.AdamW on CPU")

    # Compile RoundPipe's chunked LM-head loss for the microbatch shape before the pipeline's
    # threads first need it (its authors' harness does the same warm-up).
    try:
        from roundpipe.models.function import ChunkedCompileLinearForCausalLMLoss
        head = model.lm_head
        lm = torch.nn.Linear(head.in_features, head.out_features, head.bias is not None,
                             device="cuda", dtype=torch.bfloat16)
        h = torch.rand(args.microbatch, args.seq, head.in_features, device="cuda",
                       dtype=torch.bfloat16, requires_grad=True)
        lab = torch.randint(0, cfg.vocab_size, (args.microbatch, args.seq), device="cuda")
        ChunkedCompileLinearForCausalLMLoss(h, lm, lab)
        del lm, h, lab
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001
        notes.append(f"loss pre-compile skipped: {type(e).__name__}")

    def zero_and_step():
        opt.step()
        opt.zero_grad()

    def step():
        loss = rp.forward_backward(
            input_kwargs=dict(input_ids=tokens, labels=tokens, **kwargs),
            loss_fn=lambda outputs, _labels: outputs.loss / n_micro)
        rp.step(zero_and_step)  # async: the CPU optimizer overlaps the next step
        return loss
    notes.append("async step (each iteration uses 1-step-old parameters, as RoundPipe's default)")
    return step, notes, lambda: rp.synchronize()


# ---------------------------------------------------------------- main


def main(argv):
    args = parse_args(argv)
    rec = {"bench": "train", "impl": "roundpipe" if args.mode == "roundpipe" else "torch",
           "mode": args.mode, "model": args.model, "params": None, "seq": args.seq,
           "batch": args.batch, "microbatch": args.microbatch, "steps_timed": 0,
           "step_s_median": None, "step_s_min": None, "step_s_max": None,
           "tokens_per_s": None, "mfu": None, "peak_tflops": None, "gpu": "",
           "cap_gib": args.cap_gib or None, "peak_device_gib": None, "losses": [],
           "status": "failed", "reason": "", "device": args.device}
    try:
        run(args, rec)
        rec["status"] = "ok"
    except NotRun as e:
        rec["status"], rec["reason"] = "not run", str(e)
    except Exception as e:  # noqa: BLE001  (OOM at the cap, an API mismatch, ...)
        oom = type(e).__name__ == "OutOfMemoryError" or "out of memory" in str(e).lower()
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        rec["status"] = "failed"
        rec["reason"] = ("OOM: " if oom else "") + f"{type(e).__name__}: {first}"
        traceback.print_exc()
    line = json.dumps(rec)
    with open(args.out, "a") as f:
        f.write(line + "\n")
    print(line)
    return 0


def run(args, rec):
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise NotRun(f"needs torch and transformers: {e}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise NotRun("no CUDA device")
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        # set_per_process_memory_fraction and friends need an index (torch 2.11: "Expected a
        # torch.device with a specified index"); the current device is the one CUDA_VISIBLE_DEVICES
        # leaves first.
        device = torch.device("cuda", torch.cuda.current_device())
    rec["torch"] = torch.__version__
    rec["transformers"] = transformers.__version__
    if device.type == "cuda":
        rec["gpu"] = torch.cuda.get_device_name(device)
        total = torch.cuda.get_device_properties(device).total_memory
        if args.cap_gib:
            cap = args.cap_gib * 2**30
            if cap > total:
                raise NotRun(f"cap {args.cap_gib} GiB exceeds the GPU's {total / 2**30:.1f} GiB")
            torch.cuda.set_per_process_memory_fraction(cap / total, device)
    else:
        rec["gpu"] = "cpu"
        rec["cap_gib"] = None

    cfg, layers, hidden = model_config(args.model, args.seq)
    rec["layers"], rec["hidden"], rec["vocab"] = layers, hidden, cfg.vocab_size
    tokens = make_batch(args, cfg.vocab_size)
    setup = {"resident": setup_resident, "fsdp2-offload": setup_fsdp2,
             "roundpipe": setup_roundpipe}[args.mode]

    # Parameters of the unwrapped model, counted once (a tied LM head once).
    probe_cfg, _, _ = model_config(args.model, args.seq)
    with torch.device("meta"):
        probe = transformers.AutoModelForCausalLM.from_config(probe_cfg)
    rec["params"] = sum(p.numel() for p in probe.parameters())
    del probe

    step, notes, finish = setup(args, cfg, device, tokens)
    rec["notes"] = notes
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    losses, times = [], []
    sync()
    last = time.perf_counter()
    for i in range(args.warmup + args.steps):
        loss = step()
        sync()
        losses.append(float(loss))
        now = time.perf_counter()
        if i >= args.warmup:
            times.append(now - last)
        last = now
        print(f"step {i}: loss {losses[-1]:.4f}" + (f" {times[-1]:.3f}s" if i >= args.warmup
                                                   else " (warm-up)"), file=sys.stderr)
    if finish:
        finish()
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError(f"non-finite loss: {losses}")

    times.sort()
    med = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] +
                                                                 times[len(times) // 2])
    rec.update(steps_timed=len(times), step_s_median=med, step_s_min=times[0],
               step_s_max=times[-1], tokens_per_s=args.batch * args.seq / med,
               losses=[round(x, 5) for x in losses])
    rec["mfu"], rec["peak_tflops"] = train_flops.mfu(rec["tokens_per_s"], rec["params"], layers,
                                                     hidden, args.seq, rec["gpu"])
    if device.type == "cuda":
        rec["peak_device_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        rec["peak_reserved_gib"] = torch.cuda.max_memory_reserved(device) / 2**30
    if rec["mfu"] is None:
        rec["reason"] = f"mfu null: no bf16 peak known for {rec['gpu']!r}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
