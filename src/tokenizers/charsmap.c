/* The precompiled character map of SentencePiece normalization: the check that
 * proves a blob safe to walk, and the prefix lookup (charsmap.h describes the
 * format and what is checked). */
#include "tokenizers/charsmap.h"

#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

static uint32_t unit_at(const vkf_charsmap *m, uint32_t i)
{
    const uint8_t *p = m->units + (size_t)i * 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* darts-clone's unit fields */
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xffu); }
static bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1u; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF),
 * as Rust's String::from_utf8, which Hugging Face's loader applies. Returns the
 * offset of the first bad byte, or size. */
static size_t utf8_valid_prefix(const uint8_t *s, size_t size)
{
    size_t i = 0;
    while (i < size) {
        uint8_t c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
        else return i;
        if (size - i < n) return i;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = cp << 6 | (s[i + k] & 0x3fu);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return i;
        i += n;
    }
    return size;
}

/* The value of the key that ends at node (has_leaf set): it must start a
 * NUL-terminated string inside the string blob, at a character boundary. */
static vkf_status check_value(const vkf_charsmap *m, uint32_t node)
{
    uint32_t base = node ^ unit_offset(unit_at(m, node));   /* < n_units: checked on the node's visit */
    uint32_t v = unit_value(unit_at(m, base));
    if (v >= m->strings_size)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: unit %u: a key's string offset %u is past the "
                        "%u bytes of normalized strings", node, v, m->strings_size);
    if (((uint8_t)m->strings[v] & 0xc0) == 0x80)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: unit %u: a key's string offset %u is inside a "
                        "UTF-8 character", node, v);
    if (!memchr(m->strings + v, 0, m->strings_size - v))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: unit %u: the string at offset %u has no NUL "
                        "before the end of the blob", node, v);
    return VKF_OK;
}

/* Walks every node reachable from the root (iterative depth-first search) and
 * checks each as charsmap.h says. */
static vkf_status check_walks(const vkf_charsmap *m)
{
    enum { WHITE = 0, GREY = 1, BLACK = 2 };
    uint32_t n = m->n_units;
    uint8_t *color = calloc(n, 1);
    uint8_t *hits = calloc(n, 1);   /* most keys met on a walk that starts after the node */
    struct frame { uint32_t node, next; } *stack = malloc((size_t)n * sizeof *stack);
    if (!color || !hits || !stack) {
        free(color), free(hits), free(stack);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "precompiled charsmap: out of memory checking %u units", n);
    }
    vkf_status st = VKF_OK;
    uint32_t depth = 0;
    /* A node is checked when it is pushed: its 256 successors lie in the array,
     * and, if it ends a key, the key's value is a string. */
#define PUSH(node_)                                                                              \
    do {                                                                                         \
        uint32_t pn_ = (node_);                                                                  \
        uint32_t base_ = pn_ ^ unit_offset(unit_at(m, pn_));                                     \
        if ((base_ | 0xffu) >= n) {                                                              \
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: unit %u: its children "     \
                          "(%u..%u) lie past the end of the %u-unit array", pn_, base_ & ~0xffu, \
                          base_ | 0xffu, n);                                                     \
            goto done;                                                                           \
        }                                                                                        \
        if (pn_ != 0 && unit_has_leaf(unit_at(m, pn_)) && (st = check_value(m, pn_)) != VKF_OK)  \
            goto done;                                                                           \
        color[pn_] = GREY;                                                                       \
        stack[depth].node = pn_;                                                                 \
        stack[depth].next = 0;                                                                   \
        depth++;                                                                                 \
    } while (0)

    PUSH(0);
    while (depth > 0) {
        struct frame *f = &stack[depth - 1];
        uint32_t base = f->node ^ unit_offset(unit_at(m, f->node));
        bool descended = false;
        for (; f->next < 256; f->next++) {
            uint32_t c = f->next, child = base ^ c;
            uint32_t u = unit_at(m, child);
            if (unit_label(u) != c) continue;
            if (color[child] == GREY) {
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: unit %u: byte 0x%02x leads back to unit "
                              "%u: the walks loop", f->node, c, child);
                goto done;
            }
            if (color[child] == WHITE) {
                PUSH(child);   /* f->next stays at c: the child's hits are added when the walk returns here */
                descended = true;
                break;
            }
            uint32_t h = (uint32_t)hits[child] + (unit_has_leaf(u) ? 1u : 0u);
            if (h > VKF_CHARSMAP_MAX_HITS) {
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: a walk through unit %u meets more than %d "
                              "keys", child, VKF_CHARSMAP_MAX_HITS);
                goto done;
            }
            if (h > hits[f->node]) hits[f->node] = (uint8_t)h;
        }
        if (!descended) {
            color[f->node] = BLACK;
            depth--;
        }
    }
#undef PUSH
done:
    free(color), free(hits), free(stack);
    return st;
}

vkf_status vkf_charsmap_parse(const void *blob, size_t size, vkf_charsmap *out_map)
{
    if (!out_map) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_charsmap_parse: out_map is NULL");
    memset(out_map, 0, sizeof *out_map);
    if (!blob && size) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_charsmap_parse: blob is NULL");
    const uint8_t *b = blob;
    if (size < 4)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: %zu bytes, too short for its 4-byte header", size);
    uint32_t array_bytes = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (array_bytes > size - 4)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: its double array of %u bytes is longer than the "
                        "%zu bytes that follow the header (truncated?)", array_bytes, size - 4);
    if (array_bytes % 4 != 0)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: its double array of %u bytes is not a whole "
                        "number of 4-byte units", array_bytes);
    if (array_bytes < 256 * 4)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: its double array has %u units, fewer than the "
                        "256 its root needs", array_bytes / 4);
    if (array_bytes > VKF_CHARSMAP_MAX_ARRAY_BYTES)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: its double array of %u bytes is larger than "
                        "the %u this reader accepts", array_bytes, VKF_CHARSMAP_MAX_ARRAY_BYTES);
    size_t strings_size = size - 4 - array_bytes;
    if (strings_size > UINT32_MAX)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: %zu bytes of strings, more than 4 GiB",
                        strings_size);
    vkf_charsmap m = {
        .units = b + 4,
        .n_units = array_bytes / 4,
        .strings = (const char *)(b + 4 + array_bytes),
        .strings_size = (uint32_t)strings_size,
    };
    size_t bad = utf8_valid_prefix((const uint8_t *)m.strings, strings_size);
    if (bad != strings_size)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "precompiled charsmap: its normalized strings are not UTF-8 (byte %zu "
                        "of %zu)", bad, strings_size);
    VKF_TRY(check_walks(&m));
    *out_map = m;
    return VKF_OK;
}

size_t vkf_charsmap_prefix(const vkf_charsmap *map, const char *in, size_t len, vkf_charsmap_match match,
                           const char **out_norm)
{
    if (!map || !map->n_units || (!in && len)) return 0;
    uint32_t node = unit_offset(unit_at(map, 0));   /* 0 ^ offset(root) */
    size_t found = 0;
    uint32_t value = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)in[i];
        if (c == 0 && match == VKF_CHARSMAP_SHORTEST) break;
        node ^= c;
        uint32_t u = unit_at(map, node);
        if (unit_label(u) != c) break;
        node ^= unit_offset(u);
        if (unit_has_leaf(u)) {
            found = i + 1;
            value = unit_value(unit_at(map, node));
            if (match == VKF_CHARSMAP_SHORTEST) break;
        }
    }
    if (found && out_norm) *out_norm = map->strings + value;
    return found;
}
