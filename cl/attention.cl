/*
 * attention.cl - the posenc kernels of posenc_attention's three steps (internal.h):
 *   pe_attn_softmax   the row softmax, in place on the f32 logits (always)
 *   pe_attn_copy      copy / convert a strided f32 or f16 view into another (packing an
 *                     operand for CLBlast, unpacking the output into dst)
 *   pe_attn_scores    logits = scale * Q.K, one work-item per logit   (used when posenc
 *   pe_attn_output    dst = P.V, one work-item per output element      is built without
 *                                                                      CLBlast)
 * With CLBlast the two matrix products are CLBlast GEMMs (src/opencl/ops_attention.c).
 *
 * Storage types from -D options (0 or 1, common.cl): DST_F16 (the output of a kernel:
 * copy destination, dst, or the softmax's weights), HAS_X / X_F16 (the copy source, Q,
 * or the softmax's mask) and TAB_F16 (K or V). HAS_W: the softmax writes weights.
 * Offsets and strides are in elements of each tensor's own type; index arithmetic is
 * 64-bit. The host (src/opencl/ops_attention.c) lists the argument order.
 */

#ifndef HAS_W
#define HAS_W 0
#endif
/* Work-group size of pe_attn_softmax: at most this (-D, chosen by the host from the
 * device's work-group and local-memory limits); the host launches a power of two. */
#ifndef PE_ATTN_WG
#define PE_ATTN_WG 64
#endif

/* The max (is_max) or the sum of v over the work-group, for every work-item. The local
 * size must be a power of two; every work-item must call it (it has barriers). */
float pe_attn_reduce(__local float *red, float v, int is_max)
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

/*
 * pe_attn_softmax: one work-group per row (q, h, b), the work-items striding over the
 * keys. With qpos = q + q_offset, the keys k + k_offset > qpos are masked when causal:
 *   x_k = logits[k] + mask[k]    (no mask: the logit)
 *   m   = max over unmasked k of x_k          (fmax; a work-group reduction)
 *   m == -inf:  every p_k = 0                 (all keys masked: zeros, not NaN)
 *   else        p_k = exp(x_k - m) / sum_j exp(x_j - m)   (0 for masked keys)
 * written over the logits and, with HAS_W, into weights.
 * shape = (Tk, Tq, Hq, B); offs = (q_offset, k_offset, causal, 0).
 * NDRange (local size, Tq*Hq*B, 1), local (power of two <= PE_ATTN_WG, 1, 1).
 */
__kernel void pe_attn_softmax(__global float *lg, const long lg_off, const long4 lg_st,
                              __global const X_T *mk, const long mk_off, const long4 mk_st,
                              __global DST_T *w, const long w_off, const long4 w_st,
                              const long4 shape, const long4 offs)
{
    __local float red[PE_ATTN_WG];
    const long lid = (long)get_local_id(0);
    const long nl = (long)get_local_size(0);
    const long row = (long)get_group_id(1);
    const long K = shape.s0, Q = shape.s1, H = shape.s2;
    const long iq = row % Q;
    const long h = (row / Q) % H;
    const long b = row / (Q * H);
    const long lb = lg_off + iq * lg_st.s1 + h * lg_st.s2 + b * lg_st.s3;
    const long mb = mk_off + iq * mk_st.s1 + h * mk_st.s2 + b * mk_st.s3;
    const long wb = w_off + iq * w_st.s1 + h * w_st.s2 + b * w_st.s3;
    /* keys k < kn are not masked by causality: k + k_offset <= q + q_offset */
    long kn = K;
    if (offs.s2 != 0) {
        const long last = iq + offs.s0 - offs.s1;
        kn = last < 0 ? 0 : (last + 1 < K ? last + 1 : K);
    }

    float m = -INFINITY;
    for (long k = lid; k < kn; k += nl) {
        float x = lg[lb + k * lg_st.s0];
#if HAS_X
        x = x + PE_LOAD_X(mk, mb + k * mk_st.s0);
#endif
        m = fmax(m, x);
    }
    m = pe_attn_reduce(red, m, 1);
    if (m == -INFINITY) { /* the same value in every work-item: a uniform branch */
        for (long k = lid; k < K; k += nl) {
            lg[lb + k * lg_st.s0] = 0.0f;
#if HAS_W
            PE_STORE_DST(w, wb + k * w_st.s0, 0.0f);
#endif
        }
        return;
    }
    float s = 0.0f;
    for (long k = lid; k < kn; k += nl) {
        float x = lg[lb + k * lg_st.s0];
#if HAS_X
        x = x + PE_LOAD_X(mk, mb + k * mk_st.s0);
#endif
        s += exp(x - m);
    }
    s = pe_attn_reduce(red, s, 0);
    for (long k = lid; k < K; k += nl) {
        float p = 0.0f;
        if (k < kn) {
            float x = lg[lb + k * lg_st.s0];
#if HAS_X
            x = x + PE_LOAD_X(mk, mb + k * mk_st.s0);
#endif
            p = exp(x - m) / s;
        }
        lg[lb + k * lg_st.s0] = p;
#if HAS_W
        PE_STORE_DST(w, wb + k * w_st.s0, p);
#endif
    }
}

/*
 * pe_attn_copy: dst[i0, i1, i2, i3] = src[i0, i1, i2, i3], converting between f32 and f16
 * (HAS_X=1; X_F16 the source, DST_F16 the destination). shape = (n0, n1, n2, n3).
 * NDRange (n0, n1, n2*n3).
 */
__kernel void pe_attn_copy(__global DST_T *dst, const long dst_off, const long4 dst_st,
                           __global const X_T *src, const long src_off, const long4 src_st,
                           const long4 shape)
{
    const long i0 = (long)get_global_id(0);
    const long i1 = (long)get_global_id(1);
    const long i23 = (long)get_global_id(2);
    if (i0 >= shape.s0 || i1 >= shape.s1 || i23 >= shape.s2 * shape.s3)
        return;
    const long i2 = i23 % shape.s2;
    const long i3 = i23 / shape.s2;
    const float v = PE_LOAD_X(src, src_off + i0 * src_st.s0 + i1 * src_st.s1 +
                                       i2 * src_st.s2 + i3 * src_st.s3);
    PE_STORE_DST(dst, dst_off + i0 * dst_st.s0 + i1 * dst_st.s1 + i2 * dst_st.s2 +
                          i3 * dst_st.s3,
                 v);
}

/*
 * pe_attn_scores (no CLBlast): one work-item per logit (k, q, h + Hq*b):
 *   logits[k, q, h, b] = scale * sum_{i < D} q[i, h, q, b] * k[i, h / group, k, b]
 * in f32, summed in order of i. Q is X (HAS_X=1, X_F16), K is TAB (TAB_F16).
 * shape = (Tk, Tq, Hq, B); dims = (D, group, 0, 0). NDRange (Tk, Tq, Hq*B).
 */
__kernel void pe_attn_scores(__global float *lg, const long lg_off, const long4 lg_st,
                             __global const X_T *qv, const long q_off, const long4 q_st,
                             __global const TAB_T *kv, const long k_off, const long4 k_st,
                             const long4 shape, const long4 dims, const float scale)
{
    const long ik = (long)get_global_id(0);
    const long iq = (long)get_global_id(1);
    const long hb = (long)get_global_id(2);
    if (ik >= shape.s0 || iq >= shape.s1 || hb >= shape.s2 * shape.s3)
        return;
    const long h = hb % shape.s2;
    const long b = hb / shape.s2;
    const long qb = q_off + h * q_st.s1 + iq * q_st.s2 + b * q_st.s3;
    const long kb = k_off + (h / dims.s1) * k_st.s1 + ik * k_st.s2 + b * k_st.s3;
    float acc = 0.0f;
    for (long i = 0; i < dims.s0; i++)
        acc += PE_LOAD_X(qv, qb + i * q_st.s0) * PE_LOAD_TAB(kv, kb + i * k_st.s0);
    lg[lg_off + ik * lg_st.s0 + iq * lg_st.s1 + h * lg_st.s2 + b * lg_st.s3] = scale * acc;
}

/*
 * pe_attn_output (no CLBlast): one work-item per output element (i, q, h + Hq*b):
 *   dst[i, h, q, b] = sum_{k < Tk} p[k, q, h, b] * v[i, h / group, k, b]
 * in f32, summed in order of k. V is TAB (TAB_F16), dst DST (DST_F16).
 * shape = (Dv, Tq, Hq, B); dims = (Tk, group, 0, 0). NDRange (Dv, Tq, Hq*B).
 */
__kernel void pe_attn_output(__global DST_T *dst, const long dst_off, const long4 dst_st,
                             __global const float *pv, const long p_off, const long4 p_st,
                             __global const TAB_T *vv, const long v_off, const long4 v_st,
                             const long4 shape, const long4 dims)
{
    const long i = (long)get_global_id(0);
    const long iq = (long)get_global_id(1);
    const long hb = (long)get_global_id(2);
    if (i >= shape.s0 || iq >= shape.s1 || hb >= shape.s2 * shape.s3)
        return;
    const long h = hb % shape.s2;
    const long b = hb / shape.s2;
    const long pb = p_off + iq * p_st.s1 + h * p_st.s2 + b * p_st.s3;
    const long vb = v_off + i * v_st.s0 + (h / dims.s1) * v_st.s1 + b * v_st.s3;
    float acc = 0.0f;
    for (long k = 0; k < dims.s0; k++)
        acc += pv[pb + k * p_st.s0] * PE_LOAD_TAB(vv, vb + k * v_st.s2);
    PE_STORE_DST(dst, dst_off + i * dst_st.s0 + h * dst_st.s1 + iq * dst_st.s2 + b * dst_st.s3,
                 acc);
}
