/* vkformer serve: the routes (tools/cli/serve.h says what lives where).
 *
 * libmicrohttpd calls serve_handle several times per request: first with the
 * headers (route, method, key and declared size are checked there, so a bad
 * request is refused before its body is read), then with each piece of the
 * body (JSON kept raw; forms and multipart parsed by libmicrohttpd's post
 * processor into fields), then once more to answer. A route parses and checks
 * what it got, hands each text or recording to a model's scheduler, waits for
 * the answers on this connection's own thread (watching for the client going
 * away and the timeout, which cancel the work), and answers in the shape of
 * the API it copies. Every failure is one line in {"error":{"message":...}}. */
#include "serve.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FIELDS 256                  /* form fields of one request */
#define MAX_TEXTS 128                   /* texts of one translation request */
#define MAX_ALTERNATIVES 8              /* LibreTranslate alternatives (beam n-best - 1) */

typedef struct form_field {
    char *key;                          /* owned */
    char *val;                          /* owned, NUL-terminated at n (may hold NULs) */
    size_t n, cap;
    bool is_file;
    char filename[256];
} form_field;

struct serve_request {
    serve_route route;
    bool counted;                       /* an answer was queued and counted */
    struct MHD_PostProcessor *pp;       /* forms and multipart */
    bool raw;                           /* JSON: the body as it came */
    char *body;                         /* owned (raw) */
    size_t n_body, cap_body;
    uint64_t received;                  /* body bytes so far */
    bool too_large, malformed;
    char why[256];                      /* what was malformed */
    form_field fields[MAX_FIELDS];
    uint32_t n_fields;
    /* multipart: the closing delimiter "--BOUNDARY--"; what follows it (the
     * epilogue, which RFC 2046 says to ignore and some clients send as one
     * more CRLF) is not handed to the post processor, which refuses it */
    char closing[80];
    size_t n_closing;
    char tail[80];                      /* the last body bytes, n_closing - 1 at most */
    size_t n_tail;
    bool closed;
};

/* The boundary parameter of a multipart Content-Type into r->closing. */
static void multipart_closing(serve_request *r, const char *type)
{
    const char *b = strcasestr(type, "boundary=");
    if (!b) return;
    b += 9;
    bool quoted_value = *b == '"';
    if (quoted_value) b++;
    size_t n = quoted_value ? strcspn(b, "\"") : strcspn(b, "; \t");
    if (n == 0 || n > 70) return;
    r->n_closing = (size_t)snprintf(r->closing, sizeof r->closing, "--%.*s--", (int)n, b);
}

/* How many of the `size` bytes at data come before the end of the closing
 * delimiter (all of them while it has not come). */
static size_t before_epilogue(serve_request *r, const char *data, size_t size)
{
    if (!r->n_closing) return size;
    /* search tail + data for the delimiter */
    size_t nt = r->n_tail, n = nt + size;
    char *joined = malloc(n + 1);
    if (!joined) return size;
    memcpy(joined, r->tail, nt);
    memcpy(joined + nt, data, size);
    size_t keep = size;
    for (size_t i = 0; i + r->n_closing <= n; i++)
        if (memcmp(joined + i, r->closing, r->n_closing) == 0) {
            size_t end = i + r->n_closing; /* in joined */
            keep = end > nt ? end - nt : 0;
            r->closed = true;
            break;
        }
    size_t t = n < r->n_closing - 1 ? n : r->n_closing - 1;
    memcpy(r->tail, joined + n - t, t);
    r->n_tail = t;
    free(joined);
    return keep;
}

/* ------------------------------------------------------------------ answers */

static enum MHD_Result reply(server *sv, struct MHD_Connection *c, serve_request *r, unsigned status,
                             const char *type, const char *body, size_t len, const char *retry_after)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (retry_after) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
    if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result ok = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    if (r && !r->counted) {
        r->counted = true;
        serve_count(sv, r->route, status);
    }
    return ok;
}

static enum MHD_Result reply_json(server *sv, struct MHD_Connection *c, serve_request *r, unsigned status, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(j);
    if (!text) return reply(sv, c, r, 500, "application/json", "{\"error\":{\"message\":\"out of memory\"}}", 37, NULL);
    enum MHD_Result ok = reply(sv, c, r, status, "application/json", text, strlen(text), NULL);
    free(text);
    return ok;
}

/* {"error":{"message":...}}, the message one line (controls escaped by JSON). */
static enum MHD_Result reply_error(server *sv, struct MHD_Connection *c, serve_request *r, unsigned status,
                                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static enum MHD_Result reply_error(server *sv, struct MHD_Connection *c, serve_request *r, unsigned status,
                                   const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    for (char *p = message; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    /* a message quoting user bytes may hold ill-formed UTF-8: JSON needs it well-formed */
    json_t *msg = json_string(message);
    if (!msg) msg = json_string("a message that is not UTF-8 (the request held bytes that are not text)");
    json_t *j = json_pack("{s:{s:o,s:s}}", "error", "message", msg, "type",
                          status == 401 ? "authentication_error" : status >= 500 ? "server_error"
                                                                                  : "invalid_request_error");
    char *text = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(j);
    if (!text) return MHD_NO;
    enum MHD_Result ok = reply(sv, c, r, status, "application/json", text, strlen(text),
                               status == 503 || status == 429 ? "1" : NULL);
    free(text);
    return ok;
}

/* ------------------------------------------------------------------ routes and keys */

static serve_route route_of(const char *url, const char **method)
{
    static const struct {
        const char *url, *method;
        serve_route route;
    } table[] = {
        {"/v1/audio/transcriptions", "POST", ROUTE_TRANSCRIPTIONS}, {"/v1/audio/translations", "POST", ROUTE_TRANSLATIONS},
        {"/v1/models", "GET", ROUTE_MODELS}, {"/translate", "POST", ROUTE_TRANSLATE},
        {"/languages", "GET", ROUTE_LANGUAGES}, {"/v2/translate", "POST", ROUTE_DEEPL},
        {"/health", "GET", ROUTE_HEALTH}, {"/metrics", "GET", ROUTE_METRICS},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(url, table[i].url) == 0) {
            *method = table[i].method;
            return table[i].route;
        }
    *method = NULL;
    return ROUTE_OTHER;
}

/* Whether the request carries one of the keys (Authorization: Bearer KEY, or DeepL-Auth-Key KEY). */
static bool authorized(const server *sv, struct MHD_Connection *c)
{
    if (!sv->n_keys) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h) return false;
    const char *key = NULL;
    if (strncasecmp(h, "Bearer ", 7) == 0) key = h + 7;
    else if (strncasecmp(h, "DeepL-Auth-Key ", 15) == 0) key = h + 15;
    if (!key) return false;
    key += strspn(key, " ");
    bool ok = false;
    for (uint32_t i = 0; i < sv->n_keys; i++) {
        /* compared in full whatever matches, so the time says nothing of the key */
        const char *k = sv->keys[i];
        size_t a = strlen(k), b = strlen(key);
        unsigned diff = a != b;
        for (size_t j = 0; j < a && j < b; j++) diff |= (unsigned char)(k[j] ^ key[j]);
        ok |= diff == 0;
    }
    return ok;
}

/* ------------------------------------------------------------------ bodies */

static form_field *field_new(serve_request *r, const char *key)
{
    if (r->n_fields == MAX_FIELDS) return NULL;
    form_field *f = &r->fields[r->n_fields];
    memset(f, 0, sizeof *f);
    f->key = strdup(key ? key : "");
    f->val = malloc(1);
    if (!f->key || !f->val) {
        free(f->key), free(f->val);
        return NULL;
    }
    f->val[0] = 0, f->cap = 1;
    r->n_fields++;
    return f;
}

static bool field_append(form_field *f, const char *data, size_t size)
{
    if (f->n + size + 1 > f->cap) {
        size_t cap = (f->n + size + 1) * 2;
        char *p = realloc(f->val, cap);
        if (!p) return false;
        f->val = p, f->cap = cap;
    }
    memcpy(f->val + f->n, data, size);
    f->n += size;
    f->val[f->n] = 0;
    return true;
}

static enum MHD_Result post_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                  const char *content_type, const char *transfer_encoding, const char *data,
                                  uint64_t off, size_t size)
{
    (void)kind, (void)content_type, (void)transfer_encoding;
    serve_request *r = cls;
    form_field *f = NULL;
    /* the rest of the last field (off > 0), or a new one */
    if (off > 0 && r->n_fields && strcmp(r->fields[r->n_fields - 1].key, key ? key : "") == 0)
        f = &r->fields[r->n_fields - 1];
    if (!f) {
        f = field_new(r, key);
        if (!f) {
            r->malformed = true;
            snprintf(r->why, sizeof r->why, "more than %d form fields", MAX_FIELDS);
            return MHD_NO;
        }
        if (filename) {
            f->is_file = true;
            snprintf(f->filename, sizeof f->filename, "%s", filename);
        }
    }
    if (size && !field_append(f, data, size)) {
        r->malformed = true;
        snprintf(r->why, sizeof r->why, "out of memory for the form");
        return MHD_NO;
    }
    return MHD_YES;
}

static void request_free(serve_request *r)
{
    if (!r) return;
    if (r->pp) MHD_destroy_post_processor(r->pp);
    for (uint32_t i = 0; i < r->n_fields; i++) free(r->fields[i].key), free(r->fields[i].val);
    free(r->body);
    free(r);
}

void serve_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    (void)c;
    server *sv = cls;
    serve_request *r = *con_cls;
    if (r && !r->counted && why != MHD_REQUEST_TERMINATED_COMPLETED_OK) serve_count(sv, r->route, 499);
    request_free(r);
    *con_cls = NULL;
}

/* The first field named key, or NULL. */
static form_field *field(serve_request *r, const char *key)
{
    for (uint32_t i = 0; i < r->n_fields; i++)
        if (strcmp(r->fields[i].key, key) == 0) return &r->fields[i];
    return NULL;
}

/* ------------------------------------------------------------------ waiting for the schedulers */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t remaining;
} waiter;

/* One text or recording handed to a scheduler. */
typedef struct job {
    waiter *w;
    serve_model *m;
    serve_replica *rep;                 /* the copy running it */
    uint64_t id;
    uint32_t tries;
    bool done;
    vkf_status st;
    char message[512];
    int32_t *ids;                       /* (n_best, stride), owned */
    uint32_t *lengths;                  /* (n_best), owned */
    uint32_t n_best, stride;
    vkf_transcript *transcript;         /* owned */
    /* what to submit again on another device */
    const int32_t *src;
    uint32_t n_src;
    const vkf_generate_options *o;
    const float *samples;
    uint64_t n_samples;
    const vkf_transcribe_options *to;
} job;

static void job_done(void *user, const vkf_scheduler_result *res)
{
    job *j = user;
    pthread_mutex_lock(&j->w->mu);
    j->st = res->status;
    snprintf(j->message, sizeof j->message, "%s", res->message ? res->message : "");
    if (res->status == VKF_OK && res->ids) {
        j->n_best = res->n_best, j->stride = res->stride;
        j->ids = malloc((size_t)res->n_best * res->stride * sizeof *j->ids + 1);
        j->lengths = malloc((size_t)res->n_best * sizeof *j->lengths);
        if (j->ids && j->lengths) {
            memcpy(j->ids, res->ids, (size_t)res->n_best * res->stride * sizeof *j->ids);
            memcpy(j->lengths, res->lengths, (size_t)res->n_best * sizeof *j->lengths);
        } else {
            j->st = VKF_ERROR_OUT_OF_HOST_MEMORY;
            snprintf(j->message, sizeof j->message, "out of host memory for an answer");
        }
    }
    j->transcript = res->transcript;
    j->done = true;
    j->w->remaining--;
    pthread_cond_broadcast(&j->w->cv);
    pthread_mutex_unlock(&j->w->mu);
}

static void job_free(job *j)
{
    free(j->ids), free(j->lengths);
    vkf_transcript_free(j->transcript);
    j->ids = NULL, j->lengths = NULL, j->transcript = NULL;
}

static bool device_level(vkf_status st)
{
    return st == VKF_ERROR_DEVICE_LOST || st == VKF_ERROR_VULKAN || st == VKF_ERROR_OUT_OF_DEVICE_MEMORY;
}

/* Hands the job to the least loaded copy of its model that has not failed;
 * the submit's status (the job's `done` comes only when it is VKF_OK). */
static vkf_status job_submit(job *j)
{
    serve_model *m = j->m;
    serve_replica *best = NULL;
    uint64_t load = UINT64_MAX;
    for (uint32_t d = 0; d < m->n_rep; d++) {
        serve_replica *r = &m->rep[d];
        if (atomic_load(&r->failed)) continue;
        vkf_scheduler_stats st;
        if (vkf_scheduler_get_stats(r->sched, &st) != VKF_OK) continue;
        if ((uint64_t)st.queued + st.active < load) load = (uint64_t)st.queued + st.active, best = r;
    }
    if (!best) {
        snprintf(j->message, sizeof j->message, "every device of model %s has failed", m->name);
        return j->st = VKF_ERROR_DEVICE_LOST;
    }
    j->rep = best, j->tries++, j->done = false;
    pthread_mutex_lock(&j->w->mu);
    j->w->remaining++;
    pthread_mutex_unlock(&j->w->mu);
    vkf_status st = j->samples || j->to ? vkf_scheduler_submit_audio(best->sched, j->samples, j->n_samples, j->to,
                                                                     job_done, j, &j->id)
                                        : vkf_scheduler_submit(best->sched, j->src, j->n_src, j->o, job_done, j, &j->id);
    if (st != VKF_OK) {
        snprintf(j->message, sizeof j->message, "%s", vkf_last_error());
        j->st = st;
        pthread_mutex_lock(&j->w->mu);
        j->w->remaining--;
        pthread_mutex_unlock(&j->w->mu);
    }
    return st;
}

/* Whether the client has closed its side of the connection. */
static bool client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {ci->connect_fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    if (p.revents & POLLIN) {
        char b;
        return recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
    }
    return false;
}

typedef enum wait_end { WAIT_DONE = 0, WAIT_GONE, WAIT_TIMEOUT } wait_end;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Waits for every submitted job, or (early non-NULL) until *early turns true
 * (read under w->mu); a job that failed with a device-level error is handed to
 * another copy of the model (each copy once). The client leaving or the timeout
 * cancels the jobs (their `done` still comes, and is waited for). */
static wait_end wait_jobs(server *sv, struct MHD_Connection *c, waiter *w, job *jobs, uint32_t n, double t0,
                          const bool *early)
{
    wait_end end = WAIT_DONE;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        if (w->remaining && !(early && *early)) pthread_cond_timedwait(&w->cv, &w->mu, &until);
        uint32_t remaining = w->remaining;
        bool started = early && *early;
        pthread_mutex_unlock(&w->mu);
        if (started && end == WAIT_DONE) return WAIT_DONE;
        if (end == WAIT_DONE) {
            /* device-level failures: once more on another device */
            for (uint32_t i = 0; i < n; i++) {
                job *j = &jobs[i];
                if (!j->done || !device_level(j->st) || !j->rep || j->tries >= j->m->n_rep) continue;
                if (!atomic_exchange(&j->rep->failed, true))
                    fprintf(stderr, "vkformer serve: model %s, device %s failed (%s): its requests go to the others\n",
                            j->m->name, j->rep->info.name, j->message);
                job_free(j);
                if (job_submit(j) == VKF_OK) remaining++;
            }
        }
        if (!remaining) return end;
        if (end != WAIT_DONE) continue;
        bool gone = client_gone(c), late = now_ms() - t0 > sv->timeout_s * 1e3;
        if (gone || late) {
            end = gone ? WAIT_GONE : WAIT_TIMEOUT;
            for (uint32_t i = 0; i < n; i++)
                if (jobs[i].rep && jobs[i].id) vkf_scheduler_cancel(jobs[i].rep->sched, jobs[i].id);
        }
    }
}

/* The answer status of a library failure. */
static unsigned status_of(vkf_status st, const char *message)
{
    if (st == VKF_ERROR_STATE && strstr(message, "queue full")) return 503;
    if (st == VKF_ERROR_INVALID_ARGUMENT || st == VKF_ERROR_TOO_LARGE || st == VKF_ERROR_UNSUPPORTED ||
        st == VKF_ERROR_IO || st == VKF_ERROR_STATE)
        return 400;
    return 500;
}

/* ------------------------------------------------------------------ models and languages */

static serve_model *model_named(server *sv, const char *name)
{
    for (uint32_t i = 0; i < sv->n_models; i++)
        if (strcmp(sv->models[i].name, name) == 0) return &sv->models[i];
    return NULL;
}

static bool model_has_code(serve_model *m, const char *code)
{
    const vkf_model *model = m->rep[0].model;
    for (uint32_t i = 0; i < m->cfg.n_languages; i++) {
        const char *k = vkf_model_language(model, i);
        if (k && strcasecmp(k, code) == 0) return true;
    }
    return false;
}

/* The model's own spelling of a code (codes compare without case: DeepL's "DE"). */
static const char *model_code(serve_model *m, const char *code)
{
    const vkf_model *model = m->rep[0].model;
    for (uint32_t i = 0; i < m->cfg.n_languages; i++) {
        const char *k = vkf_model_language(model, i);
        if (k && strcasecmp(k, code) == 0) return k;
    }
    return code;
}

/* The text model for (source, target): the one named, else the first that has
 * both; NULL after writing why (status in *status). source NULL: auto. */
static serve_model *text_model(server *sv, const char *name, const char *source, const char *target, unsigned *status,
                               char *why, size_t cap)
{
    *status = 400;
    if (name) {
        serve_model *m = model_named(sv, name);
        if (!m) {
            *status = 404;
            snprintf(why, cap, "no model is named %s (GET /v1/models lists them)", quoted(name));
            return NULL;
        }
        if (m->audio) {
            snprintf(why, cap, "model %s reads audio: use /v1/audio/transcriptions", m->name);
            return NULL;
        }
    }
    for (uint32_t i = 0; i < sv->n_models; i++) {
        serve_model *m = name ? model_named(sv, name) : &sv->models[i];
        if (m->audio) continue;
        bool ok;
        if (m->cfg.n_languages) ok = model_has_code(m, target) && (!source || model_has_code(m, source));
        else ok = strcasecmp(target, m->tgt_code) == 0 && (!source || strcasecmp(source, m->src_code) == 0);
        if (ok) {
            if (!source && m->cfg.n_languages) {
                snprintf(why, cap, "source \"auto\": model %s cannot tell the source language; give its code", m->name);
                return NULL;
            }
            return m;
        }
        if (name) break;
    }
    snprintf(why, cap, "no model translates %s%s to %s (GET /languages lists the codes)", source ? "from " : "",
             source ? quoted(source) : "auto", quoted(target));
    return NULL;
}

/* ------------------------------------------------------------------ translation */

typedef struct translation {
    serve_model *m;
    uint32_t n;                         /* texts */
    uint32_t n_alt;                     /* alternatives asked for */
    char **text;                        /* (n, 1 + n_alt) owned: best first; NULL where fewer came */
    const char *source_code;            /* the source code used (auto: the model's one source) */
} translation;

static void translation_free(translation *t)
{
    for (uint32_t i = 0; t->text && i < t->n * (1 + t->n_alt); i++) free(t->text[i]);
    free(t->text);
}

/* Translates texts[0..n) with model m (source NULL: auto); *status 200 or the
 * error status with why. */
static wait_end translate_texts(server *sv, struct MHD_Connection *c, serve_model *m, const char *const *texts,
                                const size_t *lens, uint32_t n, const char *source, const char *target, uint32_t n_alt,
                                translation *out, unsigned *status, char *why, size_t cap)
{
    double t0 = now_ms();
    *status = 200;
    memset(out, 0, sizeof *out);
    out->m = m, out->n = n, out->n_alt = n_alt;
    out->source_code = source ? model_code(m, source) : m->cfg.n_languages ? NULL : m->src_code;
    const vkf_model *model = m->rep[0].model;
    uint32_t max_len = m->cfg.max_len;
    int32_t *ids = calloc((size_t)n * (max_len + 1), sizeof *ids);
    job *jobs = calloc(n, sizeof *jobs);
    out->text = calloc((size_t)n * (1 + n_alt), sizeof *out->text);
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    vkf_generate_options o;
    if (!ids || !jobs || !out->text) {
        *status = 500;
        snprintf(why, cap, "out of host memory for %u texts", n);
        goto done;
    }
    pthread_mutex_lock(&m->tok);
    vkf_status st = vkf_model_generate_defaults(model, &o);
    const char *tgt = m->cfg.n_languages ? model_code(m, target) : NULL;
    const char *src = m->cfg.n_languages && source ? model_code(m, source) : NULL;
    if (st == VKF_OK && tgt) st = vkf_model_set_target_language(model, tgt, &o);
    if (st != VKF_OK) snprintf(why, cap, "%s", vkf_last_error());
    for (uint32_t i = 0; st == VKF_OK && i < n; i++) {
        char check[128];
        if (!text_check(texts[i], lens[i], check, sizeof check)) {
            st = VKF_ERROR_INVALID_ARGUMENT;
            snprintf(why, cap, "text %u is not text: %s", i, check);
            break;
        }
        if (lens[i] == 0 || strspn(texts[i], " \t\r\n") == lens[i]) {
            st = VKF_ERROR_INVALID_ARGUMENT;
            snprintf(why, cap, "text %u is empty", i);
            break;
        }
        st = vkf_model_encode_text_with(model, texts[i], src, tgt, ids + (size_t)i * (max_len + 1), max_len + 1,
                                        &jobs[i].n_src);
        if (st != VKF_OK) snprintf(why, cap, "text %u: %s", i, vkf_last_error());
        else if (jobs[i].n_src > max_len) {
            st = VKF_ERROR_INVALID_ARGUMENT;
            snprintf(why, cap, "text %u has %u tokens, more than the model's max_len %u", i, jobs[i].n_src, max_len);
        }
    }
    pthread_mutex_unlock(&m->tok);
    if (st != VKF_OK) {
        *status = 400;
        goto done;
    }
    if (n_alt) {
        if (o.beams < n_alt + 1) o.beams = n_alt + 1;
        o.n_best = n_alt + 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        job *j = &jobs[i];
        j->w = &w, j->m = m, j->src = ids + (size_t)i * (max_len + 1), j->o = &o;
        st = job_submit(j);
        if (st != VKF_OK) {
            *status = status_of(st, j->message);
            snprintf(why, cap, "%s", j->message);
            break;
        }
    }
    if (*status != 200) /* a submit failed: what went in is not wanted any more */
        for (uint32_t i = 0; i < n; i++)
            if (jobs[i].rep && jobs[i].id) vkf_scheduler_cancel(jobs[i].rep->sched, jobs[i].id);
    wait_end end = wait_jobs(sv, c, &w, jobs, n, t0, NULL);
    if (end != WAIT_DONE && *status == 200) {
        *status = end == WAIT_GONE ? 499 : 504;
        snprintf(why, cap, "the request was not answered in %u s (--timeout)", sv->timeout_s);
    }
    for (uint32_t i = 0; *status == 200 && i < n; i++) {
        job *j = &jobs[i];
        if (j->st != VKF_OK) {
            *status = status_of(j->st, j->message);
            snprintf(why, cap, "%s", j->message);
            break;
        }
        pthread_mutex_lock(&m->tok);
        for (uint32_t k = 0; k < j->n_best && k <= n_alt; k++) {
            size_t tcap = (size_t)j->lengths[k] * 64 + 64;
            char *t = malloc(tcap);
            st = t ? vkf_model_decode_text(model, j->ids + (size_t)k * j->stride, j->lengths[k], t, tcap)
                   : VKF_ERROR_OUT_OF_HOST_MEMORY;
            if (st != VKF_OK) {
                free(t);
                *status = 500;
                snprintf(why, cap, "%s", vkf_last_error());
                break;
            }
            out->text[(size_t)i * (1 + n_alt) + k] = t;
        }
        pthread_mutex_unlock(&m->tok);
    }
    for (uint32_t i = 0; i < n; i++) job_free(&jobs[i]);
    free(ids), free(jobs);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return end;
done:
    free(ids), free(jobs);
    return WAIT_DONE;
}

/* A JSON value or form field as a number of alternatives. */
static bool parse_count(const char *s, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!isdigit((unsigned char)*s) || *end || errno || v > max) return false;
    *out = (uint32_t)v;
    return true;
}

/* The texts of q (LibreTranslate) or text (DeepL): a JSON string or array of
 * strings, or form fields (repeated). */
typedef struct text_list {
    const char *v[MAX_TEXTS];
    size_t len[MAX_TEXTS];
    uint32_t n;
    bool array;
} text_list;

static bool texts_from_json(json_t *x, text_list *t, char *why, size_t cap, const char *name)
{
    if (json_is_string(x)) {
        t->v[0] = json_string_value(x), t->len[0] = json_string_length(x), t->n = 1;
        return true;
    }
    if (!json_is_array(x)) {
        snprintf(why, cap, "%s must be a string or an array of strings", name);
        return false;
    }
    t->array = true;
    if (json_array_size(x) == 0 || json_array_size(x) > MAX_TEXTS) {
        snprintf(why, cap, "%s holds %zu texts: 1..%d", name, json_array_size(x), MAX_TEXTS);
        return false;
    }
    for (size_t i = 0; i < json_array_size(x); i++) {
        json_t *e = json_array_get(x, i);
        if (!json_is_string(e)) {
            snprintf(why, cap, "%s[%zu] is not a string", name, i);
            return false;
        }
        t->v[t->n] = json_string_value(e), t->len[t->n++] = json_string_length(e);
    }
    return true;
}

static bool texts_from_form(serve_request *r, const char *key, text_list *t, char *why, size_t cap)
{
    for (uint32_t i = 0; i < r->n_fields; i++) {
        if (strcmp(r->fields[i].key, key) != 0) continue;
        if (t->n == MAX_TEXTS) {
            snprintf(why, cap, "more than %d %s fields", MAX_TEXTS, key);
            return false;
        }
        t->v[t->n] = r->fields[i].val, t->len[t->n++] = r->fields[i].n;
    }
    t->array = t->n > 1;
    return true;
}

/* A string member of a JSON object or a form field; *bad when present but not a string. */
static const char *param(serve_request *r, json_t *j, const char *key, bool *bad)
{
    if (j) {
        json_t *x = json_object_get(j, key);
        if (!x || json_is_null(x)) return NULL;
        if (!json_is_string(x)) {
            *bad = true;
            return NULL;
        }
        return json_string_value(x);
    }
    form_field *f = field(r, key);
    if (f && strlen(f->val) != f->n) *bad = true; /* a NUL inside */
    return f ? f->val : NULL;
}

/* The body as a JSON object (raw bodies), NULL for forms; *bad with why. */
static json_t *body_json(serve_request *r, bool *bad, char *why, size_t cap)
{
    if (!r->raw) return NULL;
    json_error_t e;
    json_t *j = json_loadb(r->body ? r->body : "", r->n_body, JSON_REJECT_DUPLICATES, &e);
    if (!j) {
        *bad = true;
        snprintf(why, cap, "malformed JSON: %s (line %d, column %d)", e.text, e.line, e.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        *bad = true;
        snprintf(why, cap, "the JSON body must be an object");
        return NULL;
    }
    return j;
}

static enum MHD_Result route_translate(server *sv, struct MHD_Connection *c, serve_request *r, bool deepl)
{
    char why[1024] = "";
    bool bad = false;
    json_t *j = body_json(r, &bad, why, sizeof why);
    if (bad) return reply_error(sv, c, r, 400, "%s", why);
    text_list texts = {0};
    const char *key = deepl ? "text" : "q";
    bool ok = j ? (json_object_get(j, key) ? texts_from_json(json_object_get(j, key), &texts, why, sizeof why, key)
                                           : (snprintf(why, sizeof why, "%s is required", key), false))
                : texts_from_form(r, key, &texts, why, sizeof why);
    if (ok && !texts.n) ok = false, snprintf(why, sizeof why, "%s is required", key);
    const char *source = param(r, j, deepl ? "source_lang" : "source", &bad);
    const char *target = param(r, j, deepl ? "target_lang" : "target", &bad);
    const char *format = deepl ? NULL : param(r, j, "format", &bad);
    const char *name = param(r, j, "model", &bad);
    uint32_t n_alt = 0;
    if (!deepl && j && json_object_get(j, "alternatives")) {
        json_t *a = json_object_get(j, "alternatives");
        if (json_is_integer(a) && json_integer_value(a) >= 0 && json_integer_value(a) <= MAX_ALTERNATIVES)
            n_alt = (uint32_t)json_integer_value(a);
        else if (!json_is_null(a))
            ok = ok && (snprintf(why, sizeof why, "alternatives must be an integer 0..%d", MAX_ALTERNATIVES), false);
    } else if (!deepl && !j && field(r, "alternatives") &&
               !parse_count(field(r, "alternatives")->val, MAX_ALTERNATIVES, &n_alt)) {
        ok = ok && (snprintf(why, sizeof why, "alternatives must be an integer 0..%d", MAX_ALTERNATIVES), false);
    }
    if (ok && bad) ok = false, snprintf(why, sizeof why, "a parameter that must be a string is not one");
    if (ok && !target) ok = false, snprintf(why, sizeof why, "%s is required", deepl ? "target_lang" : "target");
    if (ok && format && strcmp(format, "text") != 0)
        ok = false, snprintf(why, sizeof why, "format %s: only text is supported", quoted(format));
    if (ok && source && (strcasecmp(source, "auto") == 0 || !*source)) source = NULL;
    unsigned status = 400;
    serve_model *m = NULL;
    if (ok) m = text_model(sv, name, source, target, &status, why, sizeof why);
    if (!ok || !m) {
        json_decref(j);
        return reply_error(sv, c, r, status, "%s", why);
    }
    translation t;
    atomic_fetch_add(&sv->in_flight, 1);
    wait_end end = translate_texts(sv, c, m, texts.v, texts.len, texts.n, source, target, n_alt, &t, &status, why,
                                   sizeof why);
    enum MHD_Result res;
    if (end == WAIT_GONE) {
        res = MHD_NO; /* nobody to answer: close */
    } else if (status != 200) {
        res = reply_error(sv, c, r, status, "%s", why);
    } else if (deepl) {
        json_t *list = json_array();
        for (uint32_t i = 0; i < t.n; i++) {
            char code[64];
            snprintf(code, sizeof code, "%s", t.source_code ? t.source_code : "");
            for (char *p = code; *p; p++) *p = (char)toupper((unsigned char)*p);
            json_array_append_new(list, json_pack("{s:s,s:s}", "detected_source_language", code, "text",
                                                  t.text[i] ? t.text[i] : ""));
        }
        res = reply_json(sv, c, r, 200, json_pack("{s:o}", "translations", list));
    } else {
        json_t *out = json_object(), *tr = texts.array ? json_array() : NULL, *alts = texts.array ? json_array() : NULL;
        for (uint32_t i = 0; i < t.n; i++) {
            json_t *a = json_array();
            for (uint32_t k = 1; k <= n_alt; k++)
                if (t.text[i * (1 + n_alt) + k]) json_array_append_new(a, json_string(t.text[i * (1 + n_alt) + k]));
            const char *best = t.text[i * (1 + n_alt)] ? t.text[i * (1 + n_alt)] : "";
            if (texts.array) {
                json_array_append_new(tr, json_string(best));
                json_array_append_new(alts, a);
            } else {
                json_object_set_new(out, "translatedText", json_string(best));
                if (n_alt) json_object_set_new(out, "alternatives", a);
                else json_decref(a);
            }
        }
        if (texts.array) {
            json_object_set_new(out, "translatedText", tr);
            if (n_alt) json_object_set_new(out, "alternatives", alts);
            else json_decref(alts);
        }
        if (!source)
            json_object_set_new(out, "detectedLanguage",
                                json_pack("{s:f,s:s}", "confidence", 100.0, "language",
                                          t.source_code ? t.source_code : ""));
        res = reply_json(sv, c, r, 200, out);
    }
    translation_free(&t);
    json_decref(j);
    atomic_fetch_sub(&sv->in_flight, 1);
    return res;
}

static enum MHD_Result route_languages(server *sv, struct MHD_Connection *c, serve_request *r)
{
    json_t *list = json_array();
    for (uint32_t i = 0; i < sv->n_models; i++) {
        serve_model *m = &sv->models[i];
        if (m->audio) continue;
        if (!m->cfg.n_languages) {
            json_array_append_new(list, json_pack("{s:s,s:s,s:[s]}", "code", m->src_code, "name", m->src_code,
                                                  "targets", m->tgt_code));
            if (strcmp(m->src_code, m->tgt_code) != 0)
                json_array_append_new(list, json_pack("{s:s,s:s,s:[]}", "code", m->tgt_code, "name", m->tgt_code,
                                                      "targets"));
            continue;
        }
        const vkf_model *model = m->rep[0].model;
        for (uint32_t k = 0; k < m->cfg.n_languages; k++) {
            const char *code = vkf_model_language(model, k);
            json_t *targets = json_array();
            for (uint32_t t = 0; t < m->cfg.n_languages; t++)
                if (t != k) json_array_append_new(targets, json_string(vkf_model_language(model, t)));
            json_array_append_new(list, json_pack("{s:s,s:s,s:o}", "code", code, "name", code, "targets", targets));
        }
    }
    return reply_json(sv, c, r, 200, list);
}

static enum MHD_Result route_models(server *sv, struct MHD_Connection *c, serve_request *r)
{
    json_t *list = json_array();
    for (uint32_t i = 0; i < sv->n_models; i++)
        json_array_append_new(list, json_pack("{s:s,s:s,s:i,s:s}", "id", sv->models[i].name, "object", "model",
                                              "created", 0, "owned_by", "vkformer"));
    return reply_json(sv, c, r, 200, json_pack("{s:s,s:o}", "object", "list", "data", list));
}

/* ------------------------------------------------------------------ audio */

static void srt_time(double s, char *out, size_t cap, char sep)
{
    long long ms = (long long)llround(s * 1000.0);
    if (ms < 0) ms = 0;
    snprintf(out, cap, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep, ms % 1000);
}

static const char *skip_spaces(const char *s)
{
    return s ? s + strspn(s, " ") : "";
}

/* ------------------------------------------------------------------ transcription as server-sent events */

/* A transcription streamed to its client: the scheduler's on_window hands each
 * window's new segments here as transcript.text.delta events while the rest of
 * the recording is decoded (a 30-second window at a time), and the response's
 * reader sends them as they come, then transcript.text.done. Everything below
 * w.mu. The stream owns the samples and holds an in-flight count until MHD
 * frees the response. */
typedef struct sse {
    waiter w;
    job j;
    server *sv;
    struct MHD_Connection *c;
    vkf_transcribe_options to;
    float *samples;
    double t0;
    char *buf;                          /* events formatted so far */
    size_t len, cap, sent;              /* bytes in buf; handed to MHD */
    uint32_t segments;                  /* segments sent as deltas */
    bool windowed;                      /* a window's segments have come */
    bool ended;                         /* the last event is in buf */
    bool cancelled;                     /* the client left or the timeout passed: the job is cancelled */
    bool failed;                        /* buf could not grow: the stream ends */
} sse;

static void sse_event(sse *s, json_t *e)
{
    char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    size_t n = text ? strlen(text) + 8 : 0;
    if (!text || s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2 + 256;
        char *b = text ? realloc(s->buf, cap) : NULL;
        if (!b) {
            s->failed = true;
            free(text);
            return;
        }
        s->buf = b, s->cap = cap;
    }
    s->len += (size_t)snprintf(s->buf + s->len, s->cap - s->len, "data: %s\n\n", text);
    free(text);
}

/* Deltas for the segments of t not yet sent (the first one's leading spaces cut). */
static void sse_deltas(sse *s, const vkf_transcript *t)
{
    for (; s->segments < t->n_segments; s->segments++) {
        const char *seg = t->segments[s->segments].text ? t->segments[s->segments].text : "";
        if (s->segments == 0) seg = skip_spaces(seg);
        sse_event(s, json_pack("{s:s,s:s}", "type", "transcript.text.delta", "delta", seg));
    }
}

/* vkf_transcribe_options.on_window, on the scheduler's thread. */
static void sse_window(void *user, const vkf_transcript *so_far)
{
    sse *s = user;
    pthread_mutex_lock(&s->w.mu);
    sse_deltas(s, so_far);
    s->windowed = true;
    pthread_cond_broadcast(&s->w.cv);
    pthread_mutex_unlock(&s->w.mu);
}

/* The job has answered (under w.mu): the last deltas and transcript.text.done,
 * or an error event; a device-level failure before any delta goes to another
 * device instead (false: not ended). */
static bool sse_end(sse *s)
{
    job *j = &s->j;
    if (j->st == VKF_OK && j->transcript) {
        sse_deltas(s, j->transcript);
        sse_event(s, json_pack("{s:s,s:s}", "type", "transcript.text.done", "text", skip_spaces(j->transcript->text)));
        return s->ended = true;
    }
    if (!s->cancelled && !s->segments && device_level(j->st) && j->rep && j->tries < j->m->n_rep) {
        if (!atomic_exchange(&j->rep->failed, true))
            fprintf(stderr, "vkformer serve: model %s, device %s failed (%s): its requests go to the others\n",
                    j->m->name, j->rep->info.name, j->message);
        job_free(j);
        pthread_mutex_unlock(&s->w.mu);
        vkf_status st = job_submit(j);
        pthread_mutex_lock(&s->w.mu);
        if (st == VKF_OK) return false;
    }
    sse_event(s, json_pack("{s:s,s:{s:s}}", "type", "error", "error", "message",
                           s->cancelled ? "the request was not answered in time (--timeout)" : j->message));
    return s->ended = true;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    sse *s = cls;
    pthread_mutex_lock(&s->w.mu);
    for (;;) {
        if (s->sent < s->len) {
            size_t n = s->len - s->sent < max ? s->len - s->sent : max;
            memcpy(out, s->buf + s->sent, n);
            s->sent += n;
            pthread_mutex_unlock(&s->w.mu);
            return (ssize_t)n;
        }
        if (s->failed) break;
        if (s->ended) {
            pthread_mutex_unlock(&s->w.mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (s->j.done && !s->w.remaining) {
            sse_end(s);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&s->w.cv, &s->w.mu, &until);
        if (s->cancelled || s->sent < s->len || s->j.done) continue;
        pthread_mutex_unlock(&s->w.mu);
        bool gone = client_gone(s->c), late = now_ms() - s->t0 > s->sv->timeout_s * 1e3;
        if (gone || late) vkf_scheduler_cancel(s->j.rep->sched, s->j.id);
        pthread_mutex_lock(&s->w.mu);
        if (gone) break;
        if (late) s->cancelled = true;
    }
    pthread_mutex_unlock(&s->w.mu);
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Frees the stream once its job has answered (cancelled first if it has not). */
static void sse_free(void *cls)
{
    sse *s = cls;
    pthread_mutex_lock(&s->w.mu);
    bool pending = s->w.remaining > 0;
    pthread_mutex_unlock(&s->w.mu);
    if (pending && s->j.rep) vkf_scheduler_cancel(s->j.rep->sched, s->j.id);
    pthread_mutex_lock(&s->w.mu);
    while (s->w.remaining) pthread_cond_wait(&s->w.cv, &s->w.mu);
    pthread_mutex_unlock(&s->w.mu);
    job_free(&s->j);
    vkf_audio_free(s->samples);
    free(s->buf);
    atomic_fetch_sub(&s->sv->in_flight, 1);
    pthread_mutex_destroy(&s->w.mu);
    pthread_cond_destroy(&s->w.cv);
    free(s);
}

/* stream=true: the recording's windows as they are decoded. An error before the
 * first window (an unknown language, a full queue) is the JSON error it would
 * be without streaming; after it, an "error" event ends the stream. Takes the
 * samples. */
static enum MHD_Result stream_transcription(server *sv, struct MHD_Connection *c, serve_request *r, serve_model *m,
                                            float *samples, uint64_t count, const vkf_transcribe_options *to)
{
    sse *s = calloc(1, sizeof *s);
    if (!s) {
        vkf_audio_free(samples);
        return reply_error(sv, c, r, 500, "out of host memory");
    }
    pthread_mutex_init(&s->w.mu, NULL);
    pthread_cond_init(&s->w.cv, NULL);
    s->sv = sv, s->c = c, s->samples = samples, s->to = *to, s->t0 = now_ms();
    s->to.on_window = sse_window, s->to.on_window_user = s;
    s->j = (job){.w = &s->w, .m = m, .samples = samples, .n_samples = count, .to = &s->to};
    atomic_fetch_add(&sv->in_flight, 1);
    enum MHD_Result res = MHD_NO;
    vkf_status st = job_submit(&s->j);
    wait_end end = st == VKF_OK ? wait_jobs(sv, c, &s->w, &s->j, 1, s->t0, &s->windowed) : WAIT_DONE;
    pthread_mutex_lock(&s->w.mu);
    bool started = s->windowed || (s->j.done && s->j.st == VKF_OK);
    pthread_mutex_unlock(&s->w.mu);
    struct MHD_Response *resp = NULL;
    if (st != VKF_OK) res = reply_error(sv, c, r, status_of(st, s->j.message), "%s", s->j.message);
    else if (end == WAIT_TIMEOUT) res = reply_error(sv, c, r, 504, "the request was not answered in %u s (--timeout)", sv->timeout_s);
    else if (end == WAIT_DONE && !started) res = reply_error(sv, c, r, status_of(s->j.st, s->j.message), "%s", s->j.message);
    else if (end == WAIT_DONE) resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, s, sse_free);
    if (!resp) {
        sse_free(s);
        return end == WAIT_DONE && started ? reply_error(sv, c, r, 500, "out of host memory") : res;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    res = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    if (!r->counted) {
        r->counted = true;
        serve_count(sv, r->route, 200);
    }
    return res;
}

/* The OpenAI answer of a transcript in response_format `format` (stream=true: stream_transcription). */
static enum MHD_Result answer_transcript(server *sv, struct MHD_Connection *c, serve_request *r, const vkf_transcript *t,
                                         const char *format, bool translate)
{
    const char *text = skip_spaces(t->text);
    if (strcmp(format, "json") == 0) return reply_json(sv, c, r, 200, json_pack("{s:s}", "text", text));
    if (strcmp(format, "text") == 0) {
        size_t n = strlen(text);
        char *body = malloc(n + 2);
        if (!body) return reply_error(sv, c, r, 500, "out of host memory");
        memcpy(body, text, n);
        body[n] = '\n', body[n + 1] = 0;
        enum MHD_Result res = reply(sv, c, r, 200, "text/plain; charset=utf-8", body, n + 1, NULL);
        free(body);
        return res;
    }
    if (strcmp(format, "verbose_json") == 0) {
        json_t *segs = json_array();
        for (uint32_t i = 0; i < t->n_segments; i++) {
            const vkf_segment *s = &t->segments[i];
            json_t *tokens = json_array();
            for (uint32_t k = 0; k < s->count; k++) json_array_append_new(tokens, json_integer(t->ids[s->first + k]));
            json_array_append_new(segs, json_pack("{s:i,s:f,s:f,s:s,s:o,s:f}", "id", (int)i, "start", s->start, "end",
                                                  s->end, "text", s->text ? s->text : "", "tokens", tokens,
                                                  "temperature", 0.0));
        }
        return reply_json(sv, c, r, 200,
                          json_pack("{s:s,s:s,s:f,s:s,s:o}", "task", translate ? "translate" : "transcribe",
                                    "language", t->language, "duration", t->seconds, "text", text, "segments", segs));
    }
    /* srt, vtt */
    bool vtt = strcmp(format, "vtt") == 0;
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    if (!f) return reply_error(sv, c, r, 500, "out of host memory");
    if (vtt) fputs("WEBVTT\n\n", f);
    for (uint32_t i = 0; i < t->n_segments; i++) {
        char a[32], b[32];
        srt_time(t->segments[i].start, a, sizeof a, vtt ? '.' : ',');
        srt_time(t->segments[i].end, b, sizeof b, vtt ? '.' : ',');
        if (!vtt) fprintf(f, "%u\n", i + 1);
        fprintf(f, "%s --> %s\n%s\n\n", a, b, skip_spaces(t->segments[i].text));
    }
    fclose(f);
    enum MHD_Result res = reply(sv, c, r, 200, vtt ? "text/vtt; charset=utf-8" : "application/x-subrip; charset=utf-8",
                                body, len, NULL);
    free(body);
    return res;
}

static bool truthy(const char *s)
{
    return s && (strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0);
}

static enum MHD_Result route_audio(server *sv, struct MHD_Connection *c, serve_request *r, bool translate)
{
    if (r->raw) return reply_error(sv, c, r, 400, "the body must be multipart/form-data with a file field");
    form_field *file = field(r, "file");
    if (!file || !file->n) return reply_error(sv, c, r, 400, "file is required (multipart/form-data)");
    form_field *mf = field(r, "model");
    if (!mf || !mf->n) return reply_error(sv, c, r, 400, "model is required");
    serve_model *m = model_named(sv, mf->val);
    if (!m && strcmp(mf->val, "whisper-1") == 0) /* OpenAI's name: the first model that reads audio */
        for (uint32_t i = 0; i < sv->n_models && !m; i++)
            if (sv->models[i].audio) m = &sv->models[i];
    if (!m) return reply_error(sv, c, r, 404, "no model is named %s (GET /v1/models lists them)", quoted(mf->val));
    if (!m->audio) return reply_error(sv, c, r, 400, "model %s does not read audio: use /translate", m->name);
    const char *format = field(r, "response_format") ? field(r, "response_format")->val : "json";
    static const char *const formats[] = {"json", "text", "srt", "vtt", "verbose_json"};
    bool known = false;
    for (size_t i = 0; i < 5; i++) known |= strcmp(format, formats[i]) == 0;
    if (!known) return reply_error(sv, c, r, 400, "response_format %s: json, text, srt, vtt or verbose_json", quoted(format));
    form_field *tf = field(r, "temperature");
    if (tf) {
        char *end;
        double temp = strtod(tf->val, &end);
        if (end == tf->val || *end || !isfinite(temp) || temp < 0 || temp > 1)
            return reply_error(sv, c, r, 400, "temperature %s is not a number in 0..1", quoted(tf->val));
        if (temp != 0) return reply_error(sv, c, r, 400, "temperature %s: only 0 (greedy decoding) is supported", quoted(tf->val));
    }
    form_field *pf = field(r, "prompt");
    if (pf && pf->n) return reply_error(sv, c, r, 400, "prompt is not supported");
    for (uint32_t i = 0; i < r->n_fields; i++)
        if (strcmp(r->fields[i].key, "timestamp_granularities[]") == 0 && strcmp(r->fields[i].val, "segment") != 0)
            return reply_error(sv, c, r, 400, "timestamp_granularities %s: only segment is supported",
                               quoted(r->fields[i].val));
    const char *lang = field(r, "language") ? field(r, "language")->val : NULL;
    if (lang && !*lang) lang = NULL;
    bool stream = field(r, "stream") && truthy(field(r, "stream")->val);
    if (field(r, "stream") && !stream && strcasecmp(field(r, "stream")->val, "false") != 0 &&
        strcmp(field(r, "stream")->val, "0") != 0)
        return reply_error(sv, c, r, 400, "stream must be true or false");
    /* the upload through a file: libsndfile reads files */
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[4096];
    snprintf(path, sizeof path, "%s/vkformer-serve-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) return reply_error(sv, c, r, 500, "cannot write the upload to %s: %s", dir, strerror(errno));
    size_t off = 0;
    while (off < file->n) {
        ssize_t k = write(fd, file->val + off, file->n - off);
        if (k <= 0) break;
        off += (size_t)k;
    }
    close(fd);
    float *samples = NULL;
    uint64_t count = 0;
    vkf_status st = off == file->n ? vkf_audio_read(path, m->cfg.sample_rate, &samples, &count, NULL) : VKF_ERROR_IO;
    unlink(path);
    if (st != VKF_OK) {
        /* the message names the temporary file: name the upload instead */
        char message[1024];
        snprintf(message, sizeof message, "%s", off == file->n ? vkf_last_error() : "the upload could not be stored");
        char *at = strstr(message, path);
        if (at) {
            char rest[1024];
            snprintf(rest, sizeof rest, "%s", at + strlen(path));
            snprintf(at, sizeof message - (size_t)(at - message), "%s%s", file->filename[0] ? file->filename : "file", rest);
        }
        return reply_error(sv, c, r, 400, "file: %s", message);
    }
    vkf_transcribe_options to;
    vkf_transcribe_options_init(&to);
    to.language = lang;
    to.task = translate ? "translate" : "transcribe";
    /* timestamps as the model's generation_config says (vkformer transcribe's default):
     * srt, vtt and verbose_json take the segments' times as they come */
    if (stream) return stream_transcription(sv, c, r, m, samples, count, &to);
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    job j = {.w = &w, .m = m, .samples = samples, .n_samples = count, .to = &to};
    atomic_fetch_add(&sv->in_flight, 1);
    double t0 = now_ms();
    enum MHD_Result res;
    st = job_submit(&j);
    if (st != VKF_OK) {
        res = reply_error(sv, c, r, status_of(st, j.message), "%s", j.message);
    } else {
        wait_end end = wait_jobs(sv, c, &w, &j, 1, t0, NULL);
        if (end == WAIT_GONE) res = MHD_NO;
        else if (end == WAIT_TIMEOUT) res = reply_error(sv, c, r, 504, "the request was not answered in %u s (--timeout)", sv->timeout_s);
        else if (j.st != VKF_OK) res = reply_error(sv, c, r, status_of(j.st, j.message), "%s", j.message);
        else res = answer_transcript(sv, c, r, j.transcript, format, translate);
    }
    job_free(&j);
    vkf_audio_free(samples);
    atomic_fetch_sub(&sv->in_flight, 1);
    return res;
}

/* ------------------------------------------------------------------ the handler */

enum MHD_Result serve_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)version;
    server *sv = cls;
    serve_request *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        *con_cls = r;
        const char *want;
        r->route = route_of(url, &want);
        if (r->route == ROUTE_OTHER) return reply_error(sv, c, r, 404, "no route %s %s", method, quoted(url));
        if (strcmp(method, want) != 0)
            return reply_error(sv, c, r, 405, "%s takes %s, not %s", serve_route_name(r->route), want, quoted(method));
        if (r->route != ROUTE_HEALTH && !authorized(sv, c))
            return reply_error(sv, c, r, 401, "a valid API key is required (Authorization: Bearer KEY)");
        if (atomic_load(&sv->draining) && r->route != ROUTE_HEALTH && r->route != ROUTE_METRICS)
            return reply_error(sv, c, r, 503, "the server is shutting down");
        if (strcmp(method, "POST") != 0) return MHD_YES;
        const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length && strtoull(length, NULL, 10) > sv->max_body)
            return reply_error(sv, c, r, 413, "the body (%s bytes) is larger than --max-body (%llu bytes)", length,
                               (unsigned long long)sv->max_body);
        const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (type && strncasecmp(type, "application/json", 16) == 0) {
            r->raw = true;
        } else if (type && (strncasecmp(type, "multipart/form-data", 19) == 0 ||
                            strncasecmp(type, "application/x-www-form-urlencoded", 33) == 0)) {
            r->pp = MHD_create_post_processor(c, 64 * 1024, post_field, r);
            if (strncasecmp(type, "multipart/", 10) == 0) multipart_closing(r, type);
            if (!r->pp) return reply_error(sv, c, r, 400, "malformed Content-Type %s (a multipart body needs a boundary)", quoted(type));
        } else {
            return reply_error(sv, c, r, 400, "Content-Type %s: application/json, application/x-www-form-urlencoded "
                               "or multipart/form-data", type ? quoted(type) : "missing");
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t size = *upload_data_size;
        *upload_data_size = 0;
        r->received += size;
        if (r->received > sv->max_body) r->too_large = true;
        if (r->too_large || r->malformed) return MHD_YES; /* read and dropped: answered at the end */
        if (r->pp) {
            if (r->closed) return MHD_YES; /* the epilogue */
            size = before_epilogue(r, upload_data, size);
            if (size && MHD_post_process(r->pp, upload_data, size) != MHD_YES && !r->malformed) {
                r->malformed = true;
                snprintf(r->why, sizeof r->why, "malformed form or multipart body");
            }
        } else if (r->raw) {
            if (r->n_body + size + 1 > r->cap_body) {
                size_t cap = (r->n_body + size + 1) * 2;
                char *p = realloc(r->body, cap);
                if (!p) {
                    r->malformed = true;
                    snprintf(r->why, sizeof r->why, "out of host memory for the body");
                    return MHD_YES;
                }
                r->body = p, r->cap_body = cap;
            }
            memcpy(r->body + r->n_body, upload_data, size);
            r->n_body += size;
            r->body[r->n_body] = 0;
        }
        return MHD_YES;
    }
    if (r->counted) return MHD_YES; /* answered before the body: the rest was dropped */
    if (r->too_large)
        return reply_error(sv, c, r, 413, "the body is larger than --max-body (%llu bytes)", (unsigned long long)sv->max_body);
    if (r->pp) {
        bool complete = MHD_destroy_post_processor(r->pp) == MHD_YES;
        r->pp = NULL;
        if (!complete && !r->malformed) {
            r->malformed = true;
            snprintf(r->why, sizeof r->why, "the form or multipart body ends before it is complete");
        }
    }
    if (r->malformed) return reply_error(sv, c, r, 400, "%s", r->why);
    if (atomic_load(&sv->draining) && r->route != ROUTE_HEALTH && r->route != ROUTE_METRICS)
        return reply_error(sv, c, r, 503, "the server is shutting down");
    switch (r->route) {
    case ROUTE_HEALTH:
        return reply_json(sv, c, r, 200, json_pack("{s:s}", "status", atomic_load(&sv->draining) ? "draining" : "ok"));
    case ROUTE_METRICS: {
        char *text = serve_metrics_text(sv);
        enum MHD_Result res = reply(sv, c, r, 200, "text/plain; version=0.0.4; charset=utf-8", text ? text : "",
                                    text ? strlen(text) : 0, NULL);
        free(text);
        return res;
    }
    case ROUTE_MODELS: return route_models(sv, c, r);
    case ROUTE_LANGUAGES: return route_languages(sv, c, r);
    case ROUTE_TRANSLATE: return route_translate(sv, c, r, false);
    case ROUTE_DEEPL: return route_translate(sv, c, r, true);
    case ROUTE_TRANSCRIPTIONS: return route_audio(sv, c, r, false);
    case ROUTE_TRANSLATIONS: return route_audio(sv, c, r, true);
    default: return reply_error(sv, c, r, 404, "no route %s", quoted(url));
    }
}
