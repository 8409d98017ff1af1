// The storage type of activations: float, or float16_t with -DACT_F16 (16-bit
// storage; every shader converts to float on load and computes in fp32).
#ifdef ACT_F16
#extension GL_EXT_shader_16bit_storage : require
#define ACT_T float16_t
#define ACT_T4 f16vec4
#else
#define ACT_T float
#define ACT_T4 vec4
#endif
