/* The vkformer command-line tool: the global usage text and the dispatch to the
 * commands, one file each under tools/cli/ (bench attention: tools/bench_attention.c).
 *
 *   vkformer info | check | forward | generate | translate | score | tokenize | tune
 *   vkformer bench matmul | model | attention | startup | translate
 *   vkformer COMMAND --help                        the command's own options
 *
 * Every command takes --device INDEX|NAME-SUBSTRING (else VKFORMER_DEVICE, else the
 * first discrete GPU, integrated, virtual, CPU), --max-device-memory BYTES,
 * --no-coopmat and --verbose, and rejects options it does not take.
 * VKFORMER_VALIDATE=1 turns the validation layer on; any validation message then
 * fails the command.
 *
 * Exit codes: 0 success, 1 error, 2 usage, 3 no Vulkan loader, 4 no Vulkan device,
 * 5 a check found wrong results, 6 validation messages were reported.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: vkformer COMMAND [options]        (vkformer COMMAND --help: the command's own options)\n"
    "  info [--json]                         list Vulkan devices and their limits\n"
    "  check                                 run every GPU op against the C reference\n"
    "  bench matmul [--m M --n N --k K | --size S[,S...]] [--repeat R] [--json]\n"
    "               [--dtype f32|f16|i8w|i8w-f16] [--kernel auto|coopmat|coopmat2|coopmat2wg|tiled|direct|subgroup]\n"
    "                                        f16: A, B and C stored as F16; i8w: B int8 with per-row\n"
    "                                        scales, A and C F32 (i8w-f16: F16); --kernel forces one\n"
    "                                        kernel family (default auto: the library's choice)\n"
    "  forward --model FILE --src IDS --tgt IDS --out FILE.npy|-   (- : stdout)\n"
    "                                        logits (len(tgt), tgt_vocab) as float32 .npy\n"
    "  forward --model DIR --audio FILE --tgt IDS --out FILE.npy   a Whisper folder: logits of a sound file\n"
    "  generate --model FILE --src IDS [--max-new N]\n"
    "                                        greedy ids, comma-separated, without bos/eos\n"
    "  generate --src IDS [--src IDS ...] | --input FILE | -   several sources, one batch, one line\n"
    "                                        each; eos_id is appended unless the ids end with it\n"
    "                                        (as translate does; --raw-ids: as given)\n"
    "  generate|translate ... --timing       tokens/s and time to first token on stderr\n"
    "  generate|translate --input ... --devices all|I,J,... [--batch B]   a device pool: a model replica\n"
    "                                        per device, batches to the free ones (docs/scaling.md)\n"
    "  transcribe ... --devices all|I,J,...  the files spread over a pool, one file per device at a time\n"
    "  generate|translate|forward ... --json  one JSON line per source: ids, text, timings, attention\n"
    "                                        (every --json: JSON Lines, docs/json.md)\n"
    "  generate|translate ... --temperature T --top-k K --top-p P [--seed N]\n"
    "                                        sampling on the GPU (any of the three turns it on)\n"
    "  generate|translate ... --beam K [--length-penalty A] [--early-stopping] [--n-best N] [--min-new N]\n"
    "                                        beam search (Hugging Face semantics); --n-best N > 1 prints\n"
    "                                        N lines \"ids<TAB>score\" per source, best first\n"
    "  translate --model FILE TEXT [--max-new N]   (TEXT quoted: one argument)\n"
    "                                        greedy decoding of text (models with vocabularies)\n"
    "  translate --model FILE --input FILE|- [--batch B]   (or translate --model FILE -: stdin)\n"
    "                                        one text per line, decoded B at a time; lines\n"
    "                                        \"text<TAB>expected\" are scored: accuracy at the end\n"
    "  translate --model MODEL --input FILE --max-batch-tokens N [--progress]   sorted by length, batches\n"
    "                                        of N source tokens, output in input order\n"
    "  generate|translate ... --repetition-penalty P --no-repeat-ngram N --suppress IDS|TOKENS\n"
    "                --suppress-sequence IDS|TOKENS --end-token ID|TOKEN --max-new-factor F\n"
    "                                        logits processors as Hugging Face generate() applies them\n"
    "  translate ... --target-prefix TEXT | generate ... --target-prefix-ids IDS   continue a given start\n"
    "  generate|translate ... --stream       print the output as it grows\n"
    "  score --model MODEL --src TEXT --tgt TEXT | --input FILE   log-probability of each target token\n"
    "                                        and eos: sum, sum / tokens, per token\n"
    "  tokenize --model MODEL TEXT | --input FILE|- | -   source ids (eos appended), one line per text\n"
    "  tokenize --model MODEL --decode IDS | --decode --input FILE|- | -   target ids to text\n"
    "MODEL (--model): a vkformer .safetensors file, or a Hugging Face Marian folder (opus-mt:\n"
    "config.json, model.safetensors, source.spm, target.spm, vocab.json, generation_config.json);\n"
    "a folder's generate/translate default to its generation_config (e.g. 4 beams, forced eos,\n"
    "pad banned, renormalised log-probs); --beam, --max-new, --min-new ... override it\n"
    "  bench model --preset small|base [--batch B --src-len S --tgt-len T] [--repeat R] [--json]\n"
    "                                        forward pass and decode step of a random-weight model\n"
    "  bench translate --model MODEL [--batch 32] [--beam K] [--src-len 32] [--max-new 64] [--repeat 3] [--json]\n"
    "  bench translate --model MODEL --input FILE|- [...]   the sources as id lists, one per line\n"
    "                                        target tokens/s of beam search (min-new = max-new;\n"
    "                                        tools/bench_translate.py: OPUS-MT shapes beside Transformers)\n"
    "  bench startup --model FILE | --preset small|base [--repeat R] [--json]\n"
    "                                        context creation + model load + first forward, each run\n"
    "                                        in a fresh process, with an empty (cold) and a filled\n"
    "                                        (warm) pipeline cache\n"
    "  bench shaders [--preset base|nllb|flan-t5-base|whisper-small] [--json] [--check]\n"
    "                                        compiler statistics of every pipeline a model's shapes build\n"
    "                                        (registers, spills, occupancy, matrix instructions; tools/vgpu.sh)\n"
    "  tune [--quick] [--out FILE|-] [--json]   time candidate kernel tiles on the device, check each\n"
    "                                        against a host reference, store the fastest in the\n"
    "                                        device's tune file (read by later runs; VKFORMER_TUNE=0: off)\n"
    "  transcribe --model DIR [--language en|auto] [--task transcribe|translate] [--timestamps] [--json] FILE...\n"
    "                                        Whisper: text of sound files (--timestamps: segments\n"
    "                                        [00:00:00.000 --> 00:00:02.500]  text)\n"
    "  serve --model DIR [--model DIR ...] [--host 127.0.0.1] [--port 8080] [--devices all|I,J]\n"
    "        [--max-batch N] [--max-queue N] [--max-body BYTES] [--timeout S] [--api-key-file FILE]\n"
    "                                        an HTTP server (OpenAI audio, LibreTranslate, DeepL routes)\n"
    "                                        batching requests across clients (docs/serving.md)\n"
    "IDS: comma-separated token ids, e.g. 5,6,7\n"
    "  bench attention [--n N,...] [--variants V,...] [--heads H --head-dim D --batch B]\n"
    "                [--repeat R] [--model FILE] [--json] [--plot FILE.png]\n"
    "                                        (--plot: its folder and gnuplot are checked before the run)\n"
    "                                        dense vs sparse attention: GPU time, memory, error\n"
    "model commands also take --attention VARIANT (encoder and decoder self-attention; default: the\n"
    "model's own, dense but for LongT5):\n"
    "  dense | dense-naive | local:W | strided:W:S | bigbird:B:G:R | tglobal:W:G | lsh:H:C | lowrank:K\n"
    "--cross-attention dense|dense-naive|lowrank:K, --seed N (bigbird, lsh, lowrank), and\n"
    "--verbose (say where a variant does not apply and what runs instead), and\n"
    "--precision auto|f32|f16|int8 (storage: f16 stores weights and activations as F16 and needs\n"
    "16-bit storage; int8 quantizes weight matrices at load, one scale per output channel, and\n"
    "embeddings, one scale per row, f32 activations; auto is f16 on GPUs that have it, else the\n"
    "file's weights with f32 activations)\n"
    "common options: --device INDEX|NAME-SUBSTRING, --max-device-memory BYTES (cap on tensors),\n"
    "--no-coopmat (no cooperative-matrix kernels; the same as VKFORMER_COOPMAT=0), --verbose\n"
    "A command refuses options it does not take, repeated options and extra words (exit 2); numbers\n"
    "are decimal integers without sign, and 0 is refused where it makes no sense. - is stdin or\n"
    "stdout wherever a file is named.\n"
    "exit codes: 0 success, 1 error, 2 usage, 3 no Vulkan loader, 4 no Vulkan device, 5 wrong results,\n"
    "6 validation messages (VKFORMER_VALIDATE=1)\n";

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"info", cmd_info}, {"check", cmd_check}, {"bench", cmd_bench}, {"forward", cmd_forward},
    {"generate", cmd_generate}, {"translate", cmd_translate}, {"tokenize", cmd_tokenize}, {"tune", cmd_tune},
    {"score", cmd_score},
    {"transcribe", cmd_transcribe},
    {"serve", cmd_serve},
};

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} benchmarks[] = {
    {"matmul", cmd_bench_matmul}, {"model", cmd_bench_model}, {"attention", cmd_bench_attention},
    {"startup", cmd_bench_startup}, {"translate", cmd_bench_translate}, {"shaders", cmd_bench_shaders},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void list_benchmarks(FILE *f)
{
    for (size_t i = 0; i < COUNT(benchmarks); i++) fprintf(f, "%s%s", i ? ", " : "", benchmarks[i].name);
}

int cmd_bench(int argc, char **argv)
{
    const char *what = argc > 0 ? argv[0] : NULL;
    if (what && (strcmp(what, "--help") == 0 || strcmp(what, "-h") == 0)) {
        printf("usage: vkformer bench BENCHMARK [options]   (vkformer bench BENCHMARK --help: its options)\nbenchmarks: ");
        list_benchmarks(stdout);
        printf("\n");
        return EXIT_OK;
    }
    for (size_t i = 0; what && i < COUNT(benchmarks); i++)
        if (strcmp(what, benchmarks[i].name) == 0) return benchmarks[i].run(argc - 1, argv + 1);
    if (what) fprintf(stderr, "vkformer: bench: unknown benchmark %s (known: ", quoted(what));
    else fprintf(stderr, "vkformer: bench needs a benchmark (known: ");
    list_benchmarks(stderr);
    fprintf(stderr, ")\n");
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* --no-coopmat, for every command (bench attention and bench startup's child
     * processes included): the same as VKFORMER_COOPMAT=0. */
    int kept = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-coopmat") == 0) setenv("VKFORMER_COOPMAT", "0", 1);
        else argv[kept++] = argv[i];
    }
    argc = kept;
    argv[argc] = NULL;
    const char *name = argc > 1 ? argv[1] : NULL;
    if (!name) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (argc > 2 && strcmp(name, "help") == 0) { /* vkformer help COMMAND [BENCHMARK] */
            char *help[3] = {argv[3] ? argv[3] : "--help", "--help", NULL};
            for (size_t i = 0; i < COUNT(commands); i++)
                if (strcmp(argv[2], commands[i].name) == 0) return commands[i].run(argv[3] ? 2 : 1, help);
        }
        fputs(usage_text, stdout);
        return EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        if (argc > 2) {
            fprintf(stderr, "vkformer: --version takes no arguments (%s is extra)\n", quoted(argv[2]));
            return EXIT_USAGE;
        }
        printf("vkformer %s\n", vkf_version_string());
        return EXIT_OK;
    }
    for (size_t i = 0; i < COUNT(commands); i++)
        if (strcmp(name, commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
    if (name[0] == '-')
        fprintf(stderr, "vkformer: unknown option %s: options follow the command (vkformer --help lists the commands)\n",
                quoted(name));
    else
        fprintf(stderr, "vkformer: unknown command %s (vkformer --help lists the commands)\n", quoted(name));
    return EXIT_USAGE;
}
