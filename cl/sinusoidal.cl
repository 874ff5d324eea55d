/*
 * sinusoidal.cl - sinusoidal positional encoding (posenc_sinusoidal).
 *
 * One work-item per (pair i, row i1, batch i2 + ne2*i3): it forms the angle
 * pos * freq[i] once and takes its sin and cos (common.cl's pe_angle_*: the frequency in
 * quarter turns as two f32 words, freq[i] (hi) and freq[half + i] (lo), within a few 2^-24
 * of an f64 evaluation up to |pos * freq| = 2^24), and writes the two output elements of
 * the pair (optionally x*x_scale added). It reads both x elements before writing, so x may
 * be the very same view as dst (in place).
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
    float c;
    const float s = pe_angle_sincos(p, freq[i], freq[shape.s0 + i], &c);

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

/*
 * pe_sinusoidal_vec: the same op for tensors whose innermost stride is 1 (the host checks
 * it, and that half = d/2 is a multiple of 8; otherwise it uses pe_sinusoidal). Same
 * arguments as pe_sinusoidal; NDRange (half / 8, ne1, G2 * ne3) where G2 = 1 when the
 * positions are shared by dim 2 (pos_st.s1 == 0) and ne2 otherwise.
 *
 * Work-item (u, token, group) owns pairs 8u .. 8u+7: it takes sin and cos of pos * freq
 * (pe_angle_sincos8, one 8-wide vector) once and writes them to every row
 * i2 that shares the position (all of dim 2 when G2 = 1): interleaved as 16 floats
 * (s0, c0, ..., s7, c7) at 16u; half-split as 8 sines at 8u and 8 cosines at half + 8u (or
 * cos first); plus x * x_scale when fused. The rows are visited in order, with a barrier
 * after each on CPU devices (PE_CPU_ORDER, see rope.cl). Each vector of x is read before
 * dst is written (in place allowed).
 */
#ifndef PE_CPU_ORDER
#define PE_CPU_ORDER 0
#endif
#if HAS_X && X_F16
#define PE_LOAD8_X(p, i) vload_half8(0, (p) + (i))
#define PE_LOAD16_X(p, i) vload_half16(0, (p) + (i))
#else
#define PE_LOAD8_X(p, i) vload8(0, (p) + (i))
#define PE_LOAD16_X(p, i) vload16(0, (p) + (i))
#endif

__kernel void pe_sinusoidal_vec(__global DST_T *dst, const long dst_off, const long4 dst_st,
                                __global const X_T *x, const long x_off, const long4 x_st,
                                __global const POS_T *pos, const long pos_off,
                                const long4 pos_st, __global const float *freq,
                                const long4 shape, const int layout, const float x_scale)
{
    const long u = (long)get_global_id(0);
    const long i1 = (long)get_global_id(1);
    const long gz = (long)get_global_id(2);
    const long n_half = shape.s0;
    const long G2 = pos_st.s1 == 0 ? 1 : shape.s2;
    const long g2 = gz % G2;
    const long i3 = gz / G2;
#if !PE_CPU_ORDER
    /* GPU-style launches round the dimensions up to the local size */
    if (8 * u >= n_half || i1 >= shape.s1 || i3 >= shape.s3)
        return;
#endif

    const float p = convert_float(pos[pos_off + i1 * pos_st.s0 + g2 * pos_st.s1 + i3 * pos_st.s2]);
    float8 c;
    const float8 s = pe_angle_sincos8((float8)p, vload8(u, freq), vload8(u, freq + n_half), &c);
    float16 vi = (float16)(0.0f);
    float8 v1 = (float8)(0.0f), v2 = (float8)(0.0f);
    long j1, j2 = 0;
    if (layout == PE_SIN_INTERLEAVED) {
        vi = (float16)(s.s0, c.s0, s.s1, c.s1, s.s2, c.s2, s.s3, c.s3, s.s4, c.s4, s.s5, c.s5,
                       s.s6, c.s6, s.s7, c.s7);
        j1 = 16 * u;
    } else {
        v1 = layout == PE_SIN_HALF_SPLIT ? s : c;
        v2 = layout == PE_SIN_HALF_SPLIT ? c : s;
        j1 = 8 * u;
        j2 = n_half + 8 * u;
    }
    const long r0 = G2 == 1 ? 0 : g2, r1 = G2 == 1 ? shape.s2 : g2 + 1;
    for (long i2 = r0; i2 < r1; i2++) {
        const long dr = dst_off + i1 * dst_st.s1 + i2 * dst_st.s2 + i3 * dst_st.s3;
#if HAS_X
        const long xr = x_off + i1 * x_st.s1 + i2 * x_st.s2 + i3 * x_st.s3;
#endif
        if (layout == PE_SIN_INTERLEAVED) {
#if HAS_X
            PE_STORE16_DST(dst, dr + j1, PE_LOAD16_X(x, xr + j1) * x_scale + vi);
#else
            PE_STORE16_DST(dst, dr + j1, vi);
#endif
        } else {
#if HAS_X
            const float8 w1 = PE_LOAD8_X(x, xr + j1) * x_scale + v1;
            const float8 w2 = PE_LOAD8_X(x, xr + j2) * x_scale + v2;
            PE_STORE8_DST(dst, dr + j1, w1);
            PE_STORE8_DST(dst, dr + j2, w2);
#else
            PE_STORE8_DST(dst, dr + j1, v1);
            PE_STORE8_DST(dst, dr + j2, v2);
#endif
        }
#if PE_CPU_ORDER
        barrier(CLK_GLOBAL_MEM_FENCE);
#endif
    }
}

/*
 * pe_sinusoidal_tok: pe_sinusoidal_vec's op for CPU devices (PoCL), where a work-item is a
 * loop iteration rather than a SIMD lane: work-item (block, group) takes the sin and cos of
 * every pair of the PE_TB (-D) positions of its block of tokens once (the same
 * pe_angle_sincos8 as pe_sinusoidal_vec, so the same results), in the output row's
 * layout, then writes every row i2 that shares the positions, the block's PE_TB tokens of
 * one row after another (one stretch of memory per row, as the CPU backend's blocks), with
 * no barrier (a group of consecutive blocks runs block after block). The same conditions
 * and arguments as pe_sinusoidal_vec, and PE_NH (-D) = half / 8, at most 128, so that the
 * tables have a known size (PE_TB * PE_NH * 64 bytes, at most 32 KiB: the host's choice).
 * NDRange (ceil(ne1 / PE_TB), G2 * ne3).
 */
#ifdef PE_NH
#ifndef PE_TB
#define PE_TB 1
#endif
__kernel void pe_sinusoidal_tok(__global DST_T *dst, const long dst_off, const long4 dst_st,
                                __global const X_T *x, const long x_off, const long4 x_st,
                                __global const POS_T *pos, const long pos_off,
                                const long4 pos_st, __global const float *freq,
                                const long4 shape, const int layout, const float x_scale)
{
    const long blk = (long)get_global_id(0);
    const long gz = (long)get_global_id(1);
    const long n_half = shape.s0;
    const long G2 = pos_st.s1 == 0 ? 1 : shape.s2;
    const long g2 = gz % G2;
    const long i3 = gz / G2;
    const long t0 = blk * PE_TB;
    if (t0 >= shape.s1 || i3 >= shape.s3)
        return;
    const int nt = shape.s1 - t0 < PE_TB ? (int)(shape.s1 - t0) : PE_TB;

    /* token k, unit u: interleaved, the 16 values at 16u; half-split, .lo the 8 at 8u and
     * .hi the 8 at half + 8u */
    float16 tv[PE_TB][PE_NH];
    for (int k = 0; k < nt; k++) {
        const float p = convert_float(
            pos[pos_off + (t0 + k) * pos_st.s0 + g2 * pos_st.s1 + i3 * pos_st.s2]);
        for (int u = 0; u < PE_NH; u++) {
            float8 c;
            const float8 s =
                pe_angle_sincos8((float8)p, vload8(u, freq), vload8(u, freq + n_half), &c);
            if (layout == PE_SIN_INTERLEAVED)
                tv[k][u] = (float16)(s.s0, c.s0, s.s1, c.s1, s.s2, c.s2, s.s3, c.s3, s.s4, c.s4,
                                     s.s5, c.s5, s.s6, c.s6, s.s7, c.s7);
            else if (layout == PE_SIN_HALF_SPLIT)
                tv[k][u] = (float16)(s, c);
            else
                tv[k][u] = (float16)(c, s);
        }
    }
    const long r0 = G2 == 1 ? 0 : g2, r1 = G2 == 1 ? shape.s2 : g2 + 1;
    for (long i2 = r0; i2 < r1; i2++)
        for (int k = 0; k < nt; k++) {
            const long i1 = t0 + k;
            const long dr = dst_off + i1 * dst_st.s1 + i2 * dst_st.s2 + i3 * dst_st.s3;
#if HAS_X
            const long xr = x_off + i1 * x_st.s1 + i2 * x_st.s2 + i3 * x_st.s3;
#endif
            if (layout == PE_SIN_INTERLEAVED) {
                for (int u = 0; u < PE_NH; u++) {
#if HAS_X
                    PE_STORE16_DST(dst, dr + 16 * u,
                                   PE_LOAD16_X(x, xr + 16 * u) * x_scale + tv[k][u]);
#else
                    PE_STORE16_DST(dst, dr + 16 * u, tv[k][u]);
#endif
                }
            } else {
                for (int u = 0; u < PE_NH; u++) {
#if HAS_X
                    PE_STORE8_DST(dst, dr + 8 * u,
                                  PE_LOAD8_X(x, xr + 8 * u) * x_scale + tv[k][u].lo);
#else
                    PE_STORE8_DST(dst, dr + 8 * u, tv[k][u].lo);
#endif
                }
                for (int u = 0; u < PE_NH; u++) {
#if HAS_X
                    PE_STORE8_DST(dst, dr + n_half + 8 * u,
                                  PE_LOAD8_X(x, xr + n_half + 8 * u) * x_scale + tv[k][u].hi);
#else
                    PE_STORE8_DST(dst, dr + n_half + 8 * u, tv[k][u].hi);
#endif
                }
            }
        }
}
#endif
