// Needs the bindings C (c[]), bias (bias[]) and R (res[]) and matmul_push.glsl.
void store_output(uint b0, uint b1, uint row, uint col, float acc)
{
#ifdef B_I8
    acc *= b_scale[col];                        // int8 weights: the output channel's scale
#endif
    float v = pc.alpha * acc;
    if ((pc.flags & FLAG_BIAS) != 0u) v += bias[col];
    v = activate(v, (pc.flags >> 4) & 7u);
    if ((pc.flags & FLAG_RESIDUAL) != 0u)
        v += float(res[pc.r_offset + b0 * pc.r_batch0 + b1 * pc.r_batch1 + row * pc.r_row + col]);
    c[pc.c_offset + b0 * pc.c_batch0 + b1 * pc.c_batch1 + row * pc.c_row + col] = ACT_T(v);
}
