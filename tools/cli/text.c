/* Text the tool did not write: input read a line at a time (any length), lines
 * checked for NUL bytes and ill-formed UTF-8 before they reach the library, user
 * values quoted in messages (vkf_quote) and every message printed as one line,
 * and strings written into JSON as valid UTF-8 (docs/json.md). */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ UTF-8 */

/* The character that begins the n > 0 bytes at s: its length (code point in *cp),
 * or 0 where the bytes are ill-formed, with *bad the length of the ill-formed
 * part (its maximal subpart, Unicode 15 section 3.9: one U+FFFD each, as Python
 * and browsers decode). Well-formed: RFC 3629 (no overlongs, no surrogates,
 * nothing past U+10FFFF). */
size_t utf8_char(const unsigned char *s, size_t n, uint32_t *cp, size_t *bad)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    size_t more;
    uint32_t v;
    *bad = 1;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) more = 1, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) more = 2, v = c & 0x0f, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) more = 3, v = c & 0x07, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return 0;
    for (size_t i = 1; i <= more; i++) {
        if (i >= n || s[i] < lo || s[i] > hi) {
            *bad = i;
            return 0;
        }
        lo = 0x80, hi = 0xbf;
        v = v << 6 | (s[i] & 0x3fu);
    }
    *cp = v;
    return more + 1;
}

bool text_check(const char *s, size_t len, char *why, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t bad, k = utf8_char(p + i, len - i, &cp, &bad);
        if (k && cp == 0) {
            snprintf(why, cap, "a NUL byte at byte %zu", i + 1);
            return false;
        }
        if (!k) {
            char bytes[16] = "";
            for (size_t j = 0; j < bad && j < 3; j++) snprintf(bytes + 4 * j, sizeof bytes - 4 * j, "\\x%02x", p[i + j]);
            snprintf(why, cap, "invalid UTF-8 at byte %zu (%s)", i + 1, bytes);
            return false;
        }
        i += k;
    }
    return true;
}

/* ------------------------------------------------------------------ lines */

bool lines_open(line_reader *r, const char *path)
{
    *r = (line_reader){0};
    r->name = input_name(path);
    r->f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!r->f) {
        cli_error("cannot read %s: %s", r->name, strerror(errno));
        return false;
    }
    return true;
}

bool lines_next(line_reader *r, char **out, size_t *out_len)
{
    if (!r->f || r->failed) return false;
    errno = 0;
    ssize_t n = getline(&r->buf, &r->cap, r->f);
    if (n < 0) {
        if (ferror(r->f) || !feof(r->f)) { /* a read error, or no memory for the line (ENOMEM) */
            cli_error("cannot read %s after line %lu: %s", r->name, r->number,
                      strerror(errno ? errno : EIO));
            r->failed = true;
        }
        return false;
    }
    r->number++;
    size_t len = (size_t)n;
    if (len && r->buf[len - 1] == '\n') len--;
    if (len && r->buf[len - 1] == '\r') len--; /* CRLF; a lone CR before the end of the file */
    r->buf[len] = '\0';
    *out = r->buf;
    *out_len = len;
    return true;
}

void lines_close(line_reader *r)
{
    if (r->f && r->f != stdin) fclose(r->f);
    free(r->buf);
    *r = (line_reader){0};
}

long read_id_lines(const char *path, id_line **out)
{
    *out = NULL;
    line_reader r;
    if (!lines_open(&r, path)) return -1;
    id_line *lines = NULL;
    long n = 0;
    char *line;
    size_t len;
    while (lines_next(&r, &line, &len)) {
        if (strspn(line, " \t") == len) continue; /* blank (a NUL byte stops strspn: not blank) */
        char why[96];
        if (!text_check(line, len, why, sizeof why)) {
            cli_error("%s line %lu: %s", r.name, r.number, why);
            r.failed = true;
            break;
        }
        id_line *grown = realloc(lines, (size_t)(n + 1) * sizeof *lines);
        if (!grown) {
            cli_error("out of host memory reading %s", r.name);
            exit(EXIT_ERROR);
        }
        lines = grown;
        lines[n].text = xmalloc(len + 1);
        memcpy(lines[n].text, line, len + 1);
        lines[n].number = r.number;
        n++;
    }
    bool failed = r.failed;
    lines_close(&r);
    if (failed) {
        free_id_lines(lines, n);
        return -1;
    }
    *out = lines;
    return n;
}

void free_id_lines(id_line *lines, long n)
{
    for (long i = 0; lines && i < n; i++) free(lines[i].text);
    free(lines);
}

/* ------------------------------------------------------------------ messages */

const char *quoted(const char *s)
{
    static char slots[4][VKF_QUOTE_SIZE];
    static unsigned next;
    char *buf = slots[next++ % 4];
    return vkf_quote(buf, VKF_QUOTE_SIZE, s, (size_t)-1);
}

void print_line(FILE *f, const char *prefix, const char *message)
{
    /* what vkf_fail does to library messages, for the tool's own */
    fputs(prefix, f);
    const unsigned char *p = (const unsigned char *)message;
    size_t len = strlen(message);
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t bad, k = utf8_char(p + i, len - i, &cp, &bad);
        if (k && cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp <= 0x9f)) {
            fwrite(p + i, 1, k, f);
        } else if (k && (cp == '\n' || cp == '\t' || cp == '\r')) {
            fputs(cp == '\n' ? "\\n" : cp == '\t' ? "\\t" : "\\r", f);
        } else {
            fprintf(f, "\\x%02x", p[i]);
            k = 1;
        }
        i += k;
    }
    fputc('\n', f);
}

void cli_error(const char *format, ...)
{
    char message[2048];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    print_line(stderr, "vkformer: ", message);
}

/* ------------------------------------------------------------------ JSON */

void print_json_bytes(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    putchar('"');
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t bad, k = utf8_char(p + i, len - i, &cp, &bad);
        if (!k) { /* the ill-formed part: one U+FFFD */
            fputs("\\ufffd", stdout);
            i += bad;
            continue;
        }
        if (cp == '"' || cp == '\\') printf("\\%c", (int)cp);
        else if (cp == '\n') fputs("\\n", stdout);
        else if (cp == '\r') fputs("\\r", stdout);
        else if (cp == '\t') fputs("\\t", stdout);
        else if (cp < 0x20 || cp == 0x7f || cp == 0x2028 || cp == 0x2029) printf("\\u%04x", (unsigned)cp);
        else fwrite(p + i, 1, k, stdout);
        i += k;
    }
    putchar('"');
}

void print_json_string(const char *s)
{
    print_json_bytes(s, strlen(s));
}
