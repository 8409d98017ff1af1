/* The log-mel spectrogram of transformers' WhisperFeatureExtractor, on the host
 * in double precision:
 *   window  the first n_samples samples, padded with padding_value past the audio;
 *   frames  torch.stft(center=True): the window reflect-padded by n_fft / 2 on each
 *           side, frame t = samples [t hop, t hop + n_fft) of that, times the
 *           periodic Hann window 0.5 - 0.5 cos(2 pi n / n_fft); the last of the
 *           n_samples / hop + 1 frames dropped, as the extractor drops it;
 *   power   |DFT|^2 of bins 0 .. n_fft / 2 (a mixed-radix FFT, any n_fft);
 *   mel     filters (n_fft / 2 + 1, n_mels) of mel_filter_bank(slaney, slaney)
 *           applied to the power, clamped below at 1e-10, log10;
 *   scale   floored at (the window's largest value - 8), then (x + 4) / 4.
 * The extractor computes in float32 (torch) or float64 (numpy); double here
 * is within rounding of the float64 one (docs/audio.md gives the measured gaps). */
#include "audio/audio.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>

vkf_status vkf_mel_spec_check(const vkf_mel_spec *s)
{
#define BAD(...) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, __VA_ARGS__)
    if (s->sample_rate < 1000 || s->sample_rate > 1000000)
        BAD("sampling_rate %u is outside 1000..1000000", s->sample_rate);
    if (s->n_fft < 2 || s->n_fft > 65536) BAD("n_fft %u is outside 2..65536", s->n_fft);
    if (s->hop < 1 || s->hop > s->n_fft) BAD("hop_length %u is outside 1..n_fft (%u)", s->hop, s->n_fft);
    if (s->n_mels < 1 || s->n_mels > 1024) BAD("feature_size %u is outside 1..1024", s->n_mels);
    if (s->n_samples < s->n_fft || s->n_samples > 64u * 1000000u)
        BAD("a window of %u samples is outside n_fft (%u)..64000000", s->n_samples, s->n_fft);
    if (s->frames != s->n_samples / s->hop)
        BAD("%u frames for %u samples at hop %u (%u expected)", s->frames, s->n_samples, s->hop,
            s->n_samples / s->hop);
    if (!(s->f_min >= 0 && s->f_min < s->f_max && s->f_max <= 1e6))
        BAD("the mel filters' range %g..%g Hz is empty or past 1 MHz", s->f_min, s->f_max);
    if (!isfinite(s->padding_value)) BAD("padding_value is not finite");
#undef BAD
    return VKF_OK;
}

/* transformers' hertz_to_mel / mel_to_hertz, mel_scale "slaney" */
static double hz_to_mel(double f)
{
    const double min_log_hz = 1000.0, min_log_mel = 15.0, logstep = 27.0 / log(6.4);
    return f >= min_log_hz ? min_log_mel + log(f / min_log_hz) * logstep : 3.0 * f / 200.0;
}

static double mel_to_hz(double m)
{
    const double min_log_hz = 1000.0, min_log_mel = 15.0, logstep = log(6.4) / 27.0;
    return m >= min_log_mel ? min_log_hz * exp(logstep * (m - min_log_mel)) : 200.0 * m / 3.0;
}

vkf_status vkf_mel_filters(const vkf_mel_spec *s, double **out)
{
    *out = NULL;
    uint32_t bins = s->n_fft / 2 + 1, M = s->n_mels;
    double *f = calloc((size_t)bins * M, sizeof *f), *hz = malloc((M + 2) * sizeof *hz);
    if (!f || !hz) {
        free(f), free(hz);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the mel filters");
    }
    /* filter edges: M + 2 points evenly spaced in mel (np.linspace), back in Hz */
    double lo = hz_to_mel(s->f_min), hi = hz_to_mel(s->f_max), step = (hi - lo) / (double)(M + 1);
    for (uint32_t i = 0; i < M + 2; i++) hz[i] = mel_to_hz(i == M + 1 ? hi : lo + (double)i * step);
    /* bin k at np.linspace(0, sampling_rate // 2, bins)[k]; triangles, then Slaney's area norm 2 / width */
    double nyquist = (double)(s->sample_rate / 2), bin_step = nyquist / (double)(bins - 1);
    for (uint32_t k = 0; k < bins; k++) {
        double fk = k == bins - 1 ? nyquist : (double)k * bin_step;
        for (uint32_t m = 0; m < M; m++) {
            double down = -(hz[m] - fk) / (hz[m + 1] - hz[m]), up = (hz[m + 2] - fk) / (hz[m + 2] - hz[m + 1]);
            double v = fmax(0.0, fmin(down, up));
            f[(size_t)k * M + m] = v * 2.0 / (hz[m + 2] - hz[m]);
        }
    }
    free(hz);
    *out = f;
    return VKF_OK;
}

/* ------------------------------------------------------------------ FFT */

/* out[0..n) = DFT of in[0], in[s], ... (n points), by decimation in time over
 * n's smallest prime factor; tw[j] = exp(-2 pi i j / N), N = n * tw_step. */
static void fft(double complex *out, const double complex *in, uint32_t n, uint32_t s, const double complex *tw,
                uint32_t tw_step, uint32_t N, double complex *tmp)
{
    if (n == 1) {
        out[0] = in[0];
        return;
    }
    uint32_t p = 2;
    while (n % p) p = p == 2 ? 3 : p + 2;   /* ends at n itself when n is prime */
    uint32_t m = n / p;
    for (uint32_t r = 0; r < p; r++) fft(out + r * m, in + r * s, m, s * p, tw, tw_step * p, N, tmp);
    /* butterflies: out[u m + k] = sum_q W_n^(q k) out[q m + k] W_p^(q u); q k tw_step < N, and
     * W_p^(q u) = W_N^((q u mod p) m tw_step) */
    if (p == 2) {
        for (uint32_t k = 0; k < m; k++) {
            double complex a = out[k], b = out[m + k] * tw[k * tw_step];
            out[k] = a + b, out[m + k] = a - b;
        }
        return;
    }
    (void)N;
    for (uint32_t k = 0; k < m; k++) {
        for (uint32_t q = 0; q < p; q++) tmp[q] = out[q * m + k] * tw[q * k * tw_step];
        for (uint32_t u = 0; u < p; u++) {
            double complex acc = tmp[0];
            for (uint32_t q = 1; q < p; q++) acc += tmp[q] * tw[(q * u % p) * m * tw_step];
            out[u * m + k] = acc;
        }
    }
}

vkf_status vkf_mel_features(const vkf_mel_spec *s, const float *samples, uint64_t count, float *out)
{
    VKF_TRY(vkf_mel_spec_check(s));
    uint32_t N = s->n_fft, P = N / 2, bins = N / 2 + 1, M = s->n_mels, T = s->frames, L = s->n_samples;
    double *filt = NULL;
    VKF_TRY(vkf_mel_filters(s, &filt));
    double *x = malloc(((size_t)L + 2 * P) * sizeof *x), *win = malloc(N * sizeof *win);
    double *power = malloc((size_t)bins * sizeof *power), *mel = malloc((size_t)M * T * sizeof *mel);
    double complex *tw = malloc(N * sizeof *tw), *in = malloc(N * sizeof *in), *spec = malloc(N * sizeof *spec),
                   *tmp = malloc(N * sizeof *tmp);
    uint32_t *nz = malloc(2 * (size_t)M * sizeof *nz); /* each filter's nonzero bins [nz[2m], nz[2m + 1]) */
    vkf_status st = x && win && power && mel && tw && in && spec && tmp && nz
                        ? VKF_OK
                        : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for log-mel features");
    if (st == VKF_OK) {
        /* the window, padded or cut, then reflect-padded by P on each side */
        for (uint32_t i = 0; i < L; i++) x[P + i] = i < count ? (double)samples[i] : (double)s->padding_value;
        for (uint32_t i = 1; i <= P; i++) {
            x[P - i] = x[P + i];
            x[P + L - 1 + i] = x[P + L - 1 - i];
        }
        for (uint32_t n = 0; n < N; n++) {
            win[n] = 0.5 - 0.5 * cos(2.0 * M_PI * (double)n / (double)N);
            tw[n] = cexp(-2.0 * M_PI * I * (double)n / (double)N);
        }
        for (uint32_t m = 0; m < M; m++) {
            nz[2 * m] = bins, nz[2 * m + 1] = 0;
            for (uint32_t k = 0; k < bins; k++)
                if (filt[(size_t)k * M + m] != 0.0) {
                    if (k < nz[2 * m]) nz[2 * m] = k;
                    nz[2 * m + 1] = k + 1;
                }
        }
        double top = -INFINITY;
        /* two real frames per complex DFT: z = a + i b gives A[k] = (Z[k] + conj Z[N-k]) / 2 and
         * B[k] = (Z[k] - conj Z[N-k]) / 2i */
        for (uint32_t t = 0; t < T; t += 2) {
            const double *fa = x + (size_t)t * s->hop, *fb = t + 1 < T ? fa + s->hop : NULL;
            for (uint32_t n = 0; n < N; n++) in[n] = fa[n] * win[n] + I * (fb ? fb[n] * win[n] : 0.0);
            fft(spec, in, N, 1, tw, 1, N, tmp);
            for (uint32_t half = 0; half < (fb ? 2u : 1u); half++) {
                for (uint32_t k = 0; k < bins; k++) {
                    double complex z = spec[k], zc = conj(spec[(N - k) % N]);
                    double complex X = half == 0 ? 0.5 * (z + zc) : -0.5 * I * (z - zc);
                    power[k] = creal(X) * creal(X) + cimag(X) * cimag(X);
                }
                for (uint32_t m = 0; m < M; m++) {
                    double acc = 0.0;
                    for (uint32_t k = nz[2 * m]; k < nz[2 * m + 1]; k++) acc += filt[(size_t)k * M + m] * power[k];
                    double v = log10(acc > 1e-10 ? acc : 1e-10);
                    mel[(size_t)m * T + t + half] = v;
                    if (v > top) top = v;
                }
            }
        }
        for (size_t i = 0; i < (size_t)M * T; i++) {
            double v = mel[i] > top - 8.0 ? mel[i] : top - 8.0;
            out[i] = (float)((v + 4.0) / 4.0);
        }
    }
    free(filt), free(x), free(win), free(power), free(mel), free(tw), free(in), free(spec), free(tmp), free(nz);
    return st;
}
