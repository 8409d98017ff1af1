#version 450
// Fused attention on cooperative matrices (tensor cores, GL_KHR_cooperative_matrix),
// in the manner of FlashAttention-2: the same result, masks, key lists, bindings
// and push constants as attention_fused.comp (so the host swaps the pipeline):
//   out[b, i, h, :] = Σ_j softmax_j(scale · q[b, i, h, :]·k[b, j, h, :] + bias(h, i, j) + mask(b, i, j)) v[b, j, h, :]
// mask(b, i, j), the bias and global keys: see attention_pattern.glsl. A query
// with every key masked gets zeros.
//
// One workgroup per (batch·head, block of BQ queries), one subgroup per CM query
// rows (the host sizes it so; another count is still correct):
//  - the Q block is staged once in shared memory as f16, head_dim zero-padded to DP
//    (a multiple of the fragment's CK and CN); rows past lq are zeros;
//  - per tile of BK keys from the list (fully excluded key blocks are never
//    loaded), K and V are staged as f16, zero past the sequence and head_dim;
//    two workgroup barriers per tile, for this load only;
//  - then each subgroup, on its own CM rows, with subgroup barriers between:
//    S = Q·Kᵀ on CM×CN fragments with fp32 accumulators, stored fp32 to shared;
//    one invocation per row: scale, exact mask, online softmax in fp32 (running
//    max m, sum l in log2 units), P rounded to f16 into shared, l summing the
//    rounded P (so the output is a convex combination of V rows, the weights off
//    by at most 2^-10 relative, see tests/test_attention.c), and the row of O
//    (fp32, shared) rescaled by exp2(m_old − m_new); then O += P·V on fragments
//    loaded as accumulators and stored back.
// Finally out = O / l in the output's dtype. Q and K products are exact in fp32, so
// besides the rounding of Q, K, V (F32 IO) and P to f16, scores and sums are fp32.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 32;     // invocations: BQ / CM subgroups (lavapipe needs
                                                // every subgroup to pass the same subgroup barriers)
layout(constant_id = 1) const uint BQ = 32;     // queries per workgroup, a multiple of CM
layout(constant_id = 2) const uint BK = 32;     // keys per tile, a multiple of CN and CK
layout(constant_id = 3) const uint DP = 64;     // head_dim padded to a multiple of CK and CN
layout(constant_id = 4) const uint CM = 8;      // fragment shape (ctx->coopmat_shape): M
layout(constant_id = 5) const uint CN = 8;      //   N
layout(constant_id = 6) const uint CK = 8;      //   K

#ifdef IO_F16
// Q, K, V and out stored as F16 (16-bit storage).
#extension GL_EXT_shader_16bit_storage : require
#define IO_T float16_t
#else
#define IO_T float
#endif
layout(set = 0, binding = 0) readonly buffer BufQ { IO_T q[]; };
layout(set = 0, binding = 1) readonly buffer BufK { IO_T k[]; };
layout(set = 0, binding = 2) readonly buffer BufV { IO_T v[]; };
layout(set = 0, binding = 3) readonly buffer BufLen { int lengths[]; };   // (batch) I32, or the dummy
layout(set = 0, binding = 4) writeonly buffer BufOut { IO_T outv[]; };   // (batch * lq, heads * head_dim)
layout(set = 0, binding = 5) readonly buffer BufTable { int table[]; };   // BIGBIRD's table, or the dummy
layout(set = 0, binding = 6) readonly buffer BufBias { float rel_bias[]; };   // relative position bias, or the dummy
layout(set = 0, binding = 7) readonly buffer BufGlobal { IO_T gkv[]; };   // TGLOBAL's global keys and values, or the dummy

#include "attention_pattern.glsl"

// Mirrored by vkf_attention_coopmat_shared_bytes in attention.c.
shared float16_t q_sh[BQ * DP];         // (BQ, DP) the query block
shared float16_t k_sh[BK * DP];         // (BK, DP) keys of the tile
shared float16_t v_sh[BK * DP];         // (BK, DP) values of the tile
shared float s_sh[BQ * BK];             // (BQ, BK) scores, then scaled and masked (log2 units)
shared float16_t p_sh[BQ * BK];         // (BQ, BK) probabilities
shared float o_sh[BQ * DP];             // (BQ, DP) output accumulators
shared float m_sh[BQ], l_sh[BQ];        // per row: running max, running sum
shared uint key_slot[BK];               // the key of each slot, see allowed()
shared uint slot_bits[BK];              // BIGBIRD: bit t set iff query block qa + t may see the slot's key

// k_sh, v_sh, key_slot = list entries x0 .. x0 + BK - 1. Between barriers.
void load_tile(uint x0)
{
    for (uint e = gl_LocalInvocationID.x; e < BK * DP; e += WG) {
        uint slot = e / DP, c = e % DP, x = x0 + slot;
        float kv = 0.0, vv = 0.0;
        uint j = x < n_keys ? key_of(x) : NO_KEY;
        bool global = is_global(j) && (j & NO_KEY) < n_glob;   // TGLOBAL: a global key from gkv
        if (global && c < pc.head_dim) {
            uint gb = global_at(j & NO_KEY, c);
            kv = float(gkv[gb]);
            vv = float(gkv[gb + pc.heads * pc.head_dim]);
        } else if (j < len && c < pc.head_dim) {   // loads only inside the sequence, whatever a table says
            kv = float(k[kbase + j * pc.k_row + c]);
            vv = float(v[vbase + j * pc.v_row + c]);
        }
        k_sh[e] = float16_t(kv);
        v_sh[e] = float16_t(vv);
        if (c == 0u) {
            key_slot[slot] = global ? j : j < len ? slot_word_of(j) : NO_KEY;
            slot_bits[slot] = !global && j < len ? slot_bits_of(j) : 0u;
        }
    }
}

void main()
{
    const uint wg = linear_workgroup();
    if (wg >= pc.q_blocks * pc.batch * pc.heads) return;   // padding of the 2-D grid: whole workgroup
    setup_workgroup(wg);
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID, n_sg = gl_NumSubgroups;

    for (uint e = tid; e < BQ * DP; e += WG) {
        uint r = e / DP, c = e % DP, i = i0 + r;
        q_sh[e] = float16_t(i < pc.lq && c < pc.head_dim ? float(q[qbase + i * pc.q_row + c]) : 0.0);
        o_sh[e] = 0.0;
    }
    for (uint r = tid; r < BQ; r += WG) {
        m_sh[r] = NEG_INF;
        l_sh[r] = 0.0;
    }
    // (the barrier after the first tile's load makes these visible)

    for (uint x0 = 0u; x0 < n_keys; x0 += BK) {    // uniform: n_keys depends on the workgroup only
        barrier();                              // the previous tile's readers are done
        load_tile(x0);
        barrier();                              // the tile is loaded

        // Each subgroup takes whole blocks of CM query rows (the host makes one per
        // subgroup): their scores, softmax and output fragments are its own, so only
        // subgroup barriers separate the three steps.
        for (uint tr = sg; tr < BQ / CM; tr += n_sg) {
            // S = Q·Kᵀ for rows tr·CM ...
            for (uint tc = 0u; tc < BK / CN; tc++) {
                coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc =
                    coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);
                for (uint kk = 0u; kk < DP; kk += CK) {
                    coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> qa_frag;
                    coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> kt_frag;
                    coopMatLoad(qa_frag, q_sh, tr * CM * DP + kk, DP, gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(kt_frag, k_sh, tc * CN * DP + kk, DP, gl_CooperativeMatrixLayoutColumnMajor);
                    acc = coopMatMulAdd(qa_frag, kt_frag, acc);
                }
                coopMatStore(acc, s_sh, tr * CM * BK + tc * CN, BK, gl_CooperativeMatrixLayoutRowMajor);
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();                  // the block's scores are written

            // Online softmax, one invocation per row, fp32; O's row rescaled.
            for (uint r = tr * CM + gl_SubgroupInvocationID; r < tr * CM + CM; r += gl_SubgroupSize) {
                const uint i = i0 + r;
                float m_old = m_sh[r], tile_max = NEG_INF;
                for (uint slot = 0u; slot < BK; slot++) {
                    float s = allowed(i, key_slot[slot], slot_bits[slot], len)
                                  ? s_sh[r * BK + slot] * pc.scale + score_bias(i, key_slot[slot]) : NEG_INF;
                    s_sh[r * BK + slot] = s;
                    tile_max = max(tile_max, s);
                }
                float m_new = max(m_old, tile_max);
                float alpha = m_old == NEG_INF ? 0.0 : exp2(m_old - m_new);   // m_old finite: m_new finite
                float l = l_sh[r] * alpha;
                for (uint slot = 0u; slot < BK; slot++) {
                    float s = s_sh[r * BK + slot];
                    float16_t p = float16_t(s == NEG_INF ? 0.0 : exp2(s - m_new));
                    p_sh[r * BK + slot] = p;
                    l += float(p);              // the sum of what P·V multiplies
                }
                m_sh[r] = m_new;
                l_sh[r] = l;
                if (alpha != 1.0)
                    for (uint c = 0u; c < DP; c++) o_sh[r * DP + c] *= alpha;
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();                  // the block's P and rescaled O are written

            // O += P·V for rows tr·CM ...
            for (uint tc = 0u; tc < DP / CN; tc++) {
                uint base = tr * CM * DP + tc * CN;
                coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc;
                coopMatLoad(acc, o_sh, base, DP, gl_CooperativeMatrixLayoutRowMajor);
                for (uint kk = 0u; kk < BK; kk += CK) {
                    coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> p_frag;
                    coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> v_frag;
                    coopMatLoad(p_frag, p_sh, tr * CM * BK + kk, BK, gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(v_frag, v_sh, kk * DP + tc * CN, DP, gl_CooperativeMatrixLayoutRowMajor);
                    acc = coopMatMulAdd(p_frag, v_frag, acc);
                }
                coopMatStore(acc, o_sh, base, DP, gl_CooperativeMatrixLayoutRowMajor);
            }
        }
    }
    barrier();                                  // every fragment of O and every l is final

    // out = O / l, clipped to lq and head_dim (zeros: fully masked row).
    for (uint e = tid; e < BQ * DP; e += WG) {
        uint r = e / DP, c = e % DP, i = i0 + r;
        if (i >= pc.lq || c >= pc.head_dim) continue;
        float l = l_sh[r];
        outv[obase0 + i * (pc.heads * pc.head_dim) + c] = IO_T(l > 0.0 ? o_sh[e] / l : 0.0);
    }
}
