"""Model FLOPs and GPU peaks for the end-to-end training benchmark (torch_train.py, train_table.py).

Model FLOPs per trained token (forward + backward, no recompute counted):
    6 * params + 12 * layers * hidden * seq
params counts every parameter once (embeddings and LM head included; a tied LM head once); the
second term is the attention scores (Q K^T) and the weighted values (P V) over the full (not
causally halved) seq x seq, 2 matmuls * 2 FLOPs * 3 (forward + backward).
MFU = tokens/s * flops_per_token / peak. Stdlib only.
"""

# Dense bf16 tensor-core peak, TFLOP/s, by a substring of torch.cuda.get_device_name(); first match
# wins, so the more specific names come first.
PEAK_BF16_TFLOPS = [
    ("H200", 989.4),
    ("H100 PCIe", 756.0),
    ("H100", 989.4),  # SXM (and NVL/HBM3 names without "PCIe")
    ("A100", 312.0),
    ("RTX 4090", 165.2),  # fp32 accumulate
    ("RTX 3090", 71.0),
]


def peak_tflops(gpu_name):
    """Dense bf16 peak TFLOP/s for a device name, or None when the GPU is not in the table."""
    if not gpu_name:
        return None
    for key, peak in PEAK_BF16_TFLOPS:
        if key.lower() in gpu_name.lower():
            return peak
    return None


def flops_per_token(params, layers, hidden, seq):
    """Model FLOPs per trained token: 6 * params + 12 * layers * hidden * seq."""
    return 6.0 * params + 12.0 * layers * hidden * seq


def mfu(tokens_per_s, params, layers, hidden, seq, gpu_name):
    """(mfu, peak_tflops): the fraction of the GPU's bf16 peak; (None, None) for an unknown GPU."""
    peak = peak_tflops(gpu_name)
    if peak is None or not tokens_per_s:
        return None, peak
    return tokens_per_s * flops_per_token(params, layers, hidden, seq) / (peak * 1e12), peak
