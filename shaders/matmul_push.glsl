// Push constants of both matmul kernels; mirrored by vkf_push_matmul in ops.c.
// Views: element (b0, b1, row, col) of X is X[x_offset + b0*x_batch0 + b1*x_batch1
// + row*x_row + col]. All offsets are in elements.
layout(push_constant) uniform Push {
    uint m, n, k;
    uint flags;         // bit 0 bias, bit 1 residual, bit 2 B is (k, n), bit 3 vec4 loads ok, bits 4-6 activation,
                        // bit 7 C (and R) rows 16-byte aligned (matmul_coopmat's direct fragment stores),
                        // bits 8, 9 A's, B's (n, k) rows start on 8 elements and k % 8 == 0 (matmul_coopmat's 16-byte loads)
    uint batch_inner;   // batch index z = b0 * batch_inner + b1
    float alpha;
    uint a_offset, a_row, a_batch0, a_batch1;
    uint b_offset, b_row, b_batch0, b_batch1;
    uint c_offset, c_row, c_batch0, c_batch1;
    uint r_offset, r_row, r_batch0, r_batch1;
    uint k_split;       // split-K (matmul_coopmat -DSPLIT_K, matmul_splitk): K per split, a multiple of BK; else 0
} pc;

const uint FLAG_BIAS = 1u;
const uint FLAG_RESIDUAL = 2u;
const uint FLAG_B_KN = 4u;
const uint FLAG_VEC4 = 8u;
const uint FLAG_C_ALIGNED = 128u;
const uint FLAG_A_WIDE = 256u;
const uint FLAG_B_WIDE = 512u;

// C = act(alpha * acc + bias) + residual at (row, col) of batch item (b0, b1).
void store_output(uint b0, uint b1, uint row, uint col, float acc);
