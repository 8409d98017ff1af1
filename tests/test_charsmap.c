/* The precompiled charsmap parser and lookup (src/tokenizers/charsmap.h) from the
 * command line, for tests/test_charsmap.py.
 *
 *   test_charsmap check FILE    parses the blob in FILE: prints "ok" and exits 0,
 *                               or prints the one-line message and exits 1
 *   test_charsmap lookup FILE   parses the blob (exit 1 if refused), then for each
 *                               line of stdin (the input bytes in hex) prints
 *                               "LEN HEX LEN HEX": the longest and the shortest
 *                               key that prefixes the input and its normalized
 *                               string in hex (0 and "-" when none)
 * Usage errors exit 2.
 */
#include "tokenizers/charsmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    if (!b) exit(2);
    *size = n;
    return b;
}

static void put_hex(const char *s, size_t n)
{
    if (n == 0) fputc('-', stdout);
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "lookup") != 0)) {
        fprintf(stderr, "usage: test_charsmap check|lookup FILE\n");
        return 2;
    }
    size_t size;
    unsigned char *blob = read_all(argv[2], &size);
    vkf_charsmap map;
    vkf_status st = vkf_charsmap_parse(blob, size, &map);
    if (st != VKF_OK) {
        printf("%s\n", vkf_last_error());
        free(blob);
        return 1;
    }
    if (strcmp(argv[1], "check") == 0) {
        printf("ok\n");
        free(blob);
        return 0;
    }
    char line[8192], in[4096];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = 0;
        for (char *p = line; p[0] && p[1] && p[0] != '\n' && n < sizeof in; p += 2) {
            unsigned v;
            if (sscanf(p, "%2x", &v) != 1) break;
            in[n++] = (char)v;
        }
        for (int m = 0; m < 2; m++) {
            const char *norm = NULL;
            size_t k = vkf_charsmap_prefix(&map, in, n, m ? VKF_CHARSMAP_SHORTEST : VKF_CHARSMAP_LONGEST, &norm);
            printf("%s%zu ", m ? " " : "", k);
            if (k) put_hex(norm, strlen(norm));
            else fputc('-', stdout);
        }
        fputc('\n', stdout);
    }
    free(blob);
    return 0;
}
