/*
 * softmax.cl - posenc_softmax (internal.h, struct pe_softmax_op; ggml's GGML_OP_SOFT_MAX).
 *
 * pe_softmax: one work-group per row (i1, i2, i3) of x, its work-items striding over the
 * row (any length: a row of 643251 elements is ~2500 per work-item), three passes:
 *   1. m = max(max_k v_k, sink)      v_k = scale*x_k + slope*mask_k, in f32 (as ggml)
 *   2. s = sum_k exp(v_k - m) + exp(sink - m)   (each work-item's terms summed with Kahan
 *      compensation, then a work-group tree; the result is the same on every run)
 *   3. dst_k = exp(v_k - m) * (1/s)  -- each element read and written by the same
 *      work-item after both reductions, so dst may be x (in place)
 * m == -inf (every v_k is -inf and no finite sink): every dst_k = NaN, as ggml.
 * A key whose v_k is -inf gets exactly 0.
 *
 * Storage types from -D options (common.cl): X_F16 (x; HAS_X=1), DST_F16 (dst), TAB_F16
 * (the mask). SM_MASK, SM_SINKS, SM_SLOPES (0 or 1): a mask is added, sinks are read, the
 * mask is multiplied by per-head slopes (else slope 1). Offsets and strides are in
 * elements of each tensor's own type; index arithmetic is 64-bit. The host
 * (src/opencl/ops_softmax.c) lists the argument order.
 */

#ifndef SM_MASK
#define SM_MASK 0
#endif
#ifndef SM_SINKS
#define SM_SINKS 0
#endif
#ifndef SM_SLOPES
#define SM_SLOPES 0
#endif

/* The max (is_max) or the sum of v over the work-group, for every work-item. The local
 * size must be a power of two; every work-item must call it (it has barriers). */
float pe_sm_reduce(__local float *red, float v, int is_max)
{
    const size_t lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE); /* red may still be read from the previous reduction */
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s)
            red[lid] = is_max ? fmax(red[lid], red[lid + s]) : red[lid] + red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return red[0];
}

#if SM_MASK
#define PE_SM_V(k) (scale * PE_LOAD_X(x, xb + (k) * x_st.s0) + slope * PE_LOAD_TAB(mk, mb + (k) * m_st.s0))
#else
#define PE_SM_V(k) (scale * PE_LOAD_X(x, xb + (k) * x_st.s0))
#endif

/*
 * shape = (n, rows, H, B) of this launch; bcast = (mask ne[2], mask ne[3], h_off, b_off):
 * the global head h = h_off + i2 picks the slope, the sink and the mask plane h % ne[2]
 * (batch likewise). NDRange (wg, rows*H*B, 1), local (wg, 1, 1), wg a power of two; red is
 * wg floats of local memory, sized by the host at launch from the device's limits (one
 * program for every work-group size).
 */
__kernel void pe_softmax(__global DST_T *dst, const long d_off, const long4 d_st,
                         __global const X_T *x, const long x_off, const long4 x_st,
                         __global const TAB_T *mk, const long m_off, const long4 m_st,
                         __global const float *sk, const long s_off, const long s_st,
                         __global const float *slopes, const long4 shape, const long4 bcast,
                         const float scale, __local float *red)
{
    const long lid = (long)get_local_id(0);
    const long nl = (long)get_local_size(0);
    const long row = (long)get_group_id(1);
    const long n = shape.s0, R = shape.s1, H = shape.s2;
    const long i1 = row % R;
    const long i2 = (row / R) % H;
    const long i3 = row / (R * H);
    const long h = bcast.s2 + i2, b = bcast.s3 + i3;
    const long xb = x_off + i1 * x_st.s1 + i2 * x_st.s2 + i3 * x_st.s3;
    const long db = d_off + i1 * d_st.s1 + i2 * d_st.s2 + i3 * d_st.s3;
#if SM_MASK
    const long mb = m_off + i1 * m_st.s1 + (h % bcast.s0) * m_st.s2 + (b % bcast.s1) * m_st.s3;
#if SM_SLOPES
    const float slope = slopes[h];
#else
    const float slope = 1.0f;
#endif
#endif
#if SM_SINKS
    const float sink = sk[s_off + h * s_st];
#else
    const float sink = -INFINITY;
#endif

    float m = -INFINITY;
    for (long k = lid; k < n; k += nl)
        m = fmax(m, PE_SM_V(k));
    m = fmax(pe_sm_reduce(red, m, 1), sink);
    if (m == -INFINITY) { /* the same in every work-item: a uniform branch */
        for (long k = lid; k < n; k += nl)
            PE_STORE_DST(dst, db + k * d_st.s0, NAN);
        return;
    }
    float s = 0.0f, c = 0.0f; /* Kahan: s + c is the exact running sum to ~1 ulp */
    for (long k = lid; k < n; k += nl) {
        const float v = PE_SM_V(k);
        const float e = v == -INFINITY ? 0.0f : exp(v - m);
        const float y = e - c;
        const float t = s + y;
        c = (t - s) - y;
        s = t;
    }
    s = pe_sm_reduce(red, s, 0);
#if SM_SINKS
    s += exp(sink - m);
#endif
    const float inv = 1.0f / s;
    for (long k = lid; k < n; k += nl) {
        const float v = PE_SM_V(k);
        PE_STORE_DST(dst, db + k * d_st.s0, v == -INFINITY ? 0.0f : exp(v - m) * inv);
    }
}
