#!/usr/bin/python3
"""Hostile Hugging Face model folders of every family (Marian, M2M-100, NLLB, mBART, BART, T5, LongT5,
Whisper; Whisper through forward --audio on a short WAV): each case must end
with exit 1 or 2 and exactly one line on stderr, printable (no control character, no ESC, valid UTF-8),
within the time limit: never a signal, a hang, a second forged line, or a silent success.

usage: test_hostile_models.py VKFORMER [--list]

The cases, by class (docs/reliability.md counts them):
  config     values with newline/ESC/BEL/CR/bidi controls, wrong JSON types, numbers out of range or past
             64 bits, negative or zero sizes, ids outside the vocabulary, not an object, truncated JSON;
  generation generation_config.json with huge or wrong-typed values, bans of eos, unknown early_stopping;
  tokenizer  tokenizer_config.json with control characters or unknown languages; vocab.json of the wrong
             type, duplicate or out-of-range ids; SentencePiece files (BART: vocab.json) of random bytes,
             truncated, or empty; BART's merges.txt a FIFO, a directory or a dangling link, or with a line
             holding control characters;
  files      a FIFO, a directory, a dangling symlink or an empty file where a file should be;
  tensors    tied embeddings that differ, an unexpected tensor whose name holds control characters,
             shapes that disagree with the config, a truncated model.safetensors;
  shards     model.safetensors.index.json and its shards: a missing, truncated or outside shard, a shard
             name with controls, a map that disagrees with the shards either way, a tensor in two shards,
             a malformed or FIFO index.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_marian  # noqa: E402
import gen_seq2seq  # noqa: E402
import gen_t5  # noqa: E402
import gen_whisper  # noqa: E402

TIMEOUT = 120
FORGE = "vkformer: OK\n\x1b[2J\x07\r\u202e"
TARGET = {"marian": None, "m2m_100": "fr", "nllb": "fra_Latn", "mbart": "ro_RO", "bart": None, "t5": None,
          "longt5": None}
# the tokenizer file every cut or random version of which must be refused (BART's merges.txt is not: any
# prefix of it is a valid, smaller list of merges)
SPM = {"marian": "source.spm", "m2m_100": "sentencepiece.bpe.model", "nllb": "sentencepiece.bpe.model",
       "mbart": "sentencepiece.bpe.model", "bart": "vocab.json", "t5": "spiece.model", "longt5": "spiece.model"}


def make(family, path):
    if family == "marian":
        gen_marian.make_folder(path)
    elif family == "t5":
        gen_t5.make_folder(path, "flan")
    elif family == "longt5":
        gen_t5.make_folder(path, "longt5-tglobal", form="saved")
    elif family == "whisper":
        gen_whisper.make_folder(path, layout="hub")
    else:
        gen_seq2seq.make_folder(path, family)


def edit_json(path, name, fn):
    p = os.path.join(path, name)
    with open(p) as f:
        j = json.load(f)
    fn(j)
    with open(p, "w") as f:
        json.dump(j, f)


def setter(key, value):
    return lambda j: j.__setitem__(key, value)


def replace_file(kind):
    def fn(path, name):
        p = os.path.join(path, name)
        os.remove(p)
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "dir":
            os.mkdir(p)
        elif kind == "dangling":
            os.symlink(os.path.join(path, "nowhere"), p)
        elif kind == "empty":
            open(p, "wb").close()
        elif kind == "random":
            with open(p, "wb") as f:
                f.write(os.urandom(3000))
        elif kind == "truncated":
            pass
    return fn


def t5_cases(family):
    """T5's (flan, hub form: spiece.model) and LongT5's (transient-global, saved form: tokenizer.json)."""
    out = []
    cfg = lambda k, v: ("config %s=%r" % (k, v), lambda p: edit_json(p, "config.json", setter(k, v)))  # noqa: E731
    for v in ("t\n5", "\x1b[31mred", FORGE, 7, None):
        out.append(cfg("model_type", v))
    for k, v in (("feed_forward_proj", FORGE), ("feed_forward_proj", "gated-"), ("feed_forward_proj", 3),
                 ("d_kv", 10 ** 6), ("d_kv", 0), ("num_heads", 0), ("num_heads", 10 ** 5), ("d_model", -1),
                 ("num_layers", 0), ("num_decoder_layers", 10 ** 7), ("d_ff", 2 ** 40), ("vocab_size", 3),
                 ("relative_attention_num_buckets", 10 ** 6), ("relative_attention_num_buckets", 0),
                 ("relative_attention_max_distance", 1), ("relative_attention_max_distance", 2 ** 63),
                 ("layer_norm_epsilon", 0), ("layer_norm_epsilon", "tiny"), ("eos_token_id", [1, 2]),
                 ("pad_token_id", 10 ** 9), ("tie_word_embeddings", "no"), ("decoder_start_token_id", -3)):
        out.append(cfg(k, v))
    if family == "t5":  # (LongT5 does not read it)
        out.append(cfg("scale_decoder_outputs", 1))
    if family == "longt5":
        for k, v in (("encoder_attention_type", FORGE), ("encoder_attention_type", 5), ("local_radius", -1),
                     ("local_radius", 10 ** 9), ("global_block_size", 0)):
            out.append(cfg(k, v))
    out.append(("config truncated", lambda p: open(os.path.join(p, "config.json"), "w").write('{"model_type": "t')))
    gen = lambda k, v: ("generation %s=%r" % (k, v), lambda p: edit_json(p, "generation_config.json", setter(k, v)))  # noqa: E731
    for k, v in (("num_beams", 1000), ("early_stopping", FORGE), ("decoder_start_token_id", 10 ** 9)):
        out.append(gen(k, v))
    tc = lambda k, v: ("tokenizer_config %s=%r" % (k, v), lambda p: edit_json(p, "tokenizer_config.json", setter(k, v)))  # noqa: E731
    for k, v in (("extra_ids", -1), ("extra_ids", 1e9), ("extra_ids", 2.5), ("clean_up_tokenization_spaces", "yes")):
        out.append(tc(k, v))
    files = ("config.json", "model.safetensors", "tokenizer.json" if family == "longt5" else "spiece.model")
    for kind in ("fifo", "dir", "dangling", "empty"):
        for name in files:
            out.append(("%s is a %s" % (name, kind), lambda p, kind=kind, name=name: replace_file(kind)(p, name)))
    out.append(("%s of random bytes" % files[2], lambda p: replace_file("random")(p, files[2])))
    if family == "longt5":
        for name, fn in (("tokenizer.json vocab of strings", lambda j: j["model"].__setitem__("vocab", ["a", "b", "c"])),
                         ("tokenizer.json vocab score NaN-like", lambda j: j["model"]["vocab"][3].__setitem__(1, "nan")),
                         ("tokenizer.json added token id past 2^24", lambda j: j["added_tokens"][0].__setitem__("id", 2 ** 30)),
                         ("tokenizer.json added token content controls", lambda j: j["added_tokens"].append(
                             {"id": 5, "content": FORGE, "special": "yes"})),
                         ("tokenizer.json charsmap not base64", lambda j: j["normalizer"].__setitem__(
                             "precompiled_charsmap", FORGE)),
                         ("tokenizer.json model a list", lambda j: j.__setitem__("model", [1]))):
            out.append((name, lambda p, fn=fn: edit_json(p, "tokenizer.json", fn)))

    def weights(fn):
        def g(p):
            w = gen_marian.read_safetensors(os.path.join(p, "model.safetensors"))
            fn(w)
            gen_marian.write_safetensors(os.path.join(p, "model.safetensors"), w)
        return g
    attn = "TransientGlobalSelfAttention" if family == "longt5" else "SelfAttention"
    bias = "encoder.block.0.layer.0.%s.relative_attention_bias.weight" % attn
    out.append(("relative_attention_bias with a wrong shape", weights(lambda w: w.__setitem__(bias, w[bias][:, :-1]))))
    out.append(("an unexpected tensor named with controls", weights(
        lambda w: w.__setitem__("extra\n\x1b[31mtensor", w["shared.weight"][:2]))))
    out.append(("wo with a wrong shape", weights(lambda w: w.__setitem__(
        "decoder.block.0.layer.2.DenseReluDense.wo.weight", w["decoder.block.0.layer.2.DenseReluDense.wo.weight"][:-1]))))

    def truncate(name, frac):
        def fn(p):
            q = os.path.join(p, name)
            with open(q, "r+b") as f:
                f.truncate(int(os.path.getsize(q) * frac))
        return fn
    out.append(("model.safetensors cut in half", truncate("model.safetensors", 0.5)))
    out.append(("%s cut in half" % files[2], truncate(files[2], 0.5)))
    return out


def whisper_cases():
    """Whisper's (hub form): its config keys, the feature extractor's, generation_config, files and tensors.
    Each runs `forward --audio` on a short WAV. (Keys transformers ignores are not among them: scale_embedding,
    which modeling_whisper never applies, and the stored mel_filters, which WhisperFeatureExtractor computes
    again.)"""
    out = []
    cfg = lambda k, v: ("config %s=%r" % (k, v), lambda p: edit_json(p, "config.json", setter(k, v)))  # noqa: E731
    for v in ("whis\nper", "\x1b[31mred", FORGE, 7, None):
        out.append(cfg("model_type", v))
    for k, v in (("num_mel_bins", 0), ("num_mel_bins", 10 ** 6), ("num_mel_bins", "80"), ("max_source_positions", 0),
                 ("max_source_positions", 10 ** 9), ("max_target_positions", -1), ("d_model", 10 ** 12),
                 ("encoder_layers", 0), ("decoder_attention_heads", 7), ("vocab_size", 2 ** 40),
                 ("activation_function", FORGE), ("decoder_start_token_id", 10 ** 9), ("eos_token_id", 2.5)):
        out.append(cfg(k, v))
    out.append(("config truncated", lambda p: open(os.path.join(p, "config.json"), "w").write('{"model_type": "w')))
    fe = lambda k, v: ("preprocessor_config %s=%r" % (k, v), lambda p: edit_json(p, "preprocessor_config.json",  # noqa: E731
                                                                               setter(k, v)))
    for k, v in (("feature_size", 128), ("feature_size", -1), ("sampling_rate", 0), ("sampling_rate", "16k"),
                 ("n_fft", 0), ("n_fft", 10 ** 9), ("hop_length", 0), ("chunk_length", 10 ** 7), ("chunk_length", 3),
                 ("feature_extractor_type", FORGE), ("dither", "lots"), ("padding_value", float("inf"))):
        out.append(fe(k, v))
    gen = lambda k, v: ("generation %s=%r" % (k, v), lambda p: edit_json(p, "generation_config.json", setter(k, v)))  # noqa: E731
    for k, v in (("num_beams", 1000), ("suppress_tokens", FORGE), ("suppress_tokens", [10 ** 9]),
                 ("begin_suppress_tokens", [-5]), ("lang_to_id", [1, 2]), ("lang_to_id", {FORGE: 3}),
                 ("task_to_id", {"transcribe": 10 ** 9}), ("no_timestamps_token_id", "x")):
        out.append(gen(k, v))
    for kind in ("fifo", "dir", "dangling", "empty"):
        for name in ("config.json", "model.safetensors", "preprocessor_config.json"):
            out.append(("%s is a %s" % (name, kind), lambda p, kind=kind, name=name: replace_file(kind)(p, name)))
    out.append(("preprocessor_config.json of random bytes", lambda p: replace_file("random")(p, "preprocessor_config.json")))

    def weights(fn):
        def g(p):
            w = gen_marian.read_safetensors(os.path.join(p, "model.safetensors"))
            fn(w)
            gen_marian.write_safetensors(os.path.join(p, "model.safetensors"), w)
        return g
    for name in ("model.encoder.conv1.weight", "model.encoder.conv2.weight", "model.encoder.embed_positions.weight",
                 "model.decoder.embed_positions.weight", "model.decoder.embed_tokens.weight"):
        out.append(("%s with a wrong shape" % name, weights(lambda w, name=name: w.__setitem__(name, w[name][:-1]))))
    out.append(("conv1 missing", weights(lambda w: w.pop("model.encoder.conv1.weight"))))
    out.append(("an unexpected tensor named with controls", weights(
        lambda w: w.__setitem__("extra\n\x1b[31mtensor", w["model.decoder.embed_tokens.weight"][:2]))))
    out.append(("proj_out differing from the tied embedding", weights(lambda w: w.__setitem__(
        "proj_out.weight", w["model.decoder.embed_tokens.weight"] + 1.0))))

    def truncate(name, frac):
        def fn(p):
            q = os.path.join(p, name)
            with open(q, "r+b") as f:
                f.truncate(int(os.path.getsize(q) * frac))
        return fn
    out.append(("model.safetensors cut in half", truncate("model.safetensors", 0.5)))
    out.append(("model.safetensors cut to 7 bytes", lambda p: open(os.path.join(p, "model.safetensors"), "r+b").truncate(7)))
    return out


def write_wav(path, seconds=1.0, rate=16000):
    """A 440 Hz tone as 16-bit mono PCM."""
    import math
    import struct
    import wave
    n = int(seconds * rate)
    with wave.open(path, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(n)))


def cases(family):
    """(name, function(path)) pairs for a family's folder."""
    if family in ("t5", "longt5"):
        return t5_cases(family)
    if family == "whisper":
        return whisper_cases()
    out = []
    cfg = lambda k, v: ("config %s=%r" % (k, v), lambda p: edit_json(p, "config.json", setter(k, v)))  # noqa: E731
    for v in ("mar\nian", "\x1b[31mred", "bell\x07", "cr\rlf", "\u202eevil", FORGE, 7, None, ["marian"]):
        out.append(cfg("model_type", v))
    for v in (FORGE, 7, "softsign2"):
        out.append(cfg("activation_function", v))
    for k, v in (("d_model", "32"), ("d_model", 10 ** 12), ("d_model", -32), ("d_model", 0), ("encoder_layers", 0),
                 ("decoder_layers", 10 ** 6), ("vocab_size", 0), ("vocab_size", 2 ** 40), ("max_position_embeddings", 0),
                 ("max_position_embeddings", 10 ** 9), ("pad_token_id", 10 ** 7), ("eos_token_id", -1),
                 ("eos_token_id", 2.5), ("encoder_attention_heads", 7), ("encoder_ffn_dim", "big"),
                 ("decoder_start_token_id", 10 ** 9), ("scale_embedding", "yes"), ("tie_word_embeddings", 1)):
        out.append(cfg(k, v))
    out.append(("config not an object", lambda p: open(os.path.join(p, "config.json"), "w").write("[1, 2]")))
    out.append(("config truncated", lambda p: open(os.path.join(p, "config.json"), "w").write('{"model_type": "m')))
    gen = lambda k, v: ("generation %s=%r" % (k, v), lambda p: edit_json(p, "generation_config.json", setter(k, v)))  # noqa: E731
    for k, v in (("length_penalty", 1e308), ("length_penalty", "long"), ("num_beams", 1000), ("max_length", -1),
                 ("bad_words_ids", "pad"), ("bad_words_ids", [[]]),
                 ("early_stopping", FORGE), ("forced_bos_token_id", 10 ** 9), ("eos_token_id", [2, 3, 10 ** 9]),
                 ("repetition_penalty", -1), ("num_return_sequences", 0)):
        out.append(gen(k, v))
    if family not in ("marian", "bart"):
        for v in (FORGE, "xx_YY"):
            out.append(("tokenizer_config src_lang=%r" % v,
                        lambda p, v=v: edit_json(p, "tokenizer_config.json", setter("src_lang", v))))
    if family == "bart":
        for v in (FORGE, 7):
            out.append(("tokenizer_config add_prefix_space=%r" % v, lambda p, v=v: open(
                os.path.join(p, "tokenizer_config.json"), "w").write(json.dumps({"add_prefix_space": v}))))
        out.append(("merges.txt line with controls", lambda p: open(os.path.join(p, "merges.txt"), "a").write(
            FORGE.replace("\n", "") + " x\n")))
        for kind in ("fifo", "dir", "dangling"):
            out.append(("merges.txt is a %s" % kind, lambda p, kind=kind: replace_file(kind)(p, "merges.txt")))
    if family in ("marian", "m2m_100", "bart"):
        vocab_cases = (("vocab.json a list", lambda j: None, "[1, 2, 3]"),
                       ("vocab.json ids out of range", lambda j: j.__setitem__(FORGE, 10 ** 6), None),
                       ("vocab.json duplicate id", lambda j: j.__setitem__(FORGE, 0), None),
                       ("vocab.json string id", lambda j: j.__setitem__("x", "1"), None))
        for name, fn, raw in vocab_cases:
            if raw:
                out.append((name, lambda p, raw=raw: open(os.path.join(p, "vocab.json"), "w").write(raw)))
            else:
                out.append((name, lambda p, fn=fn: edit_json(p, "vocab.json", fn)))
    for kind in ("fifo", "dir", "dangling", "empty"):
        for name in ("config.json", "model.safetensors", SPM[family]) + (("vocab.json",) if family in ("marian", "m2m_100") else ()):
            out.append(("%s is a %s" % (name, kind), lambda p, kind=kind, name=name: replace_file(kind)(p, name)))
    out.append(("%s of random bytes" % SPM[family], lambda p: replace_file("random")(p, SPM[family])))

    def truncate(name, frac):
        def fn(p):
            q = os.path.join(p, name)
            size = os.path.getsize(q)
            with open(q, "r+b") as f:
                f.truncate(int(size * frac))
        return fn
    out.append(("%s cut in half" % SPM[family], truncate(SPM[family], 0.5)))
    out.append(("model.safetensors cut in half", truncate("model.safetensors", 0.5)))
    out.append(("model.safetensors cut to 7 bytes", truncate("model.safetensors", 0.0000001)))

    def weights(fn):
        def g(p):
            w = gen_marian.read_safetensors(os.path.join(p, "model.safetensors"))
            fn(w)
            gen_marian.write_safetensors(os.path.join(p, "model.safetensors"), w)
        return g
    out.append(("tied embeddings that differ", weights(
        lambda w: w.__setitem__("lm_head.weight", w["model.shared.weight"] * 2))))
    out.append(("three tied tensors that differ", weights(lambda w: (
        w.__setitem__("model.encoder.embed_tokens.weight", w["model.shared.weight"] + 1),
        w.__setitem__("model.decoder.embed_tokens.weight", w["model.shared.weight"] - 1)))))
    out.append(("an unexpected tensor named with controls", weights(
        lambda w: w.__setitem__("model.extra\n\x1b[31mtensor", w["model.shared.weight"][:2]))))
    def sharded(fn):
        """fn(path, weight_map) edits the map or the shards; it returns None (the index is written from the
        map), an object written as the whole index, or "fifo" (the index becomes a FIFO)."""
        def g(p):
            m = gen_marian.shard_folder(p, 3)
            whole = fn(p, m)
            q = os.path.join(p, "model.safetensors.index.json")
            os.remove(q)
            if whole == "fifo":
                os.mkfifo(q)
                return
            with open(q, "w") as f:
                json.dump({"metadata": {"total_size": 1}, "weight_map": m} if whole is None else whole, f)
        return g
    first, second = "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors"
    in_first = lambda m: next(k for k, v in m.items() if v == first)  # noqa: E731
    for name, fn in (
            ("the index names a missing shard", lambda p, m: os.remove(os.path.join(p, first))),
            ("a shard outside the folder", lambda p, m: m.__setitem__(in_first(m), "../" + first)),
            ("a shard named with controls", lambda p, m: m.__setitem__(in_first(m), FORGE + ".safetensors")),
            ("a shard that is not .safetensors", lambda p, m: m.__setitem__(in_first(m), "config.json")),
            ("the index puts a tensor in the wrong shard", lambda p, m: m.__setitem__(in_first(m), second)),
            ("a shard holds a tensor the index does not list", lambda p, m: m.pop(in_first(m))),
            ("the index lists a tensor no shard holds", lambda p, m: m.__setitem__("model.extra\n\x1b[31m", first)),
            ("a tensor in two shards", lambda p, m: gen_marian.write_safetensors(
                os.path.join(p, second), dict(gen_marian.read_safetensors(os.path.join(p, second)),
                                               **{in_first(m): gen_marian.read_safetensors(os.path.join(p, first))[in_first(m)]}))),
            ("weight_map is a list", lambda p, m: {"weight_map": [first]}),
            ("weight_map is empty", lambda p, m: {"weight_map": {}}),
            ("the index is a list", lambda p, m: [m]),
            ("the index is a FIFO", lambda p, m: "fifo"),
            ("a shard is truncated", lambda p, m: truncate(first, 0.5)(p))):
        out.append(("shards: " + name, sharded(fn)))
    out.append(("fc1 with a wrong shape", weights(
        lambda w: w.__setitem__("model.encoder.layers.0.fc1.weight", w["model.encoder.layers.0.fc1.weight"][:, :-1]))))
    return out


def printable_line(s):
    return all(c == "\n" or (ord(c) >= 0x20 and ord(c) != 0x7f and not 0x80 <= ord(c) < 0xa0 and c not in "\u202e\u2028\u2029")
               for c in s)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    vkformer = sys.argv[1]
    env = dict(os.environ, VKFORMER_VALIDATE="1")
    passed = failed = 0
    counts = {}
    with tempfile.TemporaryDirectory(prefix="vkf-hostile-models-") as tmp:
        wav = os.path.join(tmp, "tone.wav")
        write_wav(wav)
        for family in ("marian", "m2m_100", "nllb", "mbart", "bart", "t5", "longt5", "whisper"):
            clean = os.path.join(tmp, family + "-clean")
            make(family, clean)
            for name, fn in cases(family):
                path = os.path.join(tmp, "case")
                shutil.rmtree(path, ignore_errors=True)
                shutil.copytree(clean, path, symlinks=True)
                fn(path)
                if family == "whisper":
                    with open(os.path.join(clean, "config.json")) as f:
                        start = json.load(f)["decoder_start_token_id"]
                    args = [vkformer, "forward", "--model", path, "--audio", wav, "--tgt", "%d" % start, "--out",
                            os.path.join(tmp, "logits.npy")]
                else:
                    args = [vkformer, "translate", "--model", path, "--max-new", "4"]
                    if TARGET[family]:
                        args += ["--target-lang", TARGET[family]]
                    args += ["the house"]
                try:
                    p = subprocess.run(args, capture_output=True, timeout=TIMEOUT, env=env,
                                       stdin=subprocess.DEVNULL)
                except subprocess.TimeoutExpired:
                    print("FAIL %s: %s: no answer within %d s" % (family, name, TIMEOUT))
                    failed += 1
                    continue
                try:
                    err = p.stderr.decode("utf-8")
                except UnicodeDecodeError:
                    err = None
                lines = [l for l in (err or "").splitlines() if "WARNING: UNSUPPORTED" not in l]
                good = p.returncode in (1, 2) and err is not None and len(lines) == 1 and printable_line(lines[0])
                key = name.split(" ")[0].rstrip(":")
                counts[key] = counts.get(key, 0) + 1
                if good:
                    passed += 1
                else:
                    failed += 1
                    print("FAIL %s: %s: exit %d, stderr %r" % (family, name, p.returncode, p.stderr[:300]))
    print("test_hostile_models: %d passed, %d failed (%s)" % (passed, failed,
          ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
