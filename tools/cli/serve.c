/* vkformer serve: the command (tools/cli/serve.h says what lives where).
 *
 * Each --model is loaded once per device (--devices, else the one device of
 * --device / VKFORMER_DEVICE / the default choice), each copy with a scheduler
 * of its own; the routes hand requests to the least loaded copy that has not
 * failed. libmicrohttpd runs one thread per connection; the handler threads
 * wait for the schedulers' answers. SIGTERM or SIGINT: stop accepting, answer
 * every request in flight, free everything, exit 0 (6 where the validation
 * layer reported messages). */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const unsigned serve_statuses[SERVE_STATUSES] = {200, 400, 401, 404, 405, 413, 415, 499, 500, 503, 504, 0};

static const cli_option serve_options[] = {
    {"--model", CLI_LIST, CLI_OFF(serve_models), 0, 0, "DIR",
     "a model to serve (a Hugging Face folder or a vkformer file), named by its folder's name; repeatable", NULL},
    {"--host", CLI_STRING, CLI_OFF(host), 0, 0, "ADDRESS", "the address to listen on (default 127.0.0.1)", NULL},
    {"--port", CLI_COUNT, CLI_OFF(port), 0, 65535, "PORT", "the TCP port (default 8080; 0: any free port, printed)",
     NULL},
    {"--devices", CLI_STRING, CLI_OFF(devices), 0, 0, "all|I,J,...",
     "a copy of every model and a scheduler on each of these devices (indices or names)", NULL},
    {"--max-batch", CLI_COUNT, CLI_OFF(max_batch), 1, 1024, "N", "slots per model and device (default 32)", NULL},
    {"--max-queue", CLI_COUNT, CLI_OFF(max_queue), 1, 1000000, "N",
     "requests waiting per model and device; past it: 503 with Retry-After (default 256)", NULL},
    {"--max-body", CLI_COUNT, CLI_OFF(max_body), 1, (unsigned long)1 << 40, "BYTES",
     "largest request body; past it: 413 (default 26214400, 25 MiB)", NULL},
    {"--timeout", CLI_COUNT, CLI_OFF(timeout), 1, 86400, "S", "a request not answered in S seconds: 504 (default 600)",
     NULL},
    {"--api-key-file", CLI_STRING, CLI_OFF(api_key_file), 0, 0, "FILE",
     "API keys, one a line: requests need Authorization: Bearer KEY (else 401)", NULL},
    CLI_COMMON_OPTIONS,
    CLI_MODEL_OPTIONS,
    CLI_END,
};

static const cli_command serve_command = {
    "serve",
    "--model DIR [--model DIR ...] [--host 127.0.0.1] [--port 8080] [--devices all|I,J] [--max-batch N]\n"
    "       [--max-queue N] [--max-body BYTES] [--timeout S] [--api-key-file FILE]",
    "Serves the models over HTTP: POST /v1/audio/transcriptions and /v1/audio/translations (OpenAI),\n"
    "GET /v1/models, POST /translate and GET /languages (LibreTranslate), POST /v2/translate (DeepL),\n"
    "GET /health, GET /metrics (Prometheus). Requests are batched across clients at decode-step\n"
    "boundaries (docs/serving.md). SIGTERM: stop accepting, finish what is in flight, exit 0.",
    serve_options,
};

const char *serve_route_name(serve_route route)
{
    static const char *const names[ROUTE_COUNT] = {"/v1/audio/transcriptions", "/v1/audio/translations", "/v1/models",
                                                   "/translate", "/languages", "/v2/translate", "/health", "/metrics",
                                                   "other"};
    return route < ROUTE_COUNT ? names[route] : "other";
}

void serve_count(server *sv, serve_route route, unsigned status)
{
    unsigned i = 0;
    while (i + 1 < SERVE_STATUSES && serve_statuses[i] != status) i++;
    pthread_mutex_lock(&sv->metrics_mu);
    sv->requests[route < ROUTE_COUNT ? route : ROUTE_OTHER][i]++;
    pthread_mutex_unlock(&sv->metrics_mu);
}

/* ------------------------------------------------------------------ /metrics */

typedef struct text_buf {
    char *p;
    size_t n, cap;
} text_buf;

static void tb_printf(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(text_buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return;
        b->p = p, b->cap = cap;
    }
}

char *serve_metrics_text(server *sv)
{
    text_buf b = {0};
    tb_printf(&b, "# HELP vkformer_requests_total HTTP requests answered, by route and status (499: the client "
                  "went away).\n# TYPE vkformer_requests_total counter\n");
    pthread_mutex_lock(&sv->metrics_mu);
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int i = 0; i < SERVE_STATUSES; i++)
            if (sv->requests[r][i])
                tb_printf(&b, "vkformer_requests_total{route=\"%s\",status=\"%u\"} %llu\n",
                          serve_route_name((serve_route)r), serve_statuses[i] ? serve_statuses[i] : 999,
                          (unsigned long long)sv->requests[r][i]);
    pthread_mutex_unlock(&sv->metrics_mu);
    tb_printf(&b, "# HELP vkformer_in_flight HTTP requests being answered now.\n# TYPE vkformer_in_flight gauge\n"
                  "vkformer_in_flight %d\n", atomic_load(&sv->in_flight));
    static const char *const gauges[][2] = {
        {"queue_depth", "requests waiting for a slot"},
        {"active_slots", "slots answering requests"},
        {"running_groups", "groups of requests decoding together"},
    };
    static const char *const counters[][2] = {
        {"admitted_total", "requests admitted into slots"},
        {"answered_total", "requests answered"},
        {"failed_total", "requests failed"},
        {"cancelled_total", "requests cancelled (client gone, timeout)"},
        {"decode_steps_total", "decode steps submitted (one per group and step)"},
        {"encoder_passes_total", "batched encoder passes"},
        {"tokens_total", "ids generated and answered"},
        {"joined_total", "requests admitted into a running batch that was decoding others"},
    };
    /* every model and device once: the schedulers' counters */
    uint32_t total = 0;
    for (uint32_t m = 0; m < sv->n_models; m++) total += sv->models[m].n_rep;
    vkf_scheduler_stats *st = calloc(total ? total : 1, sizeof *st);
    if (!st) return b.p;
    uint32_t k = 0;
    for (uint32_t m = 0; m < sv->n_models; m++)
        for (uint32_t d = 0; d < sv->models[m].n_rep; d++) vkf_scheduler_get_stats(sv->models[m].rep[d].sched, &st[k++]);
#define EACH_REPLICA(...)                                                                                            \
    do {                                                                                                             \
        uint32_t k_ = 0;                                                                                             \
        for (uint32_t m = 0; m < sv->n_models; m++)                                                                  \
            for (uint32_t d = 0; d < sv->models[m].n_rep; d++, k_++) {                                               \
                const vkf_scheduler_stats *s = &st[k_];                                                              \
                const char *name = sv->models[m].name;                                                               \
                (void)s, (void)name;                                                                                 \
                __VA_ARGS__;                                                                                         \
            }                                                                                                        \
    } while (0)
    for (int g = 0; g < 3; g++) {
        tb_printf(&b, "# HELP vkformer_%s %s.\n# TYPE vkformer_%s gauge\n", gauges[g][0], gauges[g][1], gauges[g][0]);
        EACH_REPLICA(tb_printf(&b, "vkformer_%s{model=\"%s\",device=\"%u\"} %u\n", gauges[g][0], name, d,
                               g == 0 ? s->queued : g == 1 ? s->active : s->groups));
    }
    for (int c = 0; c < 8; c++) {
        tb_printf(&b, "# HELP vkformer_%s %s.\n# TYPE vkformer_%s counter\n", counters[c][0], counters[c][1],
                  counters[c][0]);
        EACH_REPLICA({
            uint64_t v[] = {s->admitted,      s->answered,       s->failed, s->cancelled, s->steps,
                            s->encoder_passes, s->tokens, s->joined};
            tb_printf(&b, "vkformer_%s{model=\"%s\",device=\"%u\"} %llu\n", counters[c][0], name, d,
                      (unsigned long long)v[c]);
        });
    }
    tb_printf(&b, "# HELP vkformer_batch_rows Requests per group (batched encoder pass); a whole run counts its "
                  "requests (beam searches that waited together run as one batch; sampling and audio: 1).\n# TYPE vkformer_batch_rows histogram\n");
    EACH_REPLICA({
        static const char *const le[8] = {"1", "2", "4", "8", "16", "32", "64", "+Inf"};
        uint64_t cum = 0;
        for (int i = 0; i < 8; i++) {
            cum += s->batch_hist[i];
            tb_printf(&b, "vkformer_batch_rows_bucket{model=\"%s\",device=\"%u\",le=\"%s\"} %llu\n", name, d, le[i],
                      (unsigned long long)cum);
        }
        tb_printf(&b, "vkformer_batch_rows_sum{model=\"%s\",device=\"%u\"} %llu\n", name, d,
                  (unsigned long long)s->batch_rows);
        tb_printf(&b, "vkformer_batch_rows_count{model=\"%s\",device=\"%u\"} %llu\n", name, d, (unsigned long long)cum);
    });
    tb_printf(&b, "# HELP vkformer_busy_seconds_total Time the model's scheduler spent in device work (encoder "
                  "passes, decode steps, whole runs; host wall clock around each submit).\n"
                  "# TYPE vkformer_busy_seconds_total counter\n");
    EACH_REPLICA(tb_printf(&b, "vkformer_busy_seconds_total{model=\"%s\",device=\"%u\"} %.6f\n", name, d,
                           s->busy_ms / 1e3));
    tb_printf(&b, "# HELP vkformer_tokens_per_second Generated ids per busy second since start.\n"
                  "# TYPE vkformer_tokens_per_second gauge\n");
    EACH_REPLICA(tb_printf(&b, "vkformer_tokens_per_second{model=\"%s\",device=\"%u\"} %.3f\n", name, d,
                           s->busy_ms > 0 ? (double)s->tokens / (s->busy_ms / 1e3) : 0.0));
#undef EACH_REPLICA
    free(st);
    return b.p;
}

/* ------------------------------------------------------------------ startup */

/* The model's name: its folder's name, a file's without .safetensors. */
static void model_name(const char *path, char *out, size_t cap)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && path[start - 1] != '/') start--;
    size_t len = n - start;
    const char *ext = ".safetensors";
    size_t el = strlen(ext);
    if (len > el && memcmp(path + start + len - el, ext, el) == 0) len -= el;
    if (len >= cap) len = cap - 1;
    memcpy(out, path + start, len);
    out[len] = 0;
}

/* A one-way model's codes: from a name ending in -xx-yy (opus-mt-en-de), else the name. */
static void one_way_codes(serve_model *m)
{
    snprintf(m->src_code, sizeof m->src_code, "%s", m->name);
    snprintf(m->tgt_code, sizeof m->tgt_code, "%s", m->name);
    const char *last = strrchr(m->name, '-');
    if (!last || last == m->name) return;
    const char *prev = last - 1;
    while (prev > m->name && *prev != '-') prev--;
    if (*prev != '-') return;
    size_t a = (size_t)(last - prev - 1), b = strlen(last + 1);
    if (a < 2 || a > 3 || b < 2 || b > 3) return;
    snprintf(m->src_code, sizeof m->src_code, "%.*s", (int)a, prev + 1);
    snprintf(m->tgt_code, sizeof m->tgt_code, "%s", last + 1);
}

/* Keys of --api-key-file: one a line, blank lines and # comments skipped. */
static int read_keys(server *sv, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_error("serve: --api-key-file %s: %s", quoted(path), strerror(errno));
        return EXIT_ERROR;
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        char *k = line + strspn(line, " \t");
        size_t len = strlen(k);
        while (len && (k[len - 1] == ' ' || k[len - 1] == '\t')) k[--len] = 0;
        if (!len || k[0] == '#') continue;
        char **keys = realloc(sv->keys, (sv->n_keys + 1) * sizeof *keys);
        if (!keys || !(keys[sv->n_keys] = strdup(k))) {
            fclose(f);
            cli_error("out of host memory");
            return EXIT_ERROR;
        }
        sv->keys = keys, sv->n_keys++;
    }
    fclose(f);
    if (!sv->n_keys) {
        cli_error("serve: --api-key-file %s holds no key", quoted(path));
        return EXIT_USAGE;
    }
    return -1;
}

/* The devices of --devices: "all" (every GPU, or every device where there is no GPU) or a list. */
static int device_list(const options *o, char ***out, uint32_t *count)
{
    *out = NULL, *count = 0;
    if (!o->devices) {
        *out = xmalloc(sizeof **out);
        (*out)[0] = o->device ? strdup(o->device) : NULL;
        *count = 1;
        return -1;
    }
    if (strcmp(o->devices, "all") == 0) {
        vkf_device_info infos[32];
        uint32_t n = 0;
        vkf_status st = vkf_devices_list(infos, 32, &n);
        if (st != VKF_OK) return fail(st);
        if (n > 32) n = 32;
        uint32_t gpus = 0;
        for (uint32_t i = 0; i < n; i++) gpus += infos[i].type != VKF_DEVICE_CPU && infos[i].type != VKF_DEVICE_OTHER;
        *out = xmalloc((n ? n : 1) * sizeof **out);
        for (uint32_t i = 0; i < n; i++) {
            if (gpus && (infos[i].type == VKF_DEVICE_CPU || infos[i].type == VKF_DEVICE_OTHER)) continue;
            char idx[16];
            snprintf(idx, sizeof idx, "%u", infos[i].index);
            (*out)[(*count)++] = strdup(idx);
        }
        if (!*count) {
            cli_error("serve: --devices all: no Vulkan device");
            return EXIT_NO_DEVICE;
        }
        return -1;
    }
    char *copy = strdup(o->devices);
    size_t cap = strlen(o->devices) + 1;
    *out = xmalloc(cap * sizeof **out);
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        for (uint32_t i = 0; i < *count; i++)
            if (strcmp((*out)[i], t) == 0) {
                free(copy);
                return cli_usage_error(o, "--devices names %s twice", quoted(t));
            }
        (*out)[(*count)++] = strdup(t);
    }
    free(copy);
    if (!*count) return cli_usage_error(o, "--devices needs all or a list of devices");
    return -1;
}

/* Frees every model, scheduler and context; the exit code (validation messages: 6). */
static int free_models(server *sv, int code)
{
    for (uint32_t m = 0; m < sv->n_models; m++) {
        serve_model *sm = &sv->models[m];
        for (uint32_t d = 0; d < sm->n_rep; d++) {
            vkf_scheduler_destroy(sm->rep[d].sched);
            vkf_model_destroy(sm->rep[d].model);
            if (sm->rep[d].ctx) code = close_context(sm->rep[d].ctx, code);
        }
        free(sm->rep);
        pthread_mutex_destroy(&sm->tok);
    }
    free(sv->models);
    sv->models = NULL, sv->n_models = 0;
    return code;
}

static int load_models(server *sv, const options *o)
{
    char **devices = NULL;
    uint32_t n_dev = 0;
    int code = device_list(o, &devices, &n_dev);
    if (code >= 0) return code;
    sv->models = calloc(o->serve_models.n, sizeof *sv->models);
    if (!sv->models) {
        cli_error("out of host memory");
        return EXIT_ERROR;
    }
    code = -1;
    for (unsigned i = 0; i < o->serve_models.n && code < 0; i++) {
        serve_model *m = &sv->models[i];
        m->path = o->serve_models.v[i];
        model_name(m->path, m->name, sizeof m->name);
        for (unsigned j = 0; j < i; j++)
            if (strcmp(sv->models[j].name, m->name) == 0)
                code = cli_usage_error(o, "two models are named %s (%s and %s): models are named by their folder's "
                                       "name", quoted(m->name), quoted(sv->models[j].path), quoted(m->path));
        if (!m->name[0]) code = cli_usage_error(o, "--model %s names no folder or file", quoted(m->path));
        if (code >= 0) break;
        pthread_mutex_init(&m->tok, NULL);
        sv->n_models++;
        m->rep = calloc(n_dev, sizeof *m->rep);
        if (!m->rep) {
            cli_error("out of host memory");
            code = EXIT_ERROR;
            break;
        }
        for (uint32_t d = 0; d < n_dev && code < 0; d++) {
            serve_replica *r = &m->rep[d];
            options od = *o;
            od.device = devices[d];
            vkf_status st = open_context(&od, &r->ctx);
            if (st == VKF_OK) st = vkf_context_device_info(r->ctx, &r->info);
            if (st == VKF_OK) st = load_model(r->ctx, m->path, o, &r->model);
            if (st == VKF_OK) st = vkf_model_get_config(r->model, &m->cfg);
            vkf_scheduler_options so;
            vkf_scheduler_options_init(&so);
            if (o->max_batch) so.max_batch = (uint32_t)o->max_batch;
            if (o->max_queue) so.max_queue = (uint32_t)o->max_queue;
            so.max_groups = 8;
            /* benchmarks only (tools/bench_serve.py): 1 makes arrivals wait for the whole running
             * batch to end ("static batching"), the form continuous batching is measured against */
            const char *groups = getenv("VKFORMER_SERVE_MAX_GROUPS");
            if (groups && atoi(groups) >= 1 && atoi(groups) <= 64) so.max_groups = (uint32_t)atoi(groups);
            if (st == VKF_OK) st = vkf_scheduler_create(r->model, &so, &r->sched);
            m->n_rep = d + 1;
            if (st != VKF_OK) {
                cli_error("serve: %s on device %s: %s", quoted(m->path), devices[d] ? devices[d] : "(default)",
                          vkf_last_error());
                code = exit_code_for(st);
            }
        }
        if (code >= 0) break;
        m->audio = m->cfg.audio_mels > 0;
        if (!m->audio && !m->cfg.has_vocab) {
            cli_error("serve: %s has no vocabularies: it cannot translate text", quoted(m->path));
            code = EXIT_ERROR;
        }
        one_way_codes(m);
    }
    for (uint32_t d = 0; d < n_dev; d++) free(devices[d]);
    free(devices);
    return code;
}

/* The listening address of --host (an IPv4 or IPv6 literal, or localhost). */
static int make_address(const options *o, struct sockaddr_storage *addr, socklen_t *len, bool *v6)
{
    const char *host = o->host ? o->host : "127.0.0.1";
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    memset(addr, 0, sizeof *addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
    unsigned port = cli_given(o, "--port") ? (unsigned)o->port : 8080;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)port);
        *len = sizeof *a4, *v6 = false;
        return -1;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6, *v6 = true;
        return -1;
    }
    return cli_usage_error(o, "--host %s is not an IPv4 or IPv6 address (or localhost)", quoted(host));
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = 0;
    if (getenv("VKFORMER_SERVE_DEBUG")) print_line(stderr, "vkformer: serve: libmicrohttpd: ", line);
}

static int run_serve(options *o)
{
    if (!o->serve_models.n) return cli_usage_error(o, "needs --model DIR (one or more)");
    int checked = check_model_options(o);
    if (checked >= 0) return checked;
    if (o->devices && o->device) return cli_usage_error(o, "--devices and --device exclude each other");
    server *sv = calloc(1, sizeof *sv);
    if (!sv) return EXIT_ERROR;
    sv->o = o;
    sv->max_body = o->max_body ? o->max_body : 25u << 20;
    sv->timeout_s = o->timeout ? (unsigned)o->timeout : 600;
    pthread_mutex_init(&sv->metrics_mu, NULL);
    struct sockaddr_storage addr;
    socklen_t addr_len;
    bool v6 = false;
    int code = make_address(o, &addr, &addr_len, &v6);
    if (code < 0 && o->api_key_file) code = read_keys(sv, o->api_key_file);
    /* SIGTERM and SIGINT are taken by sigwait below: blocked in every thread */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (code < 0) code = load_models(sv, o);
    struct MHD_Daemon *daemon = NULL;
    if (code < 0) {
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
        daemon = MHD_start_daemon(flags, 0, NULL, NULL, serve_handle, sv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                  MHD_OPTION_NOTIFY_COMPLETED, serve_completed, sv, MHD_OPTION_CONNECTION_TIMEOUT,
                                  (unsigned)30, MHD_OPTION_CONNECTION_LIMIT, (unsigned)512,
                                  MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1u << 20), MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
                                  NULL, MHD_OPTION_END);
        if (!daemon) {
            cli_error("serve: cannot listen on %s port %u (in use, or not an address of this machine)",
                      o->host ? o->host : "127.0.0.1", cli_given(o, "--port") ? (unsigned)o->port : 8080);
            code = EXIT_ERROR;
        }
    }
    if (code < 0) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
        unsigned port = info ? info->port : (unsigned)o->port;
        fprintf(stderr, "vkformer serve: listening on http://%s%s%s:%u/ (models:", v6 ? "[" : "",
                o->host ? o->host : "127.0.0.1", v6 ? "]" : "", port);
        for (uint32_t m = 0; m < sv->n_models; m++)
            fprintf(stderr, " %s%s", sv->models[m].name, sv->models[m].audio ? " (audio)" : "");
        fprintf(stderr, "; %u device%s)\n", sv->models[0].n_rep, sv->models[0].n_rep == 1 ? "" : "s");
        fflush(stderr);
        int sig = 0;
        sigwait(&stop, &sig);
        /* draining: no new connections, no new work; what is in flight is answered */
        atomic_store(&sv->draining, true);
        fprintf(stderr, "vkformer serve: %s: draining %d request%s in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                atomic_load(&sv->in_flight), atomic_load(&sv->in_flight) == 1 ? "" : "s");
        MHD_socket listen_fd = MHD_quiesce_daemon(daemon);
        if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
        struct timespec tick = {0, 20 * 1000 * 1000};
        double waited = 0;
        while (atomic_load(&sv->in_flight) > 0 && waited < sv->timeout_s + 5.0) nanosleep(&tick, NULL), waited += 0.02;
        MHD_stop_daemon(daemon);
        code = EXIT_OK;
        fprintf(stderr, "vkformer serve: stopped\n");
    }
    code = free_models(sv, code < 0 ? EXIT_OK : code);
    for (uint32_t i = 0; i < sv->n_keys; i++) free(sv->keys[i]);
    free(sv->keys);
    pthread_mutex_destroy(&sv->metrics_mu);
    free(sv);
    return code;
}

int cmd_serve(int argc, char **argv)
{
    static options o;
    memset(&o, 0, sizeof o);
    int code = cli_parse(&serve_command, argc, argv, &o);
    if (code >= 0) return code;
    if (o.n_args) return cli_usage_error(&o, "takes no words, only options (%s is extra)", quoted(o.args[0]));
    return run_serve(&o);
}
