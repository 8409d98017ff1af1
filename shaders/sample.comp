#version 450
// Sampling of each row's next token (one workgroup per row), as Hugging Face's
// warpers in their order: logits / temperature, then top-k (keep tokens whose
// probability is at least the k-th largest), then top-p (keep the most probable
// tokens until their mass reaches top_p; the token that crosses it stays), then one
// draw from what is left. The k-th largest value and the top-p cut are found by
// bisection on the bit patterns of the (positive) probabilities, 32 parallel
// reductions each, so nothing is sorted. The draw: u = hash(seed, row, step) in
// [0, 1) times the kept mass (with row_seeds, u = hash(seeds[row], 0, step): each
// row draws as row 0 of a call with its own seed would, a slot plan's rows being
// requests of their own), walked through the kept tokens in index order (each
// invocation a contiguous chunk). Deterministic for a seed on one device; other
// devices may round exp() differently and so draw differently near a boundary.
// eos is left out while the step (state[0], or state[row] with state_stride 1: per-row
// positions) is below min_new; at force_step the token is eos. Writes ids[row] and
// tokens[row, step], as argmax.comp.
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

// Mirrored by vkf_push_sample in push.h.
layout(push_constant) uniform Push {
    uint rows, cols;
    uint token_capacity;
    float inv_temperature;
    uint top_k;             // 0: off
    float top_p;            // 1: off
    uint seed_lo, seed_hi;
    int eos;
    uint min_new;
    uint force_step;        // at this step the token is eos (forced_eos_token_id); ~0u: never
    uint state_stride;      // 0: state[0] for every row; 1: state[row]
    uint row_seeds;         // 1: seeds[row] (lo, hi) and row 0 in the draw's hash
} pc;

layout(set = 0, binding = 0) readonly buffer BufLogits { ACT_T logits[]; };  // (rows, cols)
layout(set = 0, binding = 1) readonly buffer BufState { int state[]; };      // (1) or (rows): positions
layout(set = 0, binding = 2) writeonly buffer BufIds { int ids[]; };         // (rows)
layout(set = 0, binding = 3) writeonly buffer BufTokens { int tokens[]; };   // (rows, token_capacity)
layout(set = 0, binding = 4) readonly buffer BufSeeds { uint seeds[]; };     // (rows, 2) with row_seeds

shared float red[WG];
shared float row_max;

uint hash(uint x)
{
    // PCG output permutation of one LCG step
    uint s = x * 747796405u + 2891336453u;
    uint w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

float reduce_sum(float v)
{
    const uint tid = gl_LocalInvocationID.x;
    barrier();
    red[tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier();
    }
    return red[0];
}

// Unnormalised probability of token j: exp((x_j - max) / T), 0 where left out.
float weight(uint row, uint j, bool no_eos)
{
    if (no_eos && int(j) == pc.eos) return 0.0;
    float x = float(logits[row * pc.cols + j]);
    if (isnan(x)) return 0.0;
    return exp((x - row_max) * pc.inv_temperature);
}

void main()
{
    const uint row = linear_workgroup();
    if (row >= pc.rows) return;
    const uint tid = gl_LocalInvocationID.x;
    const int pos = state[row * pc.state_stride];
    const bool no_eos = pos < int(pc.min_new);
    // max over the allowed tokens
    float m = uintBitsToFloat(0xff800000u);
    for (uint j = tid; j < pc.cols; j += WG) {
        if (no_eos && int(j) == pc.eos) continue;
        float x = float(logits[row * pc.cols + j]);
        if (!isnan(x)) m = max(m, x);
    }
    red[tid] = m;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) red[tid] = max(red[tid], red[tid + s]);
        barrier();
    }
    if (tid == 0u) row_max = red[0];
    barrier();
    // The cut: tokens with weight >= cut are kept. top-k: the largest cut keeping
    // at least k tokens; top-p: then the largest cut keeping top_p of the mass.
    uint cut = 0u;  // bits of the cut (0.0: keep everything with any weight)
    if (pc.top_k > 0u && pc.top_k < pc.cols) {
        uint lo = 0u, hi = 0x3f800001u;  // weights are in [0, 1]
        while (hi - lo > 1u) {
            uint mid = lo + (hi - lo) / 2u;
            float c = 0.0;
            for (uint j = tid; j < pc.cols; j += WG) c += floatBitsToUint(weight(row, j, no_eos)) >= mid ? 1.0 : 0.0;
            if (reduce_sum(c) >= float(pc.top_k)) lo = mid; else hi = mid;
        }
        cut = lo;
    }
    if (pc.top_p < 1.0) {
        float total = 0.0;
        for (uint j = tid; j < pc.cols; j += WG) {
            float w = weight(row, j, no_eos);
            total += floatBitsToUint(w) >= cut ? w : 0.0;
        }
        total = reduce_sum(total);
        uint lo = cut, hi = 0x3f800001u;
        while (hi - lo > 1u) {
            uint mid = lo + (hi - lo) / 2u;
            float s = 0.0;
            for (uint j = tid; j < pc.cols; j += WG) {
                float w = weight(row, j, no_eos);
                s += floatBitsToUint(w) >= mid ? w : 0.0;
            }
            if (reduce_sum(s) >= pc.top_p * total) lo = mid; else hi = mid;
        }
        cut = lo;
    }
    // the draw: each invocation sums a contiguous chunk, then the chunk holding u walks it
    const uint chunk = (pc.cols + WG - 1u) / WG, begin = min(tid * chunk, pc.cols), end = min(begin + chunk, pc.cols);
    float mine = 0.0;
    for (uint j = begin; j < end; j++) {
        float w = weight(row, j, no_eos);
        mine += floatBitsToUint(w) >= cut ? w : 0.0;
    }
    barrier();
    red[tid] = mine;
    barrier();
    if (tid == 0u) {
        float total = 0.0;
        for (uint t = 0u; t < WG; t++) total += red[t];
        uint seed_lo = pc.seed_lo, seed_hi = pc.seed_hi, r = row;
        if (pc.row_seeds != 0u) seed_lo = seeds[row * 2u], seed_hi = seeds[row * 2u + 1u], r = 0u;
        uint h = hash(hash(hash(seed_lo) ^ seed_hi) + r * 0x9e3779b9u + uint(pos) * 0x85ebca6bu);
        float u = float(h >> 8u) * (1.0 / 16777216.0) * total;
        // the chunk where the running sum passes u (the last one with weight if rounding runs past)
        uint t = 0u, last = 0xffffffffu;
        float acc = 0.0;
        for (; t < WG; t++) {
            if (red[t] > 0.0) last = t;
            if (red[t] > 0.0 && acc + red[t] > u) break;
            acc += red[t];
        }
        if (t == WG) t = last;
        int id = 0;
        if (t != 0xffffffffu) {
            uint b = min(t * chunk, pc.cols), e = min(b + chunk, pc.cols);
            for (uint j = b; j < e; j++) {
                float w = weight(row, j, no_eos);
                if (floatBitsToUint(w) < cut || w == 0.0) continue;
                id = int(j);
                acc += w;
                if (acc > u) break;
            }
        }
        if (uint(pos) == pc.force_step) id = pc.eos;
        ids[row] = id;
        if (pos >= 0 && uint(pos) < pc.token_capacity) tokens[row * pc.token_capacity + uint(pos)] = id;
    }
}
