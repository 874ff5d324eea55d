/*
 * copy.cl - posenc_copy: a strided copy with an optional f32 <-> f16 conversion, and the
 * copy ceiling of the benchmark.
 *
 * COPY_MODE (-D, set by the host):
 *   0  same 4-byte type (f32, i32): the bits are moved as uint
 *   1  same 2-byte type (f16): the bits are moved as ushort
 *   2  f32 -> f16 (vstore_half_rte: round to nearest even, NaN stays NaN)
 *   3  f16 -> f32 (vload_half: exact)
 * Offsets and strides are in elements of each tensor's own type; all index arithmetic is
 * 64-bit. The NDRange may be rounded up past the shape. The host
 * (src/opencl/backend_opencl.c) lists the argument order.
 */

#if COPY_MODE == 0
#define SRC_T uint
#define DST_T_ uint
#define PE_COPY_ONE(d, di, s, si) ((d)[(di)] = (s)[(si)])
#define PE_COPY_FOUR(d, di, s, si) vstore4(vload4(0, (s) + (si)), 0, (d) + (di))
#elif COPY_MODE == 1
#define SRC_T ushort
#define DST_T_ ushort
#define PE_COPY_ONE(d, di, s, si) ((d)[(di)] = (s)[(si)])
#define PE_COPY_FOUR(d, di, s, si) vstore4(vload4(0, (s) + (si)), 0, (d) + (di))
#elif COPY_MODE == 2
#define SRC_T float
#define DST_T_ half
#define PE_COPY_ONE(d, di, s, si) vstore_half_rte((s)[(si)], (size_t)(di), (d))
#define PE_COPY_FOUR(d, di, s, si) vstore_half4_rte(vload4(0, (s) + (si)), 0, (d) + (di))
#else
#define SRC_T half
#define DST_T_ float
#define PE_COPY_ONE(d, di, s, si) ((d)[(di)] = vload_half((size_t)(si), (s)))
#define PE_COPY_FOUR(d, di, s, si) vstore4(vload_half4(0, (s) + (si)), 0, (d) + (di))
#endif

/*
 * pe_copy: one work-item per element (i0, i1, i2 + ne2*i3).
 *   shape = (ne0, ne1, ne2, ne3)
 */
__kernel void pe_copy(__global DST_T_ *dst, const long dst_off, const long4 dst_st,
                      __global const SRC_T *src, const long src_off, const long4 src_st,
                      const long4 shape)
{
    const long i0 = (long)get_global_id(0);
    const long i1 = (long)get_global_id(1);
    const long i23 = (long)get_global_id(2);
    if (i0 >= shape.s0 || i1 >= shape.s1 || i23 >= shape.s2 * shape.s3)
        return;
    const long i2 = i23 % shape.s2;
    const long i3 = i23 / shape.s2;
    const long si = src_off + i0 * src_st.s0 + i1 * src_st.s1 + i2 * src_st.s2 + i3 * src_st.s3;
    const long di = dst_off + i0 * dst_st.s0 + i1 * dst_st.s1 + i2 * dst_st.s2 + i3 * dst_st.s3;
    PE_COPY_ONE(dst, di, src, si);
}

/*
 * pe_copy_flat: both tensors are n contiguous elements (from src_off / dst_off). Work-item
 * i moves elements [4i, 4i + 4) with 4-wide loads and stores (the last one, if n is not a
 * multiple of 4, element by element).
 */
__kernel void pe_copy_flat(__global DST_T_ *dst, const long dst_off, __global const SRC_T *src,
                           const long src_off, const long n)
{
    const long e = 4 * (long)get_global_id(0);
    if (e + 4 <= n) {
        PE_COPY_FOUR(dst, dst_off + e, src, src_off + e);
    } else {
        for (long k = e; k < n; k++)
            PE_COPY_ONE(dst, dst_off + k, src, src_off + k);
    }
}
