/*
 * rows.cl - posenc_fill and posenc_set_rows.
 *
 * pe_fill (-DFILL_16: 1 for a 2-byte dtype (f16), 0 for a 4-byte one (f32, i32)): every
 * element of the view gets `bits` (the host converted the value once). One work-item per
 * element (i0, i1, i2 + ne2*i3).
 *
 * pe_set_rows (-DX_F16 (src) -DDST_F16 -DROWS_I64 -DSAME_16 -DSAME_32): one work-item per
 * element (i0, i1, i2 + d2*i3) of src; it reads the row index of (i1, i2, i3) and writes
 * dst[i0, row, i2, i3], or nothing when the index is outside [0, n_rows). SAME_16 /
 * SAME_32: src and dst have one dtype and the bits are moved untouched; otherwise f32 <->
 * f16 through vload_half / vstore_half_rte (round to nearest even). i64 indices are read
 * as two 32-bit words (low word first, as every OpenCL device and host here is
 * little-endian), so no 64-bit load is needed: valid when the high word is 0 and the low
 * word < n_rows, which is exactly 0 <= index < n_rows.
 *
 * Offsets and strides are in elements of each tensor's own type; all index arithmetic is
 * 64-bit. The NDRange may be rounded up past the shape. The host
 * (src/opencl/ops_encodings.c) lists the argument order.
 */

#ifndef FILL_16
#define FILL_16 0
#endif
#ifndef ROWS_I64
#define ROWS_I64 0
#endif
#ifndef SAME_16
#define SAME_16 0
#endif
#ifndef SAME_32
#define SAME_32 0
#endif

#if FILL_16
#define FILL_T ushort
#else
#define FILL_T uint
#endif

/* shape = (ne0, ne1, ne2, ne3) */
__kernel void pe_fill(__global FILL_T *dst, const long dst_off, const long4 dst_st,
                      const long4 shape, const uint bits, const uint step)
{
    const long i0 = (long)get_global_id(0);
    const long i1 = (long)get_global_id(1);
    const long i23 = (long)get_global_id(2);
    if (i0 >= shape.s0 || i1 >= shape.s1 || i23 >= shape.s2 * shape.s3)
        return;
    const long i2 = i23 % shape.s2;
    const long i3 = i23 / shape.s2;
    dst[dst_off + i0 * dst_st.s0 + i1 * dst_st.s1 + i2 * dst_st.s2 + i3 * dst_st.s3] =
        (FILL_T)(bits + step * (uint)i0); /* step: 0, or a ramp's (4-byte dst only) */
}

#if SAME_16
#define SR_SRC_T ushort
#define SR_DST_T ushort
#define SR_MOVE(d, di, s, si) ((d)[(di)] = (s)[(si)])
#elif SAME_32
#define SR_SRC_T uint
#define SR_DST_T uint
#define SR_MOVE(d, di, s, si) ((d)[(di)] = (s)[(si)])
#else
#define SR_SRC_T X_T
#define SR_DST_T DST_T
#define SR_MOVE(d, di, s, si) PE_STORE_DST((d), (di), PE_LOAD_X((s), (si)))
#endif

/* The destination row of index element e (in the index dtype's elements), or -1. */
inline long pe_row_index(__global const uint *rows, const long e, const long n_rows)
{
#if ROWS_I64
    const uint lo = rows[2 * e], hi = rows[2 * e + 1];
    return hi == 0u && (long)lo < n_rows ? (long)lo : -1;
#else
    const int v = (int)rows[e];
    return v >= 0 && (long)v < n_rows ? (long)v : -1;
#endif
}

/*
 * shape = (n, r, d2, d3)        src's extents
 * rdims = (e2, e3, base2, base3)  index broadcast periods and this launch's first (i2, i3)
 */
__kernel void pe_set_rows(__global SR_DST_T *dst, const long dst_off, const long4 dst_st,
                          __global const SR_SRC_T *src, const long src_off, const long4 src_st,
                          __global const uint *rows, const long rows_off, const long4 rows_st,
                          const long4 shape, const long4 rdims, const long n_rows)
{
    const long i0 = (long)get_global_id(0);
    const long i1 = (long)get_global_id(1);
    const long i23 = (long)get_global_id(2);
    if (i0 >= shape.s0 || i1 >= shape.s1 || i23 >= shape.s2 * shape.s3)
        return;
    const long i2 = i23 % shape.s2;
    const long i3 = i23 / shape.s2;
    const long j2 = (i2 + rdims.s2) % rdims.s0;
    const long j3 = (i3 + rdims.s3) % rdims.s1;
    const long row =
        pe_row_index(rows, rows_off + i1 * rows_st.s0 + j2 * rows_st.s1 + j3 * rows_st.s2, n_rows);
    if (row < 0)
        return; /* POSENC_ROWS_UNCHECKED: skipped */
    const long si = src_off + i0 * src_st.s0 + i1 * src_st.s1 + i2 * src_st.s2 + i3 * src_st.s3;
    const long di = dst_off + i0 * dst_st.s0 + row * dst_st.s1 + i2 * dst_st.s2 + i3 * dst_st.s3;
    SR_MOVE(dst, di, src, si);
}
