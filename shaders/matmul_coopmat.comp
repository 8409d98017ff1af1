#version 450
// C = act(alpha * A·Bᵀ + bias) + R on cooperative matrices (tensor cores): fp16
// fragments, fp32 accumulators. A (m, k), B (n, k) or (k, n) (FLAG_B_KN), C and R
// (m, n), per batch item, the same contract and push constants as
// matmul_tiled.comp. Any m, n, k: staging reads 0 past the edges, the epilogue
// stores only in-range elements.
//
// Built twice: KHR (GL_KHR_cooperative_matrix; FM x FN x FK must be a shape the
// device reports for f16 x f16 -> f32 at subgroup scope) and, with -DNV2,
// GL_NV_cooperative_matrix2, whose flexible dimensions allow any FM, FN, FK that
// are multiples of the device's granularity (up to its maximum dimension); the
// host makes each subgroup tile one fragment there (FM = TM, FN = TN, FK = BK).
// The NV2 build is SPIR-V 1.6 (--target-env=vulkan1.3); flexible dimensions need
// no SPIR-V capability, only the device feature, which the context enables.
// With -DSPLIT_K the kernel writes fp32 partial sums of one K range instead of C
// (split-K; matmul_splitk.comp adds them and applies the epilogue).
//
// The form of the fast GPU GEMMs (ggml-vulkan's mul_mm, NVIDIA's coopmat sample):
// - One workgroup computes a BM x BN tile of C with (BM / TM) x (BN / TN)
//   subgroups ("warp tiles"); each holds TM x TN = (TM / FM) x (TN / FN) (at most 16)
//   accumulator fragments in registers for the whole K loop.
// - K advances BK at a time through one shared stage of A (BM, BK) and B (BN, BK)
//   in fp16, rows padded by 16 bytes (fragment loads want 16-byte aligned rows;
//   the padding spreads rows over banks). Each invocation moves 8 consecutive k
//   (one "slot", two f16vec4) per load: from f16 buffers one 16-byte load where
//   the operand's rows start on 8 elements and k is a multiple of 8
//   (FLAG_A_WIDE, FLAG_B_WIDE; int8 weights: one 8-byte load), from fp32 buffers
//   two 16-byte vec4 loads; else two 4-element loads (FLAG_VEC4: 8 bytes of
//   f16) or eight scalar ones (B (k, n), unaligned views, k not a multiple of 4).
// - Double buffering in registers: the next K slice is loaded from global memory
//   into registers while the subgroups multiply the current one out of shared
//   memory, then stored to shared memory after a barrier; global latency hides
//   behind the matrix instructions.
// - Epilogue per fragment: where the fragment lies inside C and C's rows are
//   16-byte aligned (FLAG_C_ALIGNED), alpha, the bias (loaded as a matrix of
//   stride 0), the activation (element-wise), the int8 scales and the residual
//   are applied on the accumulator and it is stored straight to C with
//   coopMatStore; elsewhere (the edges) it goes through this subgroup's
//   fragment of fp32 scratch in shared memory, and its lanes store the in-range
//   elements with store_output.
// Shared memory: 2 * (BM + BN) * (BK + 8) + 4 * (BM / TM) * (BN / TN) * FM * (FN + 4)
// bytes (tuning.c checks it against the device).
//
// The fragment arrays (accumulators, A and B fragments) are indexed by literal
// constants only (EACH_FRAG writes the 16 possible fragments out, those past
// SM x SN fold away once the spec constants are set), so that they live in
// registers: NVK 26.2 moves an array it sees indexed by a variable to local
// memory before it unrolls loops ([[unroll]] alone left the accumulators there),
// and crashed on a form with 16 separate accumulator variables. Loops over
// staging slots are unrolled ([[unroll]]); their small arrays stay in registers.
//
// Subgroups: a subgroup tile is worked by subgroup gl_SubgroupID; where the
// driver runs fewer subgroups than tiles (a bigger subgroup than WORKGROUP was
// sized for), the workgroup makes more passes over K, so the result never depends
// on the subgroup size, only the speed does.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifdef NV2
#extension GL_NV_cooperative_matrix2 : require
#endif
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

// Specialization constants (ids match vkf_matmul_tiles plus the fragment shape):
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP = 64;  // invocations = subgroup tiles x subgroup size
layout(constant_id = 1) const uint BM = 32;     // rows of C per workgroup (a multiple of TM)
layout(constant_id = 2) const uint BN = 32;     // columns of C per workgroup (a multiple of TN)
layout(constant_id = 3) const uint BK = 32;     // K per shared-memory stage (a multiple of FK and of 8)
layout(constant_id = 4) const uint TM = 16;     // rows per subgroup tile (a multiple of FM)
layout(constant_id = 5) const uint TN = 16;     // columns per subgroup tile (a multiple of FN)
layout(constant_id = 6) const uint FM = 8;      // fragment rows: A is FM x FK, the accumulator FM x FN
layout(constant_id = 7) const uint FN = 8;      // fragment columns: B is FK x FN
layout(constant_id = 8) const uint FK = 8;      // fragment depth (a multiple of 4)

const uint WG_M = BM / TM, WG_N = BN / TN;      // subgroup tiles per workgroup: rows, columns
const uint SM = TM / FM, SN = TN / FN;          // fragments per subgroup tile: rows, columns
const uint FRAGS = SM * SN;                     // accumulators per subgroup (tuning.c: at most 16)
const uint MAX_FRAGS = 16;
// X(f) for each literal f < MAX_FRAGS: the fragment arrays are indexed by constants
// only, from the SPIR-V on (NAK moves an array it sees indexed by a variable to
// local memory before it unrolls loops).
#define EACH_FRAG(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
const uint BK4 = BK / 4;                        // f16vec4 per row of a K slice
const uint BK8 = BK / 8;                        // slots (8 k) per row of a K slice
const uint LD4 = BK4 + 2;                       // row stride of the shared stages in f16vec4 (+16 bytes)
const uint LDF = FN + 4;                        // row stride of a scratch fragment in floats
const uint A_SLOTS = BM * BK8, B_SLOTS = BN * BK8;  // slots per stage of A, of B
const uint A_LOADS = (A_SLOTS + WORKGROUP - 1) / WORKGROUP;  // per invocation
const uint B_LOADS = (B_SLOTS + WORKGROUP - 1) / WORKGROUP;

// The vec4 views serve FLAG_VEC4 (k and every row start a multiple of 4, B (n, k));
// the 16-byte views FLAG_A_WIDE / FLAG_B_WIDE (k and the operand's row starts a
// multiple of 8). Every load of a slot reads its 8 elements at index i, i % 8 == 0.
layout(set = 0, binding = 0) readonly buffer BufA { ACT_T a[]; };
layout(set = 0, binding = 0) readonly buffer BufA4 { ACT_T4 a4[]; };
#ifdef ACT_F16
layout(set = 0, binding = 0) readonly buffer BufA8 { uvec4 a8[]; };
#endif
#if defined(B_I8)
#include "matmul_b_i8.glsl"
layout(set = 0, binding = 1) readonly buffer BufB8 { uvec2 b8[]; };
#elif defined(B_F16)
#extension GL_EXT_shader_16bit_storage : require
layout(set = 0, binding = 1) readonly buffer BufB { float16_t b[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { f16vec4 b4[]; };
layout(set = 0, binding = 1) readonly buffer BufB8 { uvec4 b8[]; };
#define B_AT(i) float(b[i])
#define B_AT4(i) vec4(b4[(i) >> 2])
#else
layout(set = 0, binding = 1) readonly buffer BufB { float b[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { vec4 b4[]; };
#define B_AT(i) float(b[i])
#define B_AT4(i) vec4(b4[(i) >> 2])
#endif

// Two halves of f16 from each word of a 16-byte load.
f16vec4 halves4(uint lo, uint hi) { return f16vec4(unpackFloat2x16(lo), unpackFloat2x16(hi)); }

// A's elements i .. i + 7 (i % 8 == 0) as two f16vec4: one 16-byte load (F16),
// two (F32; these need i % 4 == 0 only).
void a_load8(uint i, out f16vec4 lo, out f16vec4 hi)
{
#ifdef ACT_F16
    uvec4 u = a8[i >> 3];
    lo = halves4(u.x, u.y);
    hi = halves4(u.z, u.w);
#else
    lo = f16vec4(a4[i >> 2]);
    hi = f16vec4(a4[(i >> 2) + 1u]);
#endif
}

// B's elements i .. i + 7 (i % 8 == 0): one 16-byte load (F16), one 8-byte (int8),
// two 16-byte (F32).
void b_load8(uint i, out f16vec4 lo, out f16vec4 hi)
{
#if defined(B_I8)
    uvec2 w = b8[i >> 3];
    lo = f16vec4(ivec4(bitfieldExtract(int(w.x), 0, 8), bitfieldExtract(int(w.x), 8, 8),
                       bitfieldExtract(int(w.x), 16, 8), bitfieldExtract(int(w.x), 24, 8)));
    hi = f16vec4(ivec4(bitfieldExtract(int(w.y), 0, 8), bitfieldExtract(int(w.y), 8, 8),
                       bitfieldExtract(int(w.y), 16, 8), bitfieldExtract(int(w.y), 24, 8)));
#elif defined(B_F16)
    uvec4 u = b8[i >> 3];
    lo = halves4(u.x, u.y);
    hi = halves4(u.z, u.w);
#else
    lo = f16vec4(B_AT4(i));
    hi = f16vec4(B_AT4(i + 4u));
#endif
}
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
#ifdef SPLIT_K
// (splits, batch items, m, n) fp32 partial sums, split s of item z at (s * items + z) * m * n
layout(set = 0, binding = 4) writeonly buffer BufPart { float c[]; };
#else
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };
#include "matmul_epilogue.glsl"
#endif

shared f16vec4 tile_a[BM * LD4];                // (BM, LD4): rows of A, 4 k per element
shared f16vec4 tile_b[BN * LD4];                // (BN, LD4): rows of Bᵀ, read as column-major (FK, FN)
shared float scratch[WG_M * WG_N * FM * LDF];   // one fragment per subgroup tile (edges)

// The next K slice, in flight from global memory while the current one
// multiplies: slot r of this invocation as next_a[2 r] (k 0-3), next_a[2 r + 1] (k 4-7).
f16vec4 next_a[2 * A_LOADS];
f16vec4 next_b[2 * B_LOADS];

#define ACC coopmat<float, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator>

// Loads the K slice [k0, k0 + BK) of A's rows row0.. and B's rows col0.. into
// next_a, next_b; zeros past m, n and kend. Slot i of A is row i / BK8, k
// (i % BK8) * 8: consecutive invocations read consecutive 16 bytes of a row.
void load_slice(uint k0, uint kend, uint row0, uint col0, uint a_base, uint b_base)
{
    const uint tid = gl_LocalInvocationID.x;
    const bool vec4_loads = (pc.flags & FLAG_VEC4) != 0u, b_kn = (pc.flags & FLAG_B_KN) != 0u;
    const bool a_wide = (pc.flags & FLAG_A_WIDE) != 0u, b_wide = (pc.flags & FLAG_B_WIDE) != 0u;
    [[unroll]] for (uint r = 0; r < A_LOADS; r++) {
        uint i = tid + r * WORKGROUP;
        uint gm = row0 + i / BK8, gk = k0 + i % BK8 * 8;
        f16vec4 lo = f16vec4(0.0), hi = f16vec4(0.0);
        if (i < A_SLOTS && gm < pc.m && gk < kend) {
            uint at = a_base + gm * pc.a_row + gk;
            if (a_wide) {
                a_load8(at, lo, hi);                     // kend is a multiple of 8 here
            } else if (vec4_loads) {
                lo = f16vec4(a4[at >> 2]);               // kend and gk are multiples of 4 here
                if (gk + 4u < kend) hi = f16vec4(a4[(at >> 2) + 1u]);
            } else {
                [[unroll]] for (uint e = 0; e < 4; e++) {
                    if (gk + e < kend) lo[e] = float16_t(a[at + e]);
                    if (gk + 4u + e < kend) hi[e] = float16_t(a[at + 4u + e]);
                }
            }
        }
        next_a[2 * r] = lo;
        next_a[2 * r + 1] = hi;
    }
    [[unroll]] for (uint r = 0; r < B_LOADS; r++) {
        uint i = tid + r * WORKGROUP;
        // B (k, n): consecutive invocations take consecutive columns (coalesced).
        uint n = b_kn ? i % BN : i / BK8, kq = b_kn ? i / BN : i % BK8;
        uint gn = col0 + n, gk = k0 + kq * 8;
        f16vec4 lo = f16vec4(0.0), hi = f16vec4(0.0);
        if (i < B_SLOTS && gn < pc.n && gk < kend) {
            if (b_kn) {
                [[unroll]] for (uint e = 0; e < 4; e++) {
                    if (gk + e < kend) lo[e] = float16_t(B_AT(b_base + (gk + e) * pc.b_row + gn));
                    if (gk + 4u + e < kend) hi[e] = float16_t(B_AT(b_base + (gk + 4u + e) * pc.b_row + gn));
                }
            } else {
                uint at = b_base + gn * pc.b_row + gk;
                if (b_wide) {
                    b_load8(at, lo, hi);
                } else if (vec4_loads) {
                    lo = f16vec4(B_AT4(at));
                    if (gk + 4u < kend) hi = f16vec4(B_AT4(at + 4u));
                } else {
                    [[unroll]] for (uint e = 0; e < 4; e++) {
                        if (gk + e < kend) lo[e] = float16_t(B_AT(at + e));
                        if (gk + 4u + e < kend) hi[e] = float16_t(B_AT(at + 4u + e));
                    }
                }
            }
        }
        next_b[2 * r] = lo;
        next_b[2 * r + 1] = hi;
    }
}

// Writes next_a, next_b to the shared stage (16 bytes per slot: its two halves
// are adjacent, LD4 is even).
void store_slice()
{
    const uint tid = gl_LocalInvocationID.x;
    const bool b_kn = (pc.flags & FLAG_B_KN) != 0u;
    [[unroll]] for (uint r = 0; r < A_LOADS; r++) {
        uint i = tid + r * WORKGROUP;
        uint at = i / BK8 * LD4 + i % BK8 * 2;
        if (i < A_SLOTS) {
            tile_a[at] = next_a[2 * r];
            tile_a[at + 1u] = next_a[2 * r + 1];
        }
    }
    [[unroll]] for (uint r = 0; r < B_LOADS; r++) {
        uint i = tid + r * WORKGROUP;
        uint n = b_kn ? i % BN : i / BK8, kq = b_kn ? i / BN : i % BK8;
        uint at = n * LD4 + kq * 2;
        if (i < B_SLOTS) {
            tile_b[at] = next_b[2 * r];
            tile_b[at + 1u] = next_b[2 * r + 1];
        }
    }
}

#ifndef SPLIT_K
// act(alpha * scale * acc + bias) + R on the fragment at (row, col), stored to C.
// The fragment lies inside C, whose rows are 16-byte aligned (FLAG_C_ALIGNED).
void store_fragment(ACC v, uint b0, uint b1, uint row, uint col)
{
#ifdef B_I8
    ACC s;
    coopMatLoad(s, b_scale, col, 0, gl_CooperativeMatrixLayoutRowMajor);   // stride 0: every row the same
    v = v * s;
#endif
    v = v * pc.alpha;
    if ((pc.flags & FLAG_BIAS) != 0u) {
        ACC bm;
        coopMatLoad(bm, bias, col, 0, gl_CooperativeMatrixLayoutRowMajor);
        v = v + bm;
    }
    const uint act = (pc.flags >> 4) & 7u;
    if (act != 0u)
        [[unroll]] for (int e = 0; e < v.length(); e++) v[e] = activate(v[e], act);
    if ((pc.flags & FLAG_RESIDUAL) != 0u) {
        coopmat<ACT_T, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator> rm;
        coopMatLoad(rm, res, pc.r_offset + b0 * pc.r_batch0 + b1 * pc.r_batch1 + row * pc.r_row + col, pc.r_row,
                    gl_CooperativeMatrixLayoutRowMajor);
        v = v + ACC(rm);
    }
    coopmat<ACT_T, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator> o = coopmat<ACT_T, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator>(v);
    coopMatStore(o, c, pc.c_offset + b0 * pc.c_batch0 + b1 * pc.c_batch1 + row * pc.c_row + col, pc.c_row,
                 gl_CooperativeMatrixLayoutRowMajor);
}
#endif

// Stores fragment acc, whose origin is (row, col) of C (or of the partial sums):
// directly where it lies inside C (all of the workgroup's tile: wg_inside),
// else through this subgroup's scratch fragment with bounds checks. At the edges
// every subgroup passes the same subgroup barriers for each fragment, direct or
// not (lavapipe loses stores when the subgroups of one workgroup pass different
// numbers of them).
void store_acc(ACC acc, uint row, uint col, uint item, uint split, uint splits, uint b0, uint b1, bool wg_inside)
{
    const uint slot = gl_SubgroupID * FM * LDF;
    const bool direct = wg_inside || ((pc.flags & FLAG_C_ALIGNED) != 0u && row + FM <= pc.m && col + FN <= pc.n);
#ifdef SPLIT_K
    const uint part = (split * (gl_NumWorkGroups.z / splits) + item) * pc.m * pc.n;
#endif
    if (!wg_inside) {
        if (!direct) coopMatStore(acc, scratch, slot, LDF, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
    }
    if (direct) {
#ifdef SPLIT_K
        coopMatStore(acc, c, part + row * pc.n + col, pc.n, gl_CooperativeMatrixLayoutRowMajor);
#else
        store_fragment(acc, b0, b1, row, col);
#endif
    } else {
        for (uint e = gl_SubgroupInvocationID; e < FM * FN; e += gl_SubgroupSize) {
            uint r = row + e / FN, cc = col + e % FN;
            if (r < pc.m && cc < pc.n) {
                float v = scratch[slot + (e / FN) * LDF + e % FN];
#ifdef SPLIT_K
                c[part + r * pc.n + cc] = v;
#else
                store_output(b0, b1, r, cc, v);
#endif
            }
        }
    }
    if (!wg_inside) subgroupBarrier();          // read before the next fragment overwrites it
}

void main()
{
    const uint z = gl_WorkGroupID.z;
#ifdef SPLIT_K
    // z = batch item * splits + split; each split sums K in [kbeg, kend).
    const uint splits = (pc.k + pc.k_split - 1u) / pc.k_split;
    const uint item = z / splits, split = z % splits;
    const uint kbeg = split * pc.k_split, kend = min(pc.k, kbeg + pc.k_split);
#else
    const uint item = z, kbeg = 0u, kend = pc.k, split = 0u, splits = 1u;
#endif
    const uint b0 = item / pc.batch_inner, b1 = item % pc.batch_inner;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint a_base = pc.a_offset + b0 * pc.a_batch0 + b1 * pc.a_batch1;
    const uint b_base = pc.b_offset + b0 * pc.b_batch0 + b1 * pc.b_batch1;
    const uint tiles = WG_M * WG_N;
    const uint subgroups = gl_NumSubgroups;
    const bool aligned = (pc.flags & FLAG_C_ALIGNED) != 0u;

    for (uint pass = 0; pass * subgroups < tiles; pass++) {
        const uint tile = pass * subgroups + gl_SubgroupID;   // this subgroup's tile (none when >= tiles)
        const uint tr = (tile / WG_N) * TM, tc = (tile % WG_N) * TN;   // its origin in the workgroup tile
        ACC acc[MAX_FRAGS];                 // fragment f: row f / SN, column f % SN of the warp tile
#define ACC_ZERO(f) if (f < FRAGS) acc[f] = ACC(0.0);
        EACH_FRAG(ACC_ZERO)

        load_slice(kbeg, kend, row0, col0, a_base, b_base);
        for (uint k0 = kbeg; k0 < kend; k0 += BK) {
            store_slice();
            barrier();
            if (k0 + BK < kend) load_slice(k0 + BK, kend, row0, col0, a_base, b_base);  // in flight during the MMAs
            if (tile < tiles) {
                [[unroll]] for (uint kk = 0; kk < BK4; kk += FK / 4) {
                    coopmat<float16_t, gl_ScopeSubgroup, FM, FK, gl_MatrixUseA> fa[MAX_FRAGS];
                    coopmat<float16_t, gl_ScopeSubgroup, FK, FN, gl_MatrixUseB> fb[MAX_FRAGS];
#define LOAD_FA(i) if (i < SM) coopMatLoad(fa[i], tile_a, (tr + i * FM) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutRowMajor);
#define LOAD_FB(j) if (j < SN) coopMatLoad(fb[j], tile_b, (tc + j * FN) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutColumnMajor);
#define MMA(f) if (f < FRAGS) acc[f] = coopMatMulAdd(fa[f / SN], fb[f % SN], acc[f]);
                    EACH_FRAG(LOAD_FA)
                    EACH_FRAG(LOAD_FB)
                    EACH_FRAG(MMA)
                }
            }
            barrier();
        }
        if (tile >= tiles) continue;
        // Epilogue, fragment by fragment (a subgroup with a tile has gl_SubgroupID <
        // tiles: scratch slots never clash).
const bool wg_inside = aligned && row0 + BM <= pc.m && col0 + BN <= pc.n;
#define STORE_ACC(f) if (f < FRAGS) \
        store_acc(acc[f], row0 + tr + (f / SN) * FM, col0 + tc + (f % SN) * FN, item, split, splits, b0, b1, wg_inside);
        EACH_FRAG(STORE_ACC)
    }
}
