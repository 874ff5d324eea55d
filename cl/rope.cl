/*
 * rope.cl - rotary position embedding (posenc_rope, posenc_rope_qk, posenc_rope_rerotate).
 *
 * One work-item per (slot i, token i2, batch i3). A slot i < n_pairs is rotated pair i:
 * the work-item reads its position(s), forms the angle (pe_angle_reduce) and takes its sin
 * and cos ONCE, then rotates that pair in every head of x (and, fused Q/K, of x2:
 * GQA allows a different head count). A slot n_pairs <= i < n_pairs + n_copy is one
 * dimension outside the rotated window [n_offs, n_offs + 2*n_pairs); the work-item copies
 * it from x to dst (and x2 to dst2) in every head, unless that tensor is rotated in place
 * (flags bit 0: copy x -> dst, bit 1: copy x2 -> dst2). Both elements of a pair are read
 * before either is written, so dst may be the very same view as x.
 *
 * Storage types come from -D options (0 or 1): X_F16 / DST_F16 (common.cl; HAS_X=1),
 * X2_F16 / DST2_F16 / HAS_X2 (fused Q/K), POS_I32 and HAS_FROM / POS_FROM_I32 (rerotate).
 * Offsets and strides are in elements of each tensor's own type; all index arithmetic is
 * 64-bit. The NDRange may be rounded up past `shape`. The host
 * (src/opencl/backend_opencl.c) lists the argument order.
 *
 * tab (f32, 6 * n_pairs): freq_hi[j], freq_lo[j], from_hi[j], from_lo[j], stream[j],
 * stream_from[j] (the frequencies in quarter turns, w*2/pi, as two f32 words,
 * pe_freq_split; streams are small integers stored exactly as floats), one buffer so that a
 * call uploads once. Angles are formed and reduced with common.cl's pe_angle_* (within a
 * few 2^-24 of an f64 evaluation up to |pos * w| = 2^24, no device f64).
 */

#ifndef HAS_X2
#define HAS_X2 0
#endif
#ifndef X2_F16
#define X2_F16 0
#endif
#ifndef DST2_F16
#define DST2_F16 0
#endif
#ifndef HAS_FROM
#define HAS_FROM 0
#endif
#ifndef POS_FROM_I32
#define POS_FROM_I32 1
#endif

#if HAS_X2 && X2_F16
#define X2_T half
#define PE_LOAD_X2(p, i) vload_half((size_t)(i), (p))
#else
#define X2_T float
#define PE_LOAD_X2(p, i) ((p)[(i)])
#endif
#if HAS_X2 && DST2_F16
#define DST2_T half
#define PE_STORE_DST2(p, i, v) vstore_half_rte((v), (size_t)(i), (p))
#else
#define DST2_T float
#define PE_STORE_DST2(p, i, v) ((p)[(i)] = (v))
#endif
#if HAS_FROM && !POS_FROM_I32
#define POS_FROM_T float
#else
#define POS_FROM_T int
#endif

#define PE_ROPE_COPY_X 1
#define PE_ROPE_COPY_X2 2

/*
 * HAS_ROWS (-D, posenc_rope_set_rows): dst token of (i2, i3) is rows[...] instead of i2, and
 * three more arguments follow the kernel's last one:
 *   rows_idx  uint    the indices as 32-bit words (i32, or i64 with ROWS_I64 = 1: two
 *                     words, low first; valid when the high word is 0 and the low < R)
 *   rows_off  long    in index elements
 *   rows_st   long4   (st for the token, st for the batch (0: shared), R = dst rows, 0)
 * A token whose index is outside [0, R) is skipped (POSENC_ROWS_UNCHECKED). Without
 * HAS_ROWS the kernels are unchanged (PE_DST_TOKEN is i2).
 */
#ifndef HAS_ROWS
#define HAS_ROWS 0
#endif
#ifndef ROWS_I64
#define ROWS_I64 0
#endif
#if HAS_ROWS
#define PE_ROWS_ARGS , __global const uint *rows_idx, const long rows_off, const long4 rows_st
inline long pe_rope_dst_token(__global const uint *rows, const long rows_off,
                              const long4 rows_st, const long i2, const long i3)
{
    const long e = rows_off + i2 * rows_st.s0 + i3 * rows_st.s1;
#if ROWS_I64
    const uint lo = rows[2 * e], hi = rows[2 * e + 1];
    return hi == 0u && (long)lo < rows_st.s2 ? (long)lo : -1;
#else
    const int v = (int)rows[e];
    return v >= 0 && (long)v < rows_st.s2 ? (long)v : -1;
#endif
}
#define PE_DST_TOKEN(i2, i3) pe_rope_dst_token(rows_idx, rows_off, rows_st, (i2), (i3))
#else
#define PE_ROWS_ARGS
#define PE_DST_TOKEN(i2, i3) (i2)
#endif

/* Rotate pair (a, b) (element offsets from each head's start) of n_head heads of one
 * token: the same c, s for all of them. */
#define PE_ROPE_HEADS(LOAD, STORE, x, xr, x_st1, dst, dr, d_st1, n_head, xa, xb, da, db) \
    for (long h = 0; h < (n_head); h++) {                                                \
        const long xh = (xr) + h * (x_st1);                                              \
        const long dh = (dr) + h * (d_st1);                                              \
        const float va = LOAD(x, xh + (xa));                                             \
        const float vb = LOAD(x, xh + (xb));                                             \
        const float ya = va * c - vb * s;                                                \
        const float yb = va * s + vb * c;                                                \
        STORE(dst, dh + (da), ya);                                                       \
        STORE(dst, dh + (db), yb);                                                       \
    }

/* Copy element (xi -> di) of n_head heads. */
#define PE_COPY_HEADS(LOAD, STORE, x, xr, x_st1, dst, dr, d_st1, n_head, xi, di) \
    for (long h = 0; h < (n_head); h++)                                          \
        STORE(dst, (dr) + h * (d_st1) + (di), LOAD(x, (xr) + h * (x_st1) + (xi)));

/*
 * shape = (n_pairs, ne2 (tokens), ne3 (batch), n_copy)
 * dims  = (n_head of x, n_head of x2 (0 without), n_offs, pairing)
 */
__kernel void pe_rope(__global const X_T *x, const long x_off, const long4 x_st,
                      __global DST_T *dst, const long dst_off, const long4 dst_st,
                      __global const X2_T *x2, const long x2_off, const long4 x2_st,
                      __global DST2_T *dst2, const long dst2_off, const long4 dst2_st,
                      __global const POS_T *pos, const long pos_off, const long4 pos_st,
                      __global const POS_FROM_T *pos_from, const long pos_from_off,
                      const long4 pos_from_st, __global const float *tab, const long4 shape,
                      const long4 dims, const int flags, const float mscale,
                      const int sign PE_ROWS_ARGS)
{
    const long i = (long)get_global_id(0);
    const long i2 = (long)get_global_id(1);
    const long i3 = (long)get_global_id(2);
    const long n_pairs = shape.s0;
    if (i >= n_pairs + shape.s3 || i2 >= shape.s1 || i3 >= shape.s2)
        return;
    const long d2 = PE_DST_TOKEN(i2, i3);
    if (d2 < 0)
        return;
    const long n_head = dims.s0;
    const long xr = x_off + i2 * x_st.s2 + i3 * x_st.s3;
    const long dr = dst_off + d2 * dst_st.s2 + i3 * dst_st.s3;
#if HAS_X2
    const long n_head2 = dims.s1;
    const long x2r = x2_off + i2 * x2_st.s2 + i3 * x2_st.s3;
    const long d2r = dst2_off + i2 * dst2_st.s2 + i3 * dst2_st.s3;
#endif

    if (i >= n_pairs) {
        /* A pass-through dim: the k-th dim outside the window, in order. */
        const long k = i - n_pairs;
        const long n_offs = dims.s2;
        const long c0 = k < n_offs ? k : k + 2 * n_pairs;
        if (flags & PE_ROPE_COPY_X)
            PE_COPY_HEADS(PE_LOAD_X, PE_STORE_DST, x, xr, x_st.s1, dst, dr, dst_st.s1, n_head,
                          c0 * x_st.s0, c0 * dst_st.s0)
#if HAS_X2
        if (flags & PE_ROPE_COPY_X2)
            PE_COPY_HEADS(PE_LOAD_X2, PE_STORE_DST2, x2, x2r, x2_st.s1, dst2, d2r, dst2_st.s1,
                          n_head2, c0 * x2_st.s0, c0 * dst2_st.s0)
#endif
        return;
    }

    const long stream = (long)tab[4 * n_pairs + i];
    float p =
        convert_float(pos[pos_off + i2 * pos_st.s0 + stream * pos_st.s1 + i3 * pos_st.s2]);
    if (sign < 0)
        p = -p; /* exact: the angle's sign */
    float nq;
    float r = pe_angle_reduce(p, tab[i], tab[n_pairs + i], &nq);
#if HAS_FROM
    const long stream_from = (long)tab[5 * n_pairs + i];
    float p_from = convert_float(pos_from[pos_from_off + i2 * pos_from_st.s0 +
                                          stream_from * pos_from_st.s1 +
                                          i3 * pos_from_st.s2]);
    if (sign < 0)
        p_from = -p_from;
    float nf;
    const float rf = pe_angle_reduce(p_from, tab[2 * n_pairs + i], tab[3 * n_pairs + i], &nf);
    r = pe_angle_sub(r, rf, &nq, nf);
#endif
    float cr;
    const float sr = pe_sincos_red(r, nq, &cr);
    const float c = cr * mscale;
    const float s = sr * mscale;

    long a, b; /* i0 of the pair's two dims */
    if (dims.s3 == 0) {
        a = dims.s2 + 2 * i;
        b = a + 1;
    } else {
        a = dims.s2 + i;
        b = a + n_pairs;
    }
    PE_ROPE_HEADS(PE_LOAD_X, PE_STORE_DST, x, xr, x_st.s1, dst, dr, dst_st.s1, n_head,
                  a * x_st.s0, b * x_st.s0, a * dst_st.s0, b * dst_st.s0)
#if HAS_X2
    PE_ROPE_HEADS(PE_LOAD_X2, PE_STORE_DST2, x2, x2r, x2_st.s1, dst2, d2r, dst2_st.s1,
                  n_head2, a * x2_st.s0, b * x2_st.s0, a * dst2_st.s0, b * dst2_st.s0)
#endif
}

/*
 * pe_rope_vec: the same op for tensors whose innermost stride is 1 (the host checks it, and
 * that n_pairs is a multiple of 8; otherwise it uses pe_rope). The arguments of pe_rope,
 * then
 *    24  int  rows_per   heads (of x, then x2) per chunk
 * NDRange (n_pairs / 8 * n_chunks, ne2, ne3): dimension 0 is (u, chunk), and chunk c
 * rotates heads [c * rows_per, (c + 1) * rows_per). Many tokens: one chunk; a decode step
 * (one token) splits its heads over a few chunks so that more than one compute unit works.
 * With PE_CPU_ORDER the local size divides n_pairs / 8, so a group has one chunk.
 *
 * Work-item (u, token, batch) owns pairs 8u .. 8u + 7 of the token: it forms their angles
 * in f32 and takes full-precision sincos once (an 8-wide vector), then rotates those pairs
 * in every head of x and x2 with 8-wide loads and stores (adjacent pairs: 16 floats
 * a0 b0 a1 b1 ..., split into .even / .odd; half-split: 8 from each half). These are the
 * scalar kernel's products and differences, rounded the same way (FP_CONTRACT OFF).
 * Neighbouring work-items touch neighbouring memory in each head.
 *
 * PE_CPU_ORDER (-D, 1 on CPU devices): a barrier after each head, so that an
 * implementation that runs the work-items of a group one after another (PoCL) still walks
 * memory in order, head by head, instead of one work-item through every head. The loop
 * over heads is uniform, and every work-item of the NDRange is in range, so every
 * work-item reaches every barrier.
 * Out of place, the dims outside the window are copied by the work-items in turn (u, u +
 * n_pairs / 8, ...). A vector is read before it is written: dst may be the very same view
 * as x.
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
#if HAS_X2 && X2_F16
#define PE_LOAD8_X2(p, i) vload_half8(0, (p) + (i))
#define PE_LOAD16_X2(p, i) vload_half16(0, (p) + (i))
#else
#define PE_LOAD8_X2(p, i) vload8(0, (p) + (i))
#define PE_LOAD16_X2(p, i) vload16(0, (p) + (i))
#endif
/* dst and dst2: common.cl's stores (streaming ones with PE_NT_STORE) */
#define PE_STORE8_DST2(p, i, v) PE_STORE8_AS(DST2_F16, p, i, v)
#define PE_STORE16_DST2(p, i, v) PE_STORE16_AS(DST2_F16, p, i, v)

/* sin and cos of the angles of pairs 8u .. 8u+7 of token (i2, i3), each pair with its own
 * position stream (pe_angle_reduce8: one 8-wide reduction; re-rotation reduces the two
 * angles apart and subtracts the reduced ones). Returns sin. */
static inline float8 pe_rope_sincos8(__global const POS_T *pos, const long pos_off,
                                     const long4 pos_st, __global const POS_FROM_T *pos_from,
                                     const long pos_from_off, const long4 pos_from_st,
                                     __global const float *tab, const long n_pairs,
                                     const long u, const long i2, const long i3,
                                     const int sign, float8 *cos_out)
{
    float pv[8];
    for (int k = 0; k < 8; k++) {
        const long j = 8 * u + k;
        const long stream = (long)tab[4 * n_pairs + j];
        const float p =
            convert_float(pos[pos_off + i2 * pos_st.s0 + stream * pos_st.s1 + i3 * pos_st.s2]);
        pv[k] = sign < 0 ? -p : p;
    }
    float8 n;
    float8 r = pe_angle_reduce8(vload8(0, pv), vload8(u, tab), vload8(u, tab + n_pairs), &n);
#if HAS_FROM
    float fv[8];
    for (int k = 0; k < 8; k++) {
        const long j = 8 * u + k;
        const long stream_from = (long)tab[5 * n_pairs + j];
        const float p = convert_float(pos_from[pos_from_off + i2 * pos_from_st.s0 +
                                               stream_from * pos_from_st.s1 + i3 * pos_from_st.s2]);
        fv[k] = sign < 0 ? -p : p;
    }
    float8 nf;
    const float8 rf = pe_angle_reduce8(vload8(0, fv), vload8(u, tab + 2 * n_pairs),
                                       vload8(u, tab + 3 * n_pairs), &nf);
    r = pe_angle_sub8(r, rf, &n, nf);
#endif
    return pe_sincos_red8(r, n, cos_out);
}

/* Rotate pairs 8u .. 8u+7 of the window starting at xr (x) / dr (dst). */
#define PE_ROPE_VEC8(LOAD8, LOAD16, STORE8, STORE16, x, xr, dst, dr)                         \
    if (pairing == 0) {                                                                      \
        const float16 v = LOAD16(x, (xr) + 16 * u);                                          \
        const float8 a = v.even, b = v.odd;                                                  \
        const float8 ya = a * c - b * s, yb = a * s + b * c;                                 \
        STORE16(dst, (dr) + 16 * u,                                                          \
                (float16)(ya.s0, yb.s0, ya.s1, yb.s1, ya.s2, yb.s2, ya.s3, yb.s3, ya.s4,     \
                          yb.s4, ya.s5, yb.s5, ya.s6, yb.s6, ya.s7, yb.s7));                 \
    } else {                                                                                 \
        const float8 a = LOAD8(x, (xr) + 8 * u);                                             \
        const float8 b = LOAD8(x, (xr) + n_pairs + 8 * u);                                   \
        STORE8(dst, (dr) + 8 * u, a * c - b * s);                                            \
        STORE8(dst, (dr) + n_pairs + 8 * u, a * s + b * c);                                  \
    }

__kernel void pe_rope_vec(__global const X_T *x, const long x_off, const long4 x_st,
                          __global DST_T *dst, const long dst_off, const long4 dst_st,
                          __global const X2_T *x2, const long x2_off, const long4 x2_st,
                          __global DST2_T *dst2, const long dst2_off, const long4 dst2_st,
                          __global const POS_T *pos, const long pos_off, const long4 pos_st,
                          __global const POS_FROM_T *pos_from, const long pos_from_off,
                          const long4 pos_from_st, __global const float *tab,
                          const long4 shape, const long4 dims, const int flags,
                          const float mscale, const int sign, const int rows_per PE_ROWS_ARGS)
{
    const long nu = shape.s0 / 8;
    const long u = (long)get_global_id(0) % nu;
    const long chunk = (long)get_global_id(0) / nu;
    const long i2 = (long)get_global_id(1);
    const long i3 = (long)get_global_id(2);
    const long n_pairs = shape.s0;
    const int pairing = (int)dims.s3;
#if !PE_CPU_ORDER
    /* GPU-style launches round the dimensions up to the local size */
    if (i2 >= shape.s1 || i3 >= shape.s2 || chunk * rows_per >= dims.s0 + dims.s1)
        return;
#endif

    /* the angles of pairs 8u .. 8u+7 (each pair may read its own position stream) */
    float8 cr;
    const float8 sr = pe_rope_sincos8(pos, pos_off, pos_st, pos_from, pos_from_off,
                                      pos_from_st, tab, n_pairs, u, i2, i3, sign, &cr);
    const float8 c = cr * mscale, s = sr * mscale;

    const long n_head = dims.s0;
#if HAS_X2
    const long rows = n_head + dims.s1;
#else
    const long rows = n_head;
#endif
    const long n_offs = dims.s2;
    const long n_copy = shape.s3;
    const long h_end = (chunk + 1) * rows_per < rows ? (chunk + 1) * rows_per : rows;
#if HAS_ROWS
    /* a skipped token still walks the loop: PE_CPU_ORDER's barriers need every work-item */
    const long d2 = i2 < shape.s1 && i3 < shape.s2 ? PE_DST_TOKEN(i2, i3) : -1;
#define PE_D2_OK (d2 >= 0)
#else
    const long d2 = i2;
#define PE_D2_OK 1
#endif
    for (long h = chunk * rows_per; h < h_end; h++) {
        if (h < n_head && PE_D2_OK) {
            const long xr = x_off + h * x_st.s1 + i2 * x_st.s2 + i3 * x_st.s3;
            const long dr = dst_off + h * dst_st.s1 + d2 * dst_st.s2 + i3 * dst_st.s3;
            PE_ROPE_VEC8(PE_LOAD8_X, PE_LOAD16_X, PE_STORE8_DST, PE_STORE16_DST, x,
                         xr + n_offs, dst, dr + n_offs)
            if (flags & PE_ROPE_COPY_X)
                for (long k = u; k < n_copy; k += nu) {
                    const long c0 = k < n_offs ? k : k + 2 * n_pairs;
                    PE_STORE_DST(dst, dr + c0, PE_LOAD_X(x, xr + c0));
                }
        }
#if HAS_X2
        else {
            const long h2 = h - n_head;
            const long xr = x2_off + h2 * x2_st.s1 + i2 * x2_st.s2 + i3 * x2_st.s3;
            const long dr = dst2_off + h2 * dst2_st.s1 + i2 * dst2_st.s2 + i3 * dst2_st.s3;
            PE_ROPE_VEC8(PE_LOAD8_X2, PE_LOAD16_X2, PE_STORE8_DST2, PE_STORE16_DST2, x2,
                         xr + n_offs, dst2, dr + n_offs)
            if (flags & PE_ROPE_COPY_X2)
                for (long k = u; k < n_copy; k += nu) {
                    const long c0 = k < n_offs ? k : k + 2 * n_pairs;
                    PE_STORE_DST2(dst2, dr + c0, PE_LOAD_X2(x2, xr + c0));
                }
        }
#endif
#if PE_CPU_ORDER
        barrier(CLK_GLOBAL_MEM_FENCE);
#endif
    }
}

/*
 * pe_rope_tok: pe_rope_vec's op for CPU devices (PoCL), where a work-item is a loop
 * iteration rather than a SIMD lane: work-item (chunk, token, batch) rotates every pair of
 * one token in heads [chunk * rows_per, (chunk + 1) * rows_per) of x then x2, in memory
 * order (head after head, 8 pairs after 8 pairs), with no barrier: a group of tokens runs
 * token after token, which is memory order too. The same conditions and arguments as
 * pe_rope_vec, and PE_NU (-D) = n_pairs / 8, at most 16, so that the loops over the units
 * of 8 pairs have a known trip count and the cos/sin of the token stay in registers or
 * the stack. NDRange (n_chunks, ne2, ne3). The same pe_rope_sincos8 as pe_rope_vec, so the
 * same results. pe_rope_vec spends as many
 * instructions on its per-work-item loop (context spills, index arithmetic) as on the
 * rotation itself, which f32 hides under memory time and f16 does not.
 */
#ifdef PE_NU
/* Every pair of one head row (window at xr / dr) with the token's tables. */
#define PE_ROPE_TOK_ROW(LOAD8, LOAD16, STORE8, STORE16, x, xr, dst, dr)                     \
    if (pairing == 0) {                                                                      \
        for (int u = 0; u < PE_NU; u++) {                                                    \
            const float16 v = LOAD16(x, (xr) + 16 * u);                                      \
            const float16 vs = v.s1032547698badcfe;                                          \
            STORE16(dst, (dr) + 16 * u, v * ccv[u] + vs * ssv[u]);                           \
        }                                                                                    \
    } else {                                                                                 \
        for (int u = 0; u < PE_NU; u++) {                                                    \
            const float8 c = cv[u], s = sv[u];                                               \
            const float8 a = LOAD8(x, (xr) + 8 * u);                                         \
            const float8 b = LOAD8(x, (xr) + n_pairs + 8 * u);                               \
            STORE8(dst, (dr) + 8 * u, a * c - b * s);                                        \
            STORE8(dst, (dr) + n_pairs + 8 * u, a * s + b * c);                              \
        }                                                                                    \
    }
__kernel void pe_rope_tok(__global const X_T *x, const long x_off, const long4 x_st,
                          __global DST_T *dst, const long dst_off, const long4 dst_st,
                          __global const X2_T *x2, const long x2_off, const long4 x2_st,
                          __global DST2_T *dst2, const long dst2_off, const long4 dst2_st,
                          __global const POS_T *pos, const long pos_off, const long4 pos_st,
                          __global const POS_FROM_T *pos_from, const long pos_from_off,
                          const long4 pos_from_st, __global const float *tab,
                          const long4 shape, const long4 dims, const int flags,
                          const float mscale, const int sign, const int rows_per PE_ROWS_ARGS)
{
    const long chunk = (long)get_global_id(0);
    const long i2 = (long)get_global_id(1);
    const long i3 = (long)get_global_id(2);
    const long n_pairs = shape.s0;
    const int pairing = (int)dims.s3;
    if (i2 >= shape.s1 || i3 >= shape.s2 || chunk * rows_per >= dims.s0 + dims.s1)
        return;
    const long d2 = PE_DST_TOKEN(i2, i3);
    if (d2 < 0)
        return;

    float8 cv[PE_NU], sv[PE_NU];
    float16 ccv[PE_NU], ssv[PE_NU];
    for (int u = 0; u < PE_NU; u++) {
        float8 cr;
        const float8 sr = pe_rope_sincos8(pos, pos_off, pos_st, pos_from, pos_from_off,
                                          pos_from_st, tab, n_pairs, u, i2, i3, sign, &cr);
        cv[u] = cr * mscale;
        sv[u] = sr * mscale;
        /* adjacent pairs: y = x * cc + swap(x) * ss with cc = (c0, c0, c1, c1, ...) and
         * ss = (-s0, s0, -s1, s1, ...): a*c + b*(-s) == a*c - b*s and b*c + a*s ==
         * a*s + b*c exactly, one in-lane swap instead of de- and re-interleaving */
        const float8 c = cv[u], s = sv[u];
        ccv[u] = (float16)(c.s0, c.s0, c.s1, c.s1, c.s2, c.s2, c.s3, c.s3, c.s4, c.s4, c.s5,
                           c.s5, c.s6, c.s6, c.s7, c.s7);
        ssv[u] = (float16)(-s.s0, s.s0, -s.s1, s.s1, -s.s2, s.s2, -s.s3, s.s3, -s.s4, s.s4,
                           -s.s5, s.s5, -s.s6, s.s6, -s.s7, s.s7);
    }

    const long n_head = dims.s0;
#if HAS_X2
    const long rows = n_head + dims.s1;
#else
    const long rows = n_head;
#endif
    const long n_offs = dims.s2;
    const long n_copy = shape.s3;
    const long h_end = (chunk + 1) * rows_per < rows ? (chunk + 1) * rows_per : rows;
    for (long h = chunk * rows_per; h < h_end; h++) {
        if (h < n_head) {
            const long xr = x_off + h * x_st.s1 + i2 * x_st.s2 + i3 * x_st.s3;
            const long dr = dst_off + h * dst_st.s1 + d2 * dst_st.s2 + i3 * dst_st.s3;
            if (flags & PE_ROPE_COPY_X)
                for (long k = 0; k < n_copy; k++) {
                    const long c0 = k < n_offs ? k : k + 2 * n_pairs;
                    PE_STORE_DST(dst, dr + c0, PE_LOAD_X(x, xr + c0));
                }
            PE_ROPE_TOK_ROW(PE_LOAD8_X, PE_LOAD16_X, PE_STORE8_DST, PE_STORE16_DST, x,
                            xr + n_offs, dst, dr + n_offs)
        }
#if HAS_X2
        else {
            const long h2 = h - n_head;
            const long xr = x2_off + h2 * x2_st.s1 + i2 * x2_st.s2 + i3 * x2_st.s3;
            const long dr = dst2_off + h2 * dst2_st.s1 + i2 * dst2_st.s2 + i3 * dst2_st.s3;
            if (flags & PE_ROPE_COPY_X2)
                for (long k = 0; k < n_copy; k++) {
                    const long c0 = k < n_offs ? k : k + 2 * n_pairs;
                    PE_STORE_DST2(dst2, dr + c0, PE_LOAD_X2(x2, xr + c0));
                }
            PE_ROPE_TOK_ROW(PE_LOAD8_X2, PE_LOAD16_X2, PE_STORE8_DST2, PE_STORE16_DST2, x2,
                            xr + n_offs, dst2, dr + n_offs)
        }
#endif
    }
}
#endif
