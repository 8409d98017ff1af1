// B (binding 1) of the scalar matmul kernels, by its storage: F32, F16 (-DB_F16,
// 16-bit storage, widened on load) or int8 (-DB_I8, matmul_b_i8.glsl). B_AT(i) is
// element i as fp32; B_AT4(i) elements i .. i + 3, i a multiple of 4.
#if defined(B_I8)
#include "matmul_b_i8.glsl"
#elif defined(B_F16)
#extension GL_EXT_shader_16bit_storage : require
layout(set = 0, binding = 1) readonly buffer BufB { float16_t b[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { f16vec4 b4[]; };
#define B_AT(i) float(b[i])
#define B_AT4(i) vec4(b4[(i) >> 2])
#else
layout(set = 0, binding = 1) readonly buffer BufB { float b[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { vec4 b4[]; };
#define B_AT(i) float(b[i])
#define B_AT4(i) vec4(b4[(i) >> 2])
#endif
