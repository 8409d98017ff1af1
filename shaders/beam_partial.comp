#version 450
// Beam search, stage 1 of 2: one workgroup per (row, chunk of the vocabulary).
// Each writes its chunk's part of the row's log_softmax, stats = (max, sum of
// exp(x - max)), and its chunk's n_cand best tokens by logit (equal logits: the
// lower id first), which beam_topk.comp (stage 2) merges per source: the best
// n_cand (beam, token) pairs of a source are among the best n_cand of each row,
// which are among the best n_cand of each chunk. So the K x V pairs are searched
// by rows x chunks workgroups instead of one per source.
// Two forms, chosen by specialization: a workgroup per (row, chunk) whose
// invocations share the chunk (ROWS 0, GPUs: rounds of a parallel arg-max); or
// (ROWS 1, CPU drivers) one invocation per (row, chunk), WG of them per
// workgroup, each scanning its chunk alone with a sorted list of its n_cand best
// in registers: no barrier, two reads of the chunk.
// eos is left out while the step (state[0]) is below min_new (and, with
// renormalize 1, out of the sums too); at step force_step eos is the only
// candidate, with logit 0 (its score is the beam's, as after forced_eos).
// renormalize 2: the row already holds log-probabilities (the logits
// processor's output, not renormalised): the stats make stage 2 add them as
// they are (max 0 and sum 1 in the first chunk, nothing in the others).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint ROWS = 0;    // 1: the rows form
const uint MAX_CAND = 64u;                      // n_cand <= max(2, 1 + end ids) x beams (VKF_MAX_CANDIDATES)
layout(constant_id = 2) const uint CAND_W = MAX_CAND;   // rows form: entries kept, n_cand <= CAND_W <= MAX_CAND

// Mirrored by vkf_push_beam_partial in push.h.
layout(push_constant) uniform Push {
    uint rows, vocab, chunk, chunks, n_cand;
    int eos;
    uint min_new, force_step, renormalize;   // renormalize: 0, 1 or 2 (see above)
    uint state_stride;                       // 0: state[0] for every row; 1: state[row] (slot plans)
} pc;

layout(set = 0, binding = 0) readonly buffer BufLogits { ACT_T logits[]; };    // (rows, vocab)
layout(set = 0, binding = 1) readonly buffer BufState { int state[]; };         // (1) or (rows): the step
layout(set = 0, binding = 2) writeonly buffer BufStats { float stats[]; };      // (rows, chunks, 2)
layout(set = 0, binding = 3) writeonly buffer BufCandX { float cand_x[]; };     // (rows, chunks, n_cand)
layout(set = 0, binding = 4) writeonly buffer BufCandId { int cand_id[]; };     // (rows, chunks, n_cand); -1: none

shared float red_v[WG];
shared uint red_i[WG];

const uint NONE = 0xffffffffu;

// Whether (v, i) comes before (bv, bi): higher value, then lower index.
bool better(float v, uint i, float bv, uint bi)
{
    return bi == NONE || v > bv || (v == bv && i < bi);
}

void rows_main()
{
    const uint g = linear_workgroup() * WG + gl_LocalInvocationID.x;
    if (g >= pc.rows * pc.chunks) return;
    const uint row = g / pc.chunks, c = g - row * pc.chunks;
    const uint v0 = c * pc.chunk, v1 = min(v0 + pc.chunk, pc.vocab), base = row * pc.vocab;
    const int step = state[row * pc.state_stride];
    const bool no_eos = step < int(pc.min_new);
    const bool forced = step >= 0 && uint(step) == pc.force_step;
    const int skip = no_eos && pc.renormalize == 1u ? pc.eos : -1;
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    const uint nc = min(pc.n_cand, CAND_W);
    // The chunk's nc best, best first; empty entries are (-inf, NONE), below every
    // candidate (infinite logits are left out). Every loop over the entries is
    // unrolled: lavapipe 22.3 cuts an invocation's loops short once they have run
    // 65535 iterations together (docs/reliability.md), and a rolled-up insertion
    // costs up to nc of them per token (tokens whose logits rise along the chunk,
    // or nc 64 over NLLB's 256k vocabulary, broke it). Left: one count per token in
    // each of the two scans.
    float best_x[MAX_CAND];
    uint best_i[MAX_CAND];
    [[unroll]] for (uint q = 0u; q < CAND_W; q++) best_x[q] = NEG_INF, best_i[q] = NONE;
    float last = NEG_INF;               // best_x[nc - 1]: a token must beat it to enter
    float m = NEG_INF;
    for (uint v = v0; v < v1; v++) {
        const float raw = float(logits[base + v]);
        if (int(v) != skip) m = max(m, raw);
        float x = forced ? 0.0 : raw;
        bool take = forced ? int(v) == pc.eos : !((no_eos && int(v) == pc.eos) || isnan(x) || isinf(x));
        // ids rise along the scan, so an equal value never passes one already held
        take = take && x > last;
        if (take) {                     // lanes run it together: skipped unless one inserts
            uint at = 0u;               // entries that stay ahead of x
            [[unroll]] for (uint q = 0u; q < CAND_W; q++) at += q < nc && best_x[q] >= x ? 1u : 0u;
            // from the last entry up, the loop counting upward: written downward, Mesa
            // 22.3 left it rolled up (CAND_W is a specialization constant)
            [[unroll]] for (uint r = 1u; r < CAND_W; r++) {
                const uint q = CAND_W - r;
                if (take && q < nc && q > at) best_x[q] = best_x[q - 1u], best_i[q] = best_i[q - 1u];
            }
            [[unroll]] for (uint q = 0u; q < CAND_W; q++) {
                if (take && q == at) best_x[q] = x, best_i[q] = v;
                if (q + 1u == nc) last = best_x[q];
            }
        }
    }
    float sum = 0.0;
    if (m != NEG_INF)
        for (uint v = v0; v < v1; v++)
            if (int(v) != skip) sum += exp(float(logits[base + v]) - m);
    if (pc.renormalize == 2u) {
        m = c == 0u ? 0.0 : NEG_INF;
        sum = c == 0u ? 1.0 : 0.0;
    }
    stats[g * 2u] = m;
    stats[g * 2u + 1u] = sum;
    [[unroll]] for (uint q = 0u; q < CAND_W; q++)
        if (q < nc) {
            cand_x[g * pc.n_cand + q] = best_x[q];
            cand_id[g * pc.n_cand + q] = best_i[q] == NONE ? -1 : int(best_i[q]);
        }
}

void main()
{
    if (ROWS != 0u) {
        rows_main();
        return;
    }
    const uint g = linear_workgroup();
    if (g >= pc.rows * pc.chunks) return;
    const uint row = g / pc.chunks, c = g - row * pc.chunks, tid = gl_LocalInvocationID.x;
    const uint v0 = c * pc.chunk, v1 = min(v0 + pc.chunk, pc.vocab), base = row * pc.vocab;
    const int step = state[row * pc.state_stride];
    const bool no_eos = step < int(pc.min_new);
    const bool forced = step >= 0 && uint(step) == pc.force_step;
    const int skip = no_eos && pc.renormalize == 1u ? pc.eos : -1;
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    // the chunk's max and sum of exp(x - max)
    float m = NEG_INF;
    for (uint v = v0 + tid; v < v1; v += WG)
        if (int(v) != skip) m = max(m, float(logits[base + v]));
    red_v[tid] = m;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) red_v[tid] = max(red_v[tid], red_v[tid + s]);
        barrier();
    }
    m = red_v[0];
    barrier();
    float sum = 0.0;
    if (m != NEG_INF)
        for (uint v = v0 + tid; v < v1; v += WG)
            if (int(v) != skip) sum += exp(float(logits[base + v]) - m);
    red_v[tid] = sum;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) red_v[tid] += red_v[tid + s];
        barrier();
    }
    if (tid == 0u) {
        const bool as_is = pc.renormalize == 2u;
        stats[g * 2u] = as_is ? (c == 0u ? 0.0 : NEG_INF) : m;
        stats[g * 2u + 1u] = as_is ? (c == 0u ? 1.0 : 0.0) : red_v[0];
    }
    barrier();
    // the chunk's n_cand best: rounds of a parallel arg-max after the previous winner
    float prev_v = 0.0;
    uint prev_i = NONE;
    for (uint r = 0u; r < pc.n_cand; r++) {
        float bv = 0.0;
        uint bi = NONE;
        for (uint v = v0 + tid; v < v1; v += WG) {
            float x;
            if (forced) {
                if (int(v) != pc.eos) continue;
                x = 0.0;
            } else {
                if (no_eos && int(v) == pc.eos) continue;
                x = float(logits[base + v]);
                if (isnan(x) || isinf(x)) continue;
            }
            if (prev_i != NONE && !better(prev_v, prev_i, x, v)) continue;   // not after the previous winner
            if (better(x, v, bv, bi)) { bv = x; bi = v; }
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
            for (uint q = r; q < (prev_i == NONE ? pc.n_cand : r + 1u); q++) {
                cand_x[g * pc.n_cand + q] = prev_i == NONE ? NEG_INF : prev_v;
                cand_id[g * pc.n_cand + q] = prev_i == NONE ? -1 : int(prev_i);
            }
        }
        if (prev_i == NONE) break;
    }
}
