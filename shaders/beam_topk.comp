#version 450
// Beam search, stage 2 of 2: one workgroup per source b of K beams merges what
// beam_partial.comp (stage 1) wrote for each (row, chunk):
//   score(k, v) = beam_scores[b*K + k] + log_softmax(logits[b*K + k])[v]
// over the K*V (beam, token) pairs, as Hugging Face's beam search scores them, the
// log_softmax of each row assembled from its chunks' (max, sum) and the pairs
// taken from the chunks' best tokens. eos is left out while the step (state[0]) is
// below min_new (stage 1 already left it out, and with renormalize out of the
// sums); at step force_step eos is the only candidate and scores the beam's own
// score. Writes the n_cand best in descending order (equal scores: the lower
// k*V + v first) to cand_scores[b, :] and cand_ids[b, :] = k*V + v (-1 and -inf
// where fewer candidates exist).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#define MAX_BEAMS 16

// Mirrored by vkf_push_beam_topk in push.h.
layout(push_constant) uniform Push {
    uint sources, beams, vocab, n_cand;
    uint chunks;
    uint force_step;        // ~0u: never
    uint state_stride;      // 0: state[0] for every row; 1: state[row] (slot plans: the source's first row)
} pc;

layout(set = 0, binding = 0) readonly buffer BufStats { float stats[]; };       // (sources*beams, chunks, 2)
layout(set = 0, binding = 1) readonly buffer BufCandX { float cand_x[]; };      // (sources*beams, chunks, n_cand)
layout(set = 0, binding = 2) readonly buffer BufCandId { int cand_id[]; };      // (sources*beams, chunks, n_cand)
layout(set = 0, binding = 3) readonly buffer BufScores { float beam_scores[]; }; // (sources*beams)
layout(set = 0, binding = 4) readonly buffer BufState { int state[]; };          // (1) or (rows): the step
layout(set = 0, binding = 5) writeonly buffer BufCandScores { float cand_scores[]; };  // (sources, n_cand)
layout(set = 0, binding = 6) writeonly buffer BufCandIds { int cand_ids[]; };          // (sources, n_cand)

shared float red_v[WG];
shared uint red_i[WG];
shared float row_max[MAX_BEAMS];
shared float row_logsum[MAX_BEAMS];

const uint NONE = 0xffffffffu;

// Whether (v, i) comes before (bv, bi): higher score, then lower index.
bool better(float v, uint i, float bv, uint bi)
{
    return bi == NONE || v > bv || (v == bv && i < bi);
}

void main()
{
    const uint b = linear_workgroup();
    if (b >= pc.sources) return;
    const uint tid = gl_LocalInvocationID.x;
    const uint K = pc.beams, V = pc.vocab, C = pc.chunks, N = pc.n_cand;
    const int step = state[b * pc.beams * pc.state_stride];
    const bool forced = step >= 0 && uint(step) == pc.force_step;
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    // each row's log_softmax constants from its chunks: max, then log(sum(exp(x - max)))
    for (uint k = 0u; k < K; k++) {
        const uint row = b * K + k;
        float m = NEG_INF;
        for (uint c = tid; c < C; c += WG) m = max(m, stats[(row * C + c) * 2u]);
        red_v[tid] = m;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1) {
            if (tid < s) red_v[tid] = max(red_v[tid], red_v[tid + s]);
            barrier();
        }
        m = red_v[0];
        barrier();
        float sum = 0.0;
        for (uint c = tid; c < C; c += WG) {
            const float cm = stats[(row * C + c) * 2u];
            if (cm != NEG_INF) sum += stats[(row * C + c) * 2u + 1u] * exp(cm - m);
        }
        red_v[tid] = sum;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1) {
            if (tid < s) red_v[tid] += red_v[tid + s];
            barrier();
        }
        if (tid == 0u) {
            row_max[k] = m;
            row_logsum[k] = log(red_v[0]);
        }
        barrier();
    }
    // the n_cand best over every row's chunks' candidates
    const uint per_row = C * N, total = K * per_row;
    float prev_v = 0.0;
    uint prev_i = NONE;
    for (uint r = 0u; r < N; r++) {
        float bv = 0.0;
        uint bi = NONE;
        for (uint i = tid; i < total; i += WG) {
            const uint k = i / per_row, e = (b * K + k) * per_row + (i - k * per_row);
            const int id = cand_id[e];
            if (id < 0) continue;
            const float x = forced ? beam_scores[b * K + k]
                                   : beam_scores[b * K + k] + ((cand_x[e] - row_max[k]) - row_logsum[k]);
            if (isnan(x) || isinf(x)) continue;
            const uint gi = k * V + uint(id);
            if (prev_i != NONE && !better(prev_v, prev_i, x, gi)) continue;   // not after the previous winner
            if (better(x, gi, bv, bi)) { bv = x; bi = gi; }
        }
        red_v[tid] = bv;
        red_i[tid] = bi;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1) {
            if (tid < s && red_i[tid + s] != NONE && better(red_v[tid + s], red_i[tid + s], red_v[tid], red_i[tid])) {
                red_v[tid] = red_v[tid + s];
                red_i[tid] = red_i[tid + s];
            }
            barrier();
        }
        prev_v = red_v[0];
        prev_i = red_i[0];
        barrier();
        if (tid == 0u) {
            for (uint q = r; q < (prev_i == NONE ? N : r + 1u); q++) {
                cand_scores[b * N + q] = prev_i == NONE ? NEG_INF : prev_v;
                cand_ids[b * N + q] = prev_i == NONE ? -1 : int(prev_i);
            }
        }
        if (prev_i == NONE) break;
    }
}
