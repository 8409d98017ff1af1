/* The precompiled character map of SentencePiece normalization (NormalizerSpec's
 * precompiled_charsmap in a .model / .spm file, base64 in a Hugging Face
 * tokenizer.json's Precompiled normalizer): a parser that proves a blob safe, and
 * the prefix lookup both users of the map do. Internal, not public.
 *
 * Format (little-endian):
 *   bytes 0..4        T, the size of the double array in bytes (a multiple of 4)
 *   bytes 4..4+T      the darts-clone double array: T / 4 uint32 units
 *   bytes 4+T..       the normalized strings, each NUL-terminated
 * A key (a byte string) is looked up by walking the array from unit 0: for byte
 * c, node = node ^ offset(unit[node]) ^ c, and the step is taken when label(unit
 * [node]) == c; a node with has_leaf set ends a key, and the unit at node ^
 * offset(unit[node]) holds its value, the offset of its normalized string.
 *
 * Nothing in the blob is trusted. libsentencepiece (0.1.97) and Hugging Face's
 * Precompiled normalizer follow those offsets unchecked, so a blob of random
 * bytes makes them read outside the array (a segfault in
 * sentencepiece::normalizer::Normalizer::NormalizePrefix). vkf_charsmap_parse
 * accepts a blob only when every walk, for any input bytes, stays inside it:
 * every node reachable from the root has all 256 possible next indices inside
 * the array, every key's value is the start of a NUL-terminated string inside
 * the string blob, the walks form no cycle (a real array is a DAG: darts-clone
 * shares suffixes), and no walk meets more than VKF_CHARSMAP_MAX_HITS keys
 * (sentencepiece keeps the hits of one lookup in a 32-entry array). The strings
 * must be UTF-8 (Hugging Face refuses others) and each value must start a
 * character. */
#ifndef VKF_CHARSMAP_H
#define VKF_CHARSMAP_H

#include "vkformer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Blobs with a larger double array are refused (real ones: 180 kB for nmt_nfkc);
 * the check visits each reachable node's 256 successors, so this bounds its time. */
#define VKF_CHARSMAP_MAX_ARRAY_BYTES (4u << 20)
/* At most this many keys on one walk (sentencepiece's kMaxTrieResultsSize). */
#define VKF_CHARSMAP_MAX_HITS 32

/* A checked map; borrows the blob it was parsed from. */
typedef struct vkf_charsmap {
    const uint8_t *units;       /* borrowed: n_units little-endian uint32 */
    uint32_t n_units;
    const char *strings;        /* borrowed: strings_size bytes of NUL-terminated UTF-8 */
    uint32_t strings_size;
} vkf_charsmap;

/* Checks blob (size bytes) as described above and fills *out_map, which borrows
 * blob. VKF_ERROR_BAD_MODEL with one line naming the first problem found (the
 * caller adds which file); *out_map is zeroed on failure. */
vkf_status vkf_charsmap_parse(const void *blob, size_t size, vkf_charsmap *out_map);

/* Which key a lookup returns when several keys are prefixes of the input. */
typedef enum vkf_charsmap_match {
    /* The longest, every input byte walked (NUL included): sentencepiece's
     * Normalizer::NormalizePrefix. */
    VKF_CHARSMAP_LONGEST = 0,
    /* The shortest, the walk stopping at a NUL byte: Hugging Face's Precompiled
     * normalizer (spm_precompiled's transform takes the first hit). */
    VKF_CHARSMAP_SHORTEST = 1,
} vkf_charsmap_match;

/* Looks up the keys of map that are prefixes of in[0..len) and picks one as
 * `match` says. Returns its length in bytes and sets *out_norm to its
 * normalized string (NUL-terminated, inside the map's blob); returns 0 (and
 * leaves *out_norm alone) when no key is a prefix. */
size_t vkf_charsmap_prefix(const vkf_charsmap *map, const char *in, size_t len, vkf_charsmap_match match,
                           const char **out_norm);

#ifdef __cplusplus
}
#endif

#endif
