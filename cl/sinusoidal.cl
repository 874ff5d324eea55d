/*
 * sinusoidal.cl - sinusoidal positional encoding (posenc_sinusoidal).
 *
 * One work-item per (pair i, row i1, batch i2 + ne2*i3): it forms the angle
 * pos * freq[i] once in f32, takes full-precision sin and cos of it, and writes the two
 * output elements of the pair (optionally x*x_scale added). It reads both x elements
 * before writing, so x may be the very same view as dst (in place).
 *
 * Offsets and strides are in elements of each tensor's own type; all index arithmetic
 * is 64-bit. shape = (half, ne1, ne2, ne3); the NDRange may be rounded up past it.
 * The host (src/opencl/backend_opencl.c) lists the argument order.
 */
__kernel void pe_sinusoidal(__global DST_T *dst, const long dst_off, const long4 dst_st,
                            __global const X_T *x, const long x_off, const long4 x_st,
                            __global const POS_T *pos, const long pos_off, const long4 pos_st,
                            __global const float *freq, const long4 shape, const int layout,
                            const float x_scale)
{
    const long i = (long)get_global_id(0);
    const long i1 = (long)get_global_id(1);
    const long i23 = (long)get_global_id(2);
    if (i >= shape.s0 || i1 >= shape.s1 || i23 >= shape.s2 * shape.s3)
        return;
    const long i2 = i23 % shape.s2;
    const long i3 = i23 / shape.s2;

    const float p = convert_float(pos[pos_off + i1 * pos_st.s0 + i2 * pos_st.s1 + i3 * pos_st.s2]);
    const float angle = p * freq[i];
    float c;
    const float s = sincos(angle, &c);

    long j_sin, j_cos; /* i0 of the sin and cos elements */
    if (layout == PE_SIN_INTERLEAVED) {
        j_sin = 2 * i;
        j_cos = 2 * i + 1;
    } else if (layout == PE_SIN_HALF_SPLIT) {
        j_sin = i;
        j_cos = shape.s0 + i;
    } else {
        j_cos = i;
        j_sin = shape.s0 + i;
    }

    float v_sin = s, v_cos = c;
#if HAS_X
    const long xr = x_off + i1 * x_st.s1 + i2 * x_st.s2 + i3 * x_st.s3;
    const float x_sin = PE_LOAD_X(x, xr + j_sin * x_st.s0);
    const float x_cos = PE_LOAD_X(x, xr + j_cos * x_st.s0);
    v_sin = x_sin * x_scale + s;
    v_cos = x_cos * x_scale + c;
#endif
    const long dr = dst_off + i1 * dst_st.s1 + i2 * dst_st.s2 + i3 * dst_st.s3;
    PE_STORE_DST(dst, dr + j_sin * dst_st.s0, v_sin);
    PE_STORE_DST(dst, dr + j_cos * dst_st.s0, v_cos);
}
