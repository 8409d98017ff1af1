#version 450
// The logits processors of a decode step, as transformers' generate() applies
// them before each choice, one workgroup per row. Writes the row's processed
// scores (F32) for the choice that follows (argmax, sampling, beam search's
// top-k), in generate()'s order:
//   scores = logits, or log_softmax(logits) for beam search (LOG_PROBS);
//   repetition penalty: each id of the row's sequence so far (decoder start and
//     target prefix included) scores s * penalty where s < 0, s / penalty else;
//   no-repeat n-gram: the ids that would repeat an n-gram of the sequence: -inf;
//   bad sequences: a sequence's last id where the ids before it were just
//     generated (a one-id sequence: always): -inf;
//   min_new: every end id while fewer than min_new new tokens: -inf;
//   forced bos (right after the start alone) and forced eos (at the row's last
//     step): every id -inf but that one, which scores 0;
//   suppressed ids: -inf;
//   Whisper: begin-suppressed ids at the row's first new token (SuppressTokens-
//     AtBeginLogitsProcessor), then WhisperTimeStampLogitsProcessor's rules over
//     the row's new tokens: <|notimestamps|> never; after a lone timestamp no
//     text, after a pair no timestamp; timestamps never go back; the first new
//     token a timestamp of at most max_initial; then, on the log_softmax of
//     those scores, text banned where the timestamps' logsumexp beats the best
//     text id.
// A row still inside its target prefix gets -inf everywhere but the prefix's
// next id (0): teacher forcing through the same choice kernels.
// The row's sequence: position j < t (t = state[0], the step's input position, or
// state[row] with flag 4: per-row positions, rows of one step at different ones)
// holds inputs[row_index[row][j]][j] (beam search: the row that held the row's
// ancestor at step j; greedy: the row itself), position t the step's input id,
// which the kernel records as inputs[row][t] for later steps.
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

// Mirrored by vkf_push_logits_process in push.h.
layout(push_constant) uniform Push {
    uint rows, vocab;
    uint steps;             // columns of inputs and row_index
    uint row_stride;        // ints per row of row_data: prefix length, limit, prefix ids
    uint flags;             // 1: LOG_PROBS (beam search), 2: row_index is bound, 4: state per row,
                            // 8: settings per row (row_data: prefix length, limit, forced bos,
                            // repetition penalty's float bits, n-gram size, then the prefix ids)
    float penalty;          // 1: off
    uint ngram;             // 0: off
    uint n_suppress, n_end, n_bad;
    uint min_new;
    int forced_bos;         // -1: none
    uint forced_eos;        // 1: eos at each row's last step
    int eos;
    uint n_begin;           // begin-suppressed ids, after the bad sequences in lists
    int ts_begin;           // Whisper's timestamp rules: the first timestamp id; 0: off
    int no_timestamps;      // <|notimestamps|>
    int ts_max_initial;     // max_initial_timestamp_index; -1: none
    int ts_eos;             // ids below it are text
} pc;

layout(set = 0, binding = 0) readonly buffer BufLogits { ACT_T logits[]; };    // (rows, vocab)
layout(set = 0, binding = 1) readonly buffer BufState { int state[]; };         // (1) or (rows): position t
layout(set = 0, binding = 2) readonly buffer BufStepIds { int step_ids[]; };    // (rows): the step's input ids
layout(set = 0, binding = 3) readonly buffer BufRowIndex { int row_index[]; };  // (rows, steps), flag 2
layout(set = 0, binding = 4) buffer BufInputs { int inputs[]; };                // (rows, steps)
layout(set = 0, binding = 5) readonly buffer BufRowData { int row_data[]; };    // (rows, row_stride)
layout(set = 0, binding = 6) readonly buffer BufLists { int lists[]; };         // suppress | end | bad sequences
layout(set = 0, binding = 7) buffer BufScores { float scores[]; };    // (rows, vocab)

shared float red[WG];

float reduce_max(float v)
{
    const uint tid = gl_LocalInvocationID.x;
    red[tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] = max(red[tid], red[tid + s]);
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

float reduce_sum(float v)
{
    const uint tid = gl_LocalInvocationID.x;
    red[tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

// The id at position j <= t of the row's sequence.
int history(uint row, uint j, uint t)
{
    if (j == t) return step_ids[row];
    uint r = row;
    if ((pc.flags & 2u) != 0u) r = uint(clamp(row_index[row * pc.steps + j], 0, int(pc.rows) - 1));
    return inputs[r * pc.steps + j];
}

// Storage writes of the workgroup so far are done before the next ones (a later
// -inf must win over an earlier penalty of the same id).
void sync_writes()
{
    memoryBarrierBuffer();
    barrier();
}

void main()
{
    const uint row = linear_workgroup();
    if (row >= pc.rows) return;
    const uint tid = gl_LocalInvocationID.x, V = pc.vocab, base = row * V;
    const uint t = uint(max(state[(pc.flags & 4u) != 0u ? row : 0u], 0));
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    if (tid == 0u && t < pc.steps) inputs[row * pc.steps + t] = step_ids[row];
    const uint P = uint(row_data[row * pc.row_stride]);            // prefix length
    const uint limit = uint(row_data[row * pc.row_stride + 1u]);   // new tokens at most
    const bool per_row = (pc.flags & 8u) != 0u;                    // a slot plan's rows: requests of their own
    const int forced_bos = per_row ? row_data[row * pc.row_stride + 2u] : pc.forced_bos;
    const float penalty = per_row ? intBitsToFloat(row_data[row * pc.row_stride + 3u]) : pc.penalty;
    const uint ngram = per_row ? uint(row_data[row * pc.row_stride + 4u]) : pc.ngram;
    // inside the prefix: its next id is the only choice
    if (t < P) {
        const int id = row_data[row * pc.row_stride + (per_row ? 5u : 2u) + t];
        for (uint v = tid; v < V; v += WG) scores[base + v] = int(v) == id ? 0.0 : NEG_INF;
        return;
    }
    const uint produced = t - P;                                   // new tokens before this step's
    // forced tokens override everything but the suppressed ids
    int forced = -1;
    if (forced_bos >= 0 && t == 0u) forced = forced_bos;
    if (pc.forced_eos != 0u && produced + 1u == limit) forced = pc.eos;
    // LOG_PROBS: log_softmax(x) = (x - m) - log(sum(exp(x - m))), as beam_topk.comp forms it
    float m = 0.0, log_sum = 0.0;
    if (forced < 0 && (pc.flags & 1u) != 0u) {
        m = NEG_INF;
        for (uint v = tid; v < V; v += WG) m = max(m, float(logits[base + v]));
        m = reduce_max(m);
        float sum = 0.0;
        if (m != NEG_INF)
            for (uint v = tid; v < V; v += WG) sum += exp(float(logits[base + v]) - m);
        log_sum = log(reduce_sum(sum));
    }
    if (forced >= 0) {
        for (uint v = tid; v < V; v += WG) scores[base + v] = int(v) == forced ? 0.0 : NEG_INF;
    } else {
        for (uint v = tid; v < V; v += WG) scores[base + v] = (float(logits[base + v]) - m) - log_sum;
        sync_writes();
        // repetition penalty on each id of the sequence (an id twice writes the same value)
        if (penalty != 1.0) {
            for (uint j = tid; j <= t; j += WG) {
                const int id = history(row, j, t);
                if (id < 0 || uint(id) >= V) continue;
                const float s = (float(logits[base + uint(id)]) - m) - log_sum;
                scores[base + uint(id)] = s < 0.0 ? s * penalty : s / penalty;
            }
            sync_writes();
        }
        // no-repeat n-gram: n-gram i (i + n <= t + 1) whose first n - 1 ids are the
        // sequence's last n - 1 bans its last id
        const uint n = ngram, len = t + 1u;
        if (n > 0u && len + 1u >= n && len >= n) {
            for (uint i = tid; i + n <= len; i += WG) {
                bool same = true;
                for (uint k = 0u; k + 1u < n && same; k++) same = history(row, i + k, t) == history(row, len - n + 1u + k, t);
                if (!same) continue;
                const int id = history(row, i + n - 1u, t);
                if (id >= 0 && uint(id) < V) scores[base + uint(id)] = NEG_INF;
            }
        }
        // bad sequences: [length, ids...] one after another
        if (pc.n_bad > 0u && tid == 0u) {
            uint at = pc.n_suppress + pc.n_end, end = at + pc.n_bad;
            while (at < end) {
                const uint L = uint(lists[at]);
                bool match = L <= len;
                for (uint k = 0u; k + 1u < L && match; k++) match = history(row, len - (L - 1u) + k, t) == lists[at + 1u + k];
                const int id = lists[at + L];
                if (match && id >= 0 && uint(id) < V) scores[base + uint(id)] = NEG_INF;
                at += 1u + L;
            }
        }
        // min_new: no end id yet
        if (produced < pc.min_new)
            for (uint e = tid; e < pc.n_end; e += WG) {
                const int id = lists[pc.n_suppress + e];
                if (id >= 0 && uint(id) < V) scores[base + uint(id)] = NEG_INF;
            }
    }
    sync_writes();
    for (uint e = tid; e < pc.n_suppress; e += WG) {
        const int id = lists[e];
        if (id >= 0 && uint(id) < V) scores[base + uint(id)] = NEG_INF;
    }
    if (produced == 0u)
        for (uint e = tid; e < pc.n_begin; e += WG) {
            const int id = lists[pc.n_suppress + pc.n_end + pc.n_bad + e];
            if (id >= 0 && uint(id) < V) scores[base + uint(id)] = NEG_INF;
        }
    if (pc.ts_begin <= 0) return;
    sync_writes();
    // the row's new tokens are positions P + 1 .. t (every thread reads them)
    const int TB = pc.ts_begin;
    const uint n_new = t - P;
    const bool last_ts = n_new >= 1u && history(row, t, t) >= TB;
    const bool pen_ts = n_new < 2u || history(row, t - 1u, t) >= TB;
    int last_stamp = -1;
    for (uint j = P + 1u; j <= t; j++) {
        const int id = history(row, j, t);
        if (id >= TB) last_stamp = id;
    }
    // banned ranges [lo, hi) of ids
    uint lo0 = 0u, hi0 = 0u, lo1 = 0u, hi1 = 0u, lo2 = 0u, hi2 = 0u;
    if (last_ts) {
        if (pen_ts) lo0 = uint(TB), hi0 = V;
        else lo0 = 0u, hi0 = uint(max(pc.ts_eos, 0));
    }
    if (last_stamp >= 0) lo1 = uint(TB), hi1 = uint(last_ts && !pen_ts ? last_stamp : last_stamp + 1);
    if (n_new == 0u) lo2 = 0u, hi2 = uint(TB);
    const uint cap = n_new == 0u && pc.ts_max_initial >= 0 ? uint(TB + pc.ts_max_initial + 1) : V;
    for (uint v = tid; v < V; v += WG) {
        if (int(v) == pc.no_timestamps || (v >= lo0 && v < hi0) || (v >= lo1 && v < hi1) || (v >= lo2 && v < hi2) ||
            v >= cap)
            scores[base + v] = NEG_INF;
    }
    sync_writes();
    // log_softmax of the scores; logsumexp of the timestamps' against the best text id's
    float mx = NEG_INF, mt = NEG_INF, mtext = NEG_INF;
    for (uint v = tid; v < V; v += WG) {
        const float s = scores[base + v];
        mx = max(mx, s);
        if (int(v) >= TB) mt = max(mt, s);
        else mtext = max(mtext, s);
    }
    mx = reduce_max(mx);
    mt = reduce_max(mt);
    mtext = reduce_max(mtext);
    if (mx == NEG_INF || mt == NEG_INF) return;
    float sum = 0.0;
    for (uint v = tid; v < V; v += WG) sum += exp(scores[base + v] - mx);
    const float lse = mx + log(reduce_sum(sum));
    float st = 0.0;
    for (uint v = uint(TB) + tid; v < V; v += WG) st += exp((scores[base + v] - lse) - (mt - lse));
    const float ts_logprob = (mt - lse) + log(reduce_sum(st));
    const float text_logprob = mtext - lse;
    if (ts_logprob > text_logprob)
        for (uint v = tid; v < uint(TB); v += WG) scores[base + v] = NEG_INF;
}
