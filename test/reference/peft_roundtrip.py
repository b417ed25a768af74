#!/usr/bin/env python3
"""The loss of a model directory, optionally with a PEFT adapter on top, on one batch of a
headerless u16 token file cut into sequences of T+1 tokens with stride T (the loader's packing,
common/data/loader.h): mean cross-entropy of every next token, in float32, as Hugging Face
transformers (and PEFT's PeftModel.from_pretrained for --adapter) computes it.

  peft_roundtrip.py --model DIR [--adapter DIR] --tokens FILE --seq T

Prints one line: "loss X". Used by test/reference/peft_roundtrip_test.sh.
"""
import argparse
import sys

import numpy as np
import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--seq", type=int, required=True)
    a = ap.parse_args()
    ids = np.fromfile(a.tokens, dtype=np.uint16).astype(np.int64)
    t = a.seq
    n = (len(ids) - 1) // t
    seqs = torch.tensor(np.stack([ids[i * t:i * t + t + 1] for i in range(n)]))
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32)
    if a.adapter:
        import peft
        model = peft.PeftModel.from_pretrained(model, a.adapter)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=seqs[:, :t]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                 seqs[:, 1:].reshape(-1))
    print("loss %.6f" % loss.item())
    return 0


if __name__ == "__main__":
    sys.exit(main())
