#!/work/venv-peft/bin/python
"""Golden data for LoRA fine-tuning, with Hugging Face PEFT itself as the oracle.

Unlike make_golden.py (plain torch), this runs the real transformers model classes
(GPT2LMHeadModel, LlamaForCausalLM) with peft's LoRA on top. It needs the pinned packages of
deploy/requirements-peft.txt in a venv that sees Debian's PyTorch 1.13 (python3-torch):

  /usr/bin/python3 -m venv --system-site-packages /work/venv-peft
  /work/venv-peft/bin/pip install --no-deps -r deploy/requirements-peft.txt
  /work/venv-peft/bin/python test/reference/make_lora_golden.py [output_dir]

(--no-deps: Debian's torch calls itself 1.13.0a0, which does not satisfy peft's "torch>=1.13.0",
so pip would otherwise try to bring in a torch wheel.)

Base models are the fp32 golden models of make_golden.py, loaded with from_pretrained from
test/reference/golden/<base>/ (config.json + model.safetensors), eager attention, eval() mode
throughout (GPT2Config's default dropouts are 0.1; eval() turns them off; lora_dropout is 0).

  .../python test/reference/make_lora_golden.py [output_dir [case ...]]

For every case below it writes test/reference/golden_lora/<name>/:
  adapter_config.json, adapter_model.safetensors
                       the INITIAL adapter, exactly as PeftModel.save_pretrained writes it
                       (LoraConfig r=4, lora_alpha=8 -> scaling 2.0, bias="none",
                       init_lora_weights=False: lora_A and lora_B both keep nn.Linear's default
                       kaiming_uniform(a=sqrt(5)) init, so B != 0; torch seeded before
                       get_peft_model)
  outputs.safetensors  tokens [B,T], targets [B,T] (F32, exact; the base golden's batch),
                       logits [B,T,V] and loss [1] of the initial adapted model,
                       train_losses [5] (loss before each AdamW step; train_losses[0] == loss),
                       final_loss [1] (adapter after 5 steps), merged_loss [1] (merge_and_unload
                       model after training; equals final_loss)
  grads.safetensors    d loss / d param for every lora_A / lora_B weight at the initial adapter,
                       named as in adapter_model.safetensors (no ".default")
  final_adapter.safetensors
                       the adapter after 5 steps of AdamW(lr=1e-2, betas=(0.9, 0.95), eps=1e-8,
                       weight_decay=0) on the same batch, adapters only, no clipping (as
                       save_pretrained writes adapter_model.safetensors)
  merged.safetensors   base weights with the trained adapter merged (merge_and_unload), HF names,
                       same tensor set as the base model.safetensors (tied lm_head not repeated)

Loss convention (same as make_golden.py): targets are ALREADY shifted, targets[b, t] =
tokens[b, t+1], the last position and a few others are -100 (ignored); loss = mean cross-entropy
of logits[b, t] against targets[b, t] over the non-ignored positions, with no further shift. This
equals HF's own `labels=` loss (which shifts labels left by one inside the model) for
labels[:, 1:] = targets[:, :-1]; the script checks that.

Independent checks (asserted, printed): the initial loss and LoRA gradients recomputed with
make_golden.py's plain-torch forward on W + (alpha/r) * B @ A (transposed for GPT-2's Conv1D,
whose weight is [in, out]); HF model == base golden logits; merged weights == W + delta by hand.
"""
import json
import os
import shutil
import sys
import tempfile
import warnings

# LoraConfig keeps target_modules as a set and save_pretrained writes list(set): fix the string hash
# seed so that adapter_config.json comes out the same on every run.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch  # noqa: E402
import peft  # noqa: E402
import safetensors  # noqa: E402
import safetensors.torch  # noqa: E402
import transformers  # noqa: E402
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import make_golden  # noqa: E402  (plain-torch forward, writer, base configs and seeds)

# PEFT asks the Hub whether the base's config.json changed the vocabulary (offline: it can't, and
# assumes not, which is right here: no embedding layer is a target).
warnings.filterwarnings("ignore", message="Could not find a config file in")

R, ALPHA = 4, 8
TRAIN_STEPS = 5
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.0, eps=1e-8)
LLAMA_ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# "c_proj" matches both attn.c_proj and mlp.c_proj (PEFT matches on the name's last component).
GPT2_ALL = ["c_attn", "c_proj", "c_fc"]

# name -> (base golden dir, model class, target_modules, adapter seed)
CASES = {
    "gpt2": ("gpt2", transformers.GPT2LMHeadModel, GPT2_ALL, 11),
    "gpt2_c_attn": ("gpt2", transformers.GPT2LMHeadModel, ["c_attn"], 12),
    "llama_gqa": ("llama_gqa", transformers.LlamaForCausalLM, LLAMA_ALL, 21),
    "llama_gqa_qv": ("llama_gqa", transformers.LlamaForCausalLM, ["q_proj", "v_proj"], 22),
}
# Mixtures of experts (bases from make_moe_golden.py, loaded without the load-balancing loss): every
# expert's modules adapted, as PEFT matches "w1" or "gate_proj" in every expert (Qwen3-MoE's
# "gate_proj" also its dense layer 1's MLP); the router stays frozen. Qwen3-MoE needs transformers
# >= 4.51 (make_moe_golden.py's venv, with peft 0.10 added); a case whose class this transformers
# lacks is skipped, saying so:
#   /tmp/moe-venv/bin/python test/reference/make_lora_golden.py test/reference/golden_lora qwen3_moe_experts
CASES["mixtral_experts"] = ("mixtral_aux", getattr(transformers, "MixtralForCausalLM", None),
                            ["q_proj", "v_proj", "w1", "w2", "w3"], 31)
CASES["qwen3_moe_experts"] = ("qwen3_moe", getattr(transformers, "Qwen3MoeForCausalLM", None),
                              ["q_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 34)
MOE_BASES = {"mixtral_aux": 16, "qwen3_moe": 11}  # make_moe_golden.py's seeds
# The smallest gap allowed between the k-th and (k+1)-th router probability of the initial adapted
# model: our bf16 routing must make PEFT's fp32 decisions (a flip is a step, not an error).
MIN_MARGIN = 1e-3


def ce(logits, targets):
    return make_golden.cross_entropy(logits, targets)


def check(what, got, want, tol):
    err = (got - want).abs().max().item() if torch.is_tensor(got) else abs(got - want)
    print(f"    {what}: max |diff| {err:.3g}")
    assert err <= tol, f"{what}: {err} > {tol}"


def hand_weights(cfg, base, adapter, conv1d):
    """Base parameters with W + (alpha/r) * B @ A applied by hand; A/B are the given tensors."""
    P = dict(base)
    for key, A in adapter.items():
        if ".lora_A." not in key:
            continue
        module = key[len("base_model.model."):-len(".lora_A.weight")]
        B = adapter[key.replace(".lora_A.", ".lora_B.")]
        delta = (ALPHA / R) * (B @ A)  # [out, in]
        P[module + ".weight"] = P[module + ".weight"] + (delta.t() if conv1d else delta)
    return P


def load_base(cls, base_dir, **kwargs):
    """cls.from_pretrained(base_dir) in fp32, eager attention. transformers 4.40 wants the
    safetensors metadata {"format": "pt"}, which make_golden.py's writer leaves out: then the
    model loads from a temporary copy that has it, and keeps base_dir as its name (what
    adapter_config.json records)."""
    path = os.path.join(base_dir, "model.safetensors")
    with safetensors.safe_open(path, framework="pt") as f:
        has_format = (f.metadata() or {}).get("format") == "pt"
    with tempfile.TemporaryDirectory() as tmp:
        src = base_dir
        if not has_format:
            shutil.copyfile(os.path.join(base_dir, "config.json"), os.path.join(tmp, "config.json"))
            safetensors.torch.save_file(load_file(path), os.path.join(tmp, "model.safetensors"),
                                        metadata={"format": "pt"})
            src = tmp
        out = cls.from_pretrained(src, torch_dtype=torch.float32, attn_implementation="eager",
                                  **kwargs)
    model = out[0] if isinstance(out, tuple) else out
    model.config._name_or_path = base_dir
    model.name_or_path = base_dir
    return out


def routing_margin(model, tokens, k):
    """The smallest gap between the k-th and (k+1)-th router probability over every token and
    layer with experts (make_moe_golden.py's measure)."""
    with torch.no_grad():
        router = model(input_ids=tokens, output_router_logits=True).router_logits
    probs = torch.softmax(torch.cat(router, 0), dim=-1).sort(dim=-1, descending=True).values
    return (probs[:, k - 1] - probs[:, k]).min().item()


def hand_logits(cfg, cls, base_dir, weights, tokens):
    """The logits of `weights` (HF names): make_golden.py's plain-torch forward, or for a mixture
    of experts (which it does not implement) transformers' own model run with those tensors
    (torch.func.functional_call), a model PEFT never wrapped."""
    if not cfg.get("num_experts", cfg.get("num_local_experts")):
        return make_golden.forward(cfg, weights, tokens)
    model = load_base(cls, base_dir, output_router_logits=False)
    model.eval()
    return torch.func.functional_call(model, weights, (tokens,)).logits


def make_case(out_dir, name, base_name, cls, targets_modules, seed):
    print(f"{name}: base {base_name}, target_modules {targets_modules}")
    if cls is None:
        print(f"    SKIPPED: transformers {transformers.__version__} lacks its model class")
        return
    base_dir = os.path.join("test", "reference", "golden", base_name)  # relative: lands in config
    cfg = json.load(open(os.path.join(base_dir, "config.json")))
    base_seed = MOE_BASES.get(base_name) or make_golden.CASES[base_name][1]
    d = os.path.join(out_dir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)

    outs = load_file(os.path.join(base_dir, "outputs.safetensors"))
    tokens, targets = outs["tokens"].long(), outs["targets"].long()
    want_tokens, want_targets = make_golden.fixed_batch(cfg["vocab_size"], base_seed)
    assert torch.equal(tokens, want_tokens) and torch.equal(targets, want_targets)

    extra = {"output_router_logits": False} if base_name in MOE_BASES else {}
    model, info = load_base(cls, base_dir, output_loading_info=True, **extra)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    model.eval()
    with torch.no_grad():
        check("HF base logits vs golden logits", model(input_ids=tokens).logits, outs["logits"], 1e-5)

    conv1d = cfg["model_type"] == "gpt2"
    config = LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=targets_modules,
                        bias="none", init_lora_weights=False, task_type="CAUSAL_LM")
    torch.manual_seed(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = get_peft_model(model, config)
    for w in caught:
        if "fan_in_fan_out" in str(w.message):
            print(f"    PEFT warned: {w.message}")
    assert model.peft_config["default"].fan_in_fan_out == conv1d
    model.eval()
    model.save_pretrained(d)
    readme = os.path.join(d, "README.md")
    if os.path.exists(readme):
        os.remove(readme)
    init_adapter = load_file(os.path.join(d, "adapter_model.safetensors"))

    trainable = [p for p in model.parameters() if p.requires_grad]
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names and all(".lora_A.default." in n or ".lora_B.default." in n for n in names), names

    if base_name in MOE_BASES:
        margin = routing_margin(model, tokens, cfg["num_experts_per_tok"])
        print(f"    top-k routing margin {margin:.3g}")
        assert margin >= MIN_MARGIN, f"a near-tie ({margin:.2e} < {MIN_MARGIN}): pick another seed"
    logits = model(input_ids=tokens).logits
    loss = ce(logits, targets)
    loss.backward()
    grads = get_peft_model_state_dict(model, state_dict={n: p.grad.clone() for n, p in
                                                         model.named_parameters() if p.requires_grad})
    assert sorted(grads) == sorted(init_adapter), (sorted(grads), sorted(init_adapter))
    make_golden.write_safetensors(os.path.join(d, "grads.safetensors"), grads)
    print(f"    PEFT loss at init {loss.item():.7f}")

    # HF's own labels= loss (shifts inside) on the equivalent unshifted labels.
    labels = torch.full_like(targets, make_golden.IGNORE_INDEX)
    labels[:, 1:] = targets[:, :-1]
    assert (targets[:, -1] == make_golden.IGNORE_INDEX).all()
    with torch.no_grad():
        check("HF labels= loss vs ours", model(input_ids=tokens, labels=labels).loss.item(), loss.item(), 1e-6)

    # Independent check: plain torch (make_golden's forward) on W + (alpha/r) B A, by hand.
    base = {k: v for k, v in load_file(os.path.join(base_dir, "model.safetensors")).items()}
    leaves = {k: v.clone().requires_grad_(True) for k, v in init_adapter.items()}
    hand_loss = ce(hand_logits(cfg, cls, base_dir, hand_weights(cfg, base, leaves, conv1d), tokens),
                   targets)
    hand_loss.backward()
    print(f"    hand  loss at init {hand_loss.item():.7f}")
    check("hand loss vs PEFT loss", hand_loss.item(), loss.item(), 1e-5)
    for k in sorted(grads):
        check(f"hand grad {k}", leaves[k].grad, grads[k], 1e-5)

    # Training: adapters only (PEFT froze the rest), same batch, no clipping.
    model.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(trainable, **ADAMW)
    losses, margins = [], []
    for _ in range(TRAIN_STEPS):
        if base_name in MOE_BASES:
            margins.append(routing_margin(model, tokens, cfg["num_experts_per_tok"]))
        opt.zero_grad()
        step_loss = ce(model(input_ids=tokens).logits, targets)
        step_loss.backward()
        opt.step()
        losses.append(step_loss.item())
    check("train_losses[0] vs loss at init", losses[0], loss.item(), 1e-6)
    with torch.no_grad():
        final_loss = ce(model(input_ids=tokens).logits, targets)
    print(f"    losses {[round(x, 6) for x in losses]}, final {final_loss.item():.6f}")
    if margins:  # informational: a later step's near-tie may route differently in 16 bits
        print(f"    top-k routing margin before each step {[float(f'{m:.2g}') for m in margins]}")
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        shutil.copyfile(os.path.join(tmp, "adapter_model.safetensors"),
                        os.path.join(d, "final_adapter.safetensors"))
    final_adapter = load_file(os.path.join(d, "final_adapter.safetensors"))

    merged = model.merge_and_unload()
    merged.eval()
    with torch.no_grad():
        merged_loss = ce(merged(input_ids=tokens).logits, targets)
    check("merged loss vs final PEFT loss", merged_loss.item(), final_loss.item(), 1e-5)
    sd = merged.state_dict()
    merged_params = {k: sd[k].detach().clone() for k in base}
    assert not any("lora" in k for k in sd)
    by_hand = hand_weights(cfg, base, final_adapter, conv1d)
    check("merged weights vs W + delta by hand",
          max((merged_params[k] - by_hand[k]).abs().max() for k in base), 0.0, 1e-6)
    make_golden.write_safetensors(os.path.join(d, "merged.safetensors"), merged_params)

    make_golden.write_safetensors(os.path.join(d, "outputs.safetensors"), {
        "tokens": tokens.float(), "targets": targets.float(), "logits": logits,
        "loss": loss.reshape(1), "train_losses": torch.tensor(losses),
        "final_loss": final_loss.reshape(1), "merged_loss": merged_loss.reshape(1)})


def main():
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, "
          f"safetensors {safetensors.__version__}")
    assert peft.__version__.startswith("0.10."), peft.__version__
    torch.set_num_threads(1)  # deterministic reductions
    out_dir = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "golden_lora")
    os.chdir(REPO)  # so that adapter_config.json's base_model_name_or_path is repo-relative
    names = sys.argv[2:] or list(CASES)
    for name in names:
        if name not in CASES:
            sys.exit(f"make_lora_golden.py: unknown case {name!r} (known: {', '.join(CASES)})")
        make_case(out_dir, name, *CASES[name])


if __name__ == "__main__":
    main()
