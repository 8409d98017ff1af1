#version 450
// Fused attention for CPU drivers, without shared memory or barriers ("lanes"
// form): the same result as attention_fused.comp,
//   out[b, i, h, :] = Σ_j softmax_j(scale · q[b, i, h, :]·k[b, j, h, :] + mask(b, i, j)) v[b, j, h, :]
// with the masks and key lists of attention_pattern.glsl, computed so that a CPU
// driver loads each key once per subgroup instead of once per lane.
//
// Each invocation owns TQ query rows, i0 + r + WG·qq, with their pre-scaled q and
// their accumulators in registers (the rows form of attention_fused.comp). The
// keys are walked BK at a time: lane t of a subgroup loads the rows of K and V of
// keys x0 + t, x0 + t + SG, ... straight from memory, and each key reaches every
// lane of the subgroup by subgroupShuffle, a register move on a CPU driver, where
// a shared-memory tile costs two barriers and a load per lane for every value
// read (Mesa 22.3 loads lane by lane whatever the address). Online softmax per
// step of BK keys, in log2 units, as attention_fused.comp.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 8;      // invocations, whole subgroups: BQ / TQ
layout(constant_id = 1) const uint BQ = 32;     // queries per workgroup
layout(constant_id = 2) const uint BK = 8;      // keys per step, a multiple of SG
layout(constant_id = 3) const uint SG = 8;      // the device's subgroup size
layout(constant_id = 4) const uint TQ = 4;      // query rows per invocation
layout(constant_id = 5) const uint D4 = 16;     // vec4s per row: ceil(head_dim / 4)

const uint KL = BK / SG;                        // keys each lane loads per step

#ifdef IO_F16
// Q, K, V and out stored as F16 (16-bit storage); scores, softmax and the
// accumulators stay fp32.
#extension GL_EXT_shader_16bit_storage : require
#define IO_T float16_t
#else
#define IO_T float
#endif
layout(set = 0, binding = 0) readonly buffer BufQ { IO_T q[]; };
layout(set = 0, binding = 1) readonly buffer BufK { IO_T k[]; };
layout(set = 0, binding = 2) readonly buffer BufV { IO_T v[]; };
layout(set = 0, binding = 3) readonly buffer BufLen { int lengths[]; };   // (batch) I32, or the dummy
#ifdef SPLIT_K
layout(set = 0, binding = 4) writeonly buffer BufOut { float outv[]; };   // split-K partials (attention_io.glsl)
#else
layout(set = 0, binding = 4) writeonly buffer BufOut { IO_T outv[]; };   // (batch * lq, heads * head_dim)
#endif
layout(set = 0, binding = 5) readonly buffer BufTable { int table[]; };   // BIGBIRD's table, or the dummy
layout(set = 0, binding = 6) readonly buffer BufBias { float rel_bias[]; };   // relative position bias, or the dummy
layout(set = 0, binding = 7) readonly buffer BufGlobal { IO_T gkv[]; };   // TGLOBAL's global keys and values, or the dummy

#include "attention_pattern.glsl"
#include "attention_io.glsl"

void main()
{
    const uint wg = linear_workgroup();
    if (wg >= pc.q_blocks * pc.batch * pc.heads) return;   // padding of the 2-D grid: whole workgroup
    setup_workgroup(wg);
    const uint r = gl_LocalInvocationID.x, lane = gl_SubgroupInvocationID;
    vec4 q_reg[TQ * D4], acc[TQ * D4];      // (TQ, D4)
    float m[TQ], l[TQ];                     // running max (log2 units) and sum per row
    [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
        m[qq] = NEG_INF;
        l[qq] = 0.0;
        [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
            q_reg[qq * D4 + c4] = load_q(i0 + r + WG * qq, c4);
            acc[qq * D4 + c4] = vec4(0.0);
        }
    }
    for (uint x0 = 0u; x0 < n_keys; x0 += BK) {    // uniform: n_keys depends on the workgroup only
        // This lane's keys of the step: slot words, BIGBIRD bits, rows of K and V
        // (zero past head_dim, the list and the sequence).
        vec4 k_own[KL * D4], v_own[KL * D4];
        uint word[KL], bits[KL];
        [[unroll]] for (uint u = 0u; u < KL; u++) {
            uint x = x0 + lane + SG * u;
            uint j = x < n_keys ? key_of(x) : NO_KEY;
            word[u] = NO_KEY;
            bits[u] = 0u;
            [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) k_own[u * D4 + c4] = v_own[u * D4 + c4] = vec4(0.0);
            if (is_global(j)) {     // TGLOBAL: a global key from gkv, inside the sequence's n_glob
                if ((j & NO_KEY) < n_glob) {
                    word[u] = j;
                    uint inner = pc.heads * pc.head_dim;
                    [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
                        uint gb = global_at(j & NO_KEY, c4 * 4u);
                        for (uint c = 0u; c < 4u; c++)
                            if (c4 * 4u + c < pc.head_dim) {
                                k_own[u * D4 + c4][c] = float(gkv[gb + c]);
                                v_own[u * D4 + c4][c] = float(gkv[gb + inner + c]);
                            }
                    }
                }
            } else if (j < len) {  // loads only inside the sequence, whatever a table says
                word[u] = slot_word_of(j);
                bits[u] = slot_bits_of(j);
                [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
                    k_own[u * D4 + c4] = load_kv(kbase + j * pc.k_row, c4, true);
                    v_own[u * D4 + c4] = load_kv(vbase + j * pc.v_row, c4, false);
                }
            }
        }
        // Scores of the step's keys for each of this invocation's rows, masked.
        float s[TQ * BK], step_max[TQ];
        [[unroll]] for (uint qq = 0u; qq < TQ; qq++) step_max[qq] = NEG_INF;
        [[unroll]] for (uint u = 0u; u < KL; u++)
            [[unroll]] for (uint t = 0u; t < SG; t++) {
                float dots[TQ];
                [[unroll]] for (uint qq = 0u; qq < TQ; qq++) dots[qq] = 0.0;
                [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
                    vec4 kv = subgroupShuffle(k_own[u * D4 + c4], t);
                    [[unroll]] for (uint qq = 0u; qq < TQ; qq++) dots[qq] += dot(q_reg[qq * D4 + c4], kv);
                }
                uint w = subgroupShuffle(word[u], t), bb = subgroupShuffle(bits[u], t);
                [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
                    uint i = i0 + r + WG * qq;
                    float sm = allowed(i, w, bb, len) ? dots[qq] + score_bias(i, w) : NEG_INF;
                    s[qq * BK + u * SG + t] = sm;
                    step_max[qq] = max(step_max[qq], sm);
                }
            }
        // Online softmax: rescale what was accumulated to the new max.
        [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
            float m_new = max(m[qq], step_max[qq]);
            float alpha = m[qq] == NEG_INF ? 0.0 : exp2(m[qq] - m_new);  // m finite: m_new finite
            m[qq] = m_new;
            l[qq] *= alpha;
            [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) acc[qq * D4 + c4] *= alpha;
        }
        // acc += P · V over the step's keys.
        [[unroll]] for (uint u = 0u; u < KL; u++)
            [[unroll]] for (uint t = 0u; t < SG; t++) {
                float p[TQ];
                [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
                    float sc = s[qq * BK + u * SG + t];
                    p[qq] = sc == NEG_INF ? 0.0 : exp2(sc - m[qq]);
                    l[qq] += p[qq];
                }
                [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
                    vec4 vv = subgroupShuffle(v_own[u * D4 + c4], t);
                    [[unroll]] for (uint qq = 0u; qq < TQ; qq++) acc[qq * D4 + c4] += p[qq] * vv;
                }
            }
    }
    [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
        uint i = i0 + r + WG * qq;
        if (i >= pc.lq) continue;
        float inv = out_scale(l[qq]);                   // a fully masked row: zeros
        store_stats(i, m[qq], l[qq]);
        [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) store_out(i, c4, acc[qq * D4 + c4] * inv);
    }
}
