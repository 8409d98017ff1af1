#!/usr/bin/python3
"""A PyTorch reference of Hugging Face generate()'s decoding, written here: greedy search and beam search with the
logits processors of transformers 5.12 (checked against it by tools/check_decode_hf.py).

Runs under Debian's /usr/bin/python3 (PyTorch 1.13) and under transformers' own Python alike; needs only torch.
A model is anything with `encode(src_ids) -> memory` and `logits(memory, seqs) -> (N, V)` float32 logits of the
last position of each row of seqs (long (N, T), decoder start first); `marian(m)` and `seq2seq(m)` adapt
tests/marian_ref.Marian and tools/export_torch.Seq2Seq. Each step recomputes the whole prefix (no cache).

`cfg` holds generate()'s argument names: num_beams, max_new_tokens, min_new_tokens, length_penalty,
early_stopping (True/False), num_return_sequences, repetition_penalty, no_repeat_ngram_size, suppress_tokens,
bad_words_ids, eos_token_id (an id or a list), forced_bos_token_id, forced_eos_token_id, renormalize_logits,
plus `prefix` (decoder_input_ids = [decoder start] + prefix) and `max_new_factor` (vkformer's per-source limit:
max_new_tokens = min(max_new_tokens, ceil(factor * len(src)))). The processors run in generate()'s order
(repetition penalty, no-repeat n-gram, bad words, min new tokens, forced bos, forced eos, suppressed tokens,
then the renormalisation), on the logits for greedy search and on log_softmax(logits) for beam search, over
each row's whole sequence (decoder start and prefix included).
Returned ids: the generated ids after the prefix, without the final end id; beam search also its score.
"""
import math

import torch


class marian:
    """tests/marian_ref.Marian as a model here (generate()'s source mask: pad positions, when present)."""

    def __init__(self, m):
        self.m, self.start, self.pad = m, m.start, m.pad
        gc = getattr(m, "generation_config", {}) or {}
        self.defaults = {k: gc[k] for k in ("bad_words_ids", "forced_eos_token_id", "renormalize_logits",
                                             "eos_token_id") if k in gc}
        self.defaults.setdefault("eos_token_id", m.eos)

    def encode(self, src):
        keep = None
        if self.m.pad in src and self.m.pad != self.m.eos:
            keep = torch.tensor([[i != self.m.pad for i in src]])
        return self.m.encode(torch.tensor([list(src)]), keep), keep

    def logits(self, memory, seqs):
        mem, keep = memory
        n = seqs.shape[0]
        return self.m.decode(mem.expand(n, -1, -1), seqs, None if keep is None else keep.expand(n, -1))[:, -1].float()


class seq2seq:
    """tools/export_torch.Seq2Seq (a vkformer file's model) as a model here."""

    def __init__(self, m):
        self.m, self.start, self.pad = m, m.config["bos_id"], m.config["pad_id"]
        self.defaults = {"eos_token_id": m.config["eos_id"]}

    @torch.no_grad()
    def encode(self, src):
        return self.m.encode(torch.tensor([list(src)]))

    @torch.no_grad()
    def logits(self, memory, seqs):
        return self.m.decode(memory.expand(seqs.shape[0], -1, -1), seqs)[:, -1].float()


def _merge(model, cfg):
    """The model's defaults under cfg; cfg's bad_words_ids are added to the model's (vkformer adds the ids it is
    given to a folder's bad_words_ids, where generate() would replace them: the check passes generate() both)."""
    out = dict(model.defaults, **cfg)
    if "bad_words_ids" in cfg and "bad_words_ids" in model.defaults:
        out["bad_words_ids"] = list(model.defaults["bad_words_ids"]) + list(cfg["bad_words_ids"])
    return out


def _ends(cfg):
    e = cfg["eos_token_id"]
    return list(e) if isinstance(e, (list, tuple)) else [e]


def _ngram_bans(seq, n):
    """NoRepeatNGramLogitsProcessor's banned ids for one row (its ids so far)."""
    cur = len(seq)
    if cur + 1 < n:
        return []
    grams = {}
    for i in range(cur - n + 1):
        grams.setdefault(tuple(seq[i:i + n - 1]), []).append(seq[i + n - 1])
    return grams.get(tuple(seq[cur + 1 - n:cur]), [])


def process(cfg, ids, scores, prompt_len, max_length):
    """generate()'s processors, in its order, on scores (N, V) of rows ids (list of N lists, cur_len ids each)."""
    scores = scores.clone()
    cur = len(ids[0])
    inf = -float("inf")
    ends = _ends(cfg)
    p = cfg.get("repetition_penalty", 1.0)
    if p != 1.0:
        idx = torch.tensor(ids, dtype=torch.long)
        s = torch.gather(scores, 1, idx)
        s = torch.where(s < 0, s * p, s / p)
        scores = scores.scatter(1, idx, s)
    n = cfg.get("no_repeat_ngram_size", 0)
    if n:
        for r, seq in enumerate(ids):
            for t in _ngram_bans(seq, n):
                scores[r, t] = inf
    for bad in cfg.get("bad_words_ids") or []:
        if len(bad) == 1:
            if bad[0] not in ends:
                scores[:, bad[0]] = scores[:, bad[0]] + inf
            continue
        if len(bad) > cur:
            continue
        for r, seq in enumerate(ids):
            if seq[cur - (len(bad) - 1):] == list(bad[:-1]):
                scores[r, bad[-1]] = scores[r, bad[-1]] + inf
    if cur - prompt_len < cfg.get("min_new_tokens", 0):
        for e in ends:
            scores[:, e] = inf
    fb = cfg.get("forced_bos_token_id")
    if fb is not None and cur == 1:
        scores = torch.full_like(scores, inf)
        scores[:, fb] = 0.0
    fe = cfg.get("forced_eos_token_id")
    if fe is not None and cur == max_length - 1:
        scores = torch.full_like(scores, inf)
        scores[:, fe] = 0.0
    for t in cfg.get("suppress_tokens") or []:
        scores[:, t] = inf
    if cfg.get("renormalize_logits"):
        scores = torch.log_softmax(scores, dim=-1)
    return scores


def _lengths(model, src, cfg):
    prefix = list(cfg.get("prefix") or [])
    max_new = cfg["max_new_tokens"]
    if cfg.get("max_new_factor"):
        max_new = min(max_new, max(1, math.ceil(cfg["max_new_factor"] * len(src))))
    seq = [model.start] + prefix
    return seq, len(seq), len(seq) + max_new


@torch.no_grad()
def greedy(model, src, cfg):
    """generate(num_beams=1, do_sample=False): the ids after the prefix, without the final end id."""
    cfg = _merge(model, cfg)
    ends = _ends(cfg)
    memory = model.encode(src)
    seq, prompt, max_length = _lengths(model, src, cfg)
    while len(seq) < max_length:
        logits = model.logits(memory, torch.tensor([seq]))
        tok = int(torch.argmax(process(cfg, [seq], logits, prompt, max_length), dim=-1)[0])
        seq.append(tok)
        if tok in ends:
            break
    out = seq[prompt:]
    return out[:-1] if out and out[-1] in ends else out


@torch.no_grad()
def beam_search(model, src, cfg):
    """generate(num_beams=K), transformers 5.12's _beam_search step for step (batch size 1): the
    num_return_sequences best as [(ids after the prefix without the final end id, score)]."""
    cfg = _merge(model, cfg)
    K = cfg["num_beams"]
    lp_exp = cfg.get("length_penalty", 1.0)
    early = cfg.get("early_stopping", False)
    ends = _ends(cfg)
    memory = model.encode(src)
    seq0, prompt_len, max_length = _lengths(model, src, cfg)
    cur_len = prompt_len
    keep_n = max(2, 1 + len(ends)) * K
    top_mask = torch.arange(keep_n) < K
    running = torch.full((K, max_length), model.pad, dtype=torch.long)
    running[:, :prompt_len] = torch.tensor(seq0)
    seqs = running.clone()
    seq_len = torch.full((K,), prompt_len, dtype=torch.long)
    run_scores = torch.zeros(K)
    run_scores[1:] = -1e9
    beam_scores = torch.full((K,), -1e9)
    finished = torch.zeros(K, dtype=torch.bool)
    end_t = torch.tensor(ends)
    unsatisfied = True
    while True:
        logits = model.logits(memory, running[:, :cur_len])
        V = logits.shape[-1]
        ids = running[:, :cur_len].tolist()
        lp = process(cfg, ids, torch.log_softmax(logits, dim=-1), prompt_len, max_length)
        lp = (lp + run_scores[:, None]).reshape(-1)
        top_lp, top_idx = torch.topk(lp, keep_n)
        parent, tok = top_idx // V, top_idx % V
        top_seqs = running[parent].clone()
        top_seqs[:, cur_len] = tok
        top_len = torch.full((keep_n,), cur_len + 1, dtype=torch.long)
        hits = torch.isin(tok, end_t) | (cur_len + 1 >= max_length)
        trl = top_lp + hits.to(torch.float32) * -1.0e9
        nidx = torch.topk(trl, K)[1]
        running, run_scores = top_seqs[nidx], trl[nidx]
        just = hits & top_mask
        fl = top_lp / ((cur_len + 1 - prompt_len) ** lp_exp)
        fl = fl + float(bool(finished.all()) and early is True) * -1.0e9
        fl = fl + float(not unsatisfied) * -1.0e9
        fl = fl + (~just).to(torch.float32) * -1.0e9
        m_seqs = torch.cat([seqs, top_seqs])
        m_scores = torch.cat([beam_scores, fl])
        m_fin = torch.cat([finished, just])
        m_len = torch.cat([seq_len, top_len])
        midx = torch.topk(m_scores, K)[1]
        seqs, beam_scores, finished, seq_len = m_seqs[midx], m_scores[midx], m_fin[midx], m_len[midx]
        cur_len += 1
        best_running = run_scores[0] / ((cur_len - prompt_len) ** lp_exp)
        worst = torch.where(finished, beam_scores.min(), torch.tensor(-1.0e9))
        unsatisfied = unsatisfied and bool(torch.any(best_running > worst))
        open_beam = not (bool(finished.all()) and early is True)
        if not (unsatisfied and open_beam and not bool(hits.all())):
            break
    out = []
    for j in range(cfg.get("num_return_sequences", 1)):
        ids = seqs[j, prompt_len:int(seq_len[j])].tolist()
        if ids and ids[-1] in ends:
            ids = ids[:-1]
        out.append((ids, float(beam_scores[j])))
    return out


def generate(model, src, cfg):
    """greedy ids, or beam search's best ids, as generate() with cfg."""
    return greedy(model, src, cfg) if cfg.get("num_beams", 1) == 1 else beam_search(model, src, cfg)[0][0]


@torch.no_grad()
def score(model, src, tgt):
    """log_softmax of each target id and then the first end id, teacher-forced after the decoder start."""
    ends = _ends(model.defaults)
    memory = model.encode(src)
    seq = [model.start] + list(tgt)
    labels = list(tgt) + [ends[0]]
    out = []
    for t in range(len(seq)):
        lp = torch.log_softmax(model.logits(memory, torch.tensor([seq[:t + 1]]))[0].double(), dim=-1)
        out.append(float(lp[labels[t]]))
    return out
