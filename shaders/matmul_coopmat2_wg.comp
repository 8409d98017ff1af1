#version 450
// C = act(alpha * A·Bᵀ + bias) + R on workgroup-scope cooperative matrices
// (GL_NV_cooperative_matrix2): the form NVIDIA designed the extension for. The
// same contract and push constants as matmul_tiled.comp and matmul_coopmat.comp:
// A (m, k), B (n, k) or (k, n) (FLAG_B_KN), C and R (m, n), per batch item; any
// m, n, k; fp16 products, fp32 sums.
//
// One workgroup computes one BM x BN tile of C as a single accumulator matrix
// of workgroup scope. Each K step loads a BM x BK slice of A and a BK x BN
// slice of B with coopMatLoadTensorNV through tensor layouts (dimensions m x k
// and n x k, or k x n; the row strides of the views) and multiplies them. The
// compiler, not this shader, decides how the workgroup's warps split the tile,
// how the slices are staged through shared memory and how the loads of the next
// step are pipelined behind the matrix instructions of this one: the staging,
// double buffering and warp tiling matmul_coopmat.comp writes out by hand.
//
// Edges: the layouts clamp (gl_CooperativeMatrixClampModeConstantNV), so
// elements past m, n or k read as 0 and stores past m or n are dropped; no
// bounds checks in the loop. Where the whole tile lies inside A, B and C and K
// is a multiple of BK (the common case), the loop runs on unclamped layouts,
// which lets the compiler skip the per-element clamping.
//
// Epilogue: one per-element operation (coopMatPerElementNV) applies alpha, the
// bias, the activation and the residual to the fp32 accumulator, the arithmetic
// of store_output in matmul_epilogue.glsl; the result is converted to the
// activation type and stored with coopMatStoreTensorNV.
//
// Device requirements (the host checks them before it creates the pipeline):
// VK_NV_cooperative_matrix2 with cooperativeMatrixWorkgroupScope,
// cooperativeMatrixFlexibleDimensions, cooperativeMatrixTensorAddressing and
// cooperativeMatrixPerElementOperations, and a flexible-dimensions entry for
// f16 x f16 -> f32 at workgroup scope whose workgroupInvocations equals
// WORKGROUP and whose granularity divides BM, BN and BK. SPIR-V 1.6
// (--target-env=vulkan1.3). Mesa 26's lavapipe has neither workgroup scope nor
// tensor addressing; there the subgroup form (matmul_coopmat.comp -DNV2) runs.
//
// Variants: -DACT_F16 (A, C and R in F16), -DB_F16 (B in F16). F32 inputs are
// loaded as F32 matrices and converted to F16 (a matrix conversion, no decode
// function). Int8 weights would need a decode function (block loads) and are
// not built.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP = 256;  // the device's workgroupInvocations for workgroup scope
layout(constant_id = 1) const uint BM = 128;         // rows of C per workgroup
layout(constant_id = 2) const uint BN = 128;         // columns of C per workgroup
layout(constant_id = 3) const uint BK = 32;          // K per matrix step

layout(set = 0, binding = 0) readonly buffer BufA { ACT_T a[]; };
#ifdef B_F16
layout(set = 0, binding = 1) readonly buffer BufB { float16_t b[]; };
#define B_T float16_t
#else
layout(set = 0, binding = 1) readonly buffer BufB { float b[]; };
#define B_T float
#endif
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };

#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define ACC coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>
#define OUT coopmat<ACT_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>

// act(alpha * v + bias) + R for element (row, col) of the tile whose origin in C
// is (row0, col0); r_base: the residual's offset for this batch item.
float epilogue(const in uint row, const in uint col, const in float v, const in uint row0,
               const in uint col0, const in uint r_base)
{
    const uint gr = row0 + row, gc = col0 + col;
    if (gr >= pc.m || gc >= pc.n) return 0.0;   // dropped by the clamped store
    float x = pc.alpha * v;
    if ((pc.flags & FLAG_BIAS) != 0u) x += bias[gc];
    x = activate(x, (pc.flags >> 4) & 7u);
    if ((pc.flags & FLAG_RESIDUAL) != 0u) x += float(res[r_base + gr * pc.r_row + gc]);
    return x;
}

void main()
{
    const uint item = gl_WorkGroupID.z;
    const uint b0 = item / pc.batch_inner, b1 = item % pc.batch_inner;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint a_base = pc.a_offset + b0 * pc.a_batch0 + b1 * pc.a_batch1;
    const uint b_base = pc.b_offset + b0 * pc.b_batch0 + b1 * pc.b_batch1;
    const uint c_base = pc.c_offset + b0 * pc.c_batch0 + b1 * pc.c_batch1;
    const uint r_base = pc.r_offset + b0 * pc.r_batch0 + b1 * pc.r_batch1;
    const bool b_kn = (pc.flags & FLAG_B_KN) != 0u;

    // A (m, k) row-major; B (n, k) read through a transposing view, or (k, n).
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lc =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    la = setTensorLayoutDimensionNV(la, pc.m, pc.k);
    la = setTensorLayoutStrideNV(la, pc.a_row, 1);
    lb = b_kn ? setTensorLayoutDimensionNV(lb, pc.k, pc.n) : setTensorLayoutDimensionNV(lb, pc.n, pc.k);
    lb = setTensorLayoutStrideNV(lb, pc.b_row, 1);
    lc = setTensorLayoutDimensionNV(lc, pc.m, pc.n);
    lc = setTensorLayoutStrideNV(lc, pc.c_row, 1);
    tensorViewNV<2, false, 1, 0> transpose = createTensorViewNV(2, false, 1, 0);

    ACC acc = ACC(0.0);
    const bool inside = row0 + BM <= pc.m && col0 + BN <= pc.n && pc.k % BK == 0u;
    if (inside) {
        // No element of any slice is out of range: unclamped layouts.
        tensorLayoutNV<2> ua = createTensorLayoutNV(2);
        tensorLayoutNV<2> ub = createTensorLayoutNV(2);
        ua = setTensorLayoutDimensionNV(ua, pc.m, pc.k);
        ua = setTensorLayoutStrideNV(ua, pc.a_row, 1);
        ub = b_kn ? setTensorLayoutDimensionNV(ub, pc.k, pc.n) : setTensorLayoutDimensionNV(ub, pc.n, pc.k);
        ub = setTensorLayoutStrideNV(ub, pc.b_row, 1);
        for (uint k0 = 0; k0 < pc.k; k0 += BK) {
#ifdef ACT_F16
            MAT_A ma;
            coopMatLoadTensorNV(ma, a, a_base, sliceTensorLayoutNV(ua, row0, BM, k0, BK));
#else
            coopmat<float, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> fa;
            coopMatLoadTensorNV(fa, a, a_base, sliceTensorLayoutNV(ua, row0, BM, k0, BK));
            MAT_A ma = MAT_A(fa);
#endif
            coopmat<B_T, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
            if (b_kn)
                coopMatLoadTensorNV(mb, b, b_base, sliceTensorLayoutNV(ub, k0, BK, col0, BN));
            else
                coopMatLoadTensorNV(mb, b, b_base, sliceTensorLayoutNV(ub, col0, BN, k0, BK), transpose);
            acc = coopMatMulAdd(ma, MAT_B(mb), acc);
        }
    } else {
        for (uint k0 = 0; k0 < pc.k; k0 += BK) {
#ifdef ACT_F16
            MAT_A ma;
            coopMatLoadTensorNV(ma, a, a_base, sliceTensorLayoutNV(la, row0, BM, k0, BK));
#else
            coopmat<float, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> fa;
            coopMatLoadTensorNV(fa, a, a_base, sliceTensorLayoutNV(la, row0, BM, k0, BK));
            MAT_A ma = MAT_A(fa);
#endif
            coopmat<B_T, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
            if (b_kn)
                coopMatLoadTensorNV(mb, b, b_base, sliceTensorLayoutNV(lb, k0, BK, col0, BN));
            else
                coopMatLoadTensorNV(mb, b, b_base, sliceTensorLayoutNV(lb, col0, BN, k0, BK), transpose);
            acc = coopMatMulAdd(ma, MAT_B(mb), acc);
        }
    }

    // alpha, bias, activation, residual; skipped when they change nothing.
    if (pc.alpha != 1.0 || (pc.flags & (FLAG_BIAS | FLAG_RESIDUAL | (7u << 4))) != 0u)
        coopMatPerElementNV(acc, acc, epilogue, row0, col0, r_base);
    OUT o = OUT(acc);
    coopMatStoreTensorNV(o, c, c_base, sliceTensorLayoutNV(lc, row0, BM, col0, BN));
}
