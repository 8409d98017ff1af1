"""vkformer from Python: ctypes over the shared library, no compiler needed.

    import vkformer
    with vkformer.load("models/demo.safetensors") as model:
        model.translate("three hundred forty two")              # '342'
        model.translate(["two", "forty one"])                    # ['2', '41']
        src = model.encode("forty one")                          # int32 ids, eos last
        model.generate(src)                                      # int32 ids, without bos and eos
        model.forward(src, [model.config.bos_id, 7])             # float32 (len(tgt), tgt_vocab_size)

The library is libvkformer.so (the installed one, or build/libvkformer.so from
the build tree): the `library` argument of load() / Context() names its path;
without it, the VKFORMER_LIBRARY environment variable, else
ctypes.util.find_library("vkformer") (the system's library path).

Every failing library call raises VkformerError carrying the library's message
(vkf_last_error) and status. Ids go in as anything numpy turns into integers
and come out as int32 arrays; logits come out as float32 arrays. A context and
its models must be used by one thread at a time (as in C); the library call
itself runs without the GIL.
"""

import collections
import ctypes
import ctypes.util
import os
import weakref

import numpy as np

__all__ = ["VkformerError", "Context", "Model", "ModelConfig", "load", "library_version"]

# The C API this module was written against (include/vkformer.h).
_API_MAJOR = 0


class VkformerError(Exception):
    """A failing vkformer call. str() is the library's message; status is the
    vkf_status code (None where the library itself could not be loaded) and
    status_name its constant name, e.g. "VKF_ERROR_IO"."""

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.status_name = status_name


# ---------------------------------------------------------------- C types

_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class _ContextOptions(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_char_p),
        ("validation", ctypes.c_int),
        ("allow_host_visible", ctypes.c_bool),
        ("block_size", ctypes.c_uint64),
        ("log", _LOG_FN),
        ("log_user", ctypes.c_void_p),
        ("max_device_memory", ctypes.c_uint64),
        ("cache_dir", ctypes.c_char_p),
        ("pipeline_cache", ctypes.c_int),
        ("tune", ctypes.c_int),
        ("coopmat", ctypes.c_int),
    ]


class _ContextOptionsStorage(ctypes.Union):
    # Room for fields a newer library appends (vkf_context_options_init fills them).
    _fields_ = [("options", _ContextOptions), ("_room", ctypes.c_uint8 * 1024)]


class _ModelConfig(ctypes.Structure):
    _fields_ = [
        ("d_model", ctypes.c_uint32),
        ("n_heads", ctypes.c_uint32),
        ("n_encoder_layers", ctypes.c_uint32),
        ("n_decoder_layers", ctypes.c_uint32),
        ("d_ff", ctypes.c_uint32),
        ("activation", ctypes.c_int),
        ("norm_first", ctypes.c_bool),
        ("layer_norm_eps", ctypes.c_float),
        ("src_vocab_size", ctypes.c_uint32),
        ("tgt_vocab_size", ctypes.c_uint32),
        ("max_len", ctypes.c_uint32),
        ("embed_scale", ctypes.c_float),
        ("pad_id", ctypes.c_int32),
        ("bos_id", ctypes.c_int32),
        ("eos_id", ctypes.c_int32),
        ("has_vocab", ctypes.c_bool),
        ("activations", ctypes.c_int),
        ("format", ctypes.c_int),   # 0: a vkformer file, 1: a Hugging Face folder
        ("family", ctypes.c_char * 32),
        ("head_dim", ctypes.c_uint32),
        ("n_languages", ctypes.c_uint32),
        ("target_language_required", ctypes.c_bool),
    ]


class _ModelConfigStorage(ctypes.Union):
    _fields_ = [("config", _ModelConfig), ("_room", ctypes.c_uint8 * 1024)]


class _LoadOptions(ctypes.Structure):
    _fields_ = [("precision", ctypes.c_int)]


class _Sequences(ctypes.Structure):
    _fields_ = [
        ("count", ctypes.c_uint32),
        ("ids", ctypes.POINTER(ctypes.POINTER(ctypes.c_int32))),
        ("lengths", ctypes.POINTER(ctypes.c_uint32)),
    ]


class _GenerateOptions(ctypes.Structure):
    # vkf_generate_options (include/vkformer.h), field for field.
    _fields_ = [
        ("max_new", ctypes.c_uint32),
        ("min_new", ctypes.c_uint32),
        ("beams", ctypes.c_uint32),
        ("length_penalty", ctypes.c_float),
        ("early_stopping", ctypes.c_bool),
        ("n_best", ctypes.c_uint32),
        ("sample", ctypes.c_bool),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_uint32),
        ("top_p", ctypes.c_float),
        ("seed", ctypes.c_uint64),
        ("forced_eos", ctypes.c_bool),
        ("renormalize", ctypes.c_bool),
        ("forced_bos", ctypes.c_bool),
        ("forced_bos_id", ctypes.c_int32),
    ]


class _ModelAttention(ctypes.Structure):
    # vkf_model_attention (include/vkformer.h), field for field.
    _fields_ = [("encoder", ctypes.c_char * 48), ("decoder", ctypes.c_char * 48), ("cross", ctypes.c_char * 48),
                ("decode_self", ctypes.c_char * 48), ("decode_cross", ctypes.c_char * 48),
                ("kernel", ctypes.c_char * 24)]


class _DeviceInfoHead(ctypes.Structure):
    # The first fields of vkf_device_info (new fields are only ever appended).
    _fields_ = [("index", ctypes.c_uint32), ("name", ctypes.c_char * 256), ("type", ctypes.c_int)]


_PRECISIONS = {"auto": 0, "f32": 1, "f16": 2, "int8": 3}
_ACTIVATIONS = {0: "none", 1: "relu", 2: "gelu", 3: "silu", 4: "gelu_tanh"}
_DTYPES = {0: "f32", 1: "i32", 2: "f16"}

ModelConfig = collections.namedtuple("ModelConfig", [f for f, _ in _ModelConfig._fields_])
ModelConfig.__doc__ = ("vkf_model_config: activation is 'relu', 'gelu' or 'silu', activations 'f32' or 'f16', "
                       "format 'vkformer' (a file) or 'huggingface' (a hub folder), family the family that read it "
                       "('vkformer', 'marian', 'm2m_100', 'nllb', 'mbart', 't5', 'mt5', 'longt5').")

# ---------------------------------------------------------------- the library

_P = ctypes.c_void_p
_STATUS = ctypes.c_int
_SIGNATURES = {
    "vkf_version": (ctypes.c_uint32, []),
    "vkf_version_string": (ctypes.c_char_p, []),
    "vkf_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "vkf_last_error": (ctypes.c_char_p, []),
    "vkf_context_options_init": (None, [ctypes.POINTER(_ContextOptionsStorage)]),
    "vkf_context_create": (_STATUS, [ctypes.POINTER(_ContextOptionsStorage), ctypes.POINTER(_P)]),
    "vkf_context_destroy": (None, [_P]),
    "vkf_context_device_info": (_STATUS, [_P, _P]),
    "vkf_context_validation_counts": (_STATUS, [_P, ctypes.POINTER(ctypes.c_uint32),
                                                ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_bool)]),
    "vkf_model_load_with": (_STATUS, [_P, ctypes.c_char_p, ctypes.POINTER(_LoadOptions), ctypes.POINTER(_P)]),
    "vkf_model_destroy": (None, [_P]),
    "vkf_model_get_config": (_STATUS, [_P, ctypes.POINTER(_ModelConfigStorage)]),
    "vkf_model_set_attention": (_STATUS, [_P, ctypes.c_char_p, ctypes.c_char_p]),
    "vkf_model_set_seed": (_STATUS, [_P, ctypes.c_uint64]),
    "vkf_model_get_attention": (_STATUS, [_P, ctypes.POINTER(_ModelAttention)]),
    "vkf_model_forward": (_STATUS, [_P, ctypes.POINTER(_Sequences), ctypes.POINTER(_Sequences),
                                    ctypes.POINTER(ctypes.c_float), ctypes.c_uint64]),
    "vkf_model_generate": (_STATUS, [_P, ctypes.POINTER(_Sequences), ctypes.c_uint32,
                                     ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint32)]),
    "vkf_model_generate_defaults": (_STATUS, [_P, ctypes.POINTER(_GenerateOptions)]),
    "vkf_model_generate_with": (_STATUS, [_P, ctypes.POINTER(_Sequences), ctypes.POINTER(_GenerateOptions),
                                          ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint32),
                                          ctypes.POINTER(ctypes.c_float)]),
    "vkf_model_encode_text_with": (_STATUS, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32,
                                             ctypes.POINTER(ctypes.c_uint32)]),
    "vkf_model_set_target_language": (_STATUS, [_P, ctypes.c_char_p, ctypes.POINTER(_GenerateOptions)]),
    "vkf_model_language": (ctypes.c_char_p, [_P, ctypes.c_uint32]),
    "vkf_model_encode_text": (_STATUS, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32,
                                        ctypes.POINTER(ctypes.c_uint32)]),
    "vkf_model_decode_text": (_STATUS, [_P, ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32, ctypes.c_char_p,
                                        ctypes.c_size_t]),
}

_libraries = {}


def _find_library(path):
    if path is None:
        path = os.environ.get("VKFORMER_LIBRARY") or None
    if path is None:
        path = ctypes.util.find_library("vkformer")
        if path is None:
            raise VkformerError("libvkformer not found: pass library=PATH, set VKFORMER_LIBRARY, "
                                "or install vkformer where the dynamic linker finds it")
    return os.fspath(path)


def _library(path=None):
    """The loaded library (one per path), with every signature this module uses."""
    path = _find_library(path)
    lib = _libraries.get(path)
    if lib is not None:
        return lib
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise VkformerError("cannot load the vkformer library %s: %s" % (path, e)) from None
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise VkformerError("%s is not a vkformer library this module can use: it lacks %s" % (path, name)) from None
        fn.restype, fn.argtypes = restype, argtypes
    major = lib.vkf_version() // 10000
    if major != _API_MAJOR:
        raise VkformerError("%s is vkformer %s; this module needs major version %d"
                            % (path, lib.vkf_version_string().decode(), _API_MAJOR))
    _libraries[path] = lib
    return lib


def library_version(library=None):
    """The version string of the library that `library` (as for load()) finds."""
    return _library(library).vkf_version_string().decode()


def _check(lib, status):
    if status != 0:
        raise VkformerError(lib.vkf_last_error().decode("utf-8", "replace"), status,
                            lib.vkf_status_string(status).decode())


def _ids_array(ids, what):
    """One sequence as a contiguous 1-D int32 array."""
    a = np.asarray(ids)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("%s: a sequence of ids must be 1-D and not empty, got shape %s" % (what, a.shape))
    if a.dtype.kind not in "iu":
        raise TypeError("%s: ids must be integers, got %s" % (what, a.dtype))
    if a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max:
        raise ValueError("%s: an id does not fit int32" % what)
    return np.ascontiguousarray(a, dtype=np.int32)


def _is_batch(x):
    """A batch is a 2-D array or a list/tuple of sequences; one sequence is 1-D."""
    if isinstance(x, np.ndarray):
        return x.ndim == 2
    if isinstance(x, (list, tuple)) and len(x) > 0:
        return not np.isscalar(x[0])
    return False


class _Batch:
    """A vkf_sequences over int32 arrays that it keeps alive."""

    def __init__(self, seqs, what):
        self.arrays = [_ids_array(s, "%s %d" % (what, i)) for i, s in enumerate(seqs)]
        if not self.arrays:
            raise ValueError("%s: no sequences given" % what)
        n = len(self.arrays)
        self.ptrs = (ctypes.POINTER(ctypes.c_int32) * n)(
            *[a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)) for a in self.arrays])
        self.lengths = (ctypes.c_uint32 * n)(*[a.size for a in self.arrays])
        self.seq = _Sequences(n, self.ptrs, self.lengths)

    def __len__(self):
        return len(self.arrays)


# ---------------------------------------------------------------- context


class Context:
    """A vkf_context: one Vulkan device. device: an index or a substring of its
    name (None: VKFORMER_DEVICE, else the first discrete GPU, ...); validation:
    True/False, None for VKFORMER_VALIDATE; log: a callable(level, message)
    receiving validation messages and other diagnostics; library: as for load()."""

    def __init__(self, device=None, validation=None, cache_dir=None, log=None, library=None):
        self._lib = _library(library)
        self._handle = None
        self._models = weakref.WeakSet()
        storage = _ContextOptionsStorage()
        self._lib.vkf_context_options_init(ctypes.byref(storage))
        o = storage.options
        if device is not None:
            o.device = str(device).encode()
        if validation is not None:
            o.validation = 1 if validation else 0
        if cache_dir is not None:
            o.cache_dir = os.fsencode(cache_dir)
        if log is not None:
            # Kept on the object: the library calls it for as long as the context lives.
            self._log = _LOG_FN(lambda user, level, message: log(level, message.decode("utf-8", "replace")))
            o.log = self._log
        handle = _P()
        _check(self._lib, self._lib.vkf_context_create(ctypes.byref(storage), ctypes.byref(handle)))
        self._handle = handle

    def _live(self):
        if self._handle is None:
            raise VkformerError("the context is closed", 12, "VKF_ERROR_STATE")
        return self._handle

    @property
    def device_name(self):
        buf = ctypes.create_string_buffer(1 << 16)  # vkf_device_info, with room to grow
        _check(self._lib, self._lib.vkf_context_device_info(self._live(), buf))
        return _DeviceInfoHead.from_buffer(buf).name.decode("utf-8", "replace")

    def validation_counts(self):
        """(errors, warnings, validation_on) counted since the context was made."""
        errors, warnings, on = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_bool()
        _check(self._lib, self._lib.vkf_context_validation_counts(self._live(), ctypes.byref(errors),
                                                                  ctypes.byref(warnings), ctypes.byref(on)))
        return errors.value, warnings.value, on.value

    def load(self, path, precision="auto"):
        """A Model from a model file (docs/file-format.md) on this context."""
        return Model(self, path, precision)

    def close(self):
        """Closes the models loaded on the context, then the context."""
        for m in list(self._models):
            m.close()
        if self._handle is not None:
            self._lib.vkf_context_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()


# ---------------------------------------------------------------- model


class Model:
    """A loaded encoder-decoder model (vkf_model). Make one with load() or
    Context.load()."""

    def __init__(self, context, path, precision="auto"):
        if precision not in _PRECISIONS:
            raise ValueError("precision must be one of %s" % ", ".join(_PRECISIONS))
        self._context = context
        self._lib = context._lib
        self._handle = None
        self._owns_context = False
        options = _LoadOptions(_PRECISIONS[precision])
        handle = _P()
        _check(self._lib, self._lib.vkf_model_load_with(context._live(), os.fsencode(path), ctypes.byref(options),
                                                        ctypes.byref(handle)))
        self._handle = handle
        context._models.add(self)
        storage = _ModelConfigStorage()
        _check(self._lib, self._lib.vkf_model_get_config(handle, ctypes.byref(storage)))
        c = storage.config
        values = {f: getattr(c, f) for f, _ in _ModelConfig._fields_}
        values["activation"] = _ACTIVATIONS.get(c.activation, c.activation)
        values["activations"] = _DTYPES.get(c.activations, c.activations)
        values["format"] = {0: "vkformer", 1: "huggingface"}.get(c.format, c.format)
        values["family"] = c.family.decode()
        self.config = ModelConfig(**values)

    @property
    def context(self):
        return self._context

    def _live(self):
        if self._handle is None:
            raise VkformerError("the model is closed", 12, "VKF_ERROR_STATE")
        return self._handle

    def set_attention(self, self_attention="dense", cross_attention=None):
        """Attention variants, as --attention / --cross-attention (docs/attention.md)."""
        _check(self._lib, self._lib.vkf_model_set_attention(
            self._live(), self_attention.encode() if self_attention else None,
            cross_attention.encode() if cross_attention else None))

    def set_seed(self, seed):
        _check(self._lib, self._lib.vkf_model_set_seed(self._live(), int(seed)))

    def attention_used(self):
        """What runs at each attention site (vkf_model_get_attention): a dict of
        encoder, decoder, cross, decode_self, decode_cross (variant names; where the
        one asked for does not apply, what runs instead) and kernel."""
        a = _ModelAttention()
        _check(self._lib, self._lib.vkf_model_get_attention(self._live(), ctypes.byref(a)))
        return {f: getattr(a, f).decode() for f, _ in _ModelAttention._fields_}

    # -- text

    def encode(self, text, source_lang=None, target_lang=None):
        """Source ids of a text as the model's tokenizer makes them (eos and
        language codes placed as it places them), as int32. source_lang: a code
        as the tokenizer names it (eng_Latn, en, en_XX; default: the tokenizer's);
        target_lang: only where the target language is a token of the source
        (Marian's >>fra<<). A text holding NUL raises ValueError (C would see only
        the part before it), as does one that is not encodable as UTF-8 (a lone
        surrogate: UnicodeEncodeError)."""
        if "\0" in text:
            raise ValueError("the text holds a NUL character at index %d" % text.index("\0"))
        cap = self.config.max_len
        ids = np.zeros(cap, dtype=np.int32)
        n = ctypes.c_uint32()
        _check(self._lib, self._lib.vkf_model_encode_text_with(
            self._live(), text.encode("utf-8"), source_lang.encode() if source_lang else None,
            target_lang.encode() if target_lang else None, ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), cap,
            ctypes.byref(n)))
        return ids[:n.value].copy()

    def languages(self):
        """The language codes the model's tokenizer knows (vkf_model_language)."""
        return [self._lib.vkf_model_language(self._live(), i).decode() for i in range(self.config.n_languages)]

    def decode(self, ids):
        """The text of target ids (without bos and eos)."""
        a = np.ascontiguousarray(np.asarray(ids, dtype=np.int64).reshape(-1), dtype=np.int32)
        cap = 1024 * (a.size + 1)
        buf = ctypes.create_string_buffer(cap)
        _check(self._lib, self._lib.vkf_model_decode_text(self._live(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                                          a.size, buf, cap))
        return buf.value.decode("utf-8")

    def translate(self, text, max_new=None, beams=None, source_lang=None, target_lang=None):
        """Translation of a text, or of a list of texts (one batch): str or list
        of str. Decoding as generate() (the model's defaults: greedy, or a Hugging
        Face folder's generation_config); source_lang / target_lang: codes as the
        tokenizer names them (NLLB eng_Latn, M2M-100 en, mBART-50 en_XX), the
        target forced as the first generated token where the family does so."""
        if isinstance(text, str):
            return self.translate([text], max_new, beams, source_lang, target_lang)[0]
        texts = list(text)
        src = [self.encode(t, source_lang, target_lang) for t in texts]
        return [self.decode(ids) for ids in self.generate(src, max_new, beams, target_lang=target_lang)]

    # -- ids

    def generate(self, src, max_new=None, beams=None, target_lang=None):
        """Decoding with the model's defaults (vkf_model_generate_defaults: greedy
        for a vkformer file; a Hugging Face folder's generation_config, e.g. 4
        beams, forced eos, the pad id banned). src: one sequence of source ids (1-D)
        or a batch (a 2-D array or a list of sequences of any lengths). Returns the
        generated ids (int32, without bos and eos) as one array, or a list of arrays
        for a batch. max_new: at most this many tokens (default: the model's own,
        else max_len); beams: beam search with this many beams (1: greedy);
        target_lang: generate in that language (vkf_model_set_target_language)."""
        batch = _is_batch(src)
        seqs = _Batch(src if batch else [src], "source")
        opts = _GenerateOptions()
        _check(self._lib, self._lib.vkf_model_generate_defaults(self._live(), ctypes.byref(opts)))
        if max_new is not None:
            if int(max_new) < 1:
                raise ValueError("max_new must be at least 1")
            opts.max_new = int(max_new)
            opts.min_new = min(opts.min_new, opts.max_new)
        if opts.max_new == 0:
            opts.max_new = self.config.max_len
        if beams is not None:
            if int(beams) < 1:
                raise ValueError("beams must be at least 1")
            opts.beams = int(beams)
        opts.n_best = 1
        _check(self._lib, self._lib.vkf_model_set_target_language(
            self._live(), target_lang.encode() if target_lang else None, ctypes.byref(opts)))
        steps = opts.max_new
        out = np.zeros((len(seqs), steps), dtype=np.int32)
        lengths = np.zeros(len(seqs), dtype=np.uint32)
        _check(self._lib, self._lib.vkf_model_generate_with(self._live(), ctypes.byref(seqs.seq), ctypes.byref(opts),
                                                            out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                                            lengths.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
                                                            None))
        result = [out[i, :lengths[i]].copy() for i in range(len(seqs))]
        return result if batch else result[0]

    def forward(self, src, tgt):
        """The generator's logits (pre-softmax) for every target position:
        float32 (len(tgt), tgt_vocab_size) for one sequence pair, (count, T,
        tgt_vocab_size) for a batch (T the longest target; rows past a target's
        length are zero)."""
        batch = _is_batch(src)
        if batch != _is_batch(tgt):
            raise ValueError("src and tgt must both be one sequence or both a batch")
        s = _Batch(src if batch else [src], "source")
        t = _Batch(tgt if batch else [tgt], "target")
        if len(s) != len(t):
            raise ValueError("%d sources but %d targets" % (len(s), len(t)))
        longest = max(a.size for a in t.arrays)
        logits = np.zeros((len(t), longest, self.config.tgt_vocab_size), dtype=np.float32)
        _check(self._lib, self._lib.vkf_model_forward(self._live(), ctypes.byref(s.seq), ctypes.byref(t.seq),
                                                      logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                      logits.size))
        return logits if batch else logits[0]

    def close(self):
        """Frees the model (and the context load() made for it)."""
        if self._handle is not None:
            self._lib.vkf_model_destroy(self._handle)
            self._handle = None
        if self._owns_context:
            self._owns_context = False
            self._context.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None or getattr(self, "_owns_context", False):
            self.close()


def load(path, device=None, precision="auto", attention=None, cross_attention=None, seed=None, validation=None,
         library=None):
    """Loads a model file on a context of its own (closed with the model).
    device, validation, library: as for Context; precision "auto", "f32", "f16"
    or "int8"; attention, cross_attention, seed: as Model.set_attention/set_seed."""
    context = Context(device=device, validation=validation, library=library)
    try:
        model = Model(context, path, precision)
    except BaseException:
        context.close()
        raise
    model._owns_context = True
    try:
        if attention is not None or cross_attention is not None:
            model.set_attention(attention or "dense", cross_attention)
        if seed is not None:
            model.set_seed(seed)
    except BaseException:
        model.close()
        raise
    return model
