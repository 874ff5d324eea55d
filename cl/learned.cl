/*
 * learned.cl - learned absolute positions: posenc_learned (pe_learned) and its backward
 * pass posenc_learned_backward (pe_learned_bwd).
 *
 * Storage types from -D options (0 or 1, common.cl): DST_F16, HAS_X / X_F16 and TAB_F16.
 * pe_learned: dst, x (optional), table. pe_learned_bwd: dtable is DST (read and written),
 * dy is X (HAS_X=1). Offsets and strides are in elements of each tensor's own type; all
 * index arithmetic is 64-bit. The NDRange may be rounded up past `shape`. The host
 * (src/opencl/backend_opencl.c) lists the argument order.
 */

/*
 * pe_learned: one work-item per element (i0, t, b) of dst:
 *   dst[i0, t, b] = x[i0, t, b] + table[i0, pos[t, b]]     (x absent: the table value)
 * The x element is read before dst is written, so x may be the very same view as dst.
 * The front end checked every position against the table's rows.
 * shape = (d, T, B, 0); pos_st = (st for t, st for b (0: shared by the batch), 0, 0).
 */
__kernel void pe_learned(__global DST_T *dst, const long dst_off, const long4 dst_st,
                         __global const X_T *x, const long x_off, const long4 x_st,
                         __global const TAB_T *tab, const long tab_off, const long4 tab_st,
                         __global const int *pos, const long pos_off, const long4 pos_st,
                         const long4 shape)
{
    const long i0 = (long)get_global_id(0);
    const long t = (long)get_global_id(1);
    const long b = (long)get_global_id(2);
    if (i0 >= shape.s0 || t >= shape.s1 || b >= shape.s2)
        return;
    const long row = (long)pos[pos_off + t * pos_st.s0 + b * pos_st.s1];
    float v = PE_LOAD_TAB(tab, tab_off + i0 * tab_st.s0 + row * tab_st.s1);
#if HAS_X
    v = PE_LOAD_X(x, x_off + i0 * x_st.s0 + t * x_st.s1 + b * x_st.s2) + v;
#endif
    PE_STORE_DST(dst, dst_off + i0 * dst_st.s0 + t * dst_st.s1 + b * dst_st.s2, v);
}

/*
 * pe_learned_vec: pe_learned for x, table and dst whose innermost stride is 1 and whose
 * rows start on multiples of 16 elements (the host checks it): one work-item per PE_KPW
 * consecutive elements of a row (-D, a multiple of 16: 16 on GPUs, more on CPU devices,
 * where a work-item's set-up -- the position load among it -- is not hidden by others),
 * 16 at a time in 16-wide loads and stores; a row's last elements (d not a multiple of 16)
 * one by one. The same sum as pe_learned (x + table, in f32, one rounding to dst). Same
 * arguments; NDRange (ceil(d / PE_KPW), T, B).
 */
#ifndef PE_KPW
#define PE_KPW 16
#endif
#if HAS_X && X_F16
#define PE_LOAD16_X(p, i) vload_half16(0, (p) + (i))
#else
#define PE_LOAD16_X(p, i) vload16(0, (p) + (i))
#endif
#if TAB_F16
#define PE_LOAD16_TAB(p, i) vload_half16(0, (p) + (i))
#else
#define PE_LOAD16_TAB(p, i) vload16(0, (p) + (i))
#endif
__kernel void pe_learned_vec(__global DST_T *dst, const long dst_off, const long4 dst_st,
                             __global const X_T *x, const long x_off, const long4 x_st,
                             __global const TAB_T *tab, const long tab_off, const long4 tab_st,
                             __global const int *pos, const long pos_off, const long4 pos_st,
                             const long4 shape)
{
    const long i0 = PE_KPW * (long)get_global_id(0);
    const long t = (long)get_global_id(1);
    const long b = (long)get_global_id(2);
    if (i0 >= shape.s0 || t >= shape.s1 || b >= shape.s2)
        return;
    const long row = (long)pos[pos_off + t * pos_st.s0 + b * pos_st.s1];
    const long tr = tab_off + row * tab_st.s1;
    const long dr = dst_off + t * dst_st.s1 + b * dst_st.s2;
#if HAS_X
    const long xr = x_off + t * x_st.s1 + b * x_st.s2;
#endif
    const long i1 = i0 + PE_KPW < shape.s0 ? i0 + PE_KPW : shape.s0;
    long i = i0;
    for (; i + 16 <= i1; i += 16) {
        float16 v = PE_LOAD16_TAB(tab, tr + i);
#if HAS_X
        v = PE_LOAD16_X(x, xr + i) + v;
#endif
        PE_STORE16_DST(dst, dr + i, v);
    }
    for (; i < i1; i++) {
        float v = PE_LOAD_TAB(tab, tr + i);
#if HAS_X
        v = PE_LOAD_X(x, xr + i) + v;
#endif
        PE_STORE_DST(dst, dr + i, v);
    }
}

/*
 * pe_learned_bwd: one work-item per (i0, segment s); a segment is the tokens of one
 * table row. segs (int32) = seg_start[n_seg + 1], seg_row[n_seg], entries[n_tokens]:
 *   acc = sum over k in [seg_start[s], seg_start[s+1]) of dy[i0, t, b],  e = entries[k],
 *         t = e % T, b = e / T, added in that order in f32
 *   dtable[i0, seg_row[s]] += acc
 * Each (i0, row) has exactly one work-item and no atomics are used, so the result is the
 * same bits on every run; rows without tokens are not touched.
 * shape = (d, n_seg, T, 0).
 */
__kernel void pe_learned_bwd(__global DST_T *dtab, const long dtab_off, const long4 dtab_st,
                             __global const X_T *dy, const long dy_off, const long4 dy_st,
                             __global const int *segs, const long4 shape)
{
    const long i0 = (long)get_global_id(0);
    const long s = (long)get_global_id(1);
    const long n_seg = shape.s1;
    if (i0 >= shape.s0 || s >= n_seg)
        return;
    const long T = shape.s2;
    const long k0 = (long)segs[s];
    const long k1 = (long)segs[s + 1];
    const long row = (long)segs[n_seg + 1 + s];
    __global const int *entries = segs + (2 * n_seg + 1);

    const long yr = dy_off + i0 * dy_st.s0;
    float acc = 0.0f;
    for (long k = k0; k < k1; k++) {
        const long e = (long)entries[k];
        const long t = e % T;
        const long b = e / T;
        acc += PE_LOAD_X(dy, yr + t * dy_st.s1 + b * dy_st.s2);
    }
    const long di = dtab_off + i0 * dtab_st.s0 + row * dtab_st.s1;
    PE_STORE_DST(dtab, di, PE_LOAD_DST(dtab, di) + acc);
}
