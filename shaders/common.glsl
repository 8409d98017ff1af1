// Helpers shared by every vkformer compute shader.

// Linear index of this workgroup for grids the host lays out in 2-D because one
// dimension would pass maxComputeWorkGroupCount[0] (see grid_linear in ops.c).
uint linear_workgroup()
{
    return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}

// erf with |error| < 1.5e-7 (Abramowitz & Stegun 7.1.26); GLSL has none.
float erf_approx(float x)
{
    float s = sign(x);
    float a = abs(x);
    float t = 1.0 / (1.0 + 0.3275911 * a);
    float poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return s * (1.0 - poly * exp(-a * a));
}

// Exact (erf) GELU, as torch.nn.functional.gelu with approximate='none'.
float gelu(float x)
{
    return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752));
}

// GELU with the tanh approximation (transformers' gelu_new, T5 v1.1's gated-gelu):
// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), tanh written with one exp of a
// non-positive argument so that no input overflows to inf/inf.
float gelu_tanh(float x)
{
    float u = 0.79788456080286536 * (x + 0.044715 * x * x * x);
    float e = exp(-2.0 * abs(u));
    float t = sign(u) * (1.0 - e) / (1.0 + e);
    return 0.5 * x * (1.0 + t);
}

// Activation codes match vkf_activation.
float activate(float x, uint act)
{
    if (act == 1u) return max(x, 0.0);
    if (act == 2u) return gelu(x);
    if (act == 3u) return x / (1.0 + exp(-x));   // SiLU (swish), as torch.nn.functional.silu
    if (act == 4u) return gelu_tanh(x);
    return x;
}
