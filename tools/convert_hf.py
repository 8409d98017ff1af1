#!/usr/bin/python3
"""One-time converter of a Hugging Face model folder's pytorch_model.bin into model.safetensors (a
sharded pytorch_model-0000N-of-0000M.bin checkpoint into safetensors shards and their index).

usage: /usr/bin/python3 tools/convert_hf.py DIR [--force]

vkformer reads Marian (opus-mt) folders from model.safetensors only; older hub repositories ship just
pytorch_model.bin (a pickled state dict). This reads DIR/pytorch_model.bin with torch.load (map_location
cpu; weights_only=True where the installed PyTorch has it, so no code in the file runs) and writes
DIR/model.safetensors: each tensor as stored (F32, F16 or BF16), tensors that share storage (tied
embeddings: model.shared / encoder and decoder embed_tokens / lm_head) written once, under the first of
their names in the state dict. Needs only torch and numpy.

Refuses, with one line on stderr and exit status 1, when DIR has no pytorch_model.bin, when
DIR/model.safetensors exists (unless --force), or when a tensor is not floating point.
"""
import json
import os
import struct
import sys

sys.dont_write_bytecode = True


def die(msg):
    print("convert_hf: %s" % msg, file=sys.stderr)
    sys.exit(1)


def load_state_dict(path):
    import torch
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # PyTorch without weights_only
        sd = torch.load(path, map_location="cpu")
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    if not isinstance(sd, dict):
        raise ValueError("%s holds a %s, not a state dict" % (path, type(sd).__name__))
    return sd


def write_safetensors(src, sd, dst):
    """Writes state dict sd (read from src) to dst; returns (tensor names written, tied aliases skipped, bytes)."""
    import torch
    dtypes = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    seen = {}   # storage identity -> first name
    header, blobs, offset, skipped = {}, [], 0, []
    for name, t in sd.items():
        if not isinstance(t, torch.Tensor):
            die("%s: %s is a %s, not a tensor" % (src, name, type(t).__name__))
        if t.dtype not in dtypes:
            die("%s: tensor %s is %s, not floating point (F32, F16, BF16)" % (src, name, str(t.dtype).replace("torch.", "")))
        key = (t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr(),
               t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if t.numel() and key in seen:
            skipped.append((name, seen[key]))
            continue
        seen[key] = name
        c = t.detach().contiguous()
        if c.dtype == torch.bfloat16:
            raw = c.view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            raw = c.numpy().astype(c.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtypes[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = dst + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for b in blobs:
                f.write(b)
        os.replace(tmp, dst)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        die("cannot write %s: %s" % (dst, e.strerror or e))
    return [k for k in header if k != "__metadata__"], skipped, offset


def read_or_die(src):
    try:
        return load_state_dict(src)
    except Exception as e:  # noqa: BLE001 - any unpickling problem is one line
        die("cannot read %s: %s" % (src, str(e).splitlines()[0] if str(e) else type(e).__name__))


def convert(folder, force=False):
    if not os.path.isdir(folder):
        die("%s is not a folder" % folder)
    src = os.path.join(folder, "pytorch_model.bin")
    index = os.path.join(folder, "pytorch_model.bin.index.json")
    dst = os.path.join(folder, "model.safetensors")
    out_index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.isfile(src) and not os.path.isfile(index):
        die("%s (or pytorch_model.bin.index.json) not found (nothing to convert)" % src)
    for d in (dst, out_index):
        if os.path.exists(d) and not force:
            die("%s exists already (--force overwrites it)" % d)
    if os.path.isfile(src):
        names, skipped, size = write_safetensors(src, read_or_die(src), dst)
        print("%s: %d tensors (%d tied aliases not written again: %s), %.1f MB"
              % (dst, len(names), len(skipped), ", ".join("%s = %s" % s for s in skipped) or "none", size / 1e6))
        return 0
    # a sharded checkpoint: each shard becomes one safetensors shard, one at a time (a 3.3B model's
    # shards never sit in memory together), and model.safetensors.index.json maps the tensors to them
    try:
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        shards = sorted(set(weight_map.values()))
        if not shards or any(not isinstance(n, str) or "/" in n or n.startswith(".") for n in shards):
            raise ValueError("weight_map names no shards or names one outside the folder")
    except (OSError, ValueError, KeyError, TypeError) as e:
        die("cannot read %s: %s" % (index, e))
    new_map, total = {}, 0
    for i, name in enumerate(shards):
        out_name = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        names, skipped, size = write_safetensors(name, read_or_die(os.path.join(folder, name)),
                                                 os.path.join(folder, out_name))
        for n in names:
            new_map[n] = out_name
        total += size
        print("%s: %d tensors from %s, %.1f MB" % (out_name, len(names), name, size / 1e6))
    with open(out_index, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": new_map}, f, indent=2)
    print("%s: %d tensors in %d shards" % (out_index, len(new_map), len(shards)))
    return 0


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    opts = [a for a in argv if a.startswith("--")]
    if len(args) != 1 or any(o not in ("--force",) for o in opts):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        die("%s is missing (apt-get install python3-torch python3-numpy; run with /usr/bin/python3)" % e.name)
    return convert(args[0], "--force" in opts)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
