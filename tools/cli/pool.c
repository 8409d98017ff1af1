/* Device pools in the tool: --devices all|I,J,... for the commands that decode
 * batches (translate --input, generate; any later batch command calls the same
 * helpers). The pool (vkf_pool, include/vkformer.h) holds a model replica per
 * device; the batches are submitted as they are read, a few per device ahead, and
 * collected and printed in input order, exactly as the one-device commands print
 * them (tools/cli/decode.c). A device that fails under a batch leaves the pool,
 * its batch runs on another, and one line on stderr names it at the end. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Batches submitted ahead of the one being printed, per device: a queue long enough
 * for the dispatch rule to give slower devices work they end in time. */
#define AHEAD_PER_DEVICE 8

/* The library's messages come from the pool's threads, several at once: one line each. */
static void pool_log(void *user, vkf_log_level level, const char *message)
{
    flockfile(stderr);
    log_to_stderr(user, level, message);
    funlockfile(stderr);
}

int check_pool_options(const options *o)
{
    if (o->devices && o->device) return cli_usage_error(o, "takes --device or --devices, not both");
    if (o->pool_dispatch && !o->devices) return cli_usage_error(o, "--pool-dispatch applies with --devices only");
    if (o->devices && o->target_prefix)
        return cli_usage_error(o, "--devices does not take a target prefix yet: run it on one device");
    if (o->devices && (o->stream || o->progress || cli_given(o, "--max-batch-tokens")))
        return cli_usage_error(o, "--devices takes batches of --batch, printed as they finish in input order: not %s",
                               o->stream ? "--stream" : o->progress ? "--progress" : "--max-batch-tokens");
    if (o->pool_dispatch && strcmp(o->pool_dispatch, "balanced") != 0 && strcmp(o->pool_dispatch, "any-free") != 0)
        return cli_usage_error(o, "--pool-dispatch must be balanced or any-free, not %s", quoted(o->pool_dispatch));
    return -1;
}

int pool_open(const options *o, vkf_pool **out)
{
    *out = NULL;
    if (!o->model) {
        fprintf(stderr, "vkformer: %s: --model MODEL is required\n", o->command);
        return EXIT_USAGE;
    }
    vkf_context_options co;
    vkf_context_options_init(&co);
    co.log = pool_log;
    co.log_user = (void *)o;
    co.max_device_memory = o->max_device_memory;
    vkf_model_load_options load = o->load;
    vkf_pool_options po;
    vkf_pool_options_init(&po);
    po.devices = o->devices;
    po.context = &co;
    po.load = &load;
    po.self_attention = o->attention, po.cross_attention = o->cross_attention;
    po.seed = o->seed;
    po.dispatch = o->pool_dispatch && strcmp(o->pool_dispatch, "any-free") == 0 ? VKF_POOL_DISPATCH_ANY_FREE
                                                                                : VKF_POOL_DISPATCH_BALANCED;
    vkf_status st = vkf_pool_create(o->model, &po, out);
    /* as load_model: auto precision chose F16 on a GPU and the attention variant has no F16 kernels */
    if (st == VKF_ERROR_UNSUPPORTED && load.precision == VKF_PRECISION_AUTO && (o->attention || o->cross_attention)) {
        if (o->verbose) fprintf(stderr, "vkformer: %s; loading with precision f32\n", vkf_last_error());
        load.precision = VKF_PRECISION_F32;
        st = vkf_pool_create(o->model, &po, out);
    }
    return st == VKF_OK ? 0 : fail(st);
}

vkf_device_info *pool_devices(vkf_pool *pool)
{
    uint32_t n = vkf_pool_device_count(pool);
    vkf_device_info *devices = xmalloc((n ? n : 1) * sizeof *devices);
    for (uint32_t i = 0; i < n; i++) {
        vkf_pool_device d;
        vkf_pool_device_status(pool, i, &d);
        devices[i] = d.info;
    }
    return devices;
}

uint32_t pool_active(vkf_pool *pool)
{
    uint32_t n = vkf_pool_device_count(pool), left = 0;
    for (uint32_t i = 0; i < n; i++) {
        vkf_pool_device d;
        if (vkf_pool_device_status(pool, i, &d) == VKF_OK && d.active) left++;
    }
    return left;
}

int pool_close(vkf_pool *pool, int code, bool finished)
{
    uint32_t n = vkf_pool_device_count(pool), left = pool_active(pool);
    for (uint32_t i = 0; i < n; i++) {
        vkf_pool_device d;
        if (vkf_pool_device_status(pool, i, &d) != VKF_OK || d.active) continue;
        char tail[128] = "";
        if (finished && left == 1) snprintf(tail, sizeof tail, ", and the job finished on the other device");
        else if (finished) snprintf(tail, sizeof tail, ", and the job finished on the other %u devices", left);
        cli_error("device %u (%s) left the pool after %u batch%s: %s; its batch went back to the queue%s", d.info.index,
                  quoted(d.info.name), d.batches, d.batches == 1 ? "" : "es", d.failure_message, tail);
    }
    uint32_t errors = 0, warnings = 0;
    vkf_pool_validation_counts(pool, &errors, &warnings);
    vkf_pool_destroy(pool);
    if (code == 0 && errors + warnings > 0) {
        fprintf(stderr, "vkformer: the validation layer reported %u errors and %u warnings\n", errors, warnings);
        return EXIT_VALIDATION;
    }
    return code;
}

/* --timing: the wall time of the whole job, and what each device did. */
static void print_pool_timing(const options *o, vkf_pool *pool, uint32_t sources, uint32_t B, double wall_ms)
{
    if (!o->timing) return;
    uint32_t n = vkf_pool_device_count(pool);
    uint64_t tokens = 0;
    for (uint32_t i = 0; i < n; i++) {
        vkf_pool_device d;
        if (vkf_pool_device_status(pool, i, &d) == VKF_OK) tokens += d.tokens;
    }
    fprintf(stderr, "timing: %u sources in batches of %u on %u devices, %llu tokens in %.1f ms (wall): %.1f tokens/s\n",
            sources, B, n, (unsigned long long)tokens, wall_ms, wall_ms > 0 ? 1e3 * (double)tokens / wall_ms : 0.0);
    for (uint32_t i = 0; i < n; i++) {
        vkf_pool_device d;
        if (vkf_pool_device_status(pool, i, &d) != VKF_OK) continue;
        fprintf(stderr, "timing: device %u (%s): %u batches, %llu sources, %llu tokens, busy %.1f ms%s\n", d.info.index,
                d.info.name, d.batches, (unsigned long long)d.sources, (unsigned long long)d.tokens, d.busy_ms,
                d.active ? "" : " (left the pool)");
    }
}

/* The decoding options of a batch (decode_setup_make, as the one-device commands):
 * plain greedy where those would call vkf_model_generate (the pool then takes that
 * path too). -1, or the exit code after one line. */
static int pool_decode_setup(const options *o, const vkf_model *model, bool text, decode_setup *ds)
{
    int usage = decode_setup_make(o, model, text, ds);
    if (usage >= 0) return usage;
    if (!ds->with) {
        uint32_t max_new = ds->max_new;
        vkf_generate_options_init(&ds->g);
        ds->g.max_new = max_new;
    }
    return -1;
}

static decode_json pool_json(const options *o, const vkf_model *model, const vkf_generate_options *g, bool with,
                             uint32_t max_new, uint32_t sources, const vkf_pool_batch *b, const vkf_device_info *device)
{
    decode_json d = {o, NULL, (vkf_model *)model, "greedy", 1, max_new, sources, max_new, {0}, device, -1};
    if (with) {
        d.mode = g->sample ? "sample" : g->beams > 1 ? "beam" : "greedy";
        d.beams = g->beams ? g->beams : 1;
    }
    if (b) d.stats = b->stats;
    return d;
}

/* ------------------------------------------------------------------ translate --input */


/* A batch read and submitted, waiting to be printed. */
typedef struct pending {
    tr_line *lines;                   /* owned (B) */
    uint32_t n, ns;                     /* lines, and sources among them */
    uint32_t first;                     /* the index of its first line in the input */
    int32_t *ids;                       /* owned (B, max_len + 1) */
    const int32_t **ptrs;               /* owned (B) */
    uint32_t *lens;                     /* owned (B) */
    uint64_t ticket;                    /* 0: nothing to run (no sources) */
} pending;

/* Reads up to B lines into p (encoding each; bad lines named on stderr now).
 * Returns false at the end of the input with nothing read. */
static bool read_batch(const options *o, const vkf_model *model, const vkf_model_config *cfg, line_reader *r,
                       uint32_t B, pending *p, bool *more, unsigned long *failed)
{
    p->n = p->ns = 0;
    p->ticket = 0;
    char *line;
    size_t len;
    while (p->n < B && (*more = lines_next(r, &line, &len))) {
        read_line(o, model, cfg, r, line, len, &p->lines[p->n++], p->ids, p->ptrs, p->lens, &p->ns, failed);
    }
    return p->n > 0;
}

typedef struct translate_job {
    const options *o;
    vkf_pool *pool;
    const vkf_model *model;
    vkf_model_config cfg;
    decode_setup ds;                    /* ds.g: the options; ds.with: vkf_model_generate_with's (scores in the records) */
    uint32_t max_new;
    vkf_device_info *devices;           /* owned: each slot's */
    int32_t *out;                       /* owned (B, max_new) */
    uint32_t *out_lens;                 /* owned (B) */
    float *scores;                      /* owned (B) */
    char *text;                         /* owned (cap) */
    size_t cap;
    unsigned long scored, correct;
    uint32_t sources;
} translate_job;

/* Collects p's batch and prints its lines in order (print: false after an
 * earlier failure: collected, not printed). Frees the lines' text. */
static vkf_status finish_batch(translate_job *j, pending *p, bool print)
{
    vkf_status st = VKF_OK;
    vkf_pool_batch info;
    memset(&info, 0, sizeof info);
    if (p->ticket) {
        st = vkf_pool_collect(j->pool, p->ticket, j->out, j->out_lens, j->scores, &info);
        if (st == VKF_OK) j->sources += p->ns;
    }
    const vkf_device_info *device = &j->devices[p->ticket ? info.device : 0];
    decode_json d = pool_json(j->o, j->model, &j->ds.g, j->ds.with, j->max_new, p->ns, p->ticket ? &info : NULL, device);
    for (uint32_t i = 0; i < p->n; i++) {
        tr_line *l = &p->lines[i];
        int32_t b = l->source;
        const char *result = "";
        if (!print || st != VKF_OK) {
        } else if (l->error) {
            if (j->o->json) print_line_error(device, p->first + i, l);
            else printf("\n");
        } else if (j->o->json) {
            uint32_t none = 0;
            st = print_decode_record(&d, p->first + i, b >= 0 ? p->ptrs[b] : NULL, b >= 0 ? p->lens[b] : 0,
                                     b >= 0 ? j->out + (size_t)b * j->max_new : NULL, b >= 0 ? &j->out_lens[b] : &none,
                                     b >= 0 && j->ds.with ? &j->scores[b] : NULL, b >= 0 ? 1 : 0, l->text, true, l->expected,
                                     j->text, j->cap);
            result = b >= 0 ? j->text : "";
        } else if (b >= 0) {
            st = vkf_model_decode_text(j->model, j->out + (size_t)b * j->max_new, j->out_lens[b], j->text, j->cap);
            if (st == VKF_OK) printf("%s\n", j->text);
            result = j->text;
        } else {
            printf("\n");
        }
        if (print && st == VKF_OK && l->expected) j->scored++, j->correct += !l->error && strcmp(result, l->expected) == 0;
        free(l->text), free(l->expected), free(l->error);
    }
    return st;
}

int pool_translate_file(const options *o)
{
    line_reader r;
    if (!lines_open(&r, o->input)) return EXIT_ERROR;
    translate_job j;
    memset(&j, 0, sizeof j);
    j.o = o;
    int code = pool_open(o, &j.pool);
    if (code) {
        lines_close(&r);
        return code;
    }
    j.model = vkf_pool_model(j.pool);
    int usage = check_languages(o, j.model, true);
    if (usage >= 0) {
        lines_close(&r);
        return pool_close(j.pool, usage, false);
    }
    vkf_model_get_config(j.model, &j.cfg);
    uint32_t B = o->batch ? (uint32_t)o->batch : 64;
    usage = pool_decode_setup(o, j.model, true, &j.ds);
    if (usage >= 0) {
        decode_setup_free(&j.ds);
        lines_close(&r);
        return pool_close(j.pool, usage, false);
    }
    j.max_new = j.ds.max_new;
    j.ds.g.n_best = 1;
    uint32_t n_devices = vkf_pool_device_count(j.pool);
    j.devices = pool_devices(j.pool);
    j.out = xmalloc((size_t)B * j.max_new * sizeof *j.out);
    j.out_lens = xmalloc(B * sizeof *j.out_lens);
    j.scores = xmalloc(B * sizeof *j.scores);
    j.cap = (size_t)j.max_new * 64 + 64;
    j.text = xmalloc(j.cap);
    /* a ring of batches in flight, printed from its head */
    uint32_t W = n_devices * AHEAD_PER_DEVICE + 1, head = 0, count = 0;
    pending *ring = xmalloc(W * sizeof *ring);
    for (uint32_t i = 0; i < W; i++) {
        ring[i].lines = xmalloc(B * sizeof *ring[i].lines);
        ring[i].ids = xmalloc((size_t)B * (j.cfg.max_len + 1) * sizeof *ring[i].ids);
        ring[i].ptrs = xmalloc(B * sizeof *ring[i].ptrs);
        ring[i].lens = xmalloc(B * sizeof *ring[i].lens);
    }
    unsigned long failed = 0;
    uint32_t lines_read = 0;
    vkf_status st = VKF_OK;
    bool more = true;
    double start = now_s();
    while (st == VKF_OK && (more || count > 0)) {
        if (more && count < W) {
            pending *p = &ring[(head + count) % W];
            if (!read_batch(o, j.model, &j.cfg, &r, B, p, &more, &failed)) continue;
            p->first = lines_read;
            lines_read += p->n;
            count++;
            if (p->ns > 0) {
                vkf_sequences s = {p->ns, p->ptrs, p->lens};
                st = vkf_pool_submit(j.pool, &s, &j.ds.g, &p->ticket);
            }
            if (st == VKF_OK && (count < W && more)) continue;
        }
        if (st != VKF_OK || count == 0) break;
        st = finish_batch(&j, &ring[head], true);
        head = (head + 1) % W, count--;
    }
    if (st != VKF_OK) code = fail(st);
    /* after a failure: what is still in flight is collected, never printed */
    for (; count > 0; head = (head + 1) % W, count--) finish_batch(&j, &ring[head], false);
    double wall_ms = (now_s() - start) * 1e3;
    if (r.failed && code == 0) code = EXIT_ERROR;
    if (code == 0 && j.scored && !o->json)
        printf("accuracy: %lu of %lu (%.2f%%) exact matches\n", j.correct, j.scored, 100.0 * j.correct / j.scored);
    if (code == 0) print_pool_timing(o, j.pool, j.sources, B, wall_ms);
    if (code == 0 && failed) {
        cli_error("%lu of %u lines of %s were not translated (each named above; an empty line stands for it)", failed,
                  lines_read, r.name);
        code = EXIT_ERROR;
    }
    fflush(stdout);
    lines_close(&r);
    for (uint32_t i = 0; i < W; i++) free(ring[i].lines), free(ring[i].ids), free(ring[i].ptrs), free(ring[i].lens);
    free(ring), free(j.devices), free(j.out), free(j.out_lens), free(j.scores), free(j.text);
    decode_setup_free(&j.ds);
    return pool_close(j.pool, code, st == VKF_OK);
}

/* ------------------------------------------------------------------ generate */

int pool_generate(const options *o, int32_t **ids, uint32_t *lens, const unsigned long *numbers, uint32_t n)
{
    vkf_pool *pool;
    int code = pool_open(o, &pool);
    if (code) return code;
    const vkf_model *model = vkf_pool_model(pool);
    int usage = check_languages(o, model, false);
    if (usage >= 0) return pool_close(pool, usage, false);
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    char where[512];
    for (uint32_t i = 0; !o->raw_ids && i < n; i++) /* end each source with eos, as translate does */
        if (lens[i] == 0 || ids[i][lens[i] - 1] != cfg.eos_id) {
            ids[i] = realloc(ids[i], (lens[i] + 1) * sizeof **ids);
            if (!ids[i]) {
                cli_error("out of host memory");
                exit(EXIT_ERROR);
            }
            ids[i][lens[i]++] = cfg.eos_id;
        }
    for (uint32_t i = 0; i < n; i++)
        if (lens[i] > cfg.max_len) {
            if (o->input) snprintf(where, sizeof where, "%s line %lu", input_name(o->input), numbers[i]);
            else snprintf(where, sizeof where, "--src %lu", numbers[i]);
            cli_error("%s: %u ids%s, more than the model's %u positions (max_len)", where, lens[i],
                      o->raw_ids ? "" : " with eos", cfg.max_len);
            return pool_close(pool, EXIT_ERROR, false);
        }
    if (o->max_new > cfg.max_len) {
        fprintf(stderr, "vkformer: --max-new %lu exceeds the model's max_len %u\n", o->max_new, cfg.max_len);
        return pool_close(pool, EXIT_USAGE, false);
    }
    decode_setup ds;
    usage = pool_decode_setup(o, model, false, &ds);
    if (usage >= 0) {
        decode_setup_free(&ds);
        return pool_close(pool, usage, false);
    }
    uint32_t max_new = ds.max_new, B = o->batch ? (uint32_t)o->batch : 64;
    bool with = ds.with;
    const vkf_generate_options g = ds.g;
    uint32_t nb = with && g.n_best ? g.n_best : 1;
    int32_t lead = forced_lead(model, &ds);
    uint32_t batches = (n + B - 1) / B;
    uint64_t *tickets = xmalloc(batches * sizeof *tickets);
    vkf_status st = VKF_OK;
    double start = now_s();
    uint32_t submitted = 0;
    for (; st == VKF_OK && submitted < batches; submitted++) {
        uint32_t at = submitted * B, count = n - at < B ? n - at : B;
        vkf_sequences s = {count, (const int32_t *const *)ids + at, lens + at};
        st = vkf_pool_submit(pool, &s, &g, &tickets[submitted]);
    }
    if (st != VKF_OK) submitted--;
    int32_t *out = xmalloc((size_t)B * nb * max_new * sizeof *out);
    uint32_t *out_lens = xmalloc((size_t)B * nb * sizeof *out_lens);
    float *scores = xmalloc((size_t)B * nb * sizeof *scores);
    vkf_device_info *devices = pool_devices(pool);
    if (st != VKF_OK) code = fail(st);
    for (uint32_t k = 0; k < submitted; k++) {
        vkf_pool_batch info;
        vkf_status bst = vkf_pool_collect(pool, tickets[k], out, out_lens, scores, &info);
        if (code) continue; /* after a failure: collected, not printed */
        if (bst != VKF_OK) {
            code = fail(bst);
            st = bst;
            continue;
        }
        uint32_t at = k * B, count = n - at < B ? n - at : B;
        if (o->json) {
            decode_json d = pool_json(o, model, &g, with, max_new, count, &info, &devices[info.device]);
            d.lead = lead;
            for (uint32_t i = 0; code == 0 && i < count; i++) {
                bst = print_decode_record(&d, at + i, ids[at + i], lens[at + i], out + (size_t)i * nb * max_new,
                                          out_lens + i * nb, with ? scores + i * nb : NULL, nb, NULL, false, NULL, NULL,
                                          0);
                if (bst != VKF_OK) code = fail(bst), st = bst;
            }
            continue;
        }
        for (uint32_t h = 0; h < count * nb; h++) {
            const int32_t *row = out + (size_t)h * max_new;
            uint32_t skip = lead_of(lead, row, out_lens[h]);
            for (uint32_t i = skip; i < out_lens[h]; i++) printf("%s%d", i > skip ? "," : "", row[i]);
            if (nb > 1) printf("\t%.6f", scores[h]);
            printf("\n");
        }
    }
    if (code == 0) print_pool_timing(o, pool, n, B, (now_s() - start) * 1e3);
    fflush(stdout);
    free(tickets), free(out), free(out_lens), free(scores), free(devices);
    decode_setup_free(&ds);
    return pool_close(pool, code, st == VKF_OK);
}
