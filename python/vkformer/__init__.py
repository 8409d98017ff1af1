"""vkformer from Python: ctypes over the shared library, no compiler needed.

    import vkformer
    with vkformer.load("models/demo.safetensors") as model:
        model.translate("three hundred forty two")              # '342'
        model.translate(["two", "forty one"])                    # ['2', '41']
        src = model.encode("forty one")                          # int32 ids, eos last
        model.generate(src)                                      # int32 ids, without bos and eos
        model.forward(src, [model.config.bos_id, 7])             # float32 (len(tgt), tgt_vocab_size)

Install it with `pip install ./python` (into a virtual environment; the build
tree's libvkformer.so is copied into the package) or `meson install` (the
package goes into site-packages and remembers where the library went). The
library is found, first match wins (library_path() says which):
  1. the `library` argument of load() / Context() / Pool(), a path;
  2. the VKFORMER_LIBRARY environment variable;
  3. libvkformer.so in this package's own folder (what pip install bundles);
  4. the library folder that `meson install` recorded in vkformer/_install.py
     (relative to the package, so a DESTDIR or a moved prefix still works);
  5. the dynamic linker's search path (ctypes.util.find_library, then
     libvkformer.so.MAJOR: LD_LIBRARY_PATH, the ldconfig cache).

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

__all__ = ["VkformerError", "Context", "Model", "ModelConfig", "Pool", "Score", "load", "library_path",
           "library_version", "read_audio", "resample"]

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
        ("audio_mels", ctypes.c_uint32),      # models that read audio (Whisper); 0 elsewhere
        ("audio_frames", ctypes.c_uint32),
        ("audio_samples", ctypes.c_uint32),
        ("sample_rate", ctypes.c_uint32),
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


class _AudioBatch(ctypes.Structure):
    _fields_ = [
        ("count", ctypes.c_uint32),
        ("samples", ctypes.POINTER(ctypes.POINTER(ctypes.c_float))),
        ("lengths", ctypes.POINTER(ctypes.c_uint64)),
    ]


_TOKEN_FN = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int32),
                             ctypes.c_uint32)


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
        ("target_prefix", ctypes.c_void_p),
        ("repetition_penalty", ctypes.c_float),
        ("no_repeat_ngram", ctypes.c_uint32),
        ("suppress_ids", ctypes.POINTER(ctypes.c_int32)),
        ("n_suppress", ctypes.c_uint32),
        ("bad_sequences", ctypes.c_void_p),
        ("end_ids", ctypes.POINTER(ctypes.c_int32)),
        ("n_end_ids", ctypes.c_uint32),
        ("on_tokens", _TOKEN_FN),
        ("on_tokens_user", ctypes.c_void_p),
        ("on_progress", ctypes.c_void_p),
        ("on_progress_user", ctypes.c_void_p),
        ("max_new_factor", ctypes.c_float),
    ]


class _GenerateOptionsStorage(ctypes.Union):
    # Room for fields a newer library appends (vkf_model_generate_defaults fills them).
    _fields_ = [("options", _GenerateOptions), ("_room", ctypes.c_uint8 * 1024)]


class _ModelAttention(ctypes.Structure):
    # vkf_model_attention (include/vkformer.h), field for field.
    _fields_ = [("encoder", ctypes.c_char * 48), ("decoder", ctypes.c_char * 48), ("cross", ctypes.c_char * 48),
                ("decode_self", ctypes.c_char * 48), ("decode_cross", ctypes.c_char * 48),
                ("kernel", ctypes.c_char * 24)]


class _DeviceInfoHead(ctypes.Structure):
    # The first fields of vkf_device_info (new fields are only ever appended).
    _fields_ = [("index", ctypes.c_uint32), ("name", ctypes.c_char * 256), ("type", ctypes.c_int)]


class _PoolOptions(ctypes.Structure):
    # vkf_pool_options (include/vkformer.h), field for field.
    _fields_ = [
        ("devices", ctypes.c_char_p),
        ("context", ctypes.POINTER(_ContextOptionsStorage)),
        ("load", ctypes.POINTER(_LoadOptions)),
        ("self_attention", ctypes.c_char_p),
        ("cross_attention", ctypes.c_char_p),
        ("seed", ctypes.c_uint64),
        ("dispatch", ctypes.c_int),
    ]


class _PoolOptionsStorage(ctypes.Union):
    _fields_ = [("options", _PoolOptions), ("_room", ctypes.c_uint8 * 1024)]


class _PoolDevice(ctypes.Structure):
    # vkf_pool_device up to its vkf_device_info, which comes last (8-byte aligned).
    _fields_ = [
        ("active", ctypes.c_bool),
        ("failure", ctypes.c_int),
        ("failure_message", ctypes.c_char * 512),
        ("batches", ctypes.c_uint32),
        ("sources", ctypes.c_uint64),
        ("tokens", ctypes.c_uint64),
        ("busy_ms", ctypes.c_double),
        ("validation_errors", ctypes.c_uint32),
        ("validation_warnings", ctypes.c_uint32),
        ("ready", ctypes.c_bool),
    ]


_PRECISIONS = {"auto": 0, "f32": 1, "f16": 2, "int8": 3}
_DISPATCH = {"balanced": 0, "any-free": 1}
_ACTIVATIONS = {0: "none", 1: "relu", 2: "gelu", 3: "silu", 4: "gelu_tanh"}
_DTYPES = {0: "f32", 1: "i32", 2: "f16"}

Score = collections.namedtuple("Score", ["logprobs", "sum", "normalized"])
Score.__doc__ = ("Model.score()'s result: logprobs (float32, one per target id and one for eos), their sum, and "
                 "sum / len(logprobs) (CTranslate2's normalisation).")

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
    "vkf_model_generate_defaults": (_STATUS, [_P, ctypes.POINTER(_GenerateOptionsStorage)]),
    "vkf_model_generate_with": (_STATUS, [_P, ctypes.POINTER(_Sequences), ctypes.POINTER(_GenerateOptionsStorage),
                                          ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint32),
                                          ctypes.POINTER(ctypes.c_float)]),
    "vkf_model_generate_batched": (_STATUS, [_P, ctypes.POINTER(_Sequences), ctypes.POINTER(_GenerateOptionsStorage),
                                             ctypes.c_uint32, ctypes.POINTER(ctypes.c_int32),
                                             ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_float)]),
    "vkf_model_score": (_STATUS, [_P, ctypes.POINTER(_Sequences), ctypes.POINTER(_Sequences),
                                  ctypes.POINTER(ctypes.c_float), ctypes.c_uint64]),
    "vkf_model_encode_target_text": (_STATUS, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32,
                                               ctypes.POINTER(ctypes.c_uint32)]),
    "vkf_model_target_token_id": (_STATUS, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32)]),
    "vkf_model_encode_text_with": (_STATUS, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32,
                                             ctypes.POINTER(ctypes.c_uint32)]),
    "vkf_model_set_target_language": (_STATUS, [_P, ctypes.c_char_p, ctypes.POINTER(_GenerateOptionsStorage)]),
    "vkf_model_language": (ctypes.c_char_p, [_P, ctypes.c_uint32]),
    "vkf_model_encode_text": (_STATUS, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32,
                                        ctypes.POINTER(ctypes.c_uint32)]),
    "vkf_model_decode_text": (_STATUS, [_P, ctypes.POINTER(ctypes.c_int32), ctypes.c_uint32, ctypes.c_char_p,
                                        ctypes.c_size_t]),
    "vkf_audio_read": (_STATUS, [ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)),
                                 ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)]),
    "vkf_audio_resample": (_STATUS, [ctypes.POINTER(ctypes.c_float), ctypes.c_uint64, ctypes.c_uint32,
                                     ctypes.c_uint32, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)),
                                     ctypes.POINTER(ctypes.c_uint64)]),
    "vkf_audio_free": (None, [ctypes.POINTER(ctypes.c_float)]),
    "vkf_model_audio_features": (_STATUS, [_P, ctypes.POINTER(ctypes.c_float), ctypes.c_uint64,
                                           ctypes.POINTER(ctypes.c_float), ctypes.c_uint64]),
    "vkf_model_encode_audio": (_STATUS, [_P, ctypes.POINTER(_AudioBatch), ctypes.POINTER(ctypes.c_float),
                                         ctypes.c_uint64]),
    "vkf_model_forward_audio": (_STATUS, [_P, ctypes.POINTER(_AudioBatch), ctypes.POINTER(_Sequences),
                                          ctypes.POINTER(ctypes.c_float), ctypes.c_uint64]),
    "vkf_model_forward_features": (_STATUS, [_P, ctypes.POINTER(ctypes.c_float), ctypes.c_uint32,
                                             ctypes.POINTER(_Sequences), ctypes.POINTER(ctypes.c_float),
                                             ctypes.c_uint64]),
    "vkf_pool_options_init": (None, [ctypes.POINTER(_PoolOptionsStorage)]),
    "vkf_pool_create": (_STATUS, [ctypes.c_char_p, ctypes.POINTER(_PoolOptionsStorage), ctypes.POINTER(_P)]),
    "vkf_pool_destroy": (None, [_P]),
    "vkf_pool_device_count": (ctypes.c_uint32, [_P]),
    "vkf_pool_device_status": (_STATUS, [_P, ctypes.c_uint32, _P]),
    "vkf_pool_model": (_P, [_P]),
    "vkf_pool_generate": (_STATUS, [_P, ctypes.POINTER(_Sequences), ctypes.POINTER(_GenerateOptionsStorage), ctypes.c_uint32,
                                    ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint32),
                                    ctypes.POINTER(ctypes.c_float)]),
    "vkf_pool_validation_counts": (_STATUS, [_P, ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32)]),
}



class _TranscribeOptions(ctypes.Structure):
    """vkf_transcribe_options."""
    _fields_ = [("language", ctypes.c_char_p), ("task", ctypes.c_char_p), ("timestamps", ctypes.c_int),
                ("beams", ctypes.c_uint32), ("on_progress", ctypes.c_void_p), ("on_progress_user", ctypes.c_void_p),
                ("on_window", ctypes.c_void_p), ("on_window_user", ctypes.c_void_p)]


class _Segment(ctypes.Structure):
    """vkf_segment."""
    _fields_ = [("start", ctypes.c_double), ("end", ctypes.c_double), ("first", ctypes.c_uint32),
                ("count", ctypes.c_uint32), ("text", ctypes.c_char_p)]


class _Transcript(ctypes.Structure):
    """vkf_transcript."""
    _fields_ = [("language_id", ctypes.c_int32), ("language", ctypes.c_char * 16), ("language_detected", ctypes.c_bool),
                ("prompt", ctypes.c_int32 * 8), ("n_prompt", ctypes.c_uint32), ("timestamps", ctypes.c_bool),
                ("windows", ctypes.c_uint32), ("seconds", ctypes.c_double), ("n_ids", ctypes.c_uint32),
                ("ids", ctypes.POINTER(ctypes.c_int32)), ("n_segments", ctypes.c_uint32),
                ("segments", ctypes.POINTER(_Segment)), ("text", ctypes.c_char_p)]


_SIGNATURES.update({
    "vkf_transcribe_options_init": (None, [ctypes.POINTER(_TranscribeOptions)]),
    "vkf_model_transcribe": (_STATUS, [_P, ctypes.POINTER(ctypes.c_float), ctypes.c_uint64,
                                       ctypes.POINTER(_TranscribeOptions), ctypes.POINTER(ctypes.POINTER(_Transcript))]),
    "vkf_transcript_free": (None, [ctypes.POINTER(_Transcript)]),
    "vkf_transcription_begin": (_STATUS, [_P, ctypes.POINTER(ctypes.c_float), ctypes.c_uint64,
                                          ctypes.POINTER(_TranscribeOptions), ctypes.POINTER(_P)]),
    "vkf_transcription_next": (_STATUS, [_P, ctypes.POINTER(ctypes.c_bool)]),
    "vkf_transcription_progress": (ctypes.POINTER(_Transcript), [_P]),
    "vkf_transcription_finish": (_STATUS, [_P, ctypes.POINTER(ctypes.POINTER(_Transcript))]),
    "vkf_transcription_free": (None, [_P]),
    "vkf_pool_submit_transcribe": (_STATUS, [_P, ctypes.POINTER(ctypes.c_float), ctypes.c_uint64,
                                             ctypes.POINTER(_TranscribeOptions), ctypes.POINTER(ctypes.c_uint64)]),
    "vkf_pool_collect_transcript": (_STATUS, [_P, ctypes.c_uint64, ctypes.POINTER(ctypes.POINTER(_Transcript)),
                                              ctypes.c_void_p]),
})


def _transcribe_options(lib, language, task, timestamps, beams):
    o = _TranscribeOptions()
    lib.vkf_transcribe_options_init(ctypes.byref(o))
    o.language = language.encode() if language else None
    o.task = task.encode() if task else None
    o.timestamps = -1 if timestamps is None else int(bool(timestamps))
    o.beams = int(beams or 0)
    return o


def _transcript_dict(r):
    """The dict of a vkf_transcript's contents."""
    ids = [r.ids[i] for i in range(r.n_ids)]
    segments = []
    for i in range(r.n_segments):
        g = r.segments[i]
        segments.append({"start": g.start, "end": g.end, "ids": ids[g.first:g.first + g.count],
                         "text": g.text.decode("utf-8", "replace") if g.text is not None else None})
    return {"text": r.text.decode("utf-8", "replace") if r.text is not None else None,
            "language": r.language.decode() or None, "language_detected": bool(r.language_detected),
            "prompt": list(r.prompt[:r.n_prompt]), "timestamps": bool(r.timestamps), "windows": r.windows,
            "seconds": r.seconds, "ids": ids, "segments": segments}


def _transcript(lib, t):
    """The dict of a vkf_transcript (freed here)."""
    try:
        return _transcript_dict(t.contents)
    finally:
        lib.vkf_transcript_free(t)

_libraries = {}


_HERE = os.path.dirname(os.path.abspath(__file__))
_SONAME = "libvkformer.so.%d" % _API_MAJOR


def _installed_library():
    """The library that `meson install` put beside this package, or None. The
    recorded folders are absolute; the library is looked for at the same place
    relative to where this package really is (a DESTDIR or a moved prefix), then
    at the recorded one."""
    try:
        from . import _install
    except ImportError:
        return None
    places = [os.path.normpath(os.path.join(_HERE, os.path.relpath(_install.LIBDIR, _install.PACKAGE_DIR))),
              _install.LIBDIR]
    for folder in places:
        candidate = os.path.join(folder, _SONAME)
        if os.path.exists(candidate):
            return candidate
    return None


def _find_library(path):
    if path is not None:
        return os.fspath(path)
    path = os.environ.get("VKFORMER_LIBRARY") or None
    if path is not None:
        return path
    bundled = os.path.join(_HERE, "libvkformer.so")
    if os.path.exists(bundled):
        return bundled
    installed = _installed_library()
    if installed is not None:
        return installed
    # The dynamic linker's own search (LD_LIBRARY_PATH, the ldconfig cache, /usr/lib):
    # find_library returns a name that dlopen resolves; else the SONAME itself.
    return ctypes.util.find_library("vkformer") or _SONAME


def library_path(library=None):
    """The path (or, for the dynamic linker's search, the name) of the library
    that load() would use, given `library` as for load(); nothing is loaded."""
    return _find_library(library)


def _library(path=None):
    """The loaded library (one per path), with every signature this module uses."""
    path = _find_library(path)
    lib = _libraries.get(path)
    if lib is not None:
        return lib
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        if path == _SONAME:
            raise VkformerError("libvkformer not found: VKFORMER_LIBRARY is unset, %s holds no libvkformer.so, "
                                "no meson-installed one is recorded and the dynamic linker finds no %s; pass "
                                "library=PATH, set VKFORMER_LIBRARY, or install vkformer (docs/python.md)"
                                % (_HERE, _SONAME)) from None
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


def _ids_array(ids, what, empty=False):
    """One sequence as a contiguous 1-D int32 array (empty: it may hold no ids)."""
    a = np.asarray(ids)
    if empty and a.size == 0:
        return np.zeros(0, dtype=np.int32)
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
        # a list of paths, or of arrays, is a batch; a list of numbers is one clip
        return isinstance(x[0], (str, bytes, os.PathLike)) or not np.isscalar(x[0])
    return False


class _Batch:
    """A vkf_sequences over int32 arrays that it keeps alive (empty: sequences may be empty)."""

    def __init__(self, seqs, what, empty=False):
        self.arrays = [_ids_array(s, "%s %d" % (what, i), empty) for i, s in enumerate(seqs)]
        if not self.arrays:
            raise ValueError("%s: no sequences given" % what)
        n = len(self.arrays)
        self.ptrs = (ctypes.POINTER(ctypes.c_int32) * n)(
            *[a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)) for a in self.arrays])
        self.lengths = (ctypes.c_uint32 * n)(*[a.size for a in self.arrays])
        self.seq = _Sequences(n, self.ptrs, self.lengths)

    def __len__(self):
        return len(self.arrays)


def _pcm(x, what):
    """One clip as a contiguous 1-D float32 array."""
    a = np.asarray(x)
    if a.dtype.kind not in "fiu":
        raise TypeError("%s: samples must be numbers, got %s" % (what, a.dtype))
    if a.ndim != 1:
        raise ValueError("%s: a clip must be 1-D mono samples, got shape %s" % (what, a.shape))
    return np.ascontiguousarray(a, dtype=np.float32)


def _owned_samples(lib, ptr, count):
    """Copies what the library handed out into numpy and frees it."""
    try:
        if count == 0:
            return np.zeros(0, dtype=np.float32)
        return np.ctypeslib.as_array(ptr, shape=(count,)).copy()
    finally:
        lib.vkf_audio_free(ptr)


def read_audio(path, rate=16000, library=None):
    """A sound file (WAV, FLAC, Ogg, MP3, ... through libsndfile) as mono float32
    samples resampled to `rate` Hz (0: the file's own rate): (samples, file_rate)."""
    lib = _library(library)
    ptr, count, file_rate = ctypes.POINTER(ctypes.c_float)(), ctypes.c_uint64(), ctypes.c_uint32()
    _check(lib, lib.vkf_audio_read(os.fsencode(path), int(rate), ctypes.byref(ptr), ctypes.byref(count),
                                   ctypes.byref(file_rate)))
    return _owned_samples(lib, ptr, count.value), file_rate.value


def resample(samples, from_rate, to_rate, library=None):
    """Mono float32 samples resampled with libsoxr (very high quality)."""
    lib = _library(library)
    a = _pcm(samples, "samples")
    ptr, count = ctypes.POINTER(ctypes.c_float)(), ctypes.c_uint64()
    _check(lib, lib.vkf_audio_resample(a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size, int(from_rate),
                                       int(to_rate), ctypes.byref(ptr), ctypes.byref(count)))
    return _owned_samples(lib, ptr, count.value)


class _Audio:
    """A vkf_audio_batch over float32 arrays that it keeps alive; each clip a
    1-D array of samples at the model's rate, or a path (read and resampled)."""

    def __init__(self, clips, rate, lib):
        self.arrays = []
        for i, c in enumerate(clips):
            if isinstance(c, (str, bytes, os.PathLike)):
                c = read_audio(c, rate)[0] if lib is None else _read_with(lib, c, rate)
            self.arrays.append(_pcm(c, "clip %d" % i))
        if not self.arrays:
            raise ValueError("no audio given")
        n = len(self.arrays)
        self.ptrs = (ctypes.POINTER(ctypes.c_float) * n)(
            *[a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) for a in self.arrays])
        self.lengths = (ctypes.c_uint64 * n)(*[a.size for a in self.arrays])
        self.batch = _AudioBatch(n, self.ptrs, self.lengths)

    def __len__(self):
        return len(self.arrays)


def _read_with(lib, path, rate):
    ptr, count, file_rate = ctypes.POINTER(ctypes.c_float)(), ctypes.c_uint64(), ctypes.c_uint32()
    _check(lib, lib.vkf_audio_read(os.fsencode(path), int(rate), ctypes.byref(ptr), ctypes.byref(count),
                                   ctypes.byref(file_rate)))
    return _owned_samples(lib, ptr, count.value)


def _is_clip_batch(x):
    """One clip: a path or a 1-D array; a batch: a list/tuple of clips or a 2-D array."""
    if isinstance(x, (str, bytes, os.PathLike)):
        return False
    if isinstance(x, np.ndarray):
        return x.ndim == 2
    if isinstance(x, (list, tuple)) and len(x) > 0:
        # a list of paths, or of arrays, is a batch; a list of numbers is one clip
        return isinstance(x[0], (str, bytes, os.PathLike)) or not np.isscalar(x[0])
    return False


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

    def encode_target(self, text):
        """Target ids of a target-side text (the model's target tokenizer: Marian's
        target.spm and target vocabulary), without eos, as int32."""
        if "\0" in text:
            raise ValueError("the text holds a NUL character at index %d" % text.index("\0"))
        cap = self.config.max_len
        ids = np.zeros(cap, dtype=np.int32)
        n = ctypes.c_uint32()
        _check(self._lib, self._lib.vkf_model_encode_target_text(
            self._live(), text.encode("utf-8"), ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), cap,
            ctypes.byref(n)))
        return ids[:n.value].copy()

    def token_id(self, token):
        """The id of a target vocabulary entry, spelled as the vocabulary spells it."""
        out = ctypes.c_int32()
        _check(self._lib, self._lib.vkf_model_target_token_id(self._live(), token.encode("utf-8"), ctypes.byref(out)))
        return out.value

    def translate(self, text, max_new=None, beams=None, source_lang=None, target_lang=None, target_prefix=None,
                  max_batch_tokens=None, **options):
        """Translation of a text, or of a list of texts (one batch): str or list
        of str. Decoding as generate() (the model's defaults: greedy, or a Hugging
        Face folder's generation_config); source_lang / target_lang: codes as the
        tokenizer names them (NLLB eng_Latn, M2M-100 en, mBART-50 en_XX), the
        target forced as the first generated token where the family does so.
        target_prefix: a target text (or one per text) the translation continues;
        the text returned holds it (where the target language is forced as the
        first token, that token leads the prefix). max_batch_tokens and the other
        options: as generate()."""
        if isinstance(text, str):
            prefix = target_prefix if target_prefix is None or isinstance(target_prefix, str) else target_prefix[0]
            return self.translate([text], max_new, beams, source_lang, target_lang, prefix, max_batch_tokens,
                                  **options)[0]
        texts = list(text)
        src = [self.encode(t, source_lang, target_lang) for t in texts]
        prefix = None
        if target_prefix is not None:
            each = [target_prefix] * len(texts) if isinstance(target_prefix, str) else list(target_prefix)
            prefix = [self.encode_target(p) for p in each]
            lang = self._forced_language(target_lang)
            if lang is not None:
                prefix = [np.concatenate([[lang], p]).astype(np.int32) for p in prefix]
                options["_no_forced_bos"] = True
        out = self.generate(src, max_new, beams, target_lang=target_lang, target_prefix=prefix,
                            max_batch_tokens=max_batch_tokens, **options)
        return [self.decode(ids) for ids in out]

    def _forced_language(self, target_lang):
        """The token vkf_model_set_target_language forces first for target_lang, or None."""
        storage = _GenerateOptionsStorage()
        _check(self._lib, self._lib.vkf_model_generate_defaults(self._live(), ctypes.byref(storage)))
        _check(self._lib, self._lib.vkf_model_set_target_language(
            self._live(), target_lang.encode() if target_lang else None, ctypes.byref(storage)))
        o = storage.options
        return o.forced_bos_id if o.forced_bos else None

    # -- ids

    def _options(self, count, max_new, beams, target_lang, target_prefix, repetition_penalty, no_repeat_ngram,
                 suppress, bad_sequences, end_ids, max_new_factor, no_forced_bos=False):
        """vkf_generate_options for count sources: (storage, what it points to, ids per output row, prefixes)."""
        storage = _GenerateOptionsStorage()
        _check(self._lib, self._lib.vkf_model_generate_defaults(self._live(), ctypes.byref(storage)))
        opts = storage.options
        keep = []
        prefixes = None
        if target_prefix is not None:
            tp = target_prefix
            per_source = isinstance(tp, (list, tuple)) and len(tp) > 0 and not np.isscalar(tp[0])
            if isinstance(tp, np.ndarray) and tp.ndim == 2:
                per_source = True
            arrays = [_ids_array(p, "target prefix %d" % i, True) for i, p in enumerate(tp)] if per_source else \
                [_ids_array(tp, "target prefix", True)]
            if per_source and len(arrays) != count:
                raise ValueError("%d target prefixes for %d sources" % (len(arrays), count))
            batch = _Batch(arrays, "target prefix", empty=True)
            keep.append(batch)
            opts.target_prefix = ctypes.cast(ctypes.pointer(batch.seq), ctypes.c_void_p)
            prefixes = arrays if per_source else arrays * count
        longest = max((a.size for a in prefixes), default=0) if prefixes else 0
        if max_new is not None:
            if int(max_new) < 1:
                raise ValueError("max_new must be at least 1")
            opts.max_new = int(max_new)
            opts.min_new = min(opts.min_new, opts.max_new)
        elif longest:
            # generate()'s max_length counts the decoder start and the prefix
            default = opts.max_new or self.config.max_len
            if longest >= default:
                raise ValueError("the target prefix (%d ids) leaves no room under the model's default length (%d): "
                                 "give max_new" % (longest, default))
            opts.max_new = default - longest
            opts.min_new = min(opts.min_new, opts.max_new)
        if opts.max_new == 0:
            opts.max_new = self.config.max_len
        if beams is not None:
            if int(beams) < 1:
                raise ValueError("beams must be at least 1")
            opts.beams = int(beams)
        opts.n_best = 1
        if repetition_penalty is not None:
            opts.repetition_penalty = float(repetition_penalty)
        if no_repeat_ngram is not None:
            opts.no_repeat_ngram = int(no_repeat_ngram)
        if max_new_factor is not None:
            opts.max_new_factor = float(max_new_factor)
        if suppress is not None:
            a = _ids_array(list(suppress), "suppress", True)
            keep.append(a)
            opts.suppress_ids = a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
            opts.n_suppress = a.size
        if bad_sequences is not None:
            batch = _Batch(list(bad_sequences), "bad sequence")
            keep.append(batch)
            opts.bad_sequences = ctypes.cast(ctypes.pointer(batch.seq), ctypes.c_void_p)
        if end_ids is not None:
            a = _ids_array([end_ids] if np.isscalar(end_ids) else list(end_ids), "end_ids")
            keep.append(a)
            opts.end_ids = a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
            opts.n_end_ids = a.size
        _check(self._lib, self._lib.vkf_model_set_target_language(
            self._live(), target_lang.encode() if target_lang else None, ctypes.byref(storage)))
        if no_forced_bos:
            opts.forced_bos = False
        return storage, keep, opts.max_new, prefixes

    def generate(self, src, max_new=None, beams=None, target_lang=None, target_prefix=None, repetition_penalty=None,
                 no_repeat_ngram=None, suppress=None, bad_sequences=None, end_ids=None, max_new_factor=None,
                 max_batch_tokens=None, _no_forced_bos=False):
        """Decoding with the model's defaults (vkf_model_generate_defaults: greedy
        for a vkformer file; a Hugging Face folder's generation_config, e.g. 4
        beams, forced eos, the pad id banned). src: one sequence of source ids (1-D)
        or a batch (a 2-D array or a list of sequences of any lengths). Returns the
        generated ids (int32, without bos and eos) as one array, or a list of arrays
        for a batch. max_new: at most this many tokens after the prefix (default:
        the model's own, else max_len); beams: beam search with this many beams (1:
        greedy); target_lang: generate in that language (vkf_model_set_target_language).
        As transformers' generate() applies them (vkf_generate_options):
        target_prefix: target ids decoding continues after (one sequence, or one
        per source), returned in front of the generated ids; repetition_penalty
        (> 0); no_repeat_ngram (n); suppress: ids never generated; bad_sequences:
        id sequences never generated; end_ids: ids that end a source (an id or a
        list; default the model's eos); max_new_factor: at most ceil(factor x
        source length) new ids per source. max_batch_tokens: sorted batches of at
        most that many source ids (vkf_model_generate_batched); same results."""
        batch = _is_batch(src)
        seqs = _Batch(src if batch else [src], "source")
        storage, keep, steps, prefixes = self._options(len(seqs), max_new, beams, target_lang, target_prefix,
                                                       repetition_penalty, no_repeat_ngram, suppress, bad_sequences,
                                                       end_ids, max_new_factor, _no_forced_bos)
        out = np.zeros((len(seqs), steps), dtype=np.int32)
        lengths = np.zeros(len(seqs), dtype=np.uint32)
        out_p = out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        len_p = lengths.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32))
        if max_batch_tokens is not None:
            _check(self._lib, self._lib.vkf_model_generate_batched(self._live(), ctypes.byref(seqs.seq),
                                                                   ctypes.byref(storage), int(max_batch_tokens), out_p,
                                                                   len_p, None))
        else:
            _check(self._lib, self._lib.vkf_model_generate_with(self._live(), ctypes.byref(seqs.seq),
                                                                ctypes.byref(storage), out_p, len_p, None))
        del keep
        result = [out[i, :lengths[i]].copy() for i in range(len(seqs))]
        if prefixes is not None:
            result = [np.concatenate([p, r]).astype(np.int32) for p, r in zip(prefixes, result)]
        return result if batch else result[0]

    def stream(self, text, max_new=None, beams=None, source_lang=None, target_lang=None, target_prefix=None,
               **options):
        """The translation of one text as it grows: yields str pieces whose
        concatenation is translate()'s text (the prefix's text first). Greedy
        decoding and sampling yield after each token that adds text; beam search
        settles its hypotheses only at the end and yields the text then. The
        decoding runs on a thread of its own while the generator is live: use
        the model for nothing else until it is exhausted or closed; closing it
        early stops the decoding. Options as translate()."""
        import queue
        import threading
        src = [self.encode(text, source_lang, target_lang)]
        prefix = None
        if target_prefix is not None:
            prefix = self.encode_target(target_prefix)
            lang = self._forced_language(target_lang)
            if lang is not None:
                prefix = np.concatenate([[lang], prefix]).astype(np.int32)
                options["_no_forced_bos"] = True
        no_forced = options.pop("_no_forced_bos", False)
        keys = ("repetition_penalty", "no_repeat_ngram", "suppress", "bad_sequences", "end_ids", "max_new_factor")
        unknown = set(options) - set(keys)
        if unknown:
            raise TypeError("stream() got unexpected options %s" % ", ".join(sorted(unknown)))
        storage, keep, steps, _ = self._options(1, max_new, beams, target_lang, prefix, *[options.get(k) for k in keys],
                                                no_forced)
        seqs = _Batch(src, "source")
        ids = [] if prefix is None else [int(x) for x in prefix]
        pieces = queue.Queue()
        state = {"text": "", "stop": False}

        def grown(final):
            """What the text of ids adds to the text yielded so far."""
            a = np.asarray(ids, dtype=np.int32)
            t = self._decode_raw(a)
            if not t.startswith(state["text"]):
                return ""
            add = t[len(state["text"]):]
            if not final and add.endswith("\ufffd"):
                add = add[:-1]
            state["text"] += add
            return add

        def on_tokens(user, source, p, count):
            try:
                ids.extend(p[i] for i in range(count))
                add = grown(False)
                if add:
                    pieces.put(add)
                return not state["stop"]
            except BaseException:  # never raise into C
                return False

        callback = _TOKEN_FN(on_tokens)
        storage.options.on_tokens = callback
        out = np.zeros((1, steps), dtype=np.int32)
        lengths = np.zeros(1, dtype=np.uint32)
        done = object()

        def run():
            try:
                _check(self._lib, self._lib.vkf_model_generate_with(
                    self._live(), ctypes.byref(seqs.seq), ctypes.byref(storage),
                    out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                    lengths.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)), None))
                pieces.put(done)
            except BaseException as e:
                pieces.put(e)

        if ids:
            first = grown(False)
            if first:
                yield first
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        try:
            while True:
                item = pieces.get()
                if item is done:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
            # the final text: the prefix and every id returned
            del ids[len(ids):]
            ids[:] = ([] if prefix is None else [int(x) for x in prefix]) + out[0, :lengths[0]].tolist()
            rest = grown(True)
            if rest:
                yield rest
        finally:
            state["stop"] = True
            worker.join()
            del keep, callback

    def _decode_raw(self, ids):
        a = np.ascontiguousarray(np.asarray(ids, dtype=np.int64).reshape(-1), dtype=np.int32)
        cap = 1024 * (a.size + 1)
        buf = ctypes.create_string_buffer(cap)
        _check(self._lib, self._lib.vkf_model_decode_text(self._live(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                                          a.size, buf, cap))
        return buf.value.decode("utf-8", "replace")

    def score(self, src, tgt):
        """Log-probabilities of given translations (vkf_model_score, CTranslate2's
        score_batch): src a text or source ids (eos last), tgt a target text or
        target ids (without eos); or lists of them (one batch). Returns a Score
        (logprobs: float32 array of each target id's and then eos's
        log-probability; sum; normalized = sum / len(logprobs)), or a list."""
        batch = isinstance(src, (list, tuple)) and len(src) > 0 and (isinstance(src[0], str) or not np.isscalar(src[0]))
        if isinstance(src, np.ndarray) and src.ndim == 2:
            batch = True
        srcs, tgts = (list(src), list(tgt)) if batch else ([src], [tgt])
        if len(srcs) != len(tgts):
            raise ValueError("%d sources but %d targets" % (len(srcs), len(tgts)))
        srcs = [self.encode(s) if isinstance(s, str) else s for s in srcs]
        tgts = [self.encode_target(t) if isinstance(t, str) else t for t in tgts]
        s = _Batch(srcs, "source")
        t = _Batch(tgts, "target", empty=True)
        width = max(a.size for a in t.arrays) + 1
        lp = np.zeros((len(s), width), dtype=np.float32)
        _check(self._lib, self._lib.vkf_model_score(self._live(), ctypes.byref(s.seq), ctypes.byref(t.seq),
                                                    lp.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), lp.size))
        out = []
        for i, a in enumerate(t.arrays):
            row = lp[i, :a.size + 1].copy()
            total = float(row.astype(np.float64).sum())
            out.append(Score(row, total, total / row.size))
        return out if batch else out[0]

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

    # -- audio (models that read it: config.audio_mels > 0)

    def audio_features(self, audio):
        """Log-mel features of the first window of one clip (a 1-D array at
        config.sample_rate, or a path), as WhisperFeatureExtractor computes them:
        float32 (audio_mels, audio_frames)."""
        a = _Audio([audio], self.config.sample_rate, self._lib).arrays[0]
        out = np.zeros((self.config.audio_mels, self.config.audio_frames), dtype=np.float32)
        _check(self._lib, self._lib.vkf_model_audio_features(
            self._live(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size,
            out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size))
        return out

    def encode_audio(self, audio):
        """The encoder's output for the first window of a clip (or of each clip
        of a batch): float32 (audio_frames / 2, d_model), or (count, ...)."""
        batch = _is_clip_batch(audio)
        a = _Audio(audio if batch else [audio], self.config.sample_rate, self._lib)
        out = np.zeros((len(a), self.config.audio_frames // 2, self.config.d_model), dtype=np.float32)
        _check(self._lib, self._lib.vkf_model_encode_audio(self._live(), ctypes.byref(a.batch),
                                                           out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                           out.size))
        return out if batch else out[0]

    def forward_audio(self, audio, tgt):
        """Teacher-forced logits with audio as the source: one clip (array or
        path) and one target, float32 (len(tgt), tgt_vocab_size); or a batch of
        each, (count, T, tgt_vocab_size)."""
        batch = _is_clip_batch(audio)
        if batch != _is_batch(tgt):
            raise ValueError("audio and tgt must both be one or both a batch")
        a = _Audio(audio if batch else [audio], self.config.sample_rate, self._lib)
        t = _Batch(tgt if batch else [tgt], "target")
        if len(a) != len(t):
            raise ValueError("%d clips but %d targets" % (len(a), len(t)))
        longest = max(x.size for x in t.arrays)
        logits = np.zeros((len(t), longest, self.config.tgt_vocab_size), dtype=np.float32)
        _check(self._lib, self._lib.vkf_model_forward_audio(self._live(), ctypes.byref(a.batch), ctypes.byref(t.seq),
                                                            logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                            logits.size))
        return logits if batch else logits[0]

    def transcribe(self, audio, language=None, task=None, timestamps=None, beams=None):
        """Whisper: the transcript of one recording (a 1-D float32 array at
        config.sample_rate, 16 kHz, or a path, read and resampled), as
        vkf_model_transcribe (transformers' WhisperForConditionalGeneration.
        generate): language a code or name or "auto" (None: the folder's, else
        detected), task "transcribe" or "translate" (None: the folder's),
        timestamps True/False (None: generation_config's return_timestamps),
        beams (None: generation_config's num_beams). A dict: text (None without a
        tokenizer), language (code or None), language_detected, prompt (ids),
        timestamps, windows, seconds, ids, and segments, each a dict of start,
        end (seconds), ids and text."""
        a = _Audio([audio], self.config.sample_rate, self._lib).arrays[0]
        o = _transcribe_options(self._lib, language, task, timestamps, beams)
        t = ctypes.POINTER(_Transcript)()
        _check(self._lib, self._lib.vkf_model_transcribe(self._live(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                         a.size, ctypes.byref(o), ctypes.byref(t)))
        return _transcript(self._lib, t)

    def transcribe_windows(self, audio, language=None, task=None, timestamps=None, beams=None):
        """Whisper: transcribe one 30-second window at a time (vkf_transcription_next),
        a generator of the transcript so far after each window, as transcribe's
        dict ("text" None and "windows" the windows so far until the last, which
        is transcribe's whole answer)."""
        a = _Audio([audio], self.config.sample_rate, self._lib).arrays[0]
        o = _transcribe_options(self._lib, language, task, timestamps, beams)
        lib = self._lib
        x = _P()
        _check(lib, lib.vkf_transcription_begin(self._live(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                a.size, ctypes.byref(o), ctypes.byref(x)))
        try:
            done = ctypes.c_bool(False)
            while True:
                _check(lib, lib.vkf_transcription_next(x, ctypes.byref(done)))
                if done.value:
                    break
                yield _transcript_dict(lib.vkf_transcription_progress(x).contents)
            t = ctypes.POINTER(_Transcript)()
            st = lib.vkf_transcription_finish(x, ctypes.byref(t))
            x = None  # finish frees it, on an error too
            _check(lib, st)
            yield _transcript(lib, t)
        finally:
            if x:
                lib.vkf_transcription_free(x)

    def forward_features(self, features, tgt):
        """The same from features: (audio_mels, audio_frames) with one target, or
        (count, audio_mels, audio_frames) with a batch of targets."""
        f = np.ascontiguousarray(np.asarray(features, dtype=np.float32))
        batch = f.ndim == 3
        if f.ndim not in (2, 3) or f.shape[-2:] != (self.config.audio_mels, self.config.audio_frames):
            raise ValueError("features must be (%d, %d) or (count, %d, %d), got %s" % (
                self.config.audio_mels, self.config.audio_frames, self.config.audio_mels, self.config.audio_frames,
                f.shape))
        if batch != _is_batch(tgt):
            raise ValueError("features and tgt must both be one or both a batch")
        t = _Batch(tgt if batch else [tgt], "target")
        count = f.shape[0] if batch else 1
        if count != len(t):
            raise ValueError("%d windows but %d targets" % (count, len(t)))
        longest = max(x.size for x in t.arrays)
        logits = np.zeros((len(t), longest, self.config.tgt_vocab_size), dtype=np.float32)
        _check(self._lib, self._lib.vkf_model_forward_features(
            self._live(), f.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), count, ctypes.byref(t.seq),
            logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), logits.size))
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


# ---------------------------------------------------------------- pool


class Pool:
    """vkf_pool: one model on several Vulkan devices, a replica and a thread each;
    batches go to whichever device is free and come back in input order.

        with vkformer.Pool("models/demo.safetensors", devices="all") as pool:
            pool.translate(["two", "forty one", ...], batch_size=16)   # in input order

    devices: "all" (every GPU; every device where there is no GPU), a list of
    device indices or name substrings ([0, 1], ["llvmpipe", "SwiftShader"]), or
    the same as a comma-separated string. precision, attention, cross_attention,
    seed, validation, cache_dir, log, library: as for load() and Context (log is
    called from the pool's threads). batch_size: sources per batch (default 64).
    dispatch: "balanced" (a slow device leaves batches to faster ones that would
    end them sooner) or "any-free" (every free device takes the next batch).
    A device that fails under a batch leaves the pool and its batch runs on
    another: devices() says which left and why. The pool is used by one thread
    at a time."""

    def __init__(self, path, devices="all", precision="auto", attention=None, cross_attention=None, seed=None,
                 validation=None, cache_dir=None, log=None, library=None, batch_size=64, dispatch="balanced"):
        if dispatch not in _DISPATCH:
            raise ValueError("dispatch must be one of %s" % ", ".join(_DISPATCH))
        if precision not in _PRECISIONS:
            raise ValueError("precision must be one of %s" % ", ".join(_PRECISIONS))
        if int(batch_size) < 1:
            raise ValueError("batch_size must be at least 1")
        self._lib = _library(library)
        self._handle = None
        self.batch_size = int(batch_size)
        if devices is None:
            devices = "all"
        if not isinstance(devices, str):
            devices = ",".join(str(d) for d in devices)
        context = _ContextOptionsStorage()
        self._lib.vkf_context_options_init(ctypes.byref(context))
        c = context.options
        if validation is not None:
            c.validation = 1 if validation else 0
        if cache_dir is not None:
            c.cache_dir = os.fsencode(cache_dir)
        if log is not None:
            self._log = _LOG_FN(lambda user, level, message: log(level, message.decode("utf-8", "replace")))
            c.log = self._log
        load_options = _LoadOptions(_PRECISIONS[precision])
        storage = _PoolOptionsStorage()
        self._lib.vkf_pool_options_init(ctypes.byref(storage))
        o = storage.options
        o.devices = devices.encode()
        o.context = ctypes.pointer(context)
        o.load = ctypes.pointer(load_options)
        if attention is not None:
            o.self_attention = attention.encode()
        if cross_attention is not None:
            o.cross_attention = cross_attention.encode()
        if seed is not None:
            o.seed = int(seed)
        o.dispatch = _DISPATCH[dispatch]
        handle = _P()
        _check(self._lib, self._lib.vkf_pool_create(os.fsencode(path), ctypes.byref(storage), ctypes.byref(handle)))
        self._handle = handle
        self._model = self._lib.vkf_pool_model(handle)
        cfg = _ModelConfigStorage()
        _check(self._lib, self._lib.vkf_model_get_config(self._model, ctypes.byref(cfg)))
        c = cfg.config
        values = {f: getattr(c, f) for f, _ in _ModelConfig._fields_}
        values["activation"] = _ACTIVATIONS.get(c.activation, c.activation)
        values["activations"] = _DTYPES.get(c.activations, c.activations)
        values["format"] = {0: "vkformer", 1: "huggingface"}.get(c.format, c.format)
        values["family"] = c.family.decode()
        self.config = ModelConfig(**values)

    def _pool(self):
        if self._handle is None:
            raise VkformerError("the pool is closed", 12, "VKF_ERROR_STATE")
        return self._handle

    def _live(self):
        """The replica that text and configuration are read from (vkf_pool_model)."""
        self._pool()
        return self._model

    # text, as Model's (they read only the tokenizers)
    encode = Model.encode
    decode = Model.decode
    languages = Model.languages

    def devices(self):
        """Each device of the pool as a dict: index, name, active (False once it
        left after a failure), ready (warmed up), failure (a status name, or None),
        failure_message, batches, sources, tokens, busy_ms."""
        offset = (ctypes.sizeof(_PoolDevice) + 7) // 8 * 8
        buf = ctypes.create_string_buffer(offset + (1 << 16))  # the device info, with room to grow
        result = []
        for i in range(self._lib.vkf_pool_device_count(self._pool())):
            _check(self._lib, self._lib.vkf_pool_device_status(self._pool(), i, buf))
            tail = _PoolDevice.from_buffer(buf)
            head = _DeviceInfoHead.from_buffer(buf, offset)
            result.append({
                "index": head.index, "name": head.name.decode("utf-8", "replace"), "active": tail.active,
                "failure": None if tail.failure == 0 else self._lib.vkf_status_string(tail.failure).decode(),
                "failure_message": tail.failure_message.decode("utf-8", "replace"), "batches": tail.batches,
                "sources": tail.sources, "tokens": tail.tokens, "busy_ms": tail.busy_ms, "ready": tail.ready,
            })
        return result

    def validation_counts(self):
        """(errors, warnings) of every device's context, counted after each batch."""
        errors, warnings = ctypes.c_uint32(), ctypes.c_uint32()
        _check(self._lib, self._lib.vkf_pool_validation_counts(self._pool(), ctypes.byref(errors),
                                                               ctypes.byref(warnings)))
        return errors.value, warnings.value

    def generate(self, src, max_new=None, beams=None, target_lang=None, batch_size=None):
        """As Model.generate, the sources split into batches of batch_size (default:
        the pool's) spread over the devices; results in input order."""
        batch = _is_batch(src)
        seqs = _Batch(src if batch else [src], "source")
        storage = _GenerateOptionsStorage()
        _check(self._lib, self._lib.vkf_model_generate_defaults(self._live(), ctypes.byref(storage)))
        opts = storage.options
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
            self._live(), target_lang.encode() if target_lang else None, ctypes.byref(storage)))
        size = self.batch_size if batch_size is None else int(batch_size)
        if size < 1:
            raise ValueError("batch_size must be at least 1")
        out = np.zeros((len(seqs), opts.max_new), dtype=np.int32)
        lengths = np.zeros(len(seqs), dtype=np.uint32)
        _check(self._lib, self._lib.vkf_pool_generate(self._pool(), ctypes.byref(seqs.seq), ctypes.byref(storage), size,
                                                      out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                                      lengths.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)), None))
        result = [out[i, :lengths[i]].copy() for i in range(len(seqs))]
        return result if batch else result[0]

    def translate(self, text, max_new=None, beams=None, source_lang=None, target_lang=None, batch_size=None):
        """As Model.translate, over the pool: a list of texts is split into batches
        of batch_size; translations in input order."""
        if isinstance(text, str):
            return self.translate([text], max_new, beams, source_lang, target_lang, batch_size)[0]
        src = [self.encode(t, source_lang, target_lang) for t in text]
        if not src:
            return []
        return [self.decode(ids) for ids in self.generate(src, max_new, beams, target_lang, batch_size)]

    def transcribe(self, audio, language=None, task=None, timestamps=None, beams=None):
        """Whisper pools: as Model.transcribe, for one recording or a list of them
        (arrays or paths); each recording runs whole on one device, several at
        once, and the transcripts come back in input order. A recording that fails
        raises its error after the others are collected."""
        many = isinstance(audio, (list, tuple))
        arrays = _Audio(list(audio) if many else [audio], self.config.sample_rate, self._lib).arrays
        o = _transcribe_options(self._lib, language, task, timestamps, beams)
        tickets = []
        error = None
        for a in arrays:
            ticket = ctypes.c_uint64()
            st = self._lib.vkf_pool_submit_transcribe(self._pool(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                      a.size, ctypes.byref(o), ctypes.byref(ticket))
            if st != 0:
                try:
                    _check(self._lib, st)
                except VkformerError as e:
                    error = e
                break
            tickets.append(ticket.value)
        results = []
        for ticket in tickets:
            t = ctypes.POINTER(_Transcript)()
            st = self._lib.vkf_pool_collect_transcript(self._pool(), ticket, ctypes.byref(t), None)
            if st != 0:
                try:
                    _check(self._lib, st)
                except VkformerError as e:
                    error = error or e
                results.append(None)
                continue
            results.append(_transcript(self._lib, t))
        if error is not None:
            raise error
        return results if many else results[0]

    def close(self):
        if self._handle is not None:
            self._lib.vkf_pool_destroy(self._handle)
            self._handle = None
            self._model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
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
