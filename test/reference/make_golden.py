#!/usr/bin/python3
"""Golden data for the fp32 CPU reference model (worker/reference/).

Runs with Debian's PyTorch (python3-torch, 1.13, CPU) and nothing else: the tiny GPT-2 and
Llama-family models below are written in plain torch and mirror the Hugging Face implementations
(transformers' modeling_gpt2.py, modeling_llama.py, modeling_qwen2.py, modeling_qwen3.py and
modeling_rope_utils.py) operation by operation, in fp32.

For every configuration it writes test/reference/golden/<name>/:
  config.json          HF field names, as the real checkpoints spell them
  model.safetensors    seeded initial parameters, HF tensor names
  outputs.safetensors  tokens [B,T] and targets [B,T] (as F32, exact), logits [B,T,V], loss [1],
                       and (when trained) train_losses [10]
  grads.safetensors    d loss / d param for every parameter, named like the parameters
  final.safetensors    (when trained) parameters after 10 AdamW steps on the same batch

Usage: /usr/bin/python3 test/reference/make_golden.py [output_dir [case ...]]
"""
import json
import math
import os
import struct
import sys

import torch

B, T = 2, 16
IGNORE_INDEX = -100
TRAIN_STEPS = 10
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, eps=1e-8)

# ---------------------------------------------------------------------------------------------
# Configurations (config.json contents).

GPT2 = {
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 64, "n_embd": 32,
    "n_layer": 2, "n_head": 4, "n_positions": 32, "n_ctx": 32, "n_inner": None,
    "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True,
    "bos_token_id": 63, "eos_token_id": 63, "torch_dtype": "float32",
}
LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64,
    "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 32,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None, "hidden_act": "silu",
    "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
}
QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 64,
    "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "rope_scaling": None, "hidden_act": "silu", "attention_bias": False,
    "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
}
# Llama 3.1-style frequency remapping. head_dim 8, theta 1e4: wavelengths 6.3, 63, 628, 6283, so
# with original_max_position_embeddings 64 (low/high wavelength 64/16) every branch is exercised.
LLAMA3_ROPE = dict(LLAMA, rope_scaling={
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64})
# Qwen2: q/k/v biases (and no o_proj bias), plus linear RoPE scaling.
QWEN2_LINEAR = dict(LLAMA, architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                    rope_theta=1000000.0, rope_scaling={"rope_type": "linear", "factor": 2.0},
                    tie_word_embeddings=True)
QWEN2_LINEAR.pop("attention_bias")
QWEN2_LINEAR.pop("mlp_bias")

# name -> (config, seed, train?)
CASES = {
    "gpt2": (GPT2, 1, True),
    "llama_gqa": (LLAMA, 2, True),
    "qwen3": (QWEN3, 3, True),
    "llama3_rope": (LLAMA3_ROPE, 4, False),
    "qwen2_linear_rope": (QWEN2_LINEAR, 5, False),
}

# Generated on demand only (too large to keep in the tree): `make_golden.py OUT_DIR NAME`.
# llama_vocab128k: Llama 3's 128,256-token vocabulary, so that the LM head's token chunks are checked
# at the width that makes them necessary (ctest units_vocab128k_test builds it at test time). Its
# parameters are rounded to bf16 before anything is computed ("bf16_weights"), so PyTorch's loss and
# gradients are those of exactly the weights our bf16 units run.
EXTRA_CASES = {
    "llama_vocab128k": (dict(LLAMA, vocab_size=128256), 6, False),
}
BF16_WEIGHTS = {"llama_vocab128k"}

# ---------------------------------------------------------------------------------------------
# Parameters.


def param_shapes(cfg):
    """HF tensor names and shapes, in the order the modules declare them."""
    shapes = {}
    if cfg["model_type"] == "gpt2":
        C, V, I = cfg["n_embd"], cfg["vocab_size"], cfg["n_inner"] or 4 * cfg["n_embd"]
        shapes["transformer.wte.weight"] = [V, C]
        shapes["transformer.wpe.weight"] = [cfg["n_positions"], C]
        for i in range(cfg["n_layer"]):
            p = f"transformer.h.{i}."
            shapes[p + "ln_1.weight"] = [C]; shapes[p + "ln_1.bias"] = [C]
            shapes[p + "attn.c_attn.weight"] = [C, 3 * C]; shapes[p + "attn.c_attn.bias"] = [3 * C]
            shapes[p + "attn.c_proj.weight"] = [C, C]; shapes[p + "attn.c_proj.bias"] = [C]
            shapes[p + "ln_2.weight"] = [C]; shapes[p + "ln_2.bias"] = [C]
            shapes[p + "mlp.c_fc.weight"] = [C, I]; shapes[p + "mlp.c_fc.bias"] = [I]
            shapes[p + "mlp.c_proj.weight"] = [I, C]; shapes[p + "mlp.c_proj.bias"] = [C]
        shapes["transformer.ln_f.weight"] = [C]; shapes["transformer.ln_f.bias"] = [C]
        return shapes
    C, V, I = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or C // H
    qkv_bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)
    o_bias = cfg["model_type"] != "qwen2" and cfg.get("attention_bias", False)
    shapes["model.embed_tokens.weight"] = [V, C]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = [C]
        for proj, rows in (("q", H * hd), ("k", KV * hd), ("v", KV * hd)):
            shapes[p + f"self_attn.{proj}_proj.weight"] = [rows, C]
            if qkv_bias:
                shapes[p + f"self_attn.{proj}_proj.bias"] = [rows]
        shapes[p + "self_attn.o_proj.weight"] = [C, H * hd]
        if o_bias:
            shapes[p + "self_attn.o_proj.bias"] = [C]
        if cfg["model_type"] == "qwen3":
            shapes[p + "self_attn.q_norm.weight"] = [hd]
            shapes[p + "self_attn.k_norm.weight"] = [hd]
        shapes[p + "post_attention_layernorm.weight"] = [C]
        shapes[p + "mlp.gate_proj.weight"] = [I, C]
        shapes[p + "mlp.up_proj.weight"] = [I, C]
        shapes[p + "mlp.down_proj.weight"] = [C, I]
    shapes["model.norm.weight"] = [C]
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [V, C]
    return shapes


def init_params(cfg, seed):
    """Seeded parameters. Larger than HF's std 0.02 and with non-trivial norm weights and biases,
    so that attention is far from uniform and every term of every op matters."""
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in param_shapes(cfg).items():
        if "norm" in name or ".ln_" in name:
            t = 1.0 + 0.1 * torch.randn(shape, generator=g) if name.endswith("weight") \
                else 0.05 * torch.randn(shape, generator=g)
        elif name.endswith("bias"):
            t = 0.05 * torch.randn(shape, generator=g)
        elif "wte" in name or "wpe" in name or "embed_tokens" in name:
            t = 0.3 * torch.randn(shape, generator=g)
        else:
            t = 0.15 * torch.randn(shape, generator=g)
        params[name] = torch.nn.Parameter(t.float())
    return params


# ---------------------------------------------------------------------------------------------
# Ops, as Hugging Face writes them.


def gelu_new(x):  # transformers.activations.NewGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def rms_norm(x, weight, eps):  # LlamaRMSNorm / Qwen3RMSNorm
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rope_inv_freq(cfg, head_dim):  # modeling_rope_utils._compute_{default,linear,llama3}_...
    base = cfg["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    scaling = cfg.get("rope_scaling")
    if not scaling:
        return inv_freq
    if scaling["rope_type"] == "linear":
        return inv_freq / scaling["factor"]
    assert scaling["rope_type"] == "llama3"
    factor = scaling["factor"]
    low_freq_factor, high_freq_factor = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rope_cos_sin(cfg, head_dim, seq_len):  # LlamaRotaryEmbedding.forward
    inv_freq = rope_inv_freq(cfg, head_dim)
    position_ids = torch.arange(seq_len)[None, :]
    freqs = (inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()  # [1, T, head_dim]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def causal_attention(q, k, v, scaling):
    """q [B,H,T,hd], k/v [B,H,T,hd] (already repeated for GQA) -> [B,T,H*hd]."""
    t = q.shape[2]
    w = torch.matmul(q, k.transpose(2, 3)) * scaling
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
    w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
    w = torch.softmax(w, dim=-1, dtype=torch.float32)
    out = torch.matmul(w, v)  # [B,H,T,hd]
    return out.transpose(1, 2).reshape(q.shape[0], t, -1)


def cross_entropy(logits, targets):
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX)


# ---------------------------------------------------------------------------------------------
# Models.


def gpt2_forward(cfg, P, tokens):  # GPT2LMHeadModel
    C, H = cfg["n_embd"], cfg["n_head"]
    hd = C // H
    eps = cfg["layer_norm_epsilon"]
    b, t = tokens.shape
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (C,), P[p + ".weight"], P[p + ".bias"], eps)
    conv1d = lambda x, p: torch.addmm(P[p + ".bias"], x.reshape(-1, x.shape[-1]),
                                      P[p + ".weight"]).view(b, t, -1)
    x = P["transformer.wte.weight"][tokens] + P["transformer.wpe.weight"][torch.arange(t)][None]
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=2)
        heads = lambda z: z.view(b, t, H, hd).permute(0, 2, 1, 3)
        a = causal_attention(heads(q), heads(k), heads(v), 1.0 / math.sqrt(hd))
        x = x + conv1d(a, p + "attn.c_proj")
        m = conv1d(gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
        x = x + m
    x = ln(x, "transformer.ln_f")
    return x @ P["transformer.wte.weight"].t()


def llama_forward(cfg, P, tokens):  # LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM
    C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or C // H
    eps = cfg["rms_norm_eps"]
    b, t = tokens.shape
    cos, sin = rope_cos_sin(cfg, hd, t)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [1,1,T,hd]

    def linear(x, p):
        bias = P.get(p + ".bias")
        return torch.nn.functional.linear(x, P[p + ".weight"], bias)

    x = P["model.embed_tokens.weight"][tokens]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, P[p + "input_layernorm.weight"], eps)
        q = linear(h, p + "self_attn.q_proj").view(b, t, -1, hd)
        k = linear(h, p + "self_attn.k_proj").view(b, t, -1, hd)
        v = linear(h, p + "self_attn.v_proj").view(b, t, -1, hd).transpose(1, 2)
        if cfg["model_type"] == "qwen3":
            q = rms_norm(q, P[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, P[p + "self_attn.k_norm.weight"], eps)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        n_rep = H // KV  # repeat_kv: kv head j serves q heads j*n_rep .. j*n_rep+n_rep-1
        k = k[:, :, None].expand(b, KV, n_rep, t, hd).reshape(b, H, t, hd)
        v = v[:, :, None].expand(b, KV, n_rep, t, hd).reshape(b, H, t, hd)
        a = causal_attention(q, k, v, hd ** -0.5)
        x = x + linear(a, p + "self_attn.o_proj")
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"], eps)
        act = torch.nn.functional.silu(linear(h, p + "mlp.gate_proj")) * linear(h, p + "mlp.up_proj")
        x = x + linear(act, p + "mlp.down_proj")
    x = rms_norm(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    return x @ head.t()


def forward(cfg, P, tokens):
    return gpt2_forward(cfg, P, tokens) if cfg["model_type"] == "gpt2" else llama_forward(cfg, P, tokens)


# ---------------------------------------------------------------------------------------------
# Output.


def write_safetensors(path, tensors):
    """8-byte LE header length, JSON header (sorted names, F32), raw little-endian bytes."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data section 8-byte aligned, as the HF writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def fixed_batch(vocab, seed):
    g = torch.Generator().manual_seed(1000 + seed)
    tokens = torch.randint(0, vocab, (B, T), generator=g)
    targets = torch.full((B, T), IGNORE_INDEX, dtype=torch.int64)
    targets[:, :-1] = tokens[:, 1:]  # next-token prediction; the last position is ignored
    targets[0, 3] = IGNORE_INDEX     # and a few more, as padding would
    targets[1, 7:9] = IGNORE_INDEX
    return tokens, targets


def make_case(out_dir, name, cfg, seed, train):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    P = init_params(cfg, seed)
    if name in BF16_WEIGHTS:
        with torch.no_grad():
            for p in P.values():
                p.copy_(p.bfloat16().float())
    write_safetensors(os.path.join(d, "model.safetensors"), P)

    tokens, targets = fixed_batch(cfg["vocab_size"], seed)
    logits = forward(cfg, P, tokens)
    loss = cross_entropy(logits, targets)
    loss.backward()
    write_safetensors(os.path.join(d, "grads.safetensors"), {n: p.grad for n, p in P.items()})
    outputs = {"tokens": tokens.float(), "targets": targets.float(), "logits": logits,
               "loss": loss.reshape(1)}

    if train:
        opt = torch.optim.AdamW(list(P.values()), **ADAMW)
        losses = []
        for _ in range(TRAIN_STEPS):
            opt.zero_grad()
            step_loss = cross_entropy(forward(cfg, P, tokens), targets)
            step_loss.backward()
            opt.step()
            losses.append(step_loss.item())
        outputs["train_losses"] = torch.tensor(losses)
        write_safetensors(os.path.join(d, "final.safetensors"), P)
        print(f"{name}: loss {loss.item():.6f}, after {TRAIN_STEPS} steps {losses[-1]:.6f}")
    else:
        print(f"{name}: loss {loss.item():.6f}")
    write_safetensors(os.path.join(d, "outputs.safetensors"), outputs)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)  # deterministic reductions
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "golden")
    names = sys.argv[2:]  # none: every case of CASES (the tree's golden data)
    cases = {**CASES, **EXTRA_CASES}
    for name in names:
        if name not in cases:
            sys.exit(f"make_golden.py: unknown case {name!r} (known: {', '.join(cases)})")
    for name in names or CASES:
        cfg, seed, train = cases[name]
        make_case(out_dir, name, cfg, seed, train)


if __name__ == "__main__":
    main()
