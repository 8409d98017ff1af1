// The SentencePiece shim of tokenizer.h: the C interface over Debian's
// libsentencepiece (0.1.97) for the source.spm / target.spm of Hugging Face Marian
// models. The only C++ in the library; every entry point catches every exception
// (std::bad_alloc included) and turns it into -1 / NULL with a message.
//
// Quiet: sentencepiece logs with LOG(...) to std::cerr; its minimum log level is a
// process-wide atomic that its public header does not declare, so it is declared
// here (sentencepiece::logging::SetMinLogLevel, exported by libsentencepiece.so
// since 0.1.9x; still there in 0.2.0) and set to LOG_FATAL (3) before any other
// call into the library: LOG(INFO/WARNING/ERROR) then print nothing. Its CHECK()s
// (internal invariants, which the files we accept cannot reach) would still print
// and exit; the model file is read and checked here first (a regular file, not
// empty, a protobuf whose pieces are non-empty, hold no NUL byte and have finite
// scores) so that sentencepiece only ever sees bytes that parse.
//
// Untrusted charsmaps: sentencepiece's Normalizer walks the precompiled_charsmap
// of the normalizer_spec (encoding) and of the denormalizer_spec (decoding)
// without bounds checks, so a model whose charsmap holds random bytes segfaults
// in Normalizer::NormalizePrefix. Every charsmap in the file (each occurrence of
// field 2 in each occurrence of either spec: protobuf merges repeated messages
// and keeps the last bytes field, so checking all of them covers the one that
// wins) goes through vkf_charsmap_parse (charsmap.h) before sentencepiece sees
// the model.

// Two checks of clang's -fsanitize=undefined for C++ are off here (and in the
// std and sentencepiece inline functions instantiated here, hence before the
// #includes): "function" emits the typeinfo of each function's type, weak symbols
// of default visibility that libvkformer.so would export (its C callers are not
// checked anyway); "vptr" needs the C++ part of the UBSan runtime, which a C
// program linking libvkformer with -fsanitize=undefined does not get.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_sanitize("function", "vptr"))), apply_to = function)
#endif

#include "tokenizers/tokenizer.h"
#include "tokenizers/charsmap.h"

#include <sentencepiece_processor.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <exception>
#include <new>
#include <string>
#include <vector>

namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v);   // src/common.h of sentencepiece; LOG_FATAL is 3
}  // namespace logging
}  // namespace sentencepiece

namespace {

constexpr int kLogFatal = 3;
// Model files larger than this are refused as absurd (real ones are < 10 MB;
// protobuf refuses 2 GB anyway).
constexpr uint64_t kMaxModelBytes = 1ull << 30;

void set_err(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void set_err(char *err, size_t err_size, const char *fmt, ...) {
    if (!err || err_size == 0) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
    if (n < 0) err[0] = '\0';
    // One line: a message from sentencepiece (or a path) may hold newlines.
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

void quiet_sentencepiece() {
    sentencepiece::logging::SetMinLogLevel(kLogFatal);
}

// A sentencepiece status message as one line (set_err flattens newlines).
const char *status_text(const sentencepiece::util::Status &st) {
    const char *m = st.error_message();
    return m && *m ? m : "unknown error";
}

// ---------------------------------------------------------------- protobuf walk
// The parts of ModelProto the public API does not give: the type of each piece
// (IsUserDefined is missing from 0.1.97's processor), and a check of the pieces
// before sentencepiece builds its tries from them. Wire format: ModelProto field 1
// is repeated SentencePiece {1: string piece, 2: float score, 3: enum type}.

bool read_varint(const uint8_t *&p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end) return false;
        uint8_t b = *p++;
        if (shift == 63 && b > 1) return false;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

// Skips a field of the given wire type; false when it runs past end.
bool skip_field(const uint8_t *&p, const uint8_t *end, unsigned wire) {
    uint64_t v;
    switch (wire) {
    case 0: return read_varint(p, end, &v);
    case 1:
        if (end - p < 8) return false;
        p += 8;
        return true;
    case 2:
        if (!read_varint(p, end, &v) || v > (uint64_t)(end - p)) return false;
        p += v;
        return true;
    case 5:
        if (end - p < 4) return false;
        p += 4;
        return true;
    default: return false;   // groups (3, 4) do not occur in ModelProto
    }
}

struct PieceInfo {
    bool has_piece = false;
    bool empty_or_nul = false;   // an empty piece, or a NUL byte in it
    bool bad_score = false;      // a score that is NaN or infinite
    int type = 1;                // NORMAL
};

bool parse_piece(const uint8_t *p, const uint8_t *end, PieceInfo *out) {
    while (p < end) {
        uint64_t key;
        if (!read_varint(p, end, &key) || (key >> 3) == 0) return false;
        unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
        if (field == 1 && wire == 2) {
            uint64_t len;
            if (!read_varint(p, end, &len) || len > (uint64_t)(end - p)) return false;
            out->has_piece = true;
            out->empty_or_nul = len == 0 || memchr(p, 0, (size_t)len) != nullptr;
            p += len;
        } else if (field == 2 && wire == 5) {
            if (end - p < 4) return false;
            uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            float score;
            memcpy(&score, &bits, sizeof score);
            out->bad_score = out->bad_score || !std::isfinite(score);
            p += 4;
        } else if (field == 3 && wire == 0) {
            uint64_t v;
            if (!read_varint(p, end, &v)) return false;
            if (v >= 1 && v <= 6) out->type = (int)v;   // proto2: other values are ignored
        } else if (!skip_field(p, end, wire)) {
            return false;
        }
    }
    return true;
}

// Checks every precompiled_charsmap (field 2, bytes) of a NormalizerSpec message
// (what: "normalizer_spec" or "denormalizer_spec"); false with a reason. *cm (when
// cm is not NULL) gets the last one's bytes.
bool check_spec(const uint8_t *p, const uint8_t *end, const char *what, char *why, size_t why_size,
                const uint8_t **cm, size_t *cm_len) {
    while (p < end) {
        uint64_t key;
        if (!read_varint(p, end, &key) || (key >> 3) == 0) {
            snprintf(why, why_size, "not a SentencePiece model (its %s is malformed)", what);
            return false;
        }
        unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
        if (field == 2 && wire == 2) {
            uint64_t len;
            if (!read_varint(p, end, &len) || len > (uint64_t)(end - p)) {
                snprintf(why, why_size, "not a SentencePiece model (its %s is malformed)", what);
                return false;
            }
            vkf_charsmap map;
            // (empty: sentencepiece's identity normalization, no map at all)
            if (len > 0 && vkf_charsmap_parse(p, (size_t)len, &map) != VKF_OK) {
                snprintf(why, why_size, "%s: %s", what, vkf_last_error());
                return false;
            }
            if (cm) *cm = p, *cm_len = (size_t)len;
            p += len;
        } else if (!skip_field(p, end, wire)) {
            snprintf(why, why_size, "not a SentencePiece model (its %s is malformed)", what);
            return false;
        }
    }
    return true;
}

// trainer_spec's model_type (field 3: 1 unigram, 2 BPE, 3 word, 4 char), the last
// one given (protobuf merges repeated messages), into *type.
bool trainer_model_type(const uint8_t *p, const uint8_t *end, int *type) {
    while (p < end) {
        uint64_t key, v;
        if (!read_varint(p, end, &key) || (key >> 3) == 0) return false;
        unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
        if (field == 3 && wire == 0) {
            if (!read_varint(p, end, &v)) return false;
            *type = v <= 4 ? (int)v : 0;
        } else if (!skip_field(p, end, wire)) {
            return false;
        }
    }
    return true;
}

// The pieces' types (1..6, one char each) in order, the normalizer's charsmap (its
// offset and length in bytes; length 0: none) and the model type; false with a
// reason when the bytes are not a ModelProto, a piece is unusable or a charsmap
// is unsafe.
bool scan_model(const std::string &bytes, std::string *types, char *why, size_t why_size, size_t *cm_offset,
                size_t *cm_len, int *model_type) {
    const uint8_t *p = (const uint8_t *)bytes.data(), *end = p + bytes.size();
    bool trainer_spec = false, normalizer_spec = false;
    const uint8_t *cm = nullptr;
    *cm_offset = 0, *cm_len = 0, *model_type = 1;   // sentencepiece's default: unigram
    while (p < end) {
        uint64_t key;
        if (!read_varint(p, end, &key) || (key >> 3) == 0) {
            snprintf(why, why_size, "not a SentencePiece model (malformed protobuf)");
            return false;
        }
        unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
        if (field == 1 && wire == 2) {
            uint64_t len;
            if (!read_varint(p, end, &len) || len > (uint64_t)(end - p)) {
                snprintf(why, why_size, "not a SentencePiece model (truncated or malformed protobuf)");
                return false;
            }
            PieceInfo info;
            if (!parse_piece(p, p + len, &info)) {
                snprintf(why, why_size, "not a SentencePiece model (piece %zu is malformed)", types->size());
                return false;
            }
            if (!info.has_piece || info.empty_or_nul) {
                snprintf(why, why_size, "piece %zu is empty or holds a NUL byte", types->size());
                return false;
            }
            if (info.bad_score) {
                snprintf(why, why_size, "piece %zu has a score that is not a finite number", types->size());
                return false;
            }
            types->push_back((char)info.type);
            p += len;
        } else if (wire == 2 && (field == 3 || field == 5)) {
            // normalizer_spec (3), denormalizer_spec (5)
            uint64_t len;
            if (!read_varint(p, end, &len) || len > (uint64_t)(end - p)) {
                snprintf(why, why_size, "not a SentencePiece model (truncated or malformed protobuf)");
                return false;
            }
            if (!check_spec(p, p + len, field == 3 ? "normalizer_spec" : "denormalizer_spec", why, why_size,
                            field == 3 ? &cm : nullptr, cm_len))
                return false;
            if (field == 3) normalizer_spec = true;
            p += len;
        } else if (wire == 2 && field == 2) {
            // trainer_spec: its model type
            uint64_t len;
            if (!read_varint(p, end, &len) || len > (uint64_t)(end - p) || !trainer_model_type(p, p + len, model_type)) {
                snprintf(why, why_size, "not a SentencePiece model (truncated or malformed protobuf)");
                return false;
            }
            trainer_spec = true;
            p += len;
        } else {
            if (wire == 2 && field == 2) trainer_spec = true;
            if (!skip_field(p, end, wire)) {
                snprintf(why, why_size, "not a SentencePiece model (truncated or malformed protobuf)");
                return false;
            }
        }
    }
    if (types->empty()) {
        snprintf(why, why_size, "not a SentencePiece model (no pieces)");
        return false;
    }
    // Writers put the pieces (field 1) first, then trainer_spec (2) and
    // normalizer_spec (3): a file cut between two pieces still parses, but lacks them.
    if (!trainer_spec || !normalizer_spec) {
        snprintf(why, why_size, "not a complete SentencePiece model (no %s: truncated?)",
                 !trainer_spec ? "trainer_spec" : "normalizer_spec");
        return false;
    }
    if (cm) *cm_offset = (size_t)(cm - (const uint8_t *)bytes.data());
    return true;
}

// Reads a whole regular file; false with a reason.
bool read_model_file(const char *path, std::string *out, char *why, size_t why_size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_size, "%s", strerror(errno));
        return false;
    }
    struct stat st;
    bool ok = false;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_size, "%s", strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        snprintf(why, why_size, "is a directory");
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "not a regular file");
    } else if ((uint64_t)st.st_size > kMaxModelBytes) {
        snprintf(why, why_size, "larger than 1 GiB: not a SentencePiece model");
    } else {
        ok = true;
    }
    if (!ok) {
        close(fd);
        return false;
    }
    size_t got = 0;
    try {
        out->resize((size_t)st.st_size);
        while (got < out->size()) {
            ssize_t r = read(fd, &(*out)[got], out->size() - got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                snprintf(why, why_size, "%s", strerror(errno));
                close(fd);
                return false;
            }
            if (r == 0) break;   // shrank while being read
            got += (size_t)r;
        }
    } catch (...) {
        close(fd);
        throw;
    }
    close(fd);
    out->resize(got);
    if (got == 0) {
        snprintf(why, why_size, "empty file: not a SentencePiece model");
        return false;
    }
    return true;
}

}  // namespace

// Hidden symbols: libvkformer.so exports the public API only (tests/test_install.sh
// checks). This file is compiled with -fvisibility=hidden -fvisibility-inlines-hidden,
// but an instantiation of a non-inline member of a std template (vector's
// _M_realloc_insert, string's _M_construct<const char *>, operator+) is still a
// weak symbol of default visibility, hence exported: so nothing here grows a
// std::vector or builds a std::string from pointers or with +. Only std::string's
// non-template members are used (libstdc++ instantiates those: extern template);
// encoding goes through ImmutableSentencePieceText (its members are in
// libsentencepiece), decoding sizes its vector once.
struct vkf_spm {
    sentencepiece::SentencePieceProcessor sp;
    std::string kinds;   // VKF_SPM_* per piece
    std::string charsmap;   // the normalizer's precompiled charsmap ("" : none)
    int model_type;         // trainer_spec.model_type
};

namespace {

// Checks the model bytes (scan_model) and hands them to sentencepiece; name is
// the file's path (or the caller's name for a buffer) for messages. May throw.
vkf_spm *load_checked(const std::string &bytes, const char *name, char *err, size_t err_size) {
    std::string types;
    char why[320];
    size_t cm_offset = 0, cm_len = 0;
    int model_type = 1;
    if (!scan_model(bytes, &types, why, sizeof(why), &cm_offset, &cm_len, &model_type)) {
        set_err(err, err_size, "SentencePiece model %s: %s", name, why);
        return nullptr;
    }
    vkf_spm *s = new vkf_spm;
    try {
        s->charsmap.assign(bytes.data() + cm_offset, cm_len);
        s->model_type = model_type;
        sentencepiece::util::Status st = s->sp.LoadFromSerializedProto(bytes);
        int n = st.ok() ? s->sp.GetPieceSize() : 0;
        if (!st.ok()) {
            // (its message says "See LOG(INFO)", which is silenced here)
            const char *m = strstr(status_text(st), "Self-test failures")
                                ? "the samples of its self_test_data do not encode as expected"
                                : status_text(st);
            set_err(err, err_size, "SentencePiece model %s: not a valid model: %s", name, m);
        } else if (n <= 0 || (size_t)n != types.size()) {
            set_err(err, err_size, "SentencePiece model %s: not a valid model (%d pieces loaded, %zu in the file)",
                    name, n, types.size());
        } else {
            s->kinds.assign((size_t)n, (char)VKF_SPM_NORMAL);
            for (int i = 0; i < n; i++) {
                int k = VKF_SPM_NORMAL;
                if (s->sp.IsUnknown(i)) k = VKF_SPM_UNKNOWN;
                else if (s->sp.IsControl(i)) k = VKF_SPM_CONTROL;
                else if (s->sp.IsByte(i)) k = VKF_SPM_BYTE;
                else if (s->sp.IsUnused(i)) k = VKF_SPM_UNUSED;
                else if (types[(size_t)i] == 4) k = VKF_SPM_USER_DEFINED;
                s->kinds[(size_t)i] = (char)k;
            }
            return s;
        }
    } catch (...) {
        delete s;
        throw;
    }
    delete s;
    return nullptr;
}

}  // namespace

extern "C" {

vkf_spm *vkf_spm_load(const char *path, char *err, size_t err_size) {
    if (!path) {
        set_err(err, err_size, "SentencePiece model: no path given");
        return nullptr;
    }
    try {
        quiet_sentencepiece();
        std::string bytes;
        char why[160];
        if (!read_model_file(path, &bytes, why, sizeof(why))) {
            set_err(err, err_size, "SentencePiece model %s: %s", path, why);
            return nullptr;
        }
        return load_checked(bytes, path, err, err_size);
    } catch (const std::bad_alloc &) {
        set_err(err, err_size, "SentencePiece model %s: out of memory", path);
    } catch (const std::exception &e) {
        set_err(err, err_size, "SentencePiece model %s: %s", path, e.what());
    } catch (...) {
        set_err(err, err_size, "SentencePiece model %s: unexpected error", path);
    }
    return nullptr;
}

vkf_spm *vkf_spm_load_bytes(const void *data, size_t size, const char *name, char *err, size_t err_size) {
    if (!name) name = "(buffer)";
    if (!data && size) {
        set_err(err, err_size, "SentencePiece model %s: the data is NULL", name);
        return nullptr;
    }
    if (size == 0) {
        set_err(err, err_size, "SentencePiece model %s: empty: not a SentencePiece model", name);
        return nullptr;
    }
    if ((uint64_t)size > kMaxModelBytes) {
        set_err(err, err_size, "SentencePiece model %s: larger than 1 GiB: not a SentencePiece model", name);
        return nullptr;
    }
    try {
        quiet_sentencepiece();
        std::string bytes;
        bytes.assign((const char *)data, size);
        return load_checked(bytes, name, err, err_size);
    } catch (const std::bad_alloc &) {
        set_err(err, err_size, "SentencePiece model %s: out of memory", name);
    } catch (const std::exception &e) {
        set_err(err, err_size, "SentencePiece model %s: %s", name, e.what());
    } catch (...) {
        set_err(err, err_size, "SentencePiece model %s: unexpected error", name);
    }
    return nullptr;
}

void vkf_spm_free(vkf_spm *s) {
    try {
        delete s;
    } catch (...) {
    }
}

uint32_t vkf_spm_size(const vkf_spm *s) {
    return s ? (uint32_t)s->kinds.size() : 0;
}

const char *vkf_spm_piece(const vkf_spm *s, uint32_t i, int *kind) {
    if (!s || i >= s->kinds.size()) return nullptr;
    try {
        const std::string &p = s->sp.IdToPiece((int)i);
        if (kind) *kind = (unsigned char)s->kinds[i];
        return p.c_str();
    } catch (...) {
        return nullptr;
    }
}

float vkf_spm_score(const vkf_spm *s, uint32_t i) {
    if (!s || i >= s->kinds.size()) return 0.0f;
    try {
        return s->sp.GetScore((int)i);
    } catch (...) {
        return 0.0f;
    }
}

const char *vkf_spm_charsmap(const vkf_spm *s, size_t *len) {
    *len = 0;
    if (!s || s->charsmap.empty()) return nullptr;
    *len = s->charsmap.size();
    return s->charsmap.data();
}

int vkf_spm_model_type(const vkf_spm *s) {
    return s ? s->model_type : 0;
}

int32_t vkf_spm_piece_id(const vkf_spm *s, const char *piece, size_t len) {
    if (!s || (!piece && len)) return -1;
    try {
        absl::string_view want(piece ? piece : "", len);
        int id = s->sp.PieceToId(want);   // unk_id for an unknown piece
        if (id < 0 || (size_t)id >= s->kinds.size() || absl::string_view(s->sp.IdToPiece(id)) != want) return -1;
        return id;
    } catch (...) {
        return -1;
    }
}

int vkf_spm_encode_n(const vkf_spm *s, const char *text, size_t len,
                     int (*fn)(const char *piece, size_t len, void *user), void *user,
                     char *err, size_t err_size) {
    if (!s || (!text && len) || !fn) {
        set_err(err, err_size, "SentencePiece encode: %s is NULL", !s ? "the model" : !fn ? "the callback" : "the text");
        return -1;
    }
    try {
        // What Encode(text, &pieces) does, without a std::vector<std::string>.
        sentencepiece::ImmutableSentencePieceText spt;
        sentencepiece::util::Status st = s->sp.Encode(absl::string_view(text ? text : "", len), spt.mutable_proto());
        if (!st.ok()) {
            set_err(err, err_size, "SentencePiece encode: %s", status_text(st));
            return -1;
        }
        size_t n = spt.pieces_size();
        for (size_t i = 0; i < n; i++) {
            const std::string &p = spt.pieces((int)i).piece();
            int r = fn(p.c_str(), p.size(), user);
            if (r != 0) return r;
        }
        return 0;
    } catch (const std::bad_alloc &) {
        set_err(err, err_size, "SentencePiece encode: out of memory");
    } catch (const std::exception &e) {
        set_err(err, err_size, "SentencePiece encode: %s", e.what());
    } catch (...) {
        set_err(err, err_size, "SentencePiece encode: unexpected error");
    }
    return -1;
}

int vkf_spm_encode(const vkf_spm *s, const char *text,
                   int (*fn)(const char *piece, size_t len, void *user), void *user,
                   char *err, size_t err_size) {
    if (!text) {
        set_err(err, err_size, "SentencePiece encode: the text is NULL");
        return -1;
    }
    return vkf_spm_encode_n(s, text, strlen(text), fn, user, err, err_size);
}

int vkf_spm_decode(const vkf_spm *s, const char *const *pieces, size_t n, char **out,
                   char *err, size_t err_size) {
    if (out) *out = nullptr;
    if (!s || !out || (!pieces && n)) {
        set_err(err, err_size, "SentencePiece decode: %s is NULL", !s ? "the model" : !out ? "out" : "pieces");
        return -1;
    }
    try {
        for (size_t i = 0; i < n; i++) {
            if (!pieces[i]) {
                set_err(err, err_size, "SentencePiece decode: piece %zu is NULL", i);
                return -1;
            }
        }
        std::vector<absl::string_view> views(n);
        for (size_t i = 0; i < n; i++) views[i] = absl::string_view(pieces[i]);
        std::string text;
        sentencepiece::util::Status st = s->sp.Decode(views, &text);
        if (!st.ok()) {
            set_err(err, err_size, "SentencePiece decode: %s", status_text(st));
            return -1;
        }
        char *buf = (char *)malloc(text.size() + 1);
        if (!buf) {
            set_err(err, err_size, "SentencePiece decode: out of memory");
            return -1;
        }
        memcpy(buf, text.data(), text.size());
        buf[text.size()] = '\0';
        *out = buf;
        return 0;
    } catch (const std::bad_alloc &) {
        set_err(err, err_size, "SentencePiece decode: out of memory");
    } catch (const std::exception &e) {
        set_err(err, err_size, "SentencePiece decode: %s", e.what());
    } catch (...) {
        set_err(err, err_size, "SentencePiece decode: unexpected error");
    }
    return -1;
}

}  // extern "C"

#if defined(__clang__)
#pragma clang attribute pop
#endif
