/* vkformer serve: the HTTP front end (issue 37, docs/serving.md), on libmicrohttpd
 * (one thread per connection) and jansson, over the library's scheduler
 * (vkf_scheduler_*, src/serve/scheduler.c), which knows nothing of HTTP.
 *   serve.c         the command: options, models and their schedulers (one per
 *                   device), the daemon, SIGTERM draining, /metrics, /health
 *   serve_routes.c  the routes: request bodies (JSON, forms, multipart), the
 *                   OpenAI, LibreTranslate and DeepL shapes, waiting for answers */
#ifndef VKF_CLI_SERVE_H
#define VKF_CLI_SERVE_H

#include "cli.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

/* The routes, for dispatch and for the metrics. */
typedef enum serve_route {
    ROUTE_TRANSCRIPTIONS = 0,           /* POST /v1/audio/transcriptions */
    ROUTE_TRANSLATIONS,                 /* POST /v1/audio/translations */
    ROUTE_MODELS,                       /* GET /v1/models */
    ROUTE_TRANSLATE,                    /* POST /translate (LibreTranslate) */
    ROUTE_LANGUAGES,                    /* GET /languages (LibreTranslate) */
    ROUTE_DEEPL,                        /* POST /v2/translate (DeepL) */
    ROUTE_HEALTH,                       /* GET /health */
    ROUTE_METRICS,                      /* GET /metrics */
    ROUTE_OTHER,                        /* anything else: 404 */
    ROUTE_COUNT
} serve_route;

/* The statuses the metrics count (others count as the last). */
#define SERVE_STATUSES 12
extern const unsigned serve_statuses[SERVE_STATUSES];

/* One model on one device: its context, the model and its scheduler (owned). */
typedef struct serve_replica {
    vkf_context *ctx;
    vkf_model *model;
    vkf_scheduler *sched;
    atomic_bool failed;                 /* a device-level failure: no new requests */
    vkf_device_info info;
} serve_replica;

typedef struct serve_model {
    char name[128];                     /* the folder's name (a file's without .safetensors) */
    const char *path;                   /* borrowed from argv */
    vkf_model_config cfg;
    bool audio;                         /* reads audio (Whisper): the /v1/audio routes */
    serve_replica *rep;                 /* (n_rep) owned */
    uint32_t n_rep;
    pthread_mutex_t tok;                /* the tokenizers: one caller at a time */
    /* a model that names no languages translates one way: these codes (from a
     * name ending in -xx-yy, else the model's name) */
    char src_code[128], tgt_code[128];
} serve_model;

typedef struct server {
    const options *o;
    serve_model *models;                /* (n_models) owned */
    uint32_t n_models;
    char **keys;                        /* (n_keys) API keys, owned; none: no key needed */
    uint32_t n_keys;
    uint64_t max_body;
    unsigned timeout_s;
    atomic_int in_flight;               /* requests being answered */
    atomic_bool draining;               /* SIGTERM: no new work */
    pthread_mutex_t metrics_mu;
    uint64_t requests[ROUTE_COUNT][SERVE_STATUSES];
} server;

/* The state of one HTTP request between the access handler's calls (serve_routes.c). */
typedef struct serve_request serve_request;

/* libmicrohttpd's access handler and completion callback (serve_routes.c). */
enum MHD_Result serve_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls);
void serve_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why);

/* Counts an answer (serve.c). */
void serve_count(server *sv, serve_route route, unsigned status);
/* The Prometheus text of /metrics, malloc'd (serve.c). */
char *serve_metrics_text(server *sv);
/* The route name as the metrics label it. */
const char *serve_route_name(serve_route route);

#endif
