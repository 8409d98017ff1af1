#version 450
// tools/probes/texel_matmul.c's kernel: shaders/matmul_subgroup.comp's vec4 path, fixed tiles,
// A and B from storage buffers or (A_TEX, B_TEX) uniform texel buffers of RGBA32F texels.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;
const uint BM = 64, BN = 128, SG = 8, TM = 32, TN = 4, RG = TM / SG;
layout(push_constant) uniform P { uint m, n, k; } pc;
#if A_TEX
layout(set = 0, binding = 0) uniform samplerBuffer ta;
#define LOAD_A(i) texelFetch(ta, int((i) >> 2))
#else
layout(set = 0, binding = 0) readonly buffer BA { vec4 a4[]; };
#define LOAD_A(i) a4[(i) >> 2]
#endif
#if B_TEX
layout(set = 0, binding = 1) uniform samplerBuffer tb;
#define LOAD_B(i) texelFetch(tb, int((i) >> 2))
#else
layout(set = 0, binding = 1) readonly buffer BB { vec4 b4[]; };
#define LOAD_B(i) b4[(i) >> 2]
#endif
layout(set = 0, binding = 2) writeonly buffer BC { float c[]; };
void main()
{
    const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
    const uint sx = sg % (BN / (SG * TN)), sy = sg / (BN / (SG * TN));
    const uint row0 = gl_WorkGroupID.y * BM + sy * TM, col0 = gl_WorkGroupID.x * BN + sx * SG * TN;
    uint a_rows[RG], b_cols[TN];
    [[unroll]] for (uint g = 0; g < RG; g++) a_rows[g] = min(row0 + lane + SG * g, pc.m - 1u) * pc.k;
    [[unroll]] for (uint j = 0; j < TN; j++) b_cols[j] = min(col0 + lane + SG * j, pc.n - 1u) * pc.k;
    float acc[TM * TN];
    [[unroll]] for (uint i = 0; i < TM * TN; i++) acc[i] = 0.0;
    for (uint kk = 0; kk < pc.k; kk += 4u) {
        vec4 ra[RG], rb[TN];
        [[unroll]] for (uint g = 0; g < RG; g++) ra[g] = LOAD_A(a_rows[g] + kk);
        [[unroll]] for (uint j = 0; j < TN; j++) rb[j] = LOAD_B(b_cols[j] + kk);
        [[unroll]] for (uint q = 0; q < 4; q++)
            [[unroll]] for (uint i = 0; i < TM; i++) {
                float av = subgroupShuffle(ra[i / SG][q], i % SG);
                [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] += av * rb[j][q];
            }
    }
    [[unroll]] for (uint i = 0; i < TM; i++) {
        uint row = row0 + i;
        if (row >= pc.m) break;
        [[unroll]] for (uint j = 0; j < TN; j++) {
            uint col = col0 + lane + SG * j;
            if (col < pc.n) c[row * pc.n + col] = acc[i * TN + j];
        }
    }
}
