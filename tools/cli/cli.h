/* The vkformer command-line tool: what every command shares (tools/cli/common.c).
 *
 * Each command lives in its own file (tools/cli/<command>.c) with its own table of
 * the options it takes (cli_option, ending with an empty entry); cli_parse reads
 * argv against that table only, so an option the command does not take, a
 * repeated option, a missing value or a malformed number is a usage error (exit
 * 2, one line naming the option and the command). --help prints the command's
 * usage text, built from its table. */
#ifndef VKF_CLI_H
#define VKF_CLI_H

#include "vkformer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { EXIT_OK = 0, EXIT_ERROR = 1, EXIT_USAGE = 2, EXIT_NO_VULKAN = 3, EXIT_NO_DEVICE = 4, EXIT_WRONG = 5,
       EXIT_VALIDATION = 6 };

/* The values of a repeatable option (CLI_LIST), in order. */
typedef struct cli_list {
    const char *v[64];
    unsigned n;
} cli_list;

/* What the options of every command write to; each command reads its own. */
typedef struct options {
    const char *command;                /* "generate", "bench matmul": for messages */
    const char *device;
    bool json;
    unsigned long m, n, k;
    const char *sizes;
    unsigned long repeat;
    const char *model, *src, *tgt, *out;
    unsigned long max_new;
    const char *preset;
    const char *input;
    unsigned long max_device_memory;    /* bytes; 0: no cap (not given) */
    const char *attention, *cross_attention;
    unsigned long batch, src_len, tgt_len;
    bool quick;                         /* tune: few candidates, small shapes */
    unsigned long seed;                 /* --seed: bigbird, lsh, lowrank, sampling */
    const char *precision;              /* --precision auto|f32|f16|int8: weight storage */
    const char *dtype;                  /* bench matmul --dtype */
    const char *kernel;                 /* bench matmul --kernel FAMILY (NULL: auto) */
    vkf_model_load_options load;        /* from --precision */
    bool verbose;                       /* --verbose: the library's info messages too */
    bool no_coopmat;                    /* --no-coopmat (also handled in main for every command) */
    unsigned long beam, n_best, min_new;
    double length_penalty;
    bool early_stopping;
    const char *srcs[256];              /* generate: every --src, in order */
    unsigned n_srcs;
    bool timing;
    bool raw_ids;
    double temperature, top_p;
    unsigned long top_k;
    bool decode;                        /* tokenize --decode: ids to text */
    const char *source_lang, *target_lang; /* translate --source-lang / --target-lang: codes as the tokenizer names them */
    const char *audio;                  /* forward --audio FILE: the source is a sound file (Whisper) */
    const char *target_prefix;          /* translate --target-prefix TEXT, generate --target-prefix-ids IDS */
    double repetition_penalty;          /* --repetition-penalty (1: off) */
    unsigned long no_repeat_ngram;      /* --no-repeat-ngram N */
    cli_list suppress, suppress_sequence, end_token; /* --suppress, --suppress-sequence, --end-token */
    bool stream;                        /* --stream */
    bool progress;                      /* translate --input --progress */
    unsigned long max_batch_tokens;     /* translate --input --max-batch-tokens N */
    double max_new_factor;              /* --max-new-factor F */
    bool ids;                           /* score --ids: --src/--tgt (and --input) hold ids */
    const char *devices;                /* --devices all|I,J,...: a device pool (tools/cli/pool.c) */
    const char *pool_dispatch;          /* --pool-dispatch balanced|any-free */
    const char *language, *task;        /* transcribe --language CODE|auto, --task transcribe|translate */
    bool timestamps;                    /* transcribe --timestamps */
    cli_list serve_models;              /* serve --model DIR, repeatable */
    const char *host;                   /* serve --host */
    unsigned long port, max_batch, max_queue, max_body, timeout; /* serve --port ... --timeout S */
    const char *api_key_file;           /* serve --api-key-file FILE */
    bool check;                         /* bench shaders --check: spills and occupancy floors fail */
    const char *args[16];               /* the words that are not options, in order */
    int n_args;
    const char *given[64];              /* the options given (their canonical names) */
    int n_given;
} options;

typedef enum cli_kind {
    CLI_FLAG,                           /* bool */
    CLI_STRING,                         /* const char * */
    CLI_REPEAT,                         /* const char *srcs[]: --src, repeatable */
    CLI_COUNT,                          /* unsigned long in [min, max] */
    CLI_NUMBER,                         /* double, finite */
    CLI_LIST,                           /* cli_list: a repeatable string option */
} cli_kind;

typedef struct cli_option {
    const char *name;                   /* "--max-new"; NULL ends a table */
    cli_kind kind;
    size_t offset;                      /* of the field in options */
    unsigned long min, max;             /* CLI_COUNT: the accepted range */
    const char *arg;                    /* the value's name in the usage text ("N"); NULL for flags */
    const char *help;                   /* one line */
    const char *alias;                  /* "-v" */
} cli_option;

#define CLI_OFF(field) offsetof(options, field)
#define CLI_U32 4294967295ul

/* Options every command takes (bench attention parses its own, the same ones). */
#define CLI_COMMON_OPTIONS                                                                                           \
    {"--device", CLI_STRING, CLI_OFF(device), 0, 0, "INDEX|NAME", "the Vulkan device (default: VKFORMER_DEVICE, "  \
     "else discrete, integrated, virtual GPU, CPU)", NULL},                                                         \
    {"--max-device-memory", CLI_COUNT, CLI_OFF(max_device_memory), 1, (unsigned long)-1, "BYTES",                   \
     "cap on the device memory of tensors", NULL},                                                                    \
    {"--no-coopmat", CLI_FLAG, CLI_OFF(no_coopmat), 0, 0, NULL,                                                        \
     "no cooperative-matrix kernels (the same as VKFORMER_COOPMAT=0)", NULL},                                        \
    {"--verbose", CLI_FLAG, CLI_OFF(verbose), 0, 0, NULL, "the library's info messages on stderr too", "-v"}

/* How a model is loaded and run (commands that load one). */
#define CLI_MODEL_OPTIONS                                                                                            \
    {"--attention", CLI_STRING, CLI_OFF(attention), 0, 0, "VARIANT",                                                  \
     "self-attention: dense|dense-naive|local:W|strided:W:S|bigbird:B:G:R|tglobal:W:G|lsh:H:C|lowrank:K", NULL},                 \
    {"--cross-attention", CLI_STRING, CLI_OFF(cross_attention), 0, 0, "VARIANT",                                      \
     "cross-attention: dense|dense-naive|lowrank:K", NULL},                                                          \
    {"--precision", CLI_STRING, CLI_OFF(precision), 0, 0, "auto|f32|f16|int8",                                        \
     "storage of the weights (default auto: f16 on GPUs that have it)", NULL},                                       \
    {"--seed", CLI_COUNT, CLI_OFF(seed), 0, (unsigned long)-1, "N", "seed of bigbird, lsh, lowrank (and sampling)",  \
     NULL}

/* Decoding (generate, translate). */
#define CLI_DECODE_OPTIONS                                                                                           \
    {"--max-new", CLI_COUNT, CLI_OFF(max_new), 1, CLI_U32, "N",                                                       \
     "at most N new tokens (default: the model's max_len or generation_config)", NULL},                              \
    {"--beam", CLI_COUNT, CLI_OFF(beam), 1, 16, "K", "beam search with K beams (1..16)", NULL},                \
    {"--length-penalty", CLI_NUMBER, CLI_OFF(length_penalty), 0, 0, "A",                                              \
     "beam: a hypothesis scores its log-probability / length^A (default 1)", NULL},                                  \
    {"--early-stopping", CLI_FLAG, CLI_OFF(early_stopping), 0, 0, NULL,                                               \
     "beam: a source stops once it holds K finished hypotheses", NULL},                                              \
    {"--n-best", CLI_COUNT, CLI_OFF(n_best), 1, 16, "N", "beam: N lines \"ids<TAB>score\" per source, best first",\
     NULL},                                                                                                          \
    {"--min-new", CLI_COUNT, CLI_OFF(min_new), 0, CLI_U32, "N", "hold eos off for N steps", NULL},                   \
    {"--temperature", CLI_NUMBER, CLI_OFF(temperature), 0, 0, "T", "sampling on the GPU at temperature T", NULL},   \
    {"--top-k", CLI_COUNT, CLI_OFF(top_k), 0, CLI_U32, "K", "sampling from the K likeliest tokens", NULL},           \
    {"--top-p", CLI_NUMBER, CLI_OFF(top_p), 0, 0, "P", "sampling from the likeliest tokens of mass P", NULL},        \
    {"--timing", CLI_FLAG, CLI_OFF(timing), 0, 0, NULL, "tokens/s and time to first token on stderr", NULL},        \
    {"--repetition-penalty", CLI_NUMBER, CLI_OFF(repetition_penalty), 0, 0, "P",                                      \
     "tokens already in the sequence score x P where negative, / P otherwise (P > 0; 1: off)", NULL},              \
    {"--no-repeat-ngram", CLI_COUNT, CLI_OFF(no_repeat_ngram), 1, CLI_U32, "N", "no n-gram of N tokens twice", NULL}, \
    {"--suppress", CLI_LIST, CLI_OFF(suppress), 0, 0, "IDS|TOKENS",                                                  \
     "never generate these: ids (5,17) or target tokens separated by spaces; repeatable", NULL},                    \
    {"--suppress-sequence", CLI_LIST, CLI_OFF(suppress_sequence), 0, 0, "IDS|TOKENS",                                \
     "never generate this sequence (its last token is banned after the others); repeatable", NULL},                 \
    {"--end-token", CLI_LIST, CLI_OFF(end_token), 0, 0, "ID|TOKEN",                                                  \
     "a source ends at this token (eos_token_id as a list: replaces eos; repeatable)", NULL},                        \
    {"--max-new-factor", CLI_NUMBER, CLI_OFF(max_new_factor), 0, 0, "F",                                              \
     "at most ceil(F x source length) new tokens per source (Marian's max-length-factor)", NULL},                    \
    {"--stream", CLI_FLAG, CLI_OFF(stream), 0, 0, NULL,                                                               \
     "print the output as it grows (greedy, sampling; beam search prints at the end)", NULL}

/* Commands that decode batches (generate, translate) or files (transcribe): spread them
 * over a pool of devices (tools/cli/pool.c, docs/scaling.md). */
#define CLI_POOL_OPTIONS                                                                                             \
    {"--devices", CLI_STRING, CLI_OFF(devices), 0, 0, "all|I,J,...",                                                  \
     "a pool: a model replica on each device (indices or names), batches to the free ones", NULL},            \
    {"--pool-dispatch", CLI_STRING, CLI_OFF(pool_dispatch), 0, 0, "balanced|any-free",                              \
     "with --devices: a slow device leaves batches to faster ones that end them sooner (balanced, the default), " \
     "or any free device takes the next", NULL}

#define CLI_END {NULL, CLI_FLAG, 0, 0, 0, NULL, NULL, NULL}

/* --model MODEL, as every command that loads one takes it. */
#define CLI_MODEL_PATH                                                                                               \
    {"--model", CLI_STRING, CLI_OFF(model), 0, 0, "MODEL", "a vkformer .safetensors file or a Hugging Face Marian "  \
     "folder", NULL}

typedef struct cli_command {
    const char *name;                   /* "generate", "bench matmul" */
    const char *synopsis;               /* one or more lines of "usage: vkformer NAME ..." forms (after NAME) */
    const char *about;                  /* what it does, one or more lines */
    const cli_option *options;
} cli_command;

/* Parses argv (the words after the command's name) against cmd's table into o.
 * Returns -1 when the command is to run, else the exit code to return (0 after
 * --help, 2 after a usage error, whose one line it printed). */
int cli_parse(const cli_command *cmd, int argc, char **argv, options *o);
/* Whether the option (canonical name) was given. */
bool cli_given(const options *o, const char *name);
/* A usage error of o's command: "vkformer: COMMAND: message", one line; returns 2. */
int cli_usage_error(const options *o, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Usage error unless the command was given at most max words (not options). */
int cli_max_args(const options *o, int max);
/* A command that takes options only and loads a model: parse, refuse words,
 * check the model options (precision, attention), then run(o). */
int cli_run_model_command(const cli_command *cmd, int argc, char **argv, options *o, int (*run)(const options *o));
/* Prints the command's usage text (synopsis, about, one line per option). */
void cli_print_help(const cli_command *cmd, FILE *f);

/* Every command: parse, then run. */
int cmd_info(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_bench_matmul(int argc, char **argv);
int cmd_bench_model(int argc, char **argv);
int cmd_bench_startup(int argc, char **argv);
int cmd_bench_translate(int argc, char **argv);
int cmd_bench_shaders(int argc, char **argv);
int cmd_bench_attention(int argc, char **argv); /* tools/bench_attention.c */
int cmd_forward(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_translate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_transcribe(int argc, char **argv);
int cmd_serve(int argc, char **argv);   /* tools/cli/serve.c */

/* ------------------------------------------------------------------ helpers */

int exit_code_for(vkf_status st);
/* Prints vkf_last_error() as one line; returns the exit code for st. */
int fail(vkf_status st);
void log_to_stderr(void *user, vkf_log_level level, const char *message);
/* Context options from the common options (device, log to stderr, --max-device-memory). */
void context_options_from(const options *o, vkf_context_options *co);
/* A context from the common options; tune: -1 the default, 0 ignore tune files. */
vkf_status open_context_tuned(const options *o, int tune, vkf_context **out);
vkf_status open_context(const options *o, vkf_context **out);
/* Destroys the context; turns validation messages into a failing exit code. */
int close_context(vkf_context *ctx, int code);
/* Host allocation for the tool; the tool (not the library) may exit on failure. */
void *xmalloc(size_t bytes);
/* JSON Lines records (docs/json.md): one object per line, each opened by
 * json_begin ({"command":"bench matmul") and closed by json_end, which adds
 * "device", "driver" and "vkformer_version", ends the line and flushes. */
void jsonl_begin(const char *command);
void jsonl_end(const vkf_device_info *info);
/* The driver as records name it: driver_name and driver_info joined by a space. */
void jsonl_driver(const vkf_device_info *info, char *out, size_t size);
/* ,"key":"value" (null for NULL) */
void jsonl_string(const char *key, const char *value);
/* A finite number with digits significant digits, else null. */
void jsonl_number(double x, int digits);
/* ,"kernel":...,"tiles":[the first tile_count tiles],"source":...,"table_entry":... of a
 * kernel choice (docs/json.md, "Kernel choices"). */
void jsonl_choice(const vkf_kernel_choice *choice, uint32_t tile_count);
/* 1 when the context's fused attention for head_dim runs in the lanes form
 * (attention_fused_lanes.comp), else 0. */
int attention_lanes(const vkf_context *ctx, uint32_t head_dim);
/* [5,6,7] */
void jsonl_ids(const int32_t *ids, uint32_t n);
/* ,"attention":..,"cross_attention":.. (the variants asked for) and
 * ,"attention_used":{..} (what the model runs at each site: vkf_model_get_attention). */
void jsonl_attention(const options *o, const vkf_model *model);
/* Checks --precision, --attention and --cross-attention (usage errors, exit 2);
 * returns -1 when they are good. */
int check_model_options(options *o);
/* Loads the model with --precision, --seed and --attention. */
vkf_status load_model(vkf_context *ctx, const char *path, const options *o, vkf_model **out_model);
/* Context and model from the options (--model required); 0 or the exit code. */
int open_model(const options *o, vkf_context **out_ctx, vkf_model **out_model);
/* Parses "5,6,7" into ids; returns the count, or -1 (message printed). flag names
 * the source in the message ("--src", "stdin line 3"). */
long parse_ids(const char *text, const char *flag, int32_t **out);
/* How messages name an input: "stdin" for "-". */
const char *input_name(const char *path);

/* ------------------------------------------------------------------ decoding options (tools/cli/decode_options.c) */

/* What generate and translate decode with: the model's defaults under the
 * command line's options, and the storage of the lists they point to. */
typedef struct decode_setup {
    vkf_generate_options g;             /* g.max_new: the tokens after the prefix */
    bool with;                          /* through vkf_model_generate_with (else plain greedy vkf_model_generate) */
    uint32_t max_new;                   /* tokens after the prefix */
    int32_t *prefix;                    /* owned: the target prefix (printed before each output), or NULL */
    uint32_t n_prefix;
    const int32_t *prefix_ptr;
    vkf_sequences prefix_seq;           /* over prefix_ptr */
    int32_t *suppress;                  /* owned: --suppress ids */
    uint32_t n_suppress;
    int32_t *seq_ids;                   /* owned: --suppress-sequence ids, one sequence after another */
    uint32_t *seq_lens;                 /* owned */
    const int32_t **seq_ptrs;           /* owned */
    vkf_sequences seqs;
    int32_t ends[VKF_MAX_END_IDS];      /* --end-token ids */
} decode_setup;
/* The options for the model (text: translate, whose --target-prefix is text);
 * -1, or the exit code after one line (unknown tokens, a prefix that does not
 * fit: usage errors). */
int decode_setup_make(const options *o, const vkf_model *model, bool text, decode_setup *out);
void decode_setup_free(decode_setup *s);
/* --max-new, else the model's default length, else max_len. */
uint32_t default_max_new(const options *o, const vkf_model *model);
/* The prefix followed by ids (n of them), malloc'd; *out_n its length. */
int32_t *with_prefix(const decode_setup *s, const int32_t *ids, uint32_t n, uint32_t *out_n);
/* generate's id convention, the same for every family (docs/json.md): the ids the
 * model chose after its decoder start, without the final eos (the library leaves
 * both out) and without a forced first token, which no step chose: BART's forced
 * bos <s>, the target language of NLLB, M2M-100 and mBART-50 (forced_bos_token_id).
 * forced_lead: that token under s's options, or -1 where they force none; lead_of:
 * how many ids (0 or 1) of a row of n ids are that token and not printed. */
int32_t forced_lead(const vkf_model *model, const decode_setup *s);
uint32_t lead_of(int32_t lead, const int32_t *row, uint32_t n);

/* ------------------------------------------------------------------ text (tools/cli/text.c) */

/* The UTF-8 character that begins the n > 0 bytes at s: its length and code point,
 * or 0 where they are ill-formed (*bad: the length of the ill-formed part, >= 1). */
size_t utf8_char(const unsigned char *s, size_t n, uint32_t *cp, size_t *bad);
/* Whether the len bytes at s are text: well-formed UTF-8 without a NUL byte. If
 * not, why (cap bytes) says where: "invalid UTF-8 at byte 12 (\xff)" or "a NUL
 * byte at byte 5" (bytes counted from 1). */
bool text_check(const char *s, size_t len, char *why, size_t cap);

/* Lines of a file or stdin, of any length, read one at a time. */
typedef struct line_reader {
    FILE *f;                            /* owned, unless stdin */
    const char *name;                   /* for messages: the path, or "stdin" */
    char *buf;                          /* owned: the current line */
    size_t cap;
    unsigned long number;               /* of the current line, from 1 */
    bool failed;                        /* a read error (printed) */
} line_reader;
/* Opens FILE, or stdin for "-"; false after printing one line. */
bool lines_open(line_reader *r, const char *path);
/* The next line without its end (\n, \r\n; a final line without one counts), NUL-
 * terminated at *out_len (the line may hold NUL bytes before that); valid until
 * the next call. false at the end of the input, or after a read error (printed,
 * r->failed set). */
bool lines_next(line_reader *r, char **out, size_t *out_len);
void lines_close(line_reader *r);

/* An id list read from a file: its text and its line number. */
typedef struct id_line {
    char *text;                         /* owned */
    unsigned long number;
} id_line;
/* Every line of FILE (or stdin for "-") but blank ones, checked with text_check;
 * the count, or -1 after printing one line naming the line. */
long read_id_lines(const char *path, id_line **out);
void free_id_lines(id_line *lines, long n);

/* A value the user (or a file) gave, for a message: vkf_quote'd, in one of four
 * rotating buffers (four in one message at most). */
const char *quoted(const char *s);
/* prefix and message as one line on f: control characters and ill-formed UTF-8
 * escaped (\n, \xNN), the way vkf_fail treats the library's messages. */
void print_line(FILE *f, const char *prefix, const char *message);
/* "vkformer: message" on stderr, one line. */
void cli_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* The len bytes at s as a JSON string: valid UTF-8 whatever s holds (docs/json.md):
 * `"` `\` \n \r \t escaped, other C0 controls, DEL, U+2028 and U+2029 as \uXXXX,
 * each ill-formed part as \ufffd (U+FFFD). */
void print_json_bytes(const char *s, size_t len);
/* print_json_bytes of a NUL-terminated string. */
void print_json_string(const char *s);

float rand_uniform(void);
float *random_floats(size_t n);
extern uint64_t rng_state;
vkf_status tensor_from(vkf_context *ctx, const float *data, uint64_t rows, uint64_t cols, vkf_tensor **out);
int compare_doubles(const void *a, const void *b);
double median_of(double *v, unsigned long n);
double now_s(void);

/* bench model and bench startup: random-weight models (tools/cli/bench_model.c). */
typedef struct preset {
    const char *name;
    unsigned d_model, heads, layers, d_ff, vocab;
} preset;
const preset *find_preset(const char *name);
bool write_random_model(const char *path, const preset *p, unsigned max_len);


/* ------------------------------------------------------------------ decoding records (tools/cli/records.c) */

/* What the one-device commands (decode.c) and the pools (pool.c) both print and
 * read, so that neither calls into the other's file. */

/* --json: what every record of one decoding call shares (docs/json.md). */
typedef struct decode_json {
    const options *o;
    vkf_context *ctx;                   /* the device of the records, unless `device` is set */
    vkf_model *model;
    const char *mode;                   /* greedy, beam, sample */
    uint32_t beams, max_new, sources;   /* sources: of the call (the batch) */
    uint32_t stride;                    /* ids per hypothesis row of the outputs printed */
    vkf_generate_stats stats;           /* of the call */
    const vkf_device_info *device;      /* the device that ran the call (a pool's); NULL: ctx's */
    int32_t lead;                       /* generate: a forced first token (forced bos, target language) that
                                           "ids" leave out and "sequence" keeps; -1: none */
} decode_json;
/* One record of generate or translate --json. */
vkf_status print_decode_record(const decode_json *d, uint32_t index, const int32_t *src, uint32_t src_len,
                               const int32_t *out, const uint32_t *lens, const float *scores, uint32_t nb,
                               const char *text, bool translate, const char *expected, char *text_buf, size_t cap);
/* --source-lang / --target-lang against the model's codes: -1, or the exit code after a usage error. */
int check_languages(const options *o, const vkf_model *model, bool require_target);

/* One line of translate --input, from reading to printing. */
typedef struct tr_line {
    char *text;                         /* owned: the text (before a TAB); the whole line where it failed */
    size_t len;                         /* of text, which may hold NUL bytes where it failed */
    char *expected;                     /* owned, or NULL: the text after the first TAB */
    char *error;                        /* owned, or NULL: why the line is not translated (printed) */
    int32_t source;                     /* its row among the batch's sources; -1: blank or failed */
} tr_line;
/* A NUL-terminated malloc'd copy of len bytes. */
char *copy_bytes(const char *s, size_t len);
/* A line that will not be translated: one line on stderr now, an empty line (or
 * an error record) in its place later. */
void line_failed(tr_line *l, const line_reader *r, const char *why);
/* A line read, checked and encoded: its source ids go to row `*ns` of ids (rows
 * of max_len + 1) and ptrs/lens where it has any; failures counted in *failed. */
void read_line(const options *o, const vkf_model *model, const vkf_model_config *cfg, const line_reader *r,
               const char *line, size_t len, tr_line *l, int32_t *ids, const int32_t **ptrs, uint32_t *lens,
               uint32_t *ns, unsigned long *failed);
/* --json: the record of a line that was not translated, on `device` (docs/json.md). */
void print_line_error(const vkf_device_info *device, uint32_t index, const tr_line *l);

/* ------------------------------------------------------------------ device pools (tools/cli/pool.c) */

/* --devices with --device, --pool-dispatch without --devices or with an unknown
 * value: a usage error (returns 2); else -1. */
int check_pool_options(const options *o);
/* The pool of --devices with the command's model options (--model, --precision,
 * --attention, --seed, --max-device-memory, --pool-dispatch); 0, or the exit code
 * after printing one line. For any command that decodes batches. */
int pool_open(const options *o, vkf_pool **out);
/* One stderr line per device that left the pool, validation messages turned into
 * exit 6 (as close_context), the pool destroyed; returns the exit code.
 * finished: the job ran to its end (the lines then say it finished without them). */
int pool_close(vkf_pool *pool, int code, bool finished);
/* Devices still in the pool (not left after a failure). */
uint32_t pool_active(vkf_pool *pool);
/* Each device of the pool as it was opened (malloc'd, vkf_pool_device_count entries). */
vkf_device_info *pool_devices(vkf_pool *pool);
/* translate --input FILE|- --devices: the lines in batches of --batch, spread over
 * the pool, printed in input order as translate_file prints them. */
int pool_translate_file(const options *o);
/* generate --devices: the n parsed sources (ids[i], lens[i]; numbers[i] names
 * each in messages) in batches of --batch over the pool, printed in order. */
int pool_generate(const options *o, int32_t **ids, uint32_t *lens, const unsigned long *numbers, uint32_t n);

#endif
