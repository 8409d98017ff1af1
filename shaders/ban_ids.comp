#version 450
// Per row: logits[row, bans[row, j]] = -inf for every j with bans[row, j] >= 0:
// the ids that no_repeat_ngram_size forbids, which the host works out from the
// row's tokens before each step (at most max_bans per row, each once).
// With `correct` (beam search without renormalize_logits) also
//   beam_scores[row] -= log(S_all / S_kept),  S = sum of exp(logits[row, j] - max)
// over every id (S_all) or the unbanned ones (S_kept): beam search's
// log_softmax then runs over the unbanned ids, and the correction keeps each
// candidate's score at logit - logsumexp(every id), as transformers applies the
// ban after log_softmax without normalizing again. Not at position force_step,
// where forced_eos_token_id gives eos the score 0. One workgroup per row.
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

// Mirrored by vkf_push_ban_ids in push.h.
layout(push_constant) uniform Push {
    uint rows, cols;
    uint max_bans;          // columns of bans
    uint correct;           // 1: correct beam_scores
    uint force_step;        // no correction when state[0] == force_step
} pc;

layout(set = 0, binding = 0) buffer BufLogits { ACT_T logits[]; };           // (rows, cols)
layout(set = 0, binding = 1) readonly buffer BufBans { int bans[]; };        // (rows, max_bans), -1: none
layout(set = 0, binding = 2) readonly buffer BufState { int state[]; };      // (1): position
layout(set = 0, binding = 3) buffer BufScores { float beam_scores[]; };      // (rows) when correct

shared float red[WG];

void main()
{
    const uint row = linear_workgroup();
    if (row >= pc.rows) return;
    const uint tid = gl_LocalInvocationID.x;
    const uint base = row * pc.cols;
    const bool correct = pc.correct != 0u && uint(state[0]) != pc.force_step;
    if (correct) {
        // the row's max, then the sums of exp(x - max) over every id and over the banned ones
        float m = uintBitsToFloat(0xff800000u);
        for (uint j = tid; j < pc.cols; j += WG) m = max(m, float(logits[base + j]));
        red[tid] = m;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1) {
            if (tid < s) red[tid] = max(red[tid], red[tid + s]);
            barrier();
        }
        m = red[0];
        barrier();
        float total = 0.0;
        if (!isinf(m)) for (uint j = tid; j < pc.cols; j += WG) total += exp(float(logits[base + j]) - m);
        red[tid] = total;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1) {
            if (tid < s) red[tid] += red[tid + s];
            barrier();
        }
        total = red[0];
        barrier();
        float banned = 0.0;
        for (uint j = tid; j < pc.max_bans; j += WG) {
            int id = bans[row * pc.max_bans + j];
            if (id >= 0 && uint(id) < pc.cols && !isinf(m)) banned += exp(float(logits[base + uint(id)]) - m);
        }
        red[tid] = banned;
        barrier();
        for (uint s = WG / 2u; s > 0u; s >>= 1) {
            if (tid < s) red[tid] += red[tid + s];
            barrier();
        }
        if (tid == 0u && red[0] > 0.0) {
            float kept = total - red[0];
            beam_scores[row] -= kept > 0.0 ? log(total) - log(kept) : uintBitsToFloat(0x7f800000u);
        }
        barrier();
    }
    for (uint j = tid; j < pc.max_bans; j += WG) {
        int id = bans[row * pc.max_bans + j];
        if (id >= 0 && uint(id) < pc.cols) logits[base + uint(id)] = ACT_T(uintBitsToFloat(0xff800000u));
    }
}
