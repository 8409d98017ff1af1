/* Sound files in (vkf_audio_read): libsndfile decodes any format and sample type
 * it knows into float32, the channels are averaged to mono (as librosa's
 * to_mono), and libsoxr resamples to the rate asked for, chunk by chunk while the
 * file is read, so that memory holds only the mono result. Files come from
 * anywhere: a truncated file (a WAV whose chunks claim more bytes than the file
 * has, an Ogg stream without its end, a FLAC stream that loses sync), zero or too
 * many channels, an absurd rate, a declared length past VKF_AUDIO_MAX_SECONDS, a
 * codec libsndfile does not implement, or a sample that is not finite are each
 * refused with one line naming the file and the problem.
 *
 * Why libsoxr: it is the resampler librosa uses by default (soxr_hq through the
 * python-soxr binding), so PCM resampled here is what Python users feed Whisper
 * after librosa.load(sr=16000); its very-high-quality setting keeps the pass band
 * flat to 20 bits where libsamplerate's best sinc is both slower and no more exact. */
#include "audio/audio.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MIN_RATE 1000u
#define MAX_RATE 1000000u
#define CHUNK_FRAMES 8192u

void vkf_audio_free(float *samples)
{
    free(samples);
}

/* A growing mono buffer. */
typedef struct pcm_buf {
    float *data;
    uint64_t n, cap;
} pcm_buf;

static bool buf_reserve(pcm_buf *b, uint64_t more)
{
    if (b->n + more <= b->cap) return true;
    uint64_t cap = b->cap ? b->cap : 65536;
    while (cap < b->n + more) cap *= 2;
    float *grown = realloc(b->data, cap * sizeof *grown);
    if (!grown) return false;
    b->data = grown, b->cap = cap;
    return true;
}

/* Resamples `n` mono samples (NULL, 0: the end) into b through the resampler. */
static vkf_status resample_push(soxr_t rs, const float *in, size_t n, pcm_buf *b, double ratio)
{
    size_t done_in = 0;
    do {
        size_t room = (size_t)((double)(n - done_in) * ratio) + 1024;
        if (!buf_reserve(b, room)) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory resampling audio");
        size_t used = 0, made = 0;
        soxr_error_t e = soxr_process(rs, in ? in + done_in : NULL, in ? n - done_in : 0, &used, b->data + b->n, room,
                                      &made);
        if (e) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "resampling failed: %s", e);
        b->n += made, done_in += used;
        if (made == 0 && (!in || used == 0)) break; /* flushed (or, never seen, stuck) */
    } while (in ? done_in < n : true);
    return VKF_OK;
}

vkf_status vkf_audio_resample(const float *in, uint64_t count, uint32_t in_rate, uint32_t out_rate, float **out_samples,
                              uint64_t *out_count)
{
    if (out_samples) *out_samples = NULL;
    if (out_count) *out_count = 0;
    if (!out_samples || !out_count || (!in && count))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_audio_resample: %s is NULL",
                        !out_samples ? "out_samples" : !out_count ? "out_count" : "in");
    if (in_rate < MIN_RATE || in_rate > MAX_RATE || out_rate < MIN_RATE || out_rate > MAX_RATE)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_audio_resample: rates %u and %u Hz: each must be %u..%u",
                        in_rate, out_rate, MIN_RATE, MAX_RATE);
    if (count > (uint64_t)VKF_AUDIO_MAX_SECONDS * in_rate)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_audio_resample: %" PRIu64 " samples at %u Hz pass the %u s "
                        "vkformer takes", count, in_rate, (unsigned)VKF_AUDIO_MAX_SECONDS);
    for (uint64_t i = 0; i < count; i++)
        if (!isfinite(in[i]))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_audio_resample: sample %" PRIu64 " is not finite", i);
    pcm_buf b = {0};
    if (in_rate == out_rate) {
        if (!buf_reserve(&b, count ? count : 1)) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        if (count) memcpy(b.data, in, count * sizeof *in);
        *out_samples = b.data, *out_count = count;
        return VKF_OK;
    }
    soxr_error_t e = NULL;
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_VHQ, 0);
    soxr_t rs = soxr_create(in_rate, out_rate, 1, &e, &io, &q, NULL);
    if (!rs) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "cannot resample %u Hz to %u Hz: %s", in_rate, out_rate, e);
    double ratio = (double)out_rate / in_rate;
    vkf_status st = VKF_OK;
    for (uint64_t done = 0; st == VKF_OK && done < count; done += CHUNK_FRAMES) {
        size_t n = count - done < CHUNK_FRAMES ? (size_t)(count - done) : CHUNK_FRAMES;
        st = resample_push(rs, in + done, n, &b, ratio);
    }
    if (st == VKF_OK) st = resample_push(rs, NULL, 0, &b, ratio);
    soxr_delete(rs);
    if (st != VKF_OK) {
        free(b.data);
        return st;
    }
    if (!b.data && !buf_reserve(&b, 1)) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    *out_samples = b.data, *out_count = b.n;
    return VKF_OK;
}

/* Whether the file starts as a format libsndfile reads. libsndfile hands bytes
 * it recognises as nothing else to its MP3 decoder, libmpg123, which prints its
 * own notes on stderr while it hunts for frames; a file that matches no format's
 * signature is refused before that (so are the formats without one: headerless
 * RAW, HTK, MATLAB 4 and Sound Designer II, whose data lives in a resource fork). */
static bool known_signature(const char *path)
{
    unsigned char b[32] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return true; /* let libsndfile report why it cannot be read */
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    static const char *const magic[] = {
        "RIFF", "RIFX", "RF64", "BW64",   /* WAV */
        "riff",                           /* Sony Wave64 (its GUID) */
        "FORM",                           /* AIFF, AIFC, 8SVX */
        "fLaC", "OggS", "ID3",            /* FLAC, Ogg (Vorbis, Opus, FLAC), MP3 with a tag */
        ".snd", "dns.", "caff", "NIST_1A", "Creative Voice File", "2BIT", " paf", "fap ", "PVF1",
        "Extended Instrument:", "MATLAB 5.0 MAT-file", "ALaw",
    };
    for (size_t i = 0; i < sizeof magic / sizeof *magic; i++) {
        size_t len = strlen(magic[i]);
        if (n >= len && memcmp(b, magic[i], len) == 0) return true;
    }
    if (n >= 2 && b[0] == 0xff && (b[1] & 0xe0) == 0xe0) return true;            /* an MPEG audio frame */
    if (n >= 4 && ((b[0] == 0x64 && b[1] == 0xa3) || (b[2] == 0xa3 && b[3] == 0x64))) return true; /* IRCAM */
    if (n >= 2 && b[0] == 0xf0 && b[1] == 0x7e) return true;                     /* MIDI sample dump (SDS) */
    if (n >= 2 && b[0] == 0x01 && b[1] == 0x04) return true;                     /* Akai MPC 2000 */
    return false;
}

/* A WAV-style header that claims more bytes than the file holds: libsndfile
 * logs "data : 96000 (should be 47978)" and reads what is there. Such a line
 * (past the streaming markers 0 and 0xFFFFFFFF) means the file was cut. */
static bool log_says_truncated(SNDFILE *f, char *what, size_t cap)
{
    char log[8192];
    log[0] = '\0';
    sf_command(f, SFC_GET_LOG_INFO, log, sizeof log);
    if (strstr(log, "File ended unexpectedly")) {
        snprintf(what, cap, "the stream ends without its end-of-stream mark");
        return true;
    }
    for (char *line = log; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        const char *should = strstr(line, "(should be ");
        const char *colon = strchr(line, ':');
        if (should && colon && colon < should) {
            unsigned long long claimed = strtoull(colon + 1, NULL, 0), real = strtoull(should + 11, NULL, 0);
            if (claimed > real && claimed != 0xffffffffull) {
                char name[32];
                size_t len = (size_t)(colon - line);
                while (len && (line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
                size_t skip = 0;
                while (skip < len && (line[skip] == ' ' || line[skip] == '\t')) skip++;
                snprintf(name, sizeof name, "%.*s", (int)(len - skip < 24 ? len - skip : 24), line + skip);
                for (char *c = name; *c; c++) if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
                snprintf(what, cap, "its %s chunk claims %llu bytes, the file holds %llu", name, claimed, real);
                return true;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return false;
}

vkf_status vkf_audio_read(const char *path, uint32_t rate, float **out_samples, uint64_t *out_count,
                          uint32_t *out_file_rate)
{
    if (out_samples) *out_samples = NULL;
    if (out_count) *out_count = 0;
    if (out_file_rate) *out_file_rate = 0;
    if (!path || !out_samples || !out_count)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_audio_read: %s is NULL",
                        !path ? "path" : !out_samples ? "out_samples" : "out_count");
    if (rate && (rate < MIN_RATE || rate > MAX_RATE))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_audio_read: rate %u Hz is outside %u..%u", rate, MIN_RATE,
                        MAX_RATE);
    char q[VKF_QUOTE_SIZE];
    vkf_quote(q, sizeof q, path, (size_t)-1);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return vkf_fail(VKF_ERROR_IO, "%s: %s", q, errno == ENOENT ? "no such file" : strerror(errno));
    if (!S_ISREG(sb.st_mode)) return vkf_fail(VKF_ERROR_IO, "%s is not a regular file", q);
    if (sb.st_size == 0) return vkf_fail(VKF_ERROR_IO, "%s is empty", q);
    if (!known_signature(path))
        return vkf_fail(VKF_ERROR_IO, "%s is not a sound file vkformer reads: its first bytes match no format "
                        "libsndfile reads here (WAV, FLAC, Ogg Vorbis/Opus, MP3, AIFF, AU, CAF, W64, ...)", q);
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *f = sf_open(path, SFM_READ, &info);
    if (!f) {
        char why[256], log[4096] = "";
        snprintf(why, sizeof why, "%s", sf_strerror(NULL));
        sf_command(NULL, SFC_GET_LOG_INFO, log, sizeof log);
        /* a container it reads holding a codec it does not: "Format : 0x161 => Unknown format" */
        const char *unknown = strstr(log, "=> Unknown format");
        if (unknown || strstr(why, "unimplemented")) {
            const char *line = unknown;
            while (line && line > log && line[-1] != '\n') line--;
            const char *colon = line ? strchr(line, ':') : NULL;
            unsigned long tag = colon && colon < unknown ? strtoul(colon + 1, NULL, 0) : 0;
            if (tag) return vkf_fail(VKF_ERROR_IO, "%s uses a codec libsndfile does not implement (format tag 0x%lx)", q, tag);
            return vkf_fail(VKF_ERROR_IO, "%s uses a codec libsndfile does not implement", q);
        }
        /* libsndfile's messages are its own one-line strings; quote them anyway */
        char qw[VKF_QUOTE_SIZE * 3];
        vkf_quote(qw, sizeof qw, why, (size_t)-1);
        return vkf_fail(VKF_ERROR_IO, "%s cannot be read as audio: libsndfile says %s", q, qw);
    }
    vkf_status st = VKF_OK;
    char what[160];
    if (info.channels < 1 || info.channels > 1024)
        st = vkf_fail(VKF_ERROR_IO, "%s: %d channels (1..1024 are read)", q, info.channels);
    else if (info.samplerate < (int)MIN_RATE || info.samplerate > (int)MAX_RATE)
        st = vkf_fail(VKF_ERROR_IO, "%s: sample rate %d Hz is outside %u..%u", q, info.samplerate, MIN_RATE, MAX_RATE);
    else if (info.frames == SF_COUNT_MAX || info.frames < 0)
        st = vkf_fail(VKF_ERROR_IO, "%s is truncated or malformed: its length cannot be found%s", q,
                      log_says_truncated(f, what, sizeof what) ? " (the stream ends without its end-of-stream mark)"
                                                                : "");
    else if ((uint64_t)info.frames > (uint64_t)VKF_AUDIO_MAX_SECONDS * (uint64_t)info.samplerate)
        st = vkf_fail(VKF_ERROR_IO, "%s declares %" PRId64 " frames at %d Hz (%.1f hours), more than the %u hours "
                      "vkformer reads", q, (int64_t)info.frames, info.samplerate,
                      (double)info.frames / info.samplerate / 3600.0, (unsigned)(VKF_AUDIO_MAX_SECONDS / 3600));
    else if (log_says_truncated(f, what, sizeof what))
        st = vkf_fail(VKF_ERROR_IO, "%s is truncated: %s", q, what);
    if (st != VKF_OK) {
        sf_close(f);
        return st;
    }
    uint32_t file_rate = (uint32_t)info.samplerate, channels = (uint32_t)info.channels;
    uint32_t target = rate ? rate : file_rate;
    soxr_t rs = NULL;
    double ratio = (double)target / file_rate;
    if (target != file_rate) {
        soxr_error_t e = NULL;
        soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
        soxr_quality_spec_t qs = soxr_quality_spec(SOXR_VHQ, 0);
        rs = soxr_create(file_rate, target, 1, &e, &io, &qs, NULL);
        if (!rs) {
            sf_close(f);
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: cannot resample %u Hz to %u Hz: %s", q, file_rate,
                            target, e);
        }
    }
    float *chunk = malloc((size_t)CHUNK_FRAMES * channels * sizeof *chunk);
    float *mono = malloc((size_t)CHUNK_FRAMES * sizeof *mono);
    pcm_buf b = {0};
    if (!chunk || !mono) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading %s", q);
    uint64_t frames = 0;
    while (st == VKF_OK) {
        sf_count_t got = sf_readf_float(f, chunk, CHUNK_FRAMES);
        if (got <= 0) break;
        for (sf_count_t i = 0; i < got && st == VKF_OK; i++) {
            const float *fr = chunk + (size_t)i * channels;
            float sum = 0.0f;
            for (uint32_t c = 0; c < channels; c++) {
                if (!isfinite(fr[c])) {
                    st = vkf_fail(VKF_ERROR_IO, "%s: the sample of channel %u at frame %" PRIu64 " is not finite", q,
                                  c, frames + (uint64_t)i);
                    break;
                }
                sum += fr[c];
            }
            mono[i] = channels == 1 ? sum : sum / (float)channels;
        }
        frames += (uint64_t)got;
        if (st != VKF_OK) break;
        if (frames > (uint64_t)VKF_AUDIO_MAX_SECONDS * file_rate)
            st = vkf_fail(VKF_ERROR_IO, "%s holds more than the %u hours vkformer reads", q,
                          (unsigned)(VKF_AUDIO_MAX_SECONDS / 3600));
        else if (rs)
            st = resample_push(rs, mono, (size_t)got, &b, ratio);
        else if (!buf_reserve(&b, (uint64_t)got))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading %s", q);
        else
            memcpy(b.data + b.n, mono, (size_t)got * sizeof *mono), b.n += (uint64_t)got;
    }
    if (st == VKF_OK && sf_error(f) != SF_ERR_NO_ERROR) {
        char qw[VKF_QUOTE_SIZE * 3];
        vkf_quote(qw, sizeof qw, sf_strerror(f), (size_t)-1);
        st = vkf_fail(VKF_ERROR_IO, "%s is truncated or malformed after frame %" PRIu64 ": libsndfile says %s", q,
                      frames, qw);
    }
    if (st == VKF_OK && frames < (uint64_t)info.frames)
        st = vkf_fail(VKF_ERROR_IO, "%s is truncated: it declares %" PRId64 " frames and holds %" PRIu64, q,
                      (int64_t)info.frames, frames);
    if (st == VKF_OK && frames == 0) st = vkf_fail(VKF_ERROR_IO, "%s holds no audio (0 frames)", q);
    if (st == VKF_OK && rs) st = resample_push(rs, NULL, 0, &b, ratio);
    soxr_delete(rs);
    sf_close(f);
    free(chunk), free(mono);
    if (st != VKF_OK) {
        free(b.data);
        return st;
    }
    *out_samples = b.data, *out_count = b.n;
    if (out_file_rate) *out_file_rate = file_rate;
    return VKF_OK;
}
