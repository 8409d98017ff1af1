// Row access of the scalar fused attention kernels (attention_fused.comp,
// attention_fused_lanes.comp): the including shader declares q, k, v and outv
// (IO_T: float, or float16_t with -DIO_F16; float with -DSPLIT_K, and D4) and
// includes attention_pattern.glsl (pc, qbase, obase0) first.

// Row i of q, pre-scaled, zero-padded: vec4 c4.
vec4 load_q(uint i, uint c4)
{
    vec4 val = vec4(0.0);
    if (i < pc.lq)
        for (uint c = 0u; c < 4u; c++)
            if (c4 * 4u + c < pc.head_dim) val[c] = float(q[qbase + i * pc.q_row + c4 * 4u + c]);
    return val * pc.scale;
}

// vec4 c4 of the row of K (is_k) or V at element `base`, zero past head_dim.
vec4 load_kv(uint base, uint c4, bool is_k)
{
    vec4 val = vec4(0.0);
    for (uint c = 0u; c < 4u; c++)
        if (c4 * 4u + c < pc.head_dim) val[c] = is_k ? float(k[base + c4 * 4u + c]) : float(v[base + c4 * 4u + c]);
    return val;
}

#ifdef SPLIT_K
// Split-K (-DSPLIT_K, attention.c): each split z writes its rows' partials for
// attention_split_reduce.comp instead of out: O unnormalised, (splits, batch *
// heads, lq, 4 D4) floats, then the [m, l] pair of each of those rows.
uint part_row(uint i)
{
    return (gl_WorkGroupID.z * pc.batch * pc.heads + b * pc.heads + h) * pc.lq + i;
}
float out_scale(float l) { return 1.0; }
void store_stats(uint i, float m, float l)
{
    uint at = (gl_NumWorkGroups.z * pc.batch * pc.heads * pc.lq) * (4u * D4) + part_row(i) * 2u;
    outv[at] = m;
    outv[at + 1u] = l;
}
void store_out(uint i, uint c4, vec4 o)
{
    uint base = part_row(i) * (4u * D4) + c4 * 4u;
    for (uint c = 0u; c < 4u; c++)
        if (c4 * 4u + c < pc.head_dim) outv[base + c] = o[c];
}
#else
// What O is multiplied by at the end: 1 / l, zeros for a fully masked row (l 0).
float out_scale(float l) { return l > 0.0 ? 1.0 / l : 0.0; }
// The running max m and sum l of row i: kept only by the split-K form.
void store_stats(uint i, float m, float l) {}
// out[i, c4 vec4] = o, clipped to head_dim.
void store_out(uint i, uint c4, vec4 o)
{
    uint base = obase0 + i * (pc.heads * pc.head_dim) + c4 * 4u;
    for (uint c = 0u; c < 4u; c++)
        if (c4 * 4u + c < pc.head_dim) outv[base + c] = IO_T(o[c]);
}
#endif
