#version 450
// Fused attention on cooperative matrices (GL_KHR_cooperative_matrix) in the form
// of FlashAttention-2. The same result, masks, key lists, bindings and push
// constants as attention_fused.comp, so the host swaps the pipeline:
//   out[b, i, h, :] = Σ_j softmax_j(scale · q[b, i, h, :]·k[b, j, h, :] + bias(h, i, j) + mask(b, i, j)) v[b, j, h, :]
// mask(b, i, j), the bias and global keys: see attention_pattern.glsl. A query
// with every key masked gets zeros.
//
// One workgroup per (batch·head, block of BQ queries); the block is split over the
// workgroup's subgroups, one fragment of CM rows each. Per tile of BK keys from the
// key list (fully excluded key blocks are never loaded):
//  - the whole workgroup stages K and V once, as f16, in shared memory (rows padded
//    by 16 bytes), zero past the keys and head_dim; two workgroup barriers per tile,
//    the only ones;
//  - each subgroup then works on its own rows with subgroup barriers only:
//    S = Q·Kᵀ on matrix instructions (Q's fragments stay in registers for the whole
//    key loop, fp32 accumulators), S to shared; the online softmax with sgsize / CM
//    lanes per row (fp32, log2 units, masks and bias exact per element; the running
//    max m and sum l per row), P rounded to f16 into shared, l summing the rounded
//    P (so the output is a convex combination of V rows, see tests/test_attention.c);
//    the rows' rescale factors exp2(m_old − m_new) broadcast along each row of a
//    CM × CN matrix, which multiplies O's accumulators element by element (same
//    type, so the same element mapping); O += P·V on matrix instructions. O never
//    leaves registers inside the key loop.
// Finally O × (1 / l) (the same broadcast) goes straight from the fragments to `out`
// where the rows are inside lq and the host says the layout allows it (flag 16),
// else through shared memory, clipped.
// Split-K (-DSPLIT_K, flash decoding; attention.c picks it for calls with too few
// workgroups to fill the device): the grid's z splits each workgroup's key list
// into runs of whole tiles (attention_pattern.glsl), and instead of out each
// workgroup writes its rows' O unnormalised (fp32) and their running max and sum;
// attention_split_reduce.comp combines the splits.
// One row fragment per subgroup; if the driver runs more or smaller subgroups
// than the host planned for, the rows are covered in several passes over the keys
// (uniform in the workgroup), so any subgroup count is correct.
// Q's and O's fragment arrays are indexed only in unrolled loops that hold no
// other loop: the drivers unroll those after specialization (a loop holding a
// loop they cannot unroll stays rolled), every index becomes a constant, and the
// arrays stay in registers; NAK puts an array it cannot resolve so in local
// memory (128 B per invocation before, for O).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;    // invocations: whole subgroups
layout(constant_id = 1) const uint BQ = 64;     // queries per workgroup, a multiple of CM
layout(constant_id = 2) const uint BK = 32;     // keys per tile, a multiple of CN, CK and 4
layout(constant_id = 3) const uint DP = 64;     // head_dim rounded up to a multiple of CK, CN and 8
layout(constant_id = 4) const uint CM = 16;     // fragment shape (ctx->coopmat_shape): M
layout(constant_id = 5) const uint CN = 16;     //   N
layout(constant_id = 6) const uint CK = 16;     //   K

const uint DPS = DP + 8u;                       // shared row of K, V, Q (f16): 16 bytes of padding
const uint SS = BK + 4u;                        // shared row of S (fp32)
const uint PS = BK + 8u;                        // shared row of P (f16)
const uint NDK = DP / CK;                       // Q fragments along head_dim
const uint NDC = DP / CN;                       // O fragments along head_dim
const uint NBC = BK / CN;                       // S fragments along the tile
const uint NBK = BK / CK;                       // P fragments along the tile
const uint KV_ROWS = 2u * BK > BQ ? 2u * BK : BQ;   // K and V, or the Q block while it is staged

#ifdef IO_F16
// Q, K, V and out stored as F16 (16-bit storage).
#extension GL_EXT_shader_16bit_storage : require
#define IO_T float16_t
#define IO_V4 f16vec4
#else
#define IO_T float
#define IO_V4 vec4
#endif
layout(set = 0, binding = 0) readonly buffer BufQ { IO_T q[]; };
layout(set = 0, binding = 0) readonly buffer BufQ4 { IO_V4 q4[]; };
layout(set = 0, binding = 1) readonly buffer BufK { IO_T k[]; };
layout(set = 0, binding = 1) readonly buffer BufK4 { IO_V4 k4[]; };
layout(set = 0, binding = 2) readonly buffer BufV { IO_T v[]; };
layout(set = 0, binding = 2) readonly buffer BufV4 { IO_V4 v4[]; };
layout(set = 0, binding = 3) readonly buffer BufLen { int lengths[]; };   // (batch) I32, or the dummy
#ifdef SPLIT_K
#define OUT_T float
#else
#define OUT_T IO_T
#endif
#ifdef SPLIT_K
// Split-K (flash decoding): partial results of each split z, for the reduce pass
// (attention_split_reduce.comp): O unnormalised (splits, batch * heads, lq, DP),
// then at ml_at(...) the running max (log2 units) and sum of each row.
layout(set = 0, binding = 4) writeonly buffer BufOut { float outv[]; };
#else
layout(set = 0, binding = 4) writeonly buffer BufOut { IO_T outv[]; };   // (batch * lq, heads * head_dim)
#endif
layout(set = 0, binding = 5) readonly buffer BufTable { int table[]; };   // BIGBIRD's table, or the dummy
layout(set = 0, binding = 6) readonly buffer BufBias { float rel_bias[]; };   // relative position bias, or the dummy
layout(set = 0, binding = 7) readonly buffer BufGlobal { IO_T gkv[]; };   // TGLOBAL's global keys and values, or the dummy

#include "attention_pattern.glsl"

// Set by the host (attention.c) on top of the pattern's flags:
const uint FLAG_VEC4 = 16u;     // q, k, v offsets, strides and head_dim multiples of 4: vec4 loads
const uint FLAG_DIRECT = 32u;   // head_dim == DP and out's rows aligned for fragment stores

// Mirrored by coopmat_shared_bytes in attention.c.
shared float16_t kv_sh[KV_ROWS * DPS];  // K tile (BK, DPS) then V tile (BK, DPS); first the Q block (BQ, DPS)
shared float s_sh[BQ * SS];             // (BQ, SS) scores of each subgroup's rows
shared float16_t p_sh[BQ * PS];         // (BQ, PS) probabilities
shared float a_sh[BQ * CN];             // (BQ, CN) per row: the rescale factor (then 1 / l) in every column
shared float m_sh[BQ], l_sh[BQ];        // per row: running max (log2 units), running sum
shared uint key_slot[BK];               // the key of each slot, see allowed()
shared uint slot_bits[BK];              // BIGBIRD: bit t set iff query block qa + t may see the slot's key

#define ACC coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>

// 4 elements of row `row` (element index of c = 0) from column c (a multiple of 4)
// of q, k or v (which: 0, 1, 2), zero past head_dim.
vec4 load4(uint which, uint row, uint c)
{
    if ((pc.flags & FLAG_VEC4) != 0u) {
        if (c >= pc.head_dim) return vec4(0.0);
        uint e = (row + c) / 4u;
        return vec4(which == 0u ? q4[e] : which == 1u ? k4[e] : v4[e]);
    }
    vec4 r = vec4(0.0);
    for (uint t = 0u; t < 4u; t++)
        if (c + t < pc.head_dim) r[t] = float(which == 0u ? q[row + c + t] : which == 1u ? k[row + c + t] : v[row + c + t]);
    return r;
}

void store4(uint at, vec4 val)
{
    for (uint t = 0u; t < 4u; t++) kv_sh[at + t] = float16_t(val[t]);
}

// kv_sh, key_slot = list entries x0 .. x0 + BK - 1. Between barriers.
void load_tile(uint x0)
{
    for (uint e = gl_LocalInvocationID.x; e < BK * (DP / 4u); e += WG) {
        uint slot = e / (DP / 4u), c = (e % (DP / 4u)) * 4u, x = x0 + slot;
        vec4 kv = vec4(0.0), vv = vec4(0.0);
        uint j = x < n_keys ? key_of(x) : NO_KEY;
        bool global = is_global(j) && (j & NO_KEY) < n_glob;   // TGLOBAL: a global key from gkv
        if (global) {
            for (uint t = 0u; t < 4u; t++)
                if (c + t < pc.head_dim) {
                    uint gb = global_at(j & NO_KEY, c + t);
                    kv[t] = float(gkv[gb]);
                    vv[t] = float(gkv[gb + pc.heads * pc.head_dim]);
                }
        } else if (j < len) {                   // loads only inside the sequence, whatever a table says
            kv = load4(1u, kbase + j * pc.k_row, c);
            vv = load4(2u, vbase + j * pc.v_row, c);
        }
        store4(slot * DPS + c, kv);
        store4((BK + slot) * DPS + c, vv);
        if (c == 0u) {
            key_slot[slot] = global ? j : j < len ? slot_word_of(j) : NO_KEY;
            slot_bits[slot] = !global && j < len ? slot_bits_of(j) : 0u;
        }
    }
}

// A CM × CN accumulator whose row r holds a_sh[(rowblock · CM + r) · CN + any].
ACC row_broadcast(uint rowblock)
{
    ACC m;
    coopMatLoad(m, a_sh, rowblock * CM * CN, CN, gl_CooperativeMatrixLayoutRowMajor);
    return m;
}

void main()
{
    const uint wg = linear_workgroup();
    if (wg >= pc.q_blocks * pc.batch * pc.heads) return;   // padding of the 2-D grid: whole workgroup
    setup_workgroup(wg);
    const uint tid = gl_LocalInvocationID.x;
    const uint sg = gl_SubgroupID, n_sg = gl_NumSubgroups;
    const uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    const uint lanes = sgs >= CM ? sgs / CM : 1u;          // lanes per row in the softmax (powers of 2)
    const uint rows_per_pass = sgs / lanes;
    const uint c0 = lane % lanes;
    const uint blocks = BQ / CM;                           // row fragments in the workgroup
    // dense without causal mask or bias: a key is allowed iff it is inside the
    // sequence (its slot word, else NO_KEY, below len), as allowed() would say
    const bool plain = pc.pattern == PATTERN_DENSE && (pc.flags & (FLAG_CAUSAL | FLAG_REL_BIAS)) == 0u;

    for (uint pass0 = 0u; pass0 < blocks; pass0 += n_sg) {   // one pass when the subgroups are as planned
        // This subgroup's row fragment. A subgroup past the rows works on the last
        // one, writes nothing, and passes every subgroup barrier all the same
        // (lavapipe runs a workgroup's subgroups in step on them).
        const bool has_rows = pass0 + sg < blocks;
        const uint rb = min(pass0 + sg, blocks - 1u);
        // Stage the Q block as f16 (zeros past lq and head_dim), take this
        // subgroup's fragments into registers.
        barrier();                              // the previous pass's readers of kv_sh are done
        for (uint e = tid; e < BQ * (DP / 4u); e += WG) {
            uint r = e / (DP / 4u), c = (e % (DP / 4u)) * 4u, i = i0 + r;
            store4(r * DPS + c, i < pc.lq ? load4(0u, qbase + i * pc.q_row, c) : vec4(0.0));
        }
        for (uint r = tid; r < BQ; r += WG) {
            m_sh[r] = NEG_INF;
            l_sh[r] = 0.0;
        }
        barrier();
        // Q's and O's fragments: indexed only inside unrolled loops that hold no
        // other loop, so that every index is a constant once the driver unrolls
        // them and the arrays stay in registers (NAK keeps an array it cannot
        // resolve so in local memory).
        coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> qf[NDK];
        ACC o[NDC];
        [[unroll]] for (uint kk = 0u; kk < NDK; kk++)
            coopMatLoad(qf[kk], kv_sh, rb * CM * DPS + kk * CK, DPS, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint tc = 0u; tc < NDC; tc++) o[tc] = ACC(0.0);

        for (uint x0 = 0u; x0 < n_keys; x0 += BK) {    // uniform: n_keys depends on the workgroup only
            barrier();                          // the previous tile's (or Q's) readers are done
            load_tile(x0);
            barrier();                          // the tile is loaded

            if (has_rows) {
                // S = Q·Kᵀ for the fragment's rows
                [[unroll]] for (uint tc = 0u; tc < NBC; tc++) {
                    ACC acc = ACC(0.0);
                    [[unroll]] for (uint kk = 0u; kk < NDK; kk++) {
                        coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> kt;
                        coopMatLoad(kt, kv_sh, tc * CN * DPS + kk * CK, DPS, gl_CooperativeMatrixLayoutColumnMajor);
                        acc = coopMatMulAdd(qf[kk], kt, acc);
                    }
                    coopMatStore(acc, s_sh, rb * CM * SS + tc * CN, SS, gl_CooperativeMatrixLayoutRowMajor);
                }
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();                  // the fragment's scores are written

            // Online softmax: `lanes` lanes per row, fp32.
            if (has_rows) {
                for (uint r = lane / lanes; r < CM; r += rows_per_pass) {   // one trip when sgs >= CM
                    const uint row = rb * CM + r, i = i0 + row;
                    float tile_max = NEG_INF;
                    for (uint slot = c0; slot < BK; slot += lanes) {
                        uint word = key_slot[slot];
                        bool ok = plain ? i < pc.lq && word < len : allowed(i, word, slot_bits[slot], len);
                        float s = ok ? s_sh[row * SS + slot] * pc.scale + (plain ? 0.0 : score_bias(i, word)) : NEG_INF;
                        s_sh[row * SS + slot] = s;
                        tile_max = max(tile_max, s);
                    }
                    for (uint d = 1u; d < lanes; d <<= 1) tile_max = max(tile_max, subgroupShuffleXor(tile_max, d));
                    const float m_old = m_sh[row], m_new = max(m_old, tile_max);
                    const float alpha = m_old == NEG_INF ? 0.0 : exp2(m_old - m_new);   // m_old finite: m_new too
                    float sum = 0.0;
                    for (uint slot = c0; slot < BK; slot += lanes) {
                        float s = s_sh[row * SS + slot];
                        float16_t p = float16_t(s == NEG_INF ? 0.0 : exp2(s - m_new));
                        p_sh[row * PS + slot] = p;
                        sum += float(p);        // the sum of what P·V multiplies
                    }
                    for (uint d = 1u; d < lanes; d <<= 1) sum += subgroupShuffleXor(sum, d);
                    for (uint c = c0; c < CN; c += lanes) a_sh[row * CN + c] = alpha;
                    if (c0 == 0u) {
                        m_sh[row] = m_new;
                        l_sh[row] = l_sh[row] * alpha + sum;
                    }
                }
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();                  // P and the factors are written

            // O = O · alpha (per row) + P·V
            if (has_rows) {
                ACC alpha = row_broadcast(rb);
                coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> pf[NBK];
                [[unroll]] for (uint kk = 0u; kk < NBK; kk++)
                    coopMatLoad(pf[kk], p_sh, rb * CM * PS + kk * CK, PS, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint tc = 0u; tc < NDC; tc++) {
                    ACC acc = o[tc] * alpha;
                    [[unroll]] for (uint kk = 0u; kk < NBK; kk++) {
                        coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> vf;
                        coopMatLoad(vf, kv_sh, (BK + kk * CK) * DPS + tc * CN, DPS, gl_CooperativeMatrixLayoutRowMajor);
                        acc = coopMatMulAdd(pf[kk], vf, acc);
                    }
                    o[tc] = acc;
                }
            }
        }

        const uint row0 = i0 + rb * CM;
#ifdef SPLIT_K
        // Split-K: O as it is (fp32), m and l per row, into this split's partials;
        // rows of (split, b, h) packed DP apart, so whole fragments store directly.
        const uint bh = b * pc.heads + h, n_rows = pc.batch * pc.heads * pc.lq;
        const uint part0 = (gl_WorkGroupID.z * pc.batch * pc.heads + bh) * pc.lq;   // this (split, b, h)'s row 0
        const uint out_base = part0 * DP, out_row = DP;
        const uint ml_base = gl_NumWorkGroups.z * n_rows * DP + part0 * 2u;
        if (has_rows)
            for (uint r = lane; r < CM; r += sgs) {
                uint i = row0 + r;
                if (i < pc.lq) {
                    outv[ml_base + i * 2u] = m_sh[rb * CM + r];
                    outv[ml_base + i * 2u + 1u] = l_sh[rb * CM + r];
                }
            }
        const bool direct = row0 + CM <= pc.lq;
#define SCALED(x) (x)
#else
        // out = O / l, clipped to lq and head_dim (zeros: a fully masked row). Every
        // subgroup passes the same subgroup barriers here too.
        const uint out_base = obase0, out_row = pc.heads * pc.head_dim;
        if (has_rows)
            for (uint r = lane / lanes; r < CM; r += rows_per_pass) {
                float l = l_sh[rb * CM + r];
                for (uint c = c0; c < CN; c += lanes) a_sh[(rb * CM + r) * CN + c] = l > 0.0 ? 1.0 / l : 0.0;
            }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        ACC inv = row_broadcast(rb);
        const bool direct = (pc.flags & FLAG_DIRECT) != 0u && row0 + CM <= pc.lq;
#define SCALED(x) ((x) * inv)
#endif
        // Whole fragments straight to memory where the rows allow it.
        if (has_rows && direct)
            [[unroll]] for (uint tc = 0u; tc < NDC; tc++) {
#ifdef SPLIT_K
                coopMatStore(o[tc], outv, out_base + row0 * out_row + tc * CN, out_row, gl_CooperativeMatrixLayoutRowMajor);
#else
                coopmat<IO_T, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> io =
                    coopmat<IO_T, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(SCALED(o[tc]));
                coopMatStore(io, outv, out_base + row0 * out_row + tc * CN, out_row, gl_CooperativeMatrixLayoutRowMajor);
#endif
            }
        // Else one fragment at a time through its rows of s_sh (BK >= CN), clipped.
        // This loop holds another and is not unrolled: fragment tc is picked from O
        // by an unrolled scan, so that O's indices stay constants.
        for (uint tc = 0u; tc < NDC; tc++) {
            ACC res = o[0];
            [[unroll]] for (uint u = 1u; u < NDC; u++)
                if (u == tc) res = o[u];
            if (has_rows && !direct) coopMatStore(SCALED(res), s_sh, rb * CM * SS, SS, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            if (has_rows && !direct)
                for (uint e = lane; e < CM * CN; e += sgs) {
                    uint r = e / CN, c = e % CN, i = row0 + r, col = tc * CN + c;
                    if (i < pc.lq && col < pc.head_dim) outv[out_base + i * out_row + col] = OUT_T(s_sh[(rb * CM + r) * SS + c]);
                }
            subgroupMemoryBarrierShared();
            subgroupBarrier();                  // read before the next fragment overwrites
        }
#undef SCALED
    }
}
