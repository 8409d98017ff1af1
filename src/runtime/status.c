/* Status codes and messages: the per-thread last-error text, the names of status
 * codes and of VkResults, the version functions, and how text from outside (file
 * contents, arguments) is shown in a message: vkf_quote renders it escaped and
 * cut, and vkf_fail renders whatever control character or ill-formed UTF-8 still
 * reaches a message, so that a message is always one line of printable UTF-8. */
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

uint32_t vkf_version(void) { return VKF_VERSION_NUMBER; }

const char *vkf_version_string(void)
{
#define VKF_STR2(x) #x
#define VKF_STR(x) VKF_STR2(x)
    return VKF_STR(VKF_VERSION_MAJOR) "." VKF_STR(VKF_VERSION_MINOR) "." VKF_STR(VKF_VERSION_PATCH);
#undef VKF_STR
#undef VKF_STR2
}

const char *vkf_status_string(vkf_status status)
{
    switch (status) {
    case VKF_OK: return "VKF_OK";
    case VKF_ERROR_INVALID_ARGUMENT: return "VKF_ERROR_INVALID_ARGUMENT";
    case VKF_ERROR_NO_VULKAN: return "VKF_ERROR_NO_VULKAN";
    case VKF_ERROR_NO_DEVICE: return "VKF_ERROR_NO_DEVICE";
    case VKF_ERROR_UNSUPPORTED: return "VKF_ERROR_UNSUPPORTED";
    case VKF_ERROR_TOO_LARGE: return "VKF_ERROR_TOO_LARGE";
    case VKF_ERROR_OUT_OF_HOST_MEMORY: return "VKF_ERROR_OUT_OF_HOST_MEMORY";
    case VKF_ERROR_OUT_OF_DEVICE_MEMORY: return "VKF_ERROR_OUT_OF_DEVICE_MEMORY";
    case VKF_ERROR_DEVICE_LOST: return "VKF_ERROR_DEVICE_LOST";
    case VKF_ERROR_VULKAN: return "VKF_ERROR_VULKAN";
    case VKF_ERROR_BAD_MODEL: return "VKF_ERROR_BAD_MODEL";
    case VKF_ERROR_IO: return "VKF_ERROR_IO";
    case VKF_ERROR_STATE: return "VKF_ERROR_STATE";
    }
    return "VKF_ERROR_UNKNOWN";
}

const char *vkf_last_error(void) { return last_error; }

/* ------------------------------------------------------------------ text in messages */

/* The length of the well-formed UTF-8 character that begins the n > 0 bytes at s
 * (its code point in *cp), or 0 where none begins there: a stray continuation
 * byte, C0/C1 (overlong two-byte forms), F5..FF, an overlong three- or four-byte
 * form, a surrogate (ED A0..BF), past U+10FFFF (F4 90..), or a cut sequence. */
static size_t utf8_char(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    size_t more;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) more = 1, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) more = 2, v = c & 0x0f, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) more = 3, v = c & 0x07, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return 0;
    if (n <= more) return 0;
    for (size_t i = 1; i <= more; i++) {
        if (s[i] < lo || s[i] > hi) return 0;
        lo = 0x80, hi = 0xbf;
        v = v << 6 | (s[i] & 0x3fu);
    }
    *cp = v;
    return more + 1;
}

/* Characters no message shows as they are: C1 controls, and format characters
 * that reorder text (bidirectional marks, embeddings, isolates) or break lines. */
static bool hidden(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

/* How the character at s (n > 0 bytes) appears in a message: into out (at least
 * 8 bytes; not NUL-terminated), returning its length, with the bytes it takes
 * from s in *used. quote: `"` and `\` escaped too (vkf_quote; vkf_fail leaves
 * them, its format's own). */
static size_t render_char(const unsigned char *s, size_t n, bool quote, char *out, size_t *used)
{
    uint32_t cp = 0;
    size_t k = utf8_char(s, n, &cp);
    *used = k ? k : 1;
    const char *two = NULL;
    if (!k) return (size_t)snprintf(out, 8, "\\x%02x", s[0]);
    if (cp == '\n') two = "\\n";
    else if (cp == '\r') two = "\\r";
    else if (cp == '\t') two = "\\t";
    else if (quote && cp == '"') two = "\\\"";
    else if (quote && cp == '\\') two = "\\\\";
    if (two) {
        memcpy(out, two, 2);
        return 2;
    }
    if (cp < 0x20 || cp == 0x7f) return (size_t)snprintf(out, 8, "\\x%02x", (unsigned)cp);
    if (hidden(cp)) return (size_t)snprintf(out, 8, "\\u%04x", (unsigned)cp);
    memcpy(out, s, k);
    return k;
}

const char *vkf_quote(char *buf, size_t cap, const char *s, size_t len)
{
    if (!buf || cap == 0) return buf;
    buf[0] = '\0';
    if (!s) {
        if (cap >= 7) memcpy(buf, "(null)", 7);
        return buf;
    }
    if (cap < 8) return buf;
    if (len == (size_t)-1) len = strlen(s);
    const unsigned char *p = (const unsigned char *)s;
    char one[8];
    size_t used, total = 0, i = 0;
    /* whole: the rendering with its two quotes and the NUL fits cap */
    while (i < len && total + 3 <= cap) {
        total += render_char(p + i, len - i, true, one, &used);
        i += used;
    }
    bool whole = i == len && total + 3 <= cap;
    size_t room = whole ? total : cap - 6; /* "...\"..." and the NUL around it */
    size_t out = 0;
    buf[out++] = '"';
    for (i = 0; i < len;) {
        size_t n = render_char(p + i, len - i, true, one, &used);
        if (out - 1 + n > room) break;
        memcpy(buf + out, one, n);
        out += n, i += used;
    }
    memcpy(buf + out, whole ? "\"" : "\"...", whole ? 2 : 5);
    return buf;
}

vkf_status vkf_fail(vkf_status status, const char *fmt, ...)
{
    /* formatted apart from last_error: an argument may be vkf_last_error() itself */
    char message[sizeof last_error];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof message ? (size_t)n : sizeof message - 1;
    /* A last line of defence: a caller that forgot vkf_quote still leaves one line
     * (a control character, ill-formed UTF-8 or a cut sequence rendered as
     * vkf_quote renders it, without quotes), cut at a character where it is long. */
    const unsigned char *p = (const unsigned char *)message;
    size_t out = 0, used;
    char one[8];
    for (size_t i = 0; i < len; i += used) {
        size_t k = render_char(p + i, len - i, false, one, &used);
        if (out + k >= sizeof last_error) break;
        memcpy(last_error + out, one, k);
        out += k;
    }
    last_error[out] = '\0';
    return status;
}

const char *vkf_vk_result_name(VkResult result)
{
    switch (result) {
#define NAME(r) case r: return #r
    NAME(VK_SUCCESS);
    NAME(VK_NOT_READY);
    NAME(VK_TIMEOUT);
    NAME(VK_INCOMPLETE);
    NAME(VK_ERROR_OUT_OF_HOST_MEMORY);
    NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY);
    NAME(VK_ERROR_INITIALIZATION_FAILED);
    NAME(VK_ERROR_DEVICE_LOST);
    NAME(VK_ERROR_MEMORY_MAP_FAILED);
    NAME(VK_ERROR_LAYER_NOT_PRESENT);
    NAME(VK_ERROR_EXTENSION_NOT_PRESENT);
    NAME(VK_ERROR_FEATURE_NOT_PRESENT);
    NAME(VK_ERROR_INCOMPATIBLE_DRIVER);
    NAME(VK_ERROR_TOO_MANY_OBJECTS);
    NAME(VK_ERROR_FORMAT_NOT_SUPPORTED);
    NAME(VK_ERROR_FRAGMENTED_POOL);
    NAME(VK_ERROR_UNKNOWN);
    NAME(VK_ERROR_OUT_OF_POOL_MEMORY);
    NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE);
    NAME(VK_ERROR_FRAGMENTATION);
    NAME(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS);
    NAME(VK_PIPELINE_COMPILE_REQUIRED);
#undef NAME
    default: return "VkResult(unknown)";
    }
}

vkf_status vkf_fail_vk(VkResult result, const char *call)
{
    vkf_status status = VKF_ERROR_VULKAN;
    if (result == VK_ERROR_OUT_OF_HOST_MEMORY) status = VKF_ERROR_OUT_OF_HOST_MEMORY;
    else if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY) status = VKF_ERROR_OUT_OF_DEVICE_MEMORY;
    else if (result == VK_ERROR_DEVICE_LOST) status = VKF_ERROR_DEVICE_LOST;
    return vkf_fail(status, "%s failed with %s (%d)", call, vkf_vk_result_name(result), (int)result);
}
