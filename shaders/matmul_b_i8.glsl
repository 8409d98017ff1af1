// B as int8 weights (VKF_DTYPE_I8, -DB_I8) for the matmul kernels: read as packed
// 32-bit words, four int8 per word in element order (little-endian), sign-extended
// with bitfieldExtract, so devices without 8-bit storage (SwiftShader) run it too.
// The products accumulate q·a in fp32; the per-output-channel scale b_scale[n]
// (binding 5, F32) multiplies the sum in store_output (matmul_epilogue.glsl).
// The host binds whole words (ranges rounded up to 4 bytes inside the allocation).
layout(set = 0, binding = 1) readonly buffer BufB { uint b_words[]; };
layout(set = 0, binding = 5) readonly buffer BufScale { float b_scale[]; };

// Element i of B (any layout: i is the element index).
float b_i8(uint i)
{
    return float(bitfieldExtract(int(b_words[i >> 2]), int(i & 3u) * 8, 8));
}

// Elements i .. i + 3 of B; i is a multiple of 4 (one word).
vec4 b_i8x4(uint i)
{
    int w = int(b_words[i >> 2]);
    return vec4(bitfieldExtract(w, 0, 8), bitfieldExtract(w, 8, 8), bitfieldExtract(w, 16, 8), bitfieldExtract(w, 24, 8));
}

#define B_AT(i) b_i8(i)
#define B_AT4(i) b_i8x4(i)
