/* vkf_quote and vkf_fail's one-line guarantee, without a Vulkan device.
 *
 *  - vkf_quote: each escape (quote, backslash, \n \r \t, other C0 controls, DEL,
 *    NUL inside the given length), ill-formed UTF-8 byte by byte (stray
 *    continuation bytes, overlongs, surrogates, past U+10FFFF, cut sequences,
 *    F5..FF), C1 controls and bidirectional/line-breaking format characters as
 *    \uXXXX, well-formed UTF-8 kept; cutting at every cap from 0 to past the
 *    whole rendering (never inside an escape or a character, always ending `"`
 *    or `"...`, never writing past cap); (size_t)-1 as strlen; NULL.
 *  - vkf_fail: a message holding control characters or ill-formed UTF-8 comes out
 *    as one line of printable UTF-8; a message formatted from vkf_last_error()
 *    itself; a message longer than the buffer is cut at a character.
 * Prints "test_quote: N checks passed" and exits non-zero on any failure. */
#include "runtime/runtime.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failures;

#define CHECK_MSG(cond, ...)                                                                        \
    do {                                                                                            \
        checks++;                                                                                   \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fputc('\n', stderr);                                                                    \
            failures++;                                                                             \
        }                                                                                           \
    } while (0)

/* Whether s is well-formed UTF-8 holding no C0 control and no DEL. */
static bool printable_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        size_t more = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                                                                                     : c >= 0xf0 && c <= 0xf4 ? 3 : 9;
        if (more == 9 || c < 0x20 || c == 0x7f) return false;
        for (size_t i = 1; i <= more; i++)
            if ((p[i] & 0xc0) != 0x80) return false;
        p += more + 1;
    }
    return true;
}

/* vkf_quote of the len bytes at in (with a roomy buffer) must be want. */
static void check_quote(const char *in, size_t len, const char *want)
{
    char buf[512];
    memset(buf, 'Z', sizeof buf);
    const char *got = vkf_quote(buf, sizeof buf, in, len);
    CHECK_MSG(got == buf && strcmp(buf, want) == 0, "vkf_quote(%zu bytes) gave [%s], expected [%s]", len, buf, want);
    CHECK_MSG(printable_utf8(buf), "vkf_quote(%zu bytes) gave [%s]: not printable UTF-8", len, buf);
}

#define Q(lit, want) check_quote(lit, sizeof(lit) - 1, want)

static void test_escapes(void)
{
    Q("model_type", "\"model_type\"");
    Q("", "\"\"");
    Q("say \"hi\"", "\"say \\\"hi\\\"\"");
    Q("a\\b", "\"a\\\\b\"");
    Q("line\nforged: yes", "\"line\\nforged: yes\"");
    Q("cr\r", "\"cr\\r\"");
    Q("tab\t", "\"tab\\t\"");
    Q("\x1b[31mred\x1b[0m", "\"\\x1b[31mred\\x1b[0m\"");
    Q("bell\a", "\"bell\\x07\"");
    Q("del\x7f", "\"del\\x7f\"");
    Q("nul\0after", "\"nul\\x00after\"");
    Q("\x01\x1f", "\"\\x01\\x1f\"");
    /* well-formed UTF-8 stays */
    Q("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad",
      "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad\"");
    Q("\xef\xbf\xbd", "\"\xef\xbf\xbd\"");             /* U+FFFD itself */
    Q("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"");     /* U+10FFFF */
    /* C1 controls and format characters */
    Q("\xc2\x85", "\"\\u0085\"");                       /* NEL */
    Q("\xc2\x9b" "31m", "\"\\u009b31m\"");              /* CSI */
    Q("\xe2\x80\xa8", "\"\\u2028\"");                   /* line separator */
    Q("\xe2\x80\xae" "cod", "\"\\u202ecod\"");          /* right-to-left override */
    Q("\xe2\x81\xa6", "\"\\u2066\"");
    Q("\xef\xbb\xbf", "\"\\ufeff\"");
    Q("\xd8\x9c", "\"\\u061c\"");
    Q("\xc2\xa0", "\"\xc2\xa0\"");                      /* no-break space: printable */
}

static void test_ill_formed(void)
{
    Q("\x80", "\"\\x80\"");                             /* stray continuation byte */
    Q("a\xbf" "b", "\"a\\xbfb\"");
    Q("\xc0\xaf", "\"\\xc0\\xaf\"");                    /* overlong '/' */
    Q("\xc1\xbf", "\"\\xc1\\xbf\"");
    Q("\xe0\x80\xaf", "\"\\xe0\\x80\\xaf\"");           /* overlong, three bytes */
    Q("\xf0\x80\x80\xaf", "\"\\xf0\\x80\\x80\\xaf\"");  /* overlong, four bytes */
    Q("\xed\xa0\x80", "\"\\xed\\xa0\\x80\"");           /* U+D800, a surrogate */
    Q("\xed\xbf\xbf", "\"\\xed\\xbf\\xbf\"");           /* U+DFFF */
    Q("\xf4\x90\x80\x80", "\"\\xf4\\x90\\x80\\x80\"");  /* U+110000 */
    Q("\xf5\x80\x80\x80", "\"\\xf5\\x80\\x80\\x80\"");
    Q("\xfe\xff", "\"\\xfe\\xff\"");
    Q("\xe2\x82", "\"\\xe2\\x82\"");                    /* cut at the end */
    Q("\xe2\x82x", "\"\\xe2\\x82x\"");                  /* cut by an ASCII byte */
    Q("\xf0\x9f\x98", "\"\\xf0\\x9f\\x98\"");
    Q("\xc3", "\"\\xc3\"");
    Q("\xc3\xc3\xa9", "\"\\xc3\xc3\xa9\"");             /* a lead byte, then a whole character */
}

/* Every cap from 0 up: NUL-terminated within cap, nothing written past it, a
 * prefix of the whole rendering (cut at a character) ending `"` or `"...`. */
static void test_caps(const char *in, size_t len)
{
    char whole[4096];
    vkf_quote(whole, sizeof whole, in, len);
    size_t wlen = strlen(whole);
    for (size_t cap = 0; cap <= wlen + 8; cap++) {
        char buf[4096 + 16];
        memset(buf, 'Z', sizeof buf);
        vkf_quote(buf, cap, in, len);
        bool untouched = true;
        for (size_t i = cap; i < cap + 16; i++) untouched = untouched && buf[i] == 'Z';
        CHECK_MSG(untouched, "cap %zu: wrote past the buffer", cap);
        if (cap == 0) continue;
        size_t n = strnlen(buf, cap);
        CHECK_MSG(n < cap, "cap %zu: no NUL inside the buffer", cap);
        if (n >= cap) continue;
        if (cap < 8) {
            CHECK_MSG(n == 0, "cap %zu: [%s], expected \"\" below 8 bytes", cap, buf);
            continue;
        }
        if (cap > wlen) {
            CHECK_MSG(strcmp(buf, whole) == 0, "cap %zu: [%s], expected the whole [%s]", cap, buf, whole);
            continue;
        }
        CHECK_MSG(n >= 5 && strcmp(buf + n - 4, "\"...") == 0, "cap %zu: [%s] does not end \"...", cap, buf);
        /* the part before "..." is a prefix of the whole rendering, cut where the
         * whole rendering of a shorter input would end too */
        size_t body = n - 4;
        CHECK_MSG(strncmp(buf, whole, body) == 0, "cap %zu: [%s] is not a prefix of [%s]", cap, buf, whole);
        CHECK_MSG(printable_utf8(buf), "cap %zu: [%s] is not printable UTF-8", cap, buf);
        /* never inside an escape or a character: the part is the rendering of a
         * prefix of the input (without its closing quote) */
        bool found = false;
        for (size_t j = 0; j <= len && !found; j++) {
            char pre[4096];
            vkf_quote(pre, sizeof pre, in, j);
            found = strlen(pre) == body + 1 && strncmp(pre, buf, body) == 0;
        }
        CHECK_MSG(found, "cap %zu: [%s] is not the rendering of a prefix", cap, buf);
    }
}

static void test_cutting(void)
{
    const char mixed[] = "ab\x1b[0m\xe2\x82\xac\xff\"\\\n\xf0\x9f\x98\x80\xe2\x80\xaeqrstuvwxyz";
    test_caps(mixed, sizeof mixed - 1);
    char longs[300];
    memset(longs, 'x', sizeof longs);
    test_caps(longs, sizeof longs);
    /* the default buffer: about 80 bytes of text */
    char buf[VKF_QUOTE_SIZE];
    vkf_quote(buf, sizeof buf, longs, sizeof longs);
    CHECK_MSG(strlen(buf) == VKF_QUOTE_SIZE - 1 && strncmp(buf + strlen(buf) - 4, "\"...", 4) == 0 &&
                  strspn(buf + 1, "x") == VKF_QUOTE_SIZE - 6,
              "300 x in VKF_QUOTE_SIZE bytes: [%s]", buf);
    /* escapes are never split: 40 ESC need 160 bytes */
    char esc[40];
    memset(esc, 0x1b, sizeof esc);
    vkf_quote(buf, sizeof buf, esc, sizeof esc);
    size_t n = strlen(buf);
    CHECK_MSG(n >= 5 && (n - 5) % 4 == 0 && strcmp(buf + n - 4, "\"...") == 0, "40 ESC: [%s]", buf);
    /* strlen, NULL */
    vkf_quote(buf, sizeof buf, "abc\0def", (size_t)-1);
    CHECK_MSG(strcmp(buf, "\"abc\"") == 0, "(size_t)-1 length: [%s]", buf);
    vkf_quote(buf, sizeof buf, NULL, 3);
    CHECK_MSG(strcmp(buf, "(null)") == 0, "NULL: [%s]", buf);
    CHECK_MSG(vkf_quote(NULL, 10, "x", 1) == NULL, "NULL buffer");
}

static void test_fail(void)
{
    vkf_status st = vkf_fail(VKF_ERROR_BAD_MODEL, "model_type \"%s\" is not supported",
                             "bart\nvkformer: all good\x1b[2J\a\r");
    CHECK_MSG(st == VKF_ERROR_BAD_MODEL, "vkf_fail returned %d", (int)st);
    CHECK_MSG(strcmp(vkf_last_error(),
                     "model_type \"bart\\nvkformer: all good\\x1b[2J\\x07\\r\" is not supported") == 0,
              "vkf_fail kept control characters: [%s]", vkf_last_error());
    vkf_fail(VKF_ERROR_BAD_MODEL, "name %s", "\xff\xc0\xaf ok \xc2\x9b \xe2\x80\xae \xe2\x82");
    CHECK_MSG(strcmp(vkf_last_error(), "name \\xff\\xc0\\xaf ok \\u009b \\u202e \\xe2\\x82") == 0,
              "vkf_fail kept ill-formed UTF-8: [%s]", vkf_last_error());
    CHECK_MSG(printable_utf8(vkf_last_error()), "not printable: [%s]", vkf_last_error());
    /* `"` and `\` of a format are its own */
    vkf_fail(VKF_ERROR_IO, "a \"b\" c\\d");
    CHECK_MSG(strcmp(vkf_last_error(), "a \"b\" c\\d") == 0, "[%s]", vkf_last_error());
    /* an argument that is the last error itself */
    vkf_fail(VKF_ERROR_IO, "inner");
    vkf_fail(VKF_ERROR_IO, "outer: %s", vkf_last_error());
    CHECK_MSG(strcmp(vkf_last_error(), "outer: inner") == 0, "[%s]", vkf_last_error());
    vkf_fail(VKF_ERROR_IO, "%s and again %s", vkf_last_error(), vkf_last_error());
    CHECK_MSG(strcmp(vkf_last_error(), "outer: inner and again outer: inner") == 0, "[%s]", vkf_last_error());
    /* long: cut at a character, still printable */
    static char big[5000];
    for (size_t i = 0; i + 3 <= sizeof big - 1; i += 3) memcpy(big + i, "\xe2\x82\xac", 3);
    vkf_fail(VKF_ERROR_IO, "%s", big);
    CHECK_MSG(printable_utf8(vkf_last_error()) && strlen(vkf_last_error()) > 1000,
              "a long message of euro signs: %zu bytes, printable %d", strlen(vkf_last_error()),
              printable_utf8(vkf_last_error()));
    memset(big, '\n', sizeof big - 1);
    vkf_fail(VKF_ERROR_IO, "%s", big);
    CHECK_MSG(printable_utf8(vkf_last_error()) && strlen(vkf_last_error()) >= 1020,
              "a long message of newlines: %zu bytes", strlen(vkf_last_error()));
}

int main(void)
{
    test_escapes();
    test_ill_formed();
    test_cutting();
    test_fail();
    if (failures) {
        fprintf(stderr, "test_quote: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("test_quote: %d checks passed\n", checks);
    return 0;
}
