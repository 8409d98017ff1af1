#!/usr/bin/python3
"""local:W and strided:W:S are dense attention under a mask: vkformer's forward
logits and greedy ids with --attention must equal PyTorch's nn.Transformer given
that mask explicitly (encoder self-attention: the pattern; decoder self-attention:
the pattern and causal; cross-attention dense).

Usage: /usr/bin/python3 tests/test_attention_parity.py VKFORMER (VK_ICD_FILENAMES set by the caller)."""
import math
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
try:
    import numpy as np
    import torch
except ImportError:
    print("PyTorch is missing: apt-get install python3-torch python3-numpy (run with /usr/bin/python3)")
    sys.exit(1)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import export_torch as et  # noqa: E402


def allowed(pattern, i, j):
    kind, *p = pattern.split(":")
    w = int(p[0])
    near = abs(i - j) <= w
    if kind == "local":
        return near
    return near or j % int(p[1]) == int(p[1]) - 1


def mask(pattern, n, causal):
    m = torch.zeros(n, n)
    for i in range(n):
        for j in range(n):
            if not allowed(pattern, i, j) or (causal and j > i):
                m[i, j] = float("-inf")
    return m


@torch.no_grad()
def torch_logits(model, pattern, src, tgt):
    s = model.embed(model.src_embed, torch.tensor([src]))
    memory = model.transformer.encoder(s, mask=mask(pattern, len(src), False))
    t = model.embed(model.tgt_embed, torch.tensor([tgt]))
    out = model.transformer.decoder(t, memory, tgt_mask=mask(pattern, len(tgt), True))
    return model.generator(out)[0].numpy()


@torch.no_grad()
def torch_greedy(model, pattern, src, max_new):
    c = model.config
    memory = model.transformer.encoder(model.embed(model.src_embed, torch.tensor([src])),
                                       mask=mask(pattern, len(src), False))
    out = [c["bos_id"]]
    for _ in range(max_new):
        t = model.embed(model.tgt_embed, torch.tensor([out]))
        h = model.transformer.decoder(t, memory, tgt_mask=mask(pattern, len(out), True))
        nxt = int(torch.argmax(model.generator(h)[0, -1]))
        if nxt == c["eos_id"]:
            break
        out.append(nxt)
    return out[1:]


def main():
    vkformer = sys.argv[1]
    passed = failed = 0
    rng = np.random.default_rng(5)
    configs = [et.default_config(embed_scale=math.sqrt(48)),
               et.default_config(norm_first=True, activation="gelu", d_model=32, n_heads=2, d_ff=72)]
    patterns = ["local:0", "local:2", "strided:1:3", "strided:0:4", "local:40"]
    with tempfile.TemporaryDirectory() as tmp:
        for ci, config in enumerate(configs):
            model = et.build_model(config, seed=10 + ci)
            # Sharper attention makes a wrong mask visible in the logits.
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if name.endswith("in_proj_weight"):
                        p.mul_(4.0)
            path = os.path.join(tmp, f"m{ci}.safetensors")
            et.export(model, path)
            for pattern in patterns:
                for ls, lt in [(1, 1), (9, 12), (23, 17), (40, 40)]:
                    src = rng.integers(3, config["src_vocab_size"], ls).tolist()
                    tgt = [config["bos_id"]] + rng.integers(3, config["tgt_vocab_size"], lt - 1).tolist()
                    out = os.path.join(tmp, "l.npy")
                    r = subprocess.run([vkformer, "forward", "--model", path, "--attention", pattern,
                                        "--src", ",".join(map(str, src)), "--tgt", ",".join(map(str, tgt)),
                                        "--out", out], capture_output=True, text=True)
                    if r.returncode != 0:
                        print(f"FAIL config {ci} {pattern} {ls}x{lt}: exit {r.returncode}: {r.stderr.strip()}")
                        failed += 1
                        continue
                    got, want = np.load(out), torch_logits(model, pattern, src, tgt)
                    err = np.abs(got - want)
                    if err.max() <= 1e-3:
                        passed += 1
                    else:
                        i, j = np.unravel_index(np.argmax(err), err.shape)
                        print(f"FAIL config {ci} {pattern} {ls}x{lt}: max error {err.max():.3g} at ({i},{j}): "
                              f"expected {want[i, j]:.6g}, got {got[i, j]:.6g}")
                        failed += 1
                src = rng.integers(3, config["src_vocab_size"], 30).tolist()
                r = subprocess.run([vkformer, "generate", "--model", path, "--attention", pattern, "--max-new", "20",
                                    "--src", ",".join(map(str, src))], capture_output=True, text=True)
                want = torch_greedy(model, pattern, src, 20)
                got = [int(x) for x in r.stdout.split(",")] if r.returncode == 0 and r.stdout.strip() else []
                if got == want:
                    passed += 1
                else:
                    print(f"FAIL config {ci} {pattern} greedy: expected {want}, got {got} ({r.stderr.strip()})")
                    failed += 1
            # The masks must matter: dense and local:0 logits differ on a long input.
            src = rng.integers(3, config["src_vocab_size"], 30).tolist()
            if np.abs(torch_logits(model, "local:0", src, [1, 5, 6]) - torch_logits(model, "local:1000", src, [1, 5, 6])).max() < 1e-3:
                print(f"FAIL config {ci}: local:0 and dense agree; the test could not see a wrong mask")
                failed += 1
            else:
                passed += 1
    print(f"test_attention_parity: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
