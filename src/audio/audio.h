/* The audio layer (src/audio/): sound files in, log-mel features out, for the
 * models that read speech (Whisper). Nothing here knows a model:
 *   audio_file.c  files through libsndfile (WAV, FLAC, Ogg Vorbis and Opus, MP3,
 *                 AIFF, ...: any sample format, any channel count), mixed down to
 *                 mono and resampled with libsoxr; every malformation one line
 *   mel.c         the log-mel spectrogram as transformers' WhisperFeatureExtractor
 *                 computes it (periodic Hann window, reflect-padded frames, power
 *                 spectrum, Slaney mel filters, log10, the max - 8 floor, scaling),
 *                 on the host in double precision (docs/audio.md says why not the
 *                 device)
 * Above the runtime layer only (status and messages). */
#ifndef VKF_AUDIO_H
#define VKF_AUDIO_H

#include "runtime/runtime.h"

/* ------------------------------------------------------------------ log-mel (mel.c) */

/* A feature extractor's settings (preprocessor_config.json / processor_config.json). */
typedef struct vkf_mel_spec {
    uint32_t sample_rate;               /* Hz the samples must be at (16000) */
    uint32_t n_fft;                     /* frame length and DFT size (400) */
    uint32_t hop;                       /* samples between frames (160) */
    uint32_t n_mels;                    /* mel bins (80, or 128 for large-v3) */
    uint32_t n_samples;                 /* samples of one window (chunk_length * sample_rate: 480000) */
    uint32_t frames;                    /* frames of one window: n_samples / hop (3000) */
    double f_min, f_max;                /* the mel filters' range in Hz (0, 8000) */
    float padding_value;                /* what pads a window past the audio (0) */
} vkf_mel_spec;

/* Checks the settings' sizes (INVALID_ARGUMENT naming the field). */
vkf_status vkf_mel_spec_check(const vkf_mel_spec *spec);

/* The (n_fft / 2 + 1, n_mels) filter bank, row-major, as transformers'
 * mel_filter_bank(norm="slaney", mel_scale="slaney") builds it in float64. */
vkf_status vkf_mel_filters(const vkf_mel_spec *spec, double **out_filters);

/* out (n_mels, frames), row-major: the log-mel features of the first window of
 * `count` samples (padded with padding_value or cut to n_samples). */
vkf_status vkf_mel_features(const vkf_mel_spec *spec, const float *samples, uint64_t count, float *out);

#endif /* VKF_AUDIO_H */
