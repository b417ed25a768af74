#!/usr/bin/env python3
"""Golden data for the reference model's mixtures of experts, from transformers' own modules.

Unlike make_golden.py (plain torch mirroring transformers), this runs Qwen3MoeForCausalLM and
MixtralForCausalLM themselves, in fp32 with eager attention, so the routing (softmax, top-k,
renormalisation, the index_add_ over experts) and the load-balancing loss are transformers' code.
It needs a current transformers (written with 4.57.6 and torch 2.15, CPU):

  python3 -m venv /tmp/moe-venv && /tmp/moe-venv/bin/pip install torch transformers==4.57.6
  /tmp/moe-venv/bin/python test/reference/make_moe_golden.py [output_dir [case ...]]

gpt-oss's cases write its checkpoint as transformers does: the experts' fused tensors
(mlp.experts.gate_up_proj [E, C, 2I], gate_up_proj_bias, down_proj, down_proj_bias), in the
model, the gradients and the final parameters alike.

For every case it writes test/reference/golden/<name>/ in make_golden.py's format:
  config.json          the HF config keys the case sets (what a real config.json spells)
  model.safetensors    seeded initial parameters, HF tensor names (one tensor per expert)
  outputs.safetensors  tokens, targets (F32, exact), logits, loss [1] (transformers' loss: the
                       mean cross-entropy plus router_aux_loss_coef * aux_loss when
                       output_router_logits), aux_loss [1], train_losses [10]
  grads.safetensors    d loss / d param
  final.safetensors    parameters after 10 AdamW steps on the same batch

An expert no token routes to in a step gets no gradient from autograd (None), and torch's AdamW
skips such a parameter (no weight decay, no moment decay, no step count). DeepSpeed, FSDP and
Megatron step it on a zero gradient instead, and so does Mobius: the training loop here gives such
parameters a zero gradient before each step, so that the golden steps are those semantics.
"""
import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The batch, the file writer and the training settings are make_golden.py's (same format).
from make_golden import ADAMW, IGNORE_INDEX, TRAIN_STEPS, fixed_batch, write_safetensors  # noqa: E402

COMMON = {
    "vocab_size": 64, "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
    "torch_dtype": "float32",
}
# Qwen3-MoE with a dense layer in the middle (mlp_only_layers), top-2 of 6, no renormalisation,
# no aux loss: the defaults transformers' Qwen3MoeConfig would take for a real checkpoint's keys.
QWEN3_MOE = dict(COMMON, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                 num_hidden_layers=3, head_dim=16, intermediate_size=48, moe_intermediate_size=24,
                 num_experts=6, num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[1],
                 norm_topk_prob=False, output_router_logits=False, router_aux_loss_coef=0.001,
                 attention_bias=False, use_sliding_window=False, tie_word_embeddings=True)
# Top-3 of 8, renormalised (Qwen3-30B-A3B's norm_topk_prob), with the load-balancing loss.
QWEN3_MOE_AUX = dict(QWEN3_MOE, num_hidden_layers=2, mlp_only_layers=[], num_experts=8,
                     num_experts_per_tok=3, norm_topk_prob=True, output_router_logits=True,
                     router_aux_loss_coef=0.05, tie_word_embeddings=False)
# Mixtral: top-2 of 4 (always renormalised), experts intermediate_size wide, with the aux loss.
MIXTRAL_AUX = dict(COMMON, architectures=["MixtralForCausalLM"], model_type="mixtral",
                   num_hidden_layers=2, head_dim=8, intermediate_size=24, num_local_experts=4,
                   num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.02,
                   router_jitter_noise=0.0, sliding_window=None)

# gpt-oss: biased router (softmax over the top-k logits), clamped SwiGLU experts with biases
# (gate_up interleaved, [in, out]), attention sinks, a 4-token window on the even layers, YaRN
# RoPE as the released config sets it (factor 32 over 4096 original positions), biases on q/k/v/o.
# Its checkpoint tensors are the fused ones (mlp.experts.gate_up_proj [E, C, 2I], ...).
GPT_OSS = dict(COMMON, architectures=["GptOssForCausalLM"], model_type="gpt_oss",
               num_hidden_layers=3, head_dim=16, intermediate_size=24, num_local_experts=4,
               num_experts_per_tok=2, sliding_window=4,
               layer_types=["sliding_attention", "full_attention", "sliding_attention"],
               rope_theta=150000.0, rms_norm_eps=1e-5,
               rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                             "beta_slow": 1.0, "truncate": False,
                             "original_max_position_embeddings": 4096},
               router_aux_loss_coef=0.9, output_router_logits=False, swiglu_limit=7.0)
# The same with gate_up weights large enough that the clamps (gate > 7, |up| > 7) hold for a
# share of the rows, so that their zero gradients are covered too.
GPT_OSS_CLAMP = dict(GPT_OSS, num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"])

# name -> (config, seed[, init scale of the experts' gate_up weights])
CASES = {
    "qwen3_moe": (QWEN3_MOE, 11),
    "qwen3_moe_aux": (QWEN3_MOE_AUX, 12),
    "mixtral_aux": (MIXTRAL_AUX, 16),
    "gpt_oss": (GPT_OSS, 21),
    "gpt_oss_clamp": (GPT_OSS_CLAMP, 23, 0.8),
}


def build(cfg):
    klass = {"qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM),
             "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM),
             "gpt_oss": (transformers.GptOssConfig, transformers.GptOssForCausalLM)}
    config_class, model_class = klass[cfg["model_type"]]
    keys = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type", "torch_dtype")}
    config = config_class(**keys, attn_implementation="eager")
    return model_class(config).float().train()


def init_params(model, seed, gate_up_scale=None):
    """Seeded, larger than HF's std 0.02 (as make_golden.py), so routing is far from uniform."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if gate_up_scale is not None and name.endswith("experts.gate_up_proj"):
                p.copy_(gate_up_scale * torch.randn(p.shape, generator=g))
            elif "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def state(model, grads=False):
    """Parameters (or their gradients) by HF name; a tied head appears once, as the embedding."""
    out = {}
    for name, p in model.named_parameters():  # named_parameters skips the tied duplicate
        out[name] = p.grad if grads else p
    return out


def run(model, tokens, targets, **kwargs):
    """transformers' loss: it shifts labels left by one, so labels[t + 1] = targets[t]. The
    config's output_router_logits decides whether the aux loss is in it."""
    labels = torch.full_like(targets, IGNORE_INDEX)
    labels[:, 1:] = targets[:, :-1]
    assert bool((targets[:, -1] == IGNORE_INDEX).all())
    return model(input_ids=tokens, labels=labels, **kwargs)


def routing_margin(model, tokens, targets, k):
    """The smallest gap between the k-th and (k+1)-th router probability over every token and
    MoE layer: a top-k decision this close could flip between two fp32 implementations, which is a
    step in the loss, not an error. Cases keep it above MIN_MARGIN at every training step."""
    if model.config.model_type == "gpt_oss":  # its router_logits are the sparse top-k scores
        logits = []
        hooks = [m.register_forward_hook(lambda m, i, o: logits.append(
                     torch.nn.functional.linear(i[0].reshape(-1, m.hidden_dim), m.weight, m.bias)))
                 for m in model.modules() if isinstance(m, transformers.models.gpt_oss.
                                                        modeling_gpt_oss.GptOssTopKRouter)]
        with torch.no_grad():
            run(model, tokens, targets)
        for h in hooks:
            h.remove()
        probs = torch.softmax(torch.cat(logits, 0), dim=-1).sort(dim=-1, descending=True).values
        return (probs[:, k - 1] - probs[:, k]).min().item()
    with torch.no_grad():
        logits = run(model, tokens, targets, output_router_logits=True).router_logits
    probs = torch.softmax(torch.cat(logits, 0), dim=-1).sort(dim=-1, descending=True).values
    return (probs[:, k - 1] - probs[:, k]).min().item()


MIN_MARGIN = 1e-5


def clamped_share(model, tokens, targets):
    """The share of expert rows whose gate or up the clamps hold (gpt-oss), for the log."""
    held, total = [0], [0]

    def hook(m, i, o):
        x = i[0].reshape(-1, m.hidden_size)
        for e in range(m.num_experts):
            gu = x @ m.gate_up_proj[e] + m.gate_up_proj_bias[e]
            gate, up = gu[..., ::2], gu[..., 1::2]
            held[0] += int(((gate > m.limit) | (up.abs() > m.limit)).sum())
            total[0] += gate.numel()
    hooks = [m.register_forward_hook(hook) for m in model.modules()
             if isinstance(m, transformers.models.gpt_oss.modeling_gpt_oss.GptOssExperts)]
    with torch.no_grad():
        run(model, tokens, targets)
    for h in hooks:
        h.remove()
    return held[0] / max(1, total[0])


def make_case(out_dir, name, cfg, seed, gate_up_scale=None):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    model = build(cfg)
    init_params(model, seed, gate_up_scale)
    write_safetensors(os.path.join(d, "model.safetensors"), state(model))

    tokens, targets = fixed_batch(cfg["vocab_size"], seed)
    if cfg["model_type"] == "gpt_oss":  # its aux loss is not modelled (families/gpt_oss.cc)
        aux = torch.zeros(())
        print(f"{name}: clamped share of expert values (all experts, all rows): "
              f"{clamped_share(model, tokens, targets):.3f}")
    else:
        with torch.no_grad():  # the aux loss alone, also where the loss leaves it out
            aux = run(model, tokens, targets, output_router_logits=True).aux_loss
    out = run(model, tokens, targets)
    out.loss.backward()
    write_safetensors(os.path.join(d, "grads.safetensors"), state(model, grads=True))
    outputs = {"tokens": tokens.float(), "targets": targets.float(), "logits": out.logits,
               "loss": out.loss.reshape(1)}
    if cfg["model_type"] != "gpt_oss":
        outputs["aux_loss"] = aux.reshape(1)

    opt = torch.optim.AdamW(list(model.parameters()), **ADAMW)
    losses = []
    k = cfg["num_experts_per_tok"]
    for i in range(TRAIN_STEPS):
        margin = routing_margin(model, tokens, targets, k)
        if margin < MIN_MARGIN:
            sys.exit(f"make_moe_golden.py: {name} step {i}: top-{k} routing margin {margin:.2e} "
                     f"< {MIN_MARGIN:g}: a near-tie; pick another seed")
        opt.zero_grad()
        step = run(model, tokens, targets)
        step.loss.backward()
        for p in model.parameters():  # ZERO_GRAD_FOR_UNROUTED_EXPERTS (the docstring)
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        opt.step()
        losses.append(step.loss.item())
    outputs["train_losses"] = torch.tensor(losses)
    write_safetensors(os.path.join(d, "final.safetensors"), state(model))
    write_safetensors(os.path.join(d, "outputs.safetensors"), outputs)
    print(f"{name}: loss {out.loss.item():.6f} (aux {aux.item():.6f}), "
          f"after {TRAIN_STEPS} steps {losses[-1]:.6f}")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "golden")
    names = sys.argv[2:] or list(CASES)
    for name in names:
        if name not in CASES:
            sys.exit(f"make_moe_golden.py: unknown case {name!r} (known: {', '.join(CASES)})")
        make_case(out_dir, name, *CASES[name])


if __name__ == "__main__":
    main()
