#version 450
// One beam-search step's candidates, one workgroup per source b of K beams:
//   score(k, v) = beam_scores[b*K + k] + log_softmax(logits[b*K + k])[v]
// over the K*V (beam, token) pairs, as Hugging Face's beam search scores them; eos
// is left out while the step (state[0]) is below min_new (and, with renormalize,
// out of the log_softmax too); at step force_step eos is the only candidate. Writes the n_cand best in
// descending order (equal scores: the lower k*V + v first) to cand_scores[b, :] and
// cand_ids[b, :] = k*V + v (-1 and -inf where fewer candidates exist). Selection is
// n_cand rounds of a parallel arg-max over the pairs after the previous winner.
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#define MAX_BEAMS 16

// Mirrored by vkf_push_beam_topk in push.h.
layout(push_constant) uniform Push {
    uint sources, beams, vocab, n_cand;
    int eos;
    uint min_new;
    uint force_step;        // at this step only eos (score + 0), as forced_eos_token_id; ~0u: never
    uint renormalize;       // 1: eos left out of the log_softmax too while it is banned (renormalize_logits)
} pc;

layout(set = 0, binding = 0) readonly buffer BufLogits { ACT_T logits[]; };      // (sources*beams, vocab)
layout(set = 0, binding = 1) readonly buffer BufScores { float beam_scores[]; };  // (sources*beams)
layout(set = 0, binding = 2) readonly buffer BufState { int state[]; };           // (1): the step
layout(set = 0, binding = 3) writeonly buffer BufCandScores { float cand_scores[]; };  // (sources, n_cand)
layout(set = 0, binding = 4) writeonly buffer BufCandIds { int cand_ids[]; };          // (sources, n_cand)

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
    const uint K = pc.beams, V = pc.vocab;
    const bool no_eos = state[0] < int(pc.min_new);
    const bool forced = uint(state[0]) == pc.force_step;
    const int skip = no_eos && pc.renormalize != 0u ? pc.eos : -1;
    // log_softmax of each beam's row: max, then log(sum(exp(x - max)))
    for (uint k = 0u; k < K; k++) {
        const uint base = (b * K + k) * V;
        float m = uintBitsToFloat(0xff800000u);
        for (uint j = tid; j < V; j += WG)
            if (int(j) != skip) m = max(m, float(logits[base + j]));
        red_v[tid] = m;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1) {
            if (tid < s) red_v[tid] = max(red_v[tid], red_v[tid + s]);
            barrier();
        }
        m = red_v[0];
        barrier();
        float sum = 0.0;
        for (uint j = tid; j < V; j += WG)
            if (int(j) != skip) sum += exp(float(logits[base + j]) - m);
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
    float prev_v = 0.0;
    uint prev_i = NONE;
    for (uint c = 0u; c < pc.n_cand; c++) {
        float bv = 0.0;
        uint bi = NONE;
        for (uint i = tid; i < K * V; i += WG) {
            const uint k = i / V, v = i - k * V;
            if (forced ? int(v) != pc.eos : (no_eos && int(v) == pc.eos)) continue;
            const float x = forced ? beam_scores[b * K + k]
                                   : beam_scores[b * K + k] + ((float(logits[(b * K + k) * V + v]) - row_max[k]) - row_logsum[k]);
            if (isnan(x) || isinf(x)) continue;
            if (prev_i != NONE && !better(prev_v, prev_i, x, i)) continue;   // not after the previous winner
            if (better(x, i, bv, bi)) { bv = x; bi = i; }
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
            for (uint r = c; r < (prev_i == NONE ? pc.n_cand : c + 1u); r++) {
                cand_scores[b * pc.n_cand + r] = prev_i == NONE ? uintBitsToFloat(0xff800000u) : prev_v;
                cand_ids[b * pc.n_cand + r] = prev_i == NONE ? -1 : int(prev_i);
            }
        }
        if (prev_i == NONE) break;
    }
}
