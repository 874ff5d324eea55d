/*
 * bias.cl - biases added to attention logits [K, Q, H, B] (keys innermost):
 * posenc_relbias (pe_relbias), posenc_relbias_backward (pe_relbias_bwd) and
 * posenc_alibi (pe_alibi).
 *
 * Storage types from -D options (0 or 1, common.cl): DST_F16 (dst, or dtable read and
 * written by the backward pass), HAS_X / X_F16 (logits, or dlogits with HAS_X=1) and
 * TAB_F16 (the relative-bias table). Offsets and strides are in elements of each
 * tensor's own type; all index arithmetic (positions, distances) is 64-bit. The NDRange
 * may be rounded up past `shape`. The host (src/opencl/backend_opencl.c) lists the
 * argument order.
 *
 * shape = (K, Q, H, B) everywhere.
 */

/*
 * pe_relbias: one work-item per element (k, q, h + H*b):
 *   rel = (k + k_offset) - (q + q_offset)
 *   dst[k, q, h, b] = logits[k, q, h, b] + table[bucket[rel - rel_min], h]
 * (no logits: the table value). The logits element is read before dst is written, so
 * logits may be the very same view as dst.
 * bucket: int32 [n_rel], uploaded per call. offs = (q_offset, k_offset, rel_min, 0).
 */
__kernel void pe_relbias(__global DST_T *dst, const long dst_off, const long4 dst_st,
                         __global const X_T *lg, const long lg_off, const long4 lg_st,
                         __global const TAB_T *tab, const long tab_off, const long4 tab_st,
                         __global const int *bucket, const long4 shape, const long4 offs)
{
    const long k = (long)get_global_id(0);
    const long q = (long)get_global_id(1);
    const long hb = (long)get_global_id(2);
    if (k >= shape.s0 || q >= shape.s1 || hb >= shape.s2 * shape.s3)
        return;
    const long h = hb % shape.s2;
    const long b = hb / shape.s2;
    const long rel = (k + offs.s1) - (q + offs.s0);
    const long u = (long)bucket[rel - offs.s2];
    float v = PE_LOAD_TAB(tab, tab_off + u * tab_st.s0 + h * tab_st.s1);
#if HAS_X
    v = PE_LOAD_X(lg, lg_off + k * lg_st.s0 + q * lg_st.s1 + h * lg_st.s2 + b * lg_st.s3) + v;
#endif
    PE_STORE_DST(dst, dst_off + k * dst_st.s0 + q * dst_st.s1 + h * dst_st.s2 + b * dst_st.s3,
                 v);
}

/*
 * pe_relbias_row: pe_relbias for logits and dst whose innermost (key) stride is 1: one
 * work-item per PE_KPW consecutive keys of a row (-D: 256 on CPU devices, where a
 * work-item's set-up -- two 64-bit divisions among it -- cost more than its one key in
 * pe_relbias), the keys one by one (a bucket and a table entry each). The same sum as
 * pe_relbias. Same arguments; NDRange (ceil(K / PE_KPW), Q, H * B).
 *
 * With PE_RB = 1 (TAB_F16 = 0) `tab` is pe_relbias_expand's rb instead of the table, with
 * tab_st = (1, n_rel, 0, 0) and tab_off its start: a row's bias values are consecutive
 * there (rb[h][rel - rel_min], rel rising with k), read 16 at a time like the logits;
 * `bucket` is not read. The values are the table's own (an f16 entry converted exactly),
 * so the sum is the same.
 */
#ifndef PE_RB
#define PE_RB 0
#endif
#if PE_RB && TAB_F16
#error "PE_RB reads rb (f32): TAB_F16 must be 0"
#endif
/* Keys per work-item of pe_relbias_row and pe_alibi_vec (-D; the host always passes it). */
#ifndef PE_KPW
#define PE_KPW 16
#endif
#ifndef PE_VEC16
#define PE_VEC16 0
#endif
/* 16-wide loads of the logits (pe_relbias_row, pe_alibi_vec); dst's stores are common.cl's
 * PE_STORE16_DST (streaming ones with PE_NT_STORE). */
#if HAS_X && X_F16
#define PE_LOAD16_LG(p, i) vload_half16(0, (p) + (i))
#else
#define PE_LOAD16_LG(p, i) vload16(0, (p) + (i))
#endif
/* The table entries of 16 keys (bucket list entries bk[0..15]) of head row tr, gathered one
 * by one; f16 entries as raw bits, converted 16 at a time (one scalar vload_half per entry
 * was most of pe_relbias_row's time on PoCL). */
static inline float16 pe_relbias_gather16(__global const TAB_T *tab, const long tr,
                                          __global const int *bk, const long st0)
{
#if TAB_F16
    ushort tb[16];
    for (int j = 0; j < 16; j++)
        tb[j] = ((__global const ushort *)tab)[tr + (long)bk[j] * st0];
    return vload_half16(0, (__private const half *)tb);
#else
    float tv[16];
    for (int j = 0; j < 16; j++)
        tv[j] = PE_LOAD_TAB(tab, tr + (long)bk[j] * st0);
    return vload16(0, tv);
#endif
}

__kernel void pe_relbias_row(__global DST_T *dst, const long dst_off, const long4 dst_st,
                             __global const X_T *lg, const long lg_off, const long4 lg_st,
                             __global const TAB_T *tab, const long tab_off, const long4 tab_st,
                             __global const int *bucket, const long4 shape, const long4 offs)
{
    const long k0 = PE_KPW * (long)get_global_id(0);
    const long q = (long)get_global_id(1);
    const long hb = (long)get_global_id(2);
    if (k0 >= shape.s0 || q >= shape.s1 || hb >= shape.s2 * shape.s3)
        return;
    const long h = hb % shape.s2;
    const long b = hb / shape.s2;
    const long k1 = k0 + PE_KPW < shape.s0 ? k0 + PE_KPW : shape.s0;
    /* bucket index of key k: (k + k_offset) - (q + q_offset) - rel_min */
    __global const int *bk = bucket + (offs.s1 - q - offs.s0 - offs.s2);
    const long tr = tab_off + h * tab_st.s1;
    const long dr = dst_off + q * dst_st.s1 + h * dst_st.s2 + b * dst_st.s3;
#if HAS_X
    const long lr = lg_off + q * lg_st.s1 + h * lg_st.s2 + b * lg_st.s3;
#endif
    long k = k0;
#if PE_RB
    /* rb's row of head h from the relative position of key 0: key k's bias at rr[k] */
    __global const float *rr = tab + tr + (offs.s1 - q - offs.s0 - offs.s2);
    (void)bk;
#define PE_BIAS16(k) vload16(0, rr + (k))
#define PE_BIAS1(k) rr[k]
#else
#define PE_BIAS16(k) pe_relbias_gather16(tab, tr, bk + (k), tab_st.s0)
#define PE_BIAS1(k) PE_LOAD_TAB(tab, tr + (long)bk[k] * tab_st.s0)
#endif
#if PE_VEC16
    /* rows aligned to 16 (the host checks it): 16 keys at a time, the logits and dst as
     * 16-wide vectors */
    for (; k + 16 <= k1; k += 16) {
        float16 v = PE_BIAS16(k);
#if HAS_X
        v = PE_LOAD16_LG(lg, lr + k) + v;
#endif
        PE_STORE16_DST(dst, dr + k, v);
    }
#endif
    for (; k < k1; k++) {
        float v = PE_BIAS1(k);
#if HAS_X
        v = PE_LOAD_X(lg, lr + k) + v;
#endif
        PE_STORE_DST(dst, dr + k, v);
    }
#undef PE_BIAS16
#undef PE_BIAS1
}

/*
 * pe_relbias_expand: the bias of every relative position, per head, for pe_relbias_row's
 * PE_RB path: rb[h * n_rel + r] = table[bucket[r], h] (as f32; an f16 entry converted
 * exactly), r in [0, n_rel). One work-item per PE_KPW consecutive r of one head; NDRange
 * (ceil(n_rel / PE_KPW), H).
 */
__kernel void pe_relbias_expand(__global float *rb, __global const TAB_T *tab, const long tab_off,
                                const long4 tab_st, __global const int *bucket, const long n_rel,
                                const long H)
{
    const long r0 = PE_KPW * (long)get_global_id(0);
    const long h = (long)get_global_id(1);
    if (r0 >= n_rel || h >= H)
        return;
    const long r1 = r0 + PE_KPW < n_rel ? r0 + PE_KPW : n_rel;
    const long tr = tab_off + h * tab_st.s1;
    __global float *out = rb + h * n_rel;
    for (long r = r0; r < r1; r++)
        out[r] = PE_LOAD_TAB(tab, tr + (long)bucket[r] * tab_st.s0);
}

/*
 * pe_relbias_bwd: one work-item per (bucket u, head h), in a fixed order (deterministic,
 * no atomics):
 *   acc = 0 (f32)
 *   for i in [seg_start[u], seg_start[u+1])       rel = rels[i] + rel_min, as listed
 *     for b in [0, B)
 *       for q ascending with k = q + q_offset + rel - k_offset in [0, K)
 *         acc += dlogits[k, q, h, b]
 *   dtable[u, h] += acc
 * segs (int32): seg_start[n_buckets + 1], then rels[...] (rel - rel_min values).
 * offs = (q_offset, k_offset, rel_min, n_buckets).
 */
__kernel void pe_relbias_bwd(__global DST_T *dtab, const long dtab_off, const long4 dtab_st,
                             __global const X_T *dl, const long dl_off, const long4 dl_st,
                             __global const int *segs, const long4 shape, const long4 offs)
{
    const long u = (long)get_global_id(0);
    const long h = (long)get_global_id(1);
    const long n_buckets = offs.s3;
    if (u >= n_buckets || h >= shape.s2)
        return;
    const long K = shape.s0, Q = shape.s1, B = shape.s3;
    __global const int *rels = segs + (n_buckets + 1);
    const long i_end = (long)segs[u + 1];
    const long hr = dl_off + h * dl_st.s2;

    float acc = 0.0f;
    for (long i = (long)segs[u]; i < i_end; i++) {
        const long rel = (long)rels[i] + offs.s2;
        const long delta = offs.s0 + rel - offs.s1; /* k = q + delta */
        const long q_lo = delta < 0 ? -delta : 0;
        const long q_hi = K - delta < Q ? K - delta : Q;
        for (long b = 0; b < B; b++) {
            const long br = hr + b * dl_st.s3;
            for (long q = q_lo; q < q_hi; q++)
                acc += PE_LOAD_X(dl, br + (q + delta) * dl_st.s0 + q * dl_st.s1);
        }
    }
    const long di = dtab_off + u * dtab_st.s0 + h * dtab_st.s1;
    PE_STORE_DST(dtab, di, PE_LOAD_DST(dtab, di) + acc);
}

/*
 * pe_alibi: one work-item per element (k, q, h + H*b). With qp = q + q_offset and
 * kp = k + k_offset, the distance is formed in integers and converted to f32 once:
 *   causal and kp > qp:  dst = -inf
 *   else                  dst = logits - slope[h] * (float)dist,  dist = qp - kp
 *                         (symmetric: |qp - kp|; no logits: -(slope[h] * dist), so
 *                         -0 at distance 0, as the CPU reference)
 * The logits element is read before dst is written (in place allowed).
 * slopes: f32, slope[h] = slopes[slope_off + h] (a head cut's launches share the op's
 * table). offs = (q_offset, k_offset, causal, symmetric).
 */
__kernel void pe_alibi(__global DST_T *dst, const long dst_off, const long4 dst_st,
                       __global const X_T *lg, const long lg_off, const long4 lg_st,
                       __global const float *slopes, const long slope_off, const long4 shape,
                       const long4 offs)
{
    const long k = (long)get_global_id(0);
    const long q = (long)get_global_id(1);
    const long hb = (long)get_global_id(2);
    if (k >= shape.s0 || q >= shape.s1 || hb >= shape.s2 * shape.s3)
        return;
    const long h = hb % shape.s2;
    const long b = hb / shape.s2;
    const long qp = q + offs.s0;
    const long kp = k + offs.s1;
    float v;
    if (offs.s2 != 0 && kp > qp) {
        v = -INFINITY;
    } else {
        long dist = qp - kp;
        if (offs.s3 != 0 && dist < 0)
            dist = -dist;
        const float fd = convert_float_rte(dist);
        v = -(slopes[slope_off + h] * fd);
#if HAS_X
        v = PE_LOAD_X(lg, lg_off + k * lg_st.s0 + q * lg_st.s1 + h * lg_st.s2 + b * lg_st.s3) + v;
#endif
    }
    PE_STORE_DST(dst, dst_off + k * dst_st.s0 + q * dst_st.s1 + h * dst_st.s2 + b * dst_st.s3,
                 v);
}

/*
 * pe_alibi_vec: pe_alibi for logits and dst whose innermost (key) stride is 1 and whose
 * rows start on multiples of 16 elements (the host checks it): one work-item per PE_KPW
 * consecutive keys of a row (-D, a multiple of 16: 16 on GPUs, more on CPU devices, where
 * a work-item's set-up is not hidden by others), 16 at a time in one 16-wide load and
 * store. The distance is formed in f32 as (float)(base - kb) - (0 .. 15): every position
 * is <= 2^24 (checked by the front end), so each value is the exact integer distance, the
 * same f32 the scalar kernel converts, and the arithmetic is the same. A row's last keys
 * (K not a multiple of 16) go one by one. Same arguments as pe_alibi; NDRange
 * (ceil(K / PE_KPW), Q, H * B).
 */

__kernel void pe_alibi_vec(__global DST_T *dst, const long dst_off, const long4 dst_st,
                           __global const X_T *lg, const long lg_off, const long4 lg_st,
                           __global const float *slopes, const long slope_off,
                           const long4 shape, const long4 offs)
{
    const long k0 = PE_KPW * (long)get_global_id(0);
    const long q = (long)get_global_id(1);
    const long hb = (long)get_global_id(2);
    const long K = shape.s0;
    if (k0 >= K || q >= shape.s1 || hb >= shape.s2 * shape.s3)
        return;
    const long h = hb % shape.s2;
    const long b = hb / shape.s2;
    const long base = q + offs.s0 - offs.s1; /* dist(k) = qp - kp = base - k */
    const float m = slopes[slope_off + h];
    const long dr = dst_off + q * dst_st.s1 + h * dst_st.s2 + b * dst_st.s3;
#if HAS_X
    const long lr = lg_off + q * lg_st.s1 + h * lg_st.s2 + b * lg_st.s3;
#endif
    const long k1 = k0 + PE_KPW < K ? k0 + PE_KPW : K;
    long kb = k0;
    for (; kb + 16 <= k1; kb += 16) {
        const float16 fd = (float)(base - kb) - (float16)(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f,
                                                           6.0f, 7.0f, 8.0f, 9.0f, 10.0f,
                                                           11.0f, 12.0f, 13.0f, 14.0f, 15.0f);
        const float16 ad = offs.s3 != 0 ? fabs(fd) : fd;
        float16 v = -(m * ad);
#if HAS_X
        v = PE_LOAD16_LG(lg, lr + kb) + v;
#endif
        if (offs.s2 != 0)
            v = select(v, (float16)(-INFINITY), fd < 0.0f);
        PE_STORE16_DST(dst, dr + kb, v);
    }
    for (long k = kb; k < k1; k++) {
        float v;
        long dist = base - k;
        if (offs.s2 != 0 && dist < 0) {
            v = -INFINITY;
        } else {
            if (offs.s3 != 0 && dist < 0)
                dist = -dist;
            v = -(m * convert_float_rte(dist));
#if HAS_X
            v = PE_LOAD_X(lg, lr + k) + v;
#endif
        }
        PE_STORE_DST(dst, dr + k, v);
    }
}
