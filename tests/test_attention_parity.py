#!/usr/bin/python3
"""local:W, strided:W:S and bigbird:B:G:R are dense attention under a mask:
vkformer's forward logits and greedy ids with --attention must equal PyTorch's
nn.Transformer given that mask explicitly (encoder self-attention: the pattern;
decoder self-attention: the pattern and causal; cross-attention dense). bigbird's
random blocks are drawn here by an independent implementation of the documented
rule (docs/attention.md). lowrank:K with K at least the sequence length is a
permutation of the keys, so it must equal dense too, as self- and as
cross-attention; with a small K it must not.

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


MASK64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def bigbird_random(seed, qb, key_blocks, globals_, count, causal):
    """The random key blocks of query block qb: a partial Fisher-Yates shuffle of
    the candidate blocks (not global, not qb-1..qb+1; causal: only below qb-1)."""
    if qb < globals_:
        return []
    hi = max(qb - 1, 0) if causal else key_blocks
    cand = [kb for kb in range(globals_, hi) if abs(kb - qb) > 1]
    state = (seed ^ ((qb * 0xD1B54A32D192ED03) & MASK64)) & MASK64
    out = []
    for t in range(min(count, len(cand))):
        state, r = splitmix64(state)
        pick = t + r % (len(cand) - t)
        cand[t], cand[pick] = cand[pick], cand[t]
        out.append(cand[t])
    return out


def allowed(pattern, i, j, n=None, causal=False, seed=0):
    kind, *p = pattern.split(":")
    if kind in ("dense", "lowrank"):
        return True
    if kind == "bigbird":
        b, g, r = map(int, p)
        qi, kj = i // b, j // b
        if qi < g or kj < g or abs(qi - kj) <= 1:
            return True
        return kj in bigbird_random(seed, qi, (n + b - 1) // b, g, r, causal)
    w = int(p[0])
    near = abs(i - j) <= w
    if kind == "local":
        return near
    return near or j % int(p[1]) == int(p[1]) - 1


def mask(pattern, n, causal):
    m = torch.zeros(n, n)
    for i in range(n):
        for j in range(n):
            if not allowed(pattern, i, j, n, causal) or (causal and j > i):
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
    patterns = ["local:0", "local:2", "strided:1:3", "strided:0:4", "local:40", "bigbird:4:1:2", "bigbird:3:0:3",
                "bigbird:1:2:5", "lowrank:64"]
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
                r = subprocess.run([vkformer, "generate", "--model", path, "--attention", pattern, "--max-new", "20", "--raw-ids",
                                    "--src", ",".join(map(str, src))], capture_output=True, text=True)
                want = torch_greedy(model, pattern, src, 20)
                got = [int(x) for x in r.stdout.split(",")] if r.returncode == 0 and r.stdout.strip() else []
                if got == want:
                    passed += 1
                else:
                    print(f"FAIL config {ci} {pattern} greedy: expected {want}, got {got} ({r.stderr.strip()})")
                    failed += 1
            # Cross-attention lowrank:K with K >= the source length is dense too.
            src = rng.integers(3, config["src_vocab_size"], 37).tolist()
            tgt = [config["bos_id"]] + rng.integers(3, config["tgt_vocab_size"], 20).tolist()
            got = {}
            for cross in ["lowrank:40", "lowrank:5"]:
                out = os.path.join(tmp, "c.npy")
                r = subprocess.run([vkformer, "forward", "--model", path, "--cross-attention", cross, "--attention",
                                    "lowrank:3", "--src", ",".join(map(str, src)), "--tgt", ",".join(map(str, tgt)),
                                    "--out", out], capture_output=True, text=True)
                got[cross] = np.load(out) if r.returncode == 0 else None
                if r.returncode != 0:
                    print(f"FAIL config {ci} --cross-attention {cross}: exit {r.returncode}: {r.stderr.strip()}")
            r = subprocess.run([vkformer, "forward", "--model", path, "--attention", "lowrank:3", "--src",
                                ",".join(map(str, src)), "--tgt", ",".join(map(str, tgt)), "--out",
                                os.path.join(tmp, "d.npy")], capture_output=True, text=True)
            dense_cross = np.load(os.path.join(tmp, "d.npy")) if r.returncode == 0 else None
            if dense_cross is None or got["lowrank:40"] is None or got["lowrank:5"] is None:
                failed += 1
            elif np.abs(got["lowrank:40"] - dense_cross).max() > 1e-4:
                print(f"FAIL config {ci}: cross lowrank:40 on 37 source tokens differs from dense by "
                      f"{np.abs(got['lowrank:40'] - dense_cross).max():.3g}")
                failed += 1
            elif np.abs(got["lowrank:5"] - dense_cross).max() < 1e-3:
                print(f"FAIL config {ci}: cross lowrank:5 equals dense; the projection has no effect")
                failed += 1
            else:
                passed += 1
            # lowrank with the model file's projection: the identity (K = max_len) is
            # dense attention at every length; a random one changes the logits.
            ml = config["max_len"]
            for kind, proj in [("identity", torch.eye(ml)), ("random", torch.rand(6, ml))]:
                lpath = os.path.join(tmp, f"lr{ci}.safetensors")
                et.export(model, lpath, lowrank={"self": proj, "cross": proj})
                k = proj.shape[0]
                for ls, lt in [(5, 4), (23, 17)]:
                    src = rng.integers(3, config["src_vocab_size"], ls).tolist()
                    tgt = [config["bos_id"]] + rng.integers(3, config["tgt_vocab_size"], lt - 1).tolist()
                    out = os.path.join(tmp, "lr.npy")
                    r = subprocess.run([vkformer, "forward", "--model", lpath, "--attention", f"lowrank:{k}",
                                        "--cross-attention", f"lowrank:{k}", "--verbose", "--src",
                                        ",".join(map(str, src)), "--tgt", ",".join(map(str, tgt)), "--out", out],
                                       capture_output=True, text=True)
                    if r.returncode != 0 or "uses the model file's lowrank.self_proj" not in r.stderr:
                        print(f"FAIL config {ci} lowrank file {kind}: exit {r.returncode}: {r.stderr.strip()}")
                        failed += 1
                        continue
                    err = np.abs(np.load(out) - torch_logits(model, "dense", src, tgt)).max()
                    if (kind == "identity") == (err <= 1e-3):
                        passed += 1
                    else:
                        print(f"FAIL config {ci} lowrank file {kind} {ls}x{lt}: error against dense {err:.3g}")
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
