#version 450
// Not a kernel: meson compiles this to learn whether glslc knows
// GL_KHR_cooperative_matrix (glslang 14 and later), and with -DNV2
// GL_NV_cooperative_matrix2 (which needs SPIR-V 1.6, --target-env=vulkan1.3).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifdef NV2
#extension GL_NV_cooperative_matrix2 : require
#endif
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Buf { float16_t x[]; };
void main()
{
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
    coopMatLoad(a, x, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(a, x, 256, 16, gl_CooperativeMatrixLayoutRowMajor);
}
