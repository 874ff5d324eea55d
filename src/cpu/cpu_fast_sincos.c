/*
 * cpu_fast_sincos.c - the CPU fast path's ops built on per-token sin/cos tables: RoPE
 * (every variant) and sinusoidal, with the f32 sin/cos they share (pe_sincos_block),
 * their AVX2 / F16C rows and the streaming stores of large out-of-place outputs. The
 * fast path as a whole, and its accuracy, are described in cpu_fast.c.
 */
#include "cpu_fast_internal.h"

#include <math.h>
#include <string.h>

/* RoPE computes the next token's cos/sin in slices of at least this many pairs (so that
 * pe_sincos_block still runs vector-wide). */
#define PE_ROPE_SLICE 16

/* ------------------------------------------------------------------------------------ */
/* sin / cos                                                                            */
/* ------------------------------------------------------------------------------------ */

static inline uint64_t bits64(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

/* pi/2 in parts of 33 bits (fdlibm's pio2_1, pio2_2): k * PE_PIO2_1 is exact for
 * |k| < 2^20, which PE_TRIG_FAST_MAX keeps. */
#define PE_PIO2_1 1.57079632673412561417e+00
#define PE_PIO2_2 6.07710050630396597660e-11
#define PE_TWO_OVER_PI 6.36619772367581382433e-01
#define PE_ROUND_MAGIC 0x1.8p52 /* x + magic - magic = nearest integer, for |x| < 2^51 */
#define PE_TRIG_FAST_MAX 4.0e5

/*
 * s[i] = sin(a[i]) * scale, c[i] = cos(a[i]) * scale in f32. The reduction by pi/2 is done
 * in double (k * PE_PIO2_1 is exact for |k| < 2^20, PE_PIO2_2 leaves an error below 1e-15
 * for |a| <= PE_TRIG_FAST_MAX), the reduced r (|r| <= pi/4) is rounded to f32 and the
 * polynomials are Cephes' sinf / cosf minimax ones in f32: measured against libm's double
 * sin/cos over 16 M random angles in [-4e5, 4e5], the largest error is 1.56 * 2^-24 (the
 * bounds of src/check/check.c allow 4 ulp, 8 * 2^-24, for the evaluation alone), then one
 * f32 rounding for the scale. Branch-free (the quadrant comes from the bits of the rounded
 * multiple of pi/2), so that it vectorises 8-wide in f32 (with AVX2): about 1 ns per
 * sin+cos pair against 3.6 ns for the double-precision polynomials this replaced. Angles
 * outside [-PE_TRIG_FAST_MAX, PE_TRIG_FAST_MAX] (and inf / NaN) are redone with libm.
 */
PE_CLONES
static void pe_sincos_block(const double *restrict a, float *restrict s, float *restrict c,
                            int64_t n, double scale)
{
    const float fscale = (float)scale;
    /* any angle outside the fast range (or NaN): an OR over the block, vectorised with
     * the rest, so that the scalar libm pass below runs only when needed (it was scalar
     * compares for every pair, 60% of this function's time) */
    uint32_t far = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i];
        far |= (uint32_t)!(fabs(x) <= PE_TRIG_FAST_MAX);
        const double t = x * PE_TWO_OVER_PI + PE_ROUND_MAGIC;
        const double k = t - PE_ROUND_MAGIC;
        const uint32_t q = (uint32_t)bits64(t); /* low bits: k mod 2^32 (two's complement) */
        const float r = (float)((x - k * PE_PIO2_1) - k * PE_PIO2_2);
        const float z = r * r;
        const float sp =
            r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f));
        const float cp = (1.0f - 0.5f * z) +
                         z * z *
                             (4.166664568298827e-2f +
                              z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f));
        /* quadrant k mod 4: odd swaps sin and cos; sin < 0 in 2, 3; cos < 0 in 1, 2 */
        const uint32_t swap = 0u - (q & 1u);
        const uint32_t su = pe_cpu_bits32(sp), cu = pe_cpu_bits32(cp);
        uint32_t so = (su & ~swap) | (cu & swap);
        uint32_t co = (cu & ~swap) | (su & swap);
        so ^= (q & 2u) << 30;
        co ^= ((q + 1u) & 2u) << 30;
        s[i] = pe_cpu_from_bits32(so) * fscale;
        c[i] = pe_cpu_from_bits32(co) * fscale;
    }
    if (far)
        for (int64_t i = 0; i < n; i++)
            if (!(fabs(a[i]) <= PE_TRIG_FAST_MAX)) {
                s[i] = (float)(sin(a[i]) * scale);
                c[i] = (float)(cos(a[i]) * scale);
            }
}

static inline double load_pos(const struct pe_view *p, int64_t idx)
{
    if (p->dtype == POSENC_DTYPE_I32)
        return (double)((const int32_t *)p->mem)[idx];
    return (double)((const float *)p->mem)[idx];
}

/* ------------------------------------------------------------------------------------ */
/* RoPE                                                                                 */
/* ------------------------------------------------------------------------------------ */

struct rope_job {
    struct pe_fast_job base;
    const struct pe_rope_op *op;
    int64_t n_streams;        /* streams read per token (max stream + 1) */
    int64_t n_streams_from;
    int64_t rows;             /* heads of x + heads of x2 */
    bool nt;                  /* streaming stores for out-of-place outputs (large ops) */
    size_t off_ang, off_tab[2], off_pv, off_in, off_out;
};

/* The per-token table: tab = [c (np) | s (np) | cc (2 np) | ss (2 np)] with c, s the
 * cos/sin of each pair times mscale, and for adjacent pairs (NORMAL) the same spread over
 * the pair's two dims: cc = (c0, c0, c1, c1, ...), ss = (-s0, s0, -s1, s1, ...), so that
 * y[i] = x[i] cc[i] + x[i^1] ss[i] (what the vector rows use). */
#define PE_ROPE_TAB(np) (6 * (size_t)(np))

/* Pairs [j0, j1) of token (i2, i3)'s table. restrict pointers and AVX2 clones, so that the
 * angle and cc/ss loops vectorise. */
PE_CLONES
static void rope_table(const struct rope_job *rj, int64_t i2, int64_t i3, int64_t j0, int64_t j1,
                       double *restrict ang, double *restrict pv, float *restrict tab)
{
    const struct pe_rope_op *op = rj->op;
    if (j1 <= j0)
        return;
    const int64_t np = op->n_pairs;
    float *restrict c = tab, *restrict s = tab + np, *restrict cc = tab + 2 * np,
                    *restrict ss = tab + 4 * np;
    const struct pe_view *pos = &op->pos;
    for (int64_t k = 0; k < rj->n_streams; k++)
        pv[k] = (double)op->sign * load_pos(pos, pos->offset + i2 * pos->st[0] + k * pos->st[1] +
                                                     i3 * pos->st[2]);
    const double *restrict freq = op->freq;
    if (rj->n_streams == 1) { /* one position per token (NORMAL, NEOX): vectorises */
        const double p = pv[0];
        for (int64_t j = j0; j < j1; j++)
            ang[j] = p * freq[j];
    } else {
        for (int64_t j = j0; j < j1; j++)
            ang[j] = pv[op->stream[j]] * op->freq[j];
    }
    if (op->pos_from.mem) {
        const struct pe_view *pf = &op->pos_from;
        for (int64_t k = 0; k < rj->n_streams_from; k++)
            pv[k] = load_pos(pf, pf->offset + i2 * pf->st[0] + k * pf->st[1] + i3 * pf->st[2]);
        for (int64_t j = j0; j < j1; j++)
            ang[j] -= pv[op->stream_from[j]] * op->freq_from[j];
    }
    pe_sincos_block(ang + j0, s + j0, c + j0, j1 - j0, op->mscale);
    if (op->pairing == 0)
        for (int64_t j = j0; j < j1; j++) {
            cc[2 * j] = cc[2 * j + 1] = c[j];
            ss[2 * j] = -s[j];
            ss[2 * j + 1] = s[j];
        }
}

#ifdef PE_HAVE_F16C
/*
 * RoPE rows with AVX2 (and F16C for f16 storage): 8 elements per step, converted in
 * registers. Adjacent pairs use y = x*cc + swap(x)*ss (swap exchanges the two dims of each
 * pair); half-split pairs y_a = a*c - b*s, y_b = a*s + b*c. Each step loads before it
 * stores the same elements, so in == out (in place) is fine. The same arithmetic as
 * rope_row (a*c + b*(-s) == a*c - b*s exactly).
 */
#ifndef PE_ROPE_PREFETCH
#define PE_ROPE_PREFETCH 4
#endif
#define PE_ROPE_ROW_AVX2(NAME, T, LOAD8, STORE8, TOF, FROMF)                                      \
    __attribute__((target("avx2,f16c"))) static void NAME(                                        \
        const T *in, T *out, int64_t in_stride, int64_t out_stride, int64_t n_rows,               \
        const float *tab, int64_t head_dim, int64_t lo, int64_t np, int pairing, bool copy_rest)  \
    {                                                                                             \
        const float *c = tab, *s = tab + np, *cc = tab + 2 * np, *ss = tab + 4 * np;              \
        for (int64_t row = 0; row < n_rows; row++, in += in_stride, out += out_stride) {          \
            /* the row PE_ROPE_PREFETCH rows ahead: its loads are in flight while this one   \
             * computes (prefetches past the end of the buffer are harmless) */               \
            for (int64_t b = 0; b < head_dim * (int64_t)sizeof(T); b += 64)                    \
                _mm_prefetch((const char *)(in + PE_ROPE_PREFETCH * in_stride) + b,            \
                             _MM_HINT_T0);                                                    \
            if (copy_rest) {                                                                      \
                const int64_t hi = lo + 2 * np;                                                   \
                if (lo > 0)                                                                       \
                    memcpy(out, in, (size_t)lo * sizeof(T));                                      \
                if (hi < head_dim)                                                                \
                    memcpy(out + hi, in + hi, (size_t)(head_dim - hi) * sizeof(T));               \
            }                                                                                     \
            const T *xa = in + lo;                                                                \
            T *ya = out + lo;                                                                     \
            int64_t j = 0;                                                                        \
            if (pairing == 0) {                                                                   \
                for (; j + 8 <= 2 * np; j += 8) {                                                 \
                    const __m256 x = LOAD8(xa + j);                                               \
                    const __m256 xs = _mm256_permute_ps(x, 0xb1);                                 \
                    const __m256 y = _mm256_add_ps(_mm256_mul_ps(x, _mm256_loadu_ps(cc + j)),     \
                                                   _mm256_mul_ps(xs, _mm256_loadu_ps(ss + j)));   \
                    STORE8(ya + j, y);                                                            \
                }                                                                                 \
                for (j /= 2; j < np; j++) {                                                       \
                    const float a = TOF(xa[2 * j]), b = TOF(xa[2 * j + 1]);                       \
                    ya[2 * j] = FROMF(a * c[j] - b * s[j]);                                       \
                    ya[2 * j + 1] = FROMF(a * s[j] + b * c[j]);                                   \
                }                                                                                 \
            } else {                                                                              \
                const T *xb = xa + np;                                                            \
                T *yb = ya + np;                                                                  \
                for (; j + 8 <= np; j += 8) {                                                     \
                    const __m256 a = LOAD8(xa + j), b = LOAD8(xb + j);                            \
                    const __m256 cv = _mm256_loadu_ps(c + j), sv = _mm256_loadu_ps(s + j);        \
                    const __m256 y1 = _mm256_sub_ps(_mm256_mul_ps(a, cv), _mm256_mul_ps(b, sv));  \
                    const __m256 y2 = _mm256_add_ps(_mm256_mul_ps(a, sv), _mm256_mul_ps(b, cv));  \
                    STORE8(ya + j, y1);                                                           \
                    STORE8(yb + j, y2);                                                           \
                }                                                                                 \
                for (; j < np; j++) {                                                             \
                    const float a = TOF(xa[j]), b = TOF(xb[j]);                                   \
                    ya[j] = FROMF(a * c[j] - b * s[j]);                                           \
                    yb[j] = FROMF(a * s[j] + b * c[j]);                                           \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }

PE_ROPE_ROW_AVX2(rope_row_avx2_f32, float, PE_LOAD8_F32, PE_STORE8_F32, PE_ID, PE_ID)
PE_ROPE_ROW_AVX2(rope_row_avx2_f16, uint16_t, PE_LOAD8_F16, PE_STORE8_F16, pe_cpu_h2f, pe_cpu_f2h)
/* Streaming (non-temporal) stores for outputs much larger than the caches: no read for
 * ownership of the destination lines. The destination of every 8-wide store must be
 * aligned (32 bytes f32, 16 bytes f16): rope_head checks it. */
#define PE_STORE8_F16_NT(p, v)                                                                    \
    _mm_stream_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
PE_ROPE_ROW_AVX2(rope_row_avx2_f32_nt, float, PE_LOAD8_F32, PE_STORE8_F32_NT, PE_ID, PE_ID)
PE_ROPE_ROW_AVX2(rope_row_avx2_f16_nt, uint16_t, PE_LOAD8_F16, PE_STORE8_F16_NT, pe_cpu_h2f,
                 pe_cpu_f2h)

#endif

/* One head row: the window rotated, the other dims copied (unless in place, where they
 * are already there). in and out never alias (in place goes through a copy of x). */
PE_CLONES
static void rope_row(const float *restrict in, float *restrict out, const float *restrict c,
                     const float *restrict s, int64_t head_dim, int64_t lo, int64_t np,
                     int pairing, bool copy_rest)
{
    if (copy_rest) {
        const int64_t hi = lo + 2 * np;
        if (lo > 0)
            memcpy(out, in, (size_t)lo * sizeof(float));
        if (hi < head_dim)
            memcpy(out + hi, in + hi, (size_t)(head_dim - hi) * sizeof(float));
    }
    const float *restrict xa = in + lo;
    float *restrict ya = out + lo;
    if (pairing == 0) {
        for (int64_t j = 0; j < np; j++) {
            const float a = xa[2 * j], b = xa[2 * j + 1];
            ya[2 * j] = a * c[j] - b * s[j];
            ya[2 * j + 1] = a * s[j] + b * c[j];
        }
    } else {
        const float *restrict xb = xa + np;
        float *restrict yb = ya + np;
        for (int64_t j = 0; j < np; j++) {
            const float a = xa[j], b = xb[j];
            ya[j] = a * c[j] - b * s[j];
            yb[j] = a * s[j] + b * c[j];
        }
    }
}

/* Heads [h0, h1) of tensor x -> d for token (i2, i3), written at d's token d2 (i2, or
 * rope_set_rows' row); nt: streaming stores where the rows are aligned. */
static void rope_heads(const struct pe_rope_op *op, const struct pe_view *x,
                       const struct pe_view *d, bool in_place, bool nt, int64_t h0, int64_t h1,
                       int64_t i2, int64_t d2, int64_t i3, const float *tab, float *tin,
                       float *tout)
{
    if (h1 <= h0)
        return;
    const int64_t hd = x->ne[0], np = op->n_pairs;
    (void)nt;
#ifdef PE_HAVE_F16C
    if (pe_cpu_have_avx2_f16c && x->dtype == d->dtype && x->st[0] == 1 && d->st[0] == 1) {
        /* every row in one call: no per-row dispatch */
        const int64_t xi = pe_cpu_at4(x, h0, i2, i3), di = pe_cpu_at4(d, h0, d2, i3), n = h1 - h0;
        const size_t es = x->dtype == POSENC_DTYPE_F32 ? 4 : 2;
        const uintptr_t w = (uintptr_t)((unsigned char *)d->mem + (size_t)(di + op->n_offs) * es);
        const bool nt_rows = nt && np % 8 == 0 && w % (8 * es) == 0 &&
                             ((size_t)d->st[1] * es) % (8 * es) == 0;
        if (x->dtype == POSENC_DTYPE_F32)
            (nt_rows ? rope_row_avx2_f32_nt : rope_row_avx2_f32)(
                (const float *)x->mem + xi, (float *)d->mem + di, x->st[1], d->st[1], n, tab, hd,
                op->n_offs, np, op->pairing, !in_place);
        else
            (nt_rows ? rope_row_avx2_f16_nt : rope_row_avx2_f16)(
                (const uint16_t *)x->mem + xi, (uint16_t *)d->mem + di, x->st[1], d->st[1], n,
                tab, hd, op->n_offs, np, op->pairing, !in_place);
        return;
    }
#endif
    const float *c = tab, *s = tab + np;
    /* the dims outside the window are already in place only when out is x's memory */
    const bool copy_rest = !(in_place && pe_cpu_direct_f32(d));
    for (int64_t h = h0; h < h1; h++) {
        const int64_t xi = pe_cpu_at4(x, h, i2, i3), di = pe_cpu_at4(d, h, d2, i3);
        const float *in = pe_cpu_input_row(x, xi, hd, in_place, tin);
        float *out = pe_cpu_output_row(d, di, tout);
        rope_row(in, out, c, s, hd, op->n_offs, np, op->pairing, copy_rest);
        pe_cpu_finish_row(d, di, hd, out);
    }
}

/* Rows [r0, r1) of token (i2, i3): heads of x, then heads of x2. */
static void rope_rows(const struct rope_job *rj, int64_t r0, int64_t r1, int64_t i2, int64_t i3,
                      const float *tab, float *tin, float *tout)
{
    const struct pe_rope_op *op = rj->op;
    const int64_t H1 = op->x.ne[1];
    int64_t d2 = i2;
    if (op->rows.mem) {
        /* rope_set_rows: the destination token; an index outside [0, n_rows) skips it */
        const struct pe_view *rv = &op->rows;
        const int64_t ri = rv->offset + i2 * rv->st[0] + i3 * rv->st[1];
        d2 = rv->dtype == POSENC_DTYPE_I64 ? ((const int64_t *)rv->mem)[ri]
                                           : (int64_t)((const int32_t *)rv->mem)[ri];
        if (d2 < 0 || d2 >= op->n_rows)
            return;
    }
    const bool in1 = pe_cpu_same_view(&op->x, &op->dst);
    rope_heads(op, &op->x, &op->dst, in1, rj->nt && !in1, r0, r1 < H1 ? r1 : H1, i2, d2, i3,
               tab, tin, tout);
    if (op->x2.mem && r1 > H1) {
        const bool in2 = pe_cpu_same_view(&op->x2, &op->dst2);
        rope_heads(op, &op->x2, &op->dst2, in2, rj->nt && !in2, r0 > H1 ? r0 - H1 : 0, r1 - H1,
                   i2, i2, i3, tab, tin, tout);
    }
}

static void rope_run(const struct pe_fast_job *job, int64_t begin, int64_t end, float *scratch)
{
    const struct rope_job *rj = (const struct rope_job *)job;
    const struct pe_rope_op *op = rj->op;
    const int64_t T = op->x.ne[2], np = op->n_pairs;
    double *ang = (double *)(void *)(scratch + rj->off_ang);
    double *pv = (double *)(void *)(scratch + rj->off_pv);
    float *tin = scratch + rj->off_in, *tout = scratch + rj->off_out;

    /* Double-buffered cos/sin: while the heads of token `it` stream through memory, the
     * table of token it + 1 is computed a slice at a time between head rows, so that
     * the sin/cos work overlaps the memory traffic instead of adding to it. Slices hold
     * at least PE_ROPE_SLICE pairs so that pe_sincos_block still runs vector-wide. */
    const int64_t rows = rj->rows;
    int64_t n_slices = np / PE_ROPE_SLICE;
    if (n_slices > rows)
        n_slices = rows;
    if (n_slices < 1)
        n_slices = 1;
    float *tabs[2] = {scratch + rj->off_tab[0], scratch + rj->off_tab[1]};
    if (begin < end)
        rope_table(rj, begin % T, begin / T, 0, np, ang, pv, tabs[0]);
    for (int64_t it = begin; it < end; it++) {
        const int64_t i2 = it % T, i3 = it / T;
        const float *tab = tabs[(it - begin) & 1];
        float *next_tab = tabs[(it - begin + 1) & 1];
        const bool next = it + 1 < end;
        const int64_t n2 = (it + 1) % T, n3 = (it + 1) / T;
        /* the rows in n_slices groups, slice k of the next table after group k */
        for (int64_t k = 0; k < n_slices; k++) {
            rope_rows(rj, rows * k / n_slices, rows * (k + 1) / n_slices, i2, i3, tab, tin, tout);
            if (next)
                rope_table(rj, n2, n3, np * k / n_slices, np * (k + 1) / n_slices, ang, pv,
                           next_tab);
        }
        if (next && rows == 0)
            rope_table(rj, n2, n3, 0, np, ang, pv, next_tab);
    }
#ifdef PE_HAVE_F16C
    if (rj->nt)
        pe_cpu_sfence(); /* streaming stores are weakly ordered: drain them before the join */
#endif
}

posenc_status pe_cpu_fast_rope(struct pe_cpu_fast *f, const struct pe_rope_op *op)
{
    const int64_t T = op->x.ne[2], B = op->x.ne[3], hd = op->x.ne[0], np = op->n_pairs;
    const int64_t H2 = op->x2.mem ? op->x2.ne[1] : 0;
    struct rope_job rj;
    memset(&rj, 0, sizeof(rj));
    rj.op = op;
    rj.rows = op->x.ne[1] + H2;
    for (int64_t j = 0; j < np; j++) {
        if (op->stream[j] + 1 > rj.n_streams)
            rj.n_streams = op->stream[j] + 1;
        if (op->pos_from.mem && op->stream_from[j] + 1 > rj.n_streams_from)
            rj.n_streams_from = op->stream_from[j] + 1;
    }
    size_t used = 0;
    rj.off_ang = pe_cpu_carve(&used, 2 * (size_t)np);
    rj.off_pv = pe_cpu_carve(&used, 2 * 256);
    rj.off_tab[0] = pe_cpu_carve(&used, PE_ROPE_TAB(np));
    rj.off_tab[1] = pe_cpu_carve(&used, PE_ROPE_TAB(np));
    rj.off_in = pe_cpu_carve(&used, (size_t)hd);
    rj.off_out = pe_cpu_carve(&used, (size_t)hd);
    PE_RETURN_IF_ERROR(pe_cpu_fast_reserve(f, used));
    rj.base.fn = rope_run;
    rj.base.op = op;
    rj.base.n_items = T * B;
    /* outputs much larger than the caches: streaming stores (out-of-place rows only) */
    rj.nt = (double)T * (double)B * (double)hd *
                ((double)op->x.ne[1] * (double)posenc_dtype_size(op->dst.dtype) +
                 (double)H2 * (op->x2.mem ? (double)posenc_dtype_size(op->dst2.dtype) : 0.0)) >=
            PE_FAST_NT_BYTES;
    const double bytes = (double)T * (double)B * (double)hd *
                         ((double)op->x.ne[1] * (double)(posenc_dtype_size(op->x.dtype) +
                                                         posenc_dtype_size(op->dst.dtype)) +
                          (double)H2 * (op->x2.mem ? (double)(posenc_dtype_size(op->x2.dtype) +
                                                              posenc_dtype_size(op->dst2.dtype))
                                                   : 0.0));
    pe_cpu_fast_run(f, &rj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Sinusoidal                                                                           */
/* ------------------------------------------------------------------------------------ */

struct sin_job {
    struct pe_fast_job base;
    const struct pe_sinusoidal_op *op;
    int64_t groups2;          /* 1 when the positions are shared by dim 2, else ne[2] */
    int64_t block;            /* tokens per item */
    bool nt;                  /* streaming stores for large out-of-place outputs */
    int kernel;               /* SIN_K_*: the row kernel */
    size_t off_ang, off_sc, off_tab[2], off_in, off_out;
};

/* The row kernels: generic (any dtypes and strides, through L1 copies of the row), or,
 * with AVX + F16C, whole rows of f32 -> f32 or f16 -> f16 (x absent or the same dtype as
 * dst, both with stride 1) converted in registers. */
enum { SIN_K_GENERIC, SIN_K_F32, SIN_K_F16 };

/*
 * The per-token table is laid out as the output row itself (d = 2 half floats): sin and
 * cos interleaved, or the two halves in the layout's order. A row is then
 * out[k] = x[k] * scale + tab[k] (or tab[k] alone without x): one stream of independent
 * elements, the same arithmetic as before (the product rounded, then the sum), and no
 * shuffles in the loop.
 */
PE_CLONES
static void sin_row(const float *restrict x, float *restrict out, const float *restrict tab,
                    int64_t n, float scale)
{
    if (x) {
        for (int64_t k = 0; k < n; k++)
            out[k] = x[k] * scale + tab[k];
    } else {
        memcpy(out, tab, (size_t)n * sizeof(float));
    }
}

/* sin/cos of every pair of token i1 (batch group g2, i3) into tab (the output row's
 * layout); sc: scratch for 2 half floats. The loops use restrict pointers (and AVX2
 * clones) so that they vectorise: the angle loop was scalar, 8% of the f16 op's time. */
PE_CLONES
static void sin_table(const struct sin_job *sj, int64_t i1, int64_t g2, int64_t i3,
                      double *restrict ang, float *restrict sc, float *restrict tab)
{
    const struct pe_sinusoidal_op *op = sj->op;
    const struct pe_view *pos = &op->pos;
    const int64_t half = op->half;
    const double *restrict freq = op->freq;
    const double p =
        load_pos(pos, pos->offset + i1 * pos->st[0] + g2 * pos->st[1] + i3 * pos->st[2]);
    for (int64_t i = 0; i < half; i++)
        ang[i] = p * freq[i];
    if (op->layout == POSENC_SIN_HALF_SPLIT) {
        pe_sincos_block(ang, tab, tab + half, half, 1.0);
    } else if (op->layout == POSENC_SIN_HALF_SPLIT_COS_FIRST) {
        pe_sincos_block(ang, tab + half, tab, half, 1.0);
    } else {
        pe_sincos_block(ang, sc, sc + half, half, 1.0);
        const float *restrict sv = sc, *restrict cv = sc + half;
        for (int64_t i = 0; i < half; i++) {
            tab[2 * i] = sv[i];
            tab[2 * i + 1] = cv[i];
        }
    }
}

#ifdef PE_HAVE_F16C
/* A row of f32: out = x * scale + tab (x NULL: tab); nt: streaming stores (out 32-byte
 * aligned, checked by the caller). x may be out (in place): each vector is loaded before
 * it is stored. */
__attribute__((target("avx"))) static void sin_row_f32(const float *x, float *out,
                                                       const float *tab, int64_t n, float scale,
                                                       bool nt)
{
    const __m256 sv = _mm256_set1_ps(scale);
    int64_t k = 0;
    if (nt) {
        if (x)
            for (; k + 8 <= n; k += 8)
                _mm256_stream_ps(out + k, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), sv),
                                                        _mm256_loadu_ps(tab + k)));
        else
            for (; k + 8 <= n; k += 8)
                _mm256_stream_ps(out + k, _mm256_loadu_ps(tab + k));
    } else if (x) {
        for (; k + 8 <= n; k += 8)
            _mm256_storeu_ps(out + k, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), sv),
                                                    _mm256_loadu_ps(tab + k)));
    } else {
        for (; k + 8 <= n; k += 8)
            _mm256_storeu_ps(out + k, _mm256_loadu_ps(tab + k));
    }
    for (; k < n; k++)
        out[k] = x ? x[k] * scale + tab[k] : tab[k];
}

/* The same for f16 x (or none) and f16 out, converted with F16C (f32 -> f16 rounds to
 * nearest even, as pe_cpu_f2h). nt: streaming stores of 16 halves (out 32-byte aligned). */
__attribute__((target("avx,f16c"))) static void sin_row_f16(const uint16_t *x, uint16_t *out,
                                                            const float *tab, int64_t n,
                                                            float scale, bool nt)
{
    const __m256 sv = _mm256_set1_ps(scale);
    int64_t k = 0;
#define PE_SIN8_F16(at)                                                                         \
    (x ? _mm256_cvtps_ph(                                                                       \
             _mm256_add_ps(                                                                     \
                 _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + (at)))),   \
                               sv),                                                             \
                 _mm256_loadu_ps(tab + (at))),                                                  \
             _MM_FROUND_TO_NEAREST_INT)                                                         \
       : _mm256_cvtps_ph(_mm256_loadu_ps(tab + (at)), _MM_FROUND_TO_NEAREST_INT))
    if (nt) {
        for (; k + 16 <= n; k += 16) {
            const __m128i lo = PE_SIN8_F16(k), hi = PE_SIN8_F16(k + 8);
            _mm256_stream_si256((__m256i *)(void *)(out + k), _mm256_set_m128i(hi, lo));
        }
    }
    for (; k + 8 <= n; k += 8)
        _mm_storeu_si128((__m128i *)(void *)(out + k), PE_SIN8_F16(k));
#undef PE_SIN8_F16
    for (; k < n; k++)
        out[k] = pe_cpu_f2h(x ? pe_cpu_h2f(x[k]) * scale + tab[k] : tab[k]);
}
#endif

/* The tables of tokens [t0 + k0, t0 + k1) of block (t0, g2, i3) into tab (token k at
 * tab + k * 2 * half). */
static void sin_tables(const struct sin_job *sj, int64_t t0, int64_t k0, int64_t k1, int64_t g2,
                       int64_t i3, double *ang, float *sc, float *tab)
{
    const int64_t half = sj->op->half;
    for (int64_t k = k0; k < k1; k++)
        sin_table(sj, t0 + k, g2, i3, ang, sc, tab + k * 2 * half);
}

/*
 * An item is a block of sj->block consecutive tokens of one batch group: each row i2 that
 * shares the positions is written for the whole block, token after token. With the
 * positions broadcast over dim 2, the rows of one token are a whole dim-2 stride apart in
 * memory; walking one row's block at a time keeps the accesses in a few long sequential
 * runs instead of one stream per row. The sin/cos tables are double-buffered as in RoPE:
 * while the rows of one block stream through memory, the tables of the next block of this
 * chunk are computed a slice after each row, so that the sin/cos work overlaps the
 * memory traffic instead of adding to it. Large out-of-place outputs are written with
 * streaming stores.
 */
/* Lines of the next row's x requested before each table slice: 16 KiB (the f16 bench
 * shape [1024, 2048, 8], a row's block 32 KiB): 2183-2335 us against 2438-2535 us without
 * in five alternated pairs of processes, medians of 60 calls (2026-12-04, Zen 4); the f32
 * rows (memory-bound) unchanged (3225-3301 against 3280-3463). */
#define PE_SIN_PF_LINES 256

static void sin_run(const struct pe_fast_job *job, int64_t begin, int64_t end, float *scratch)
{
    const struct sin_job *sj = (const struct sin_job *)job;
    const struct pe_sinusoidal_op *op = sj->op;
    const struct pe_view *d = &op->dst, *x = &op->x;
    const int64_t T = d->ne[1], G2 = sj->groups2, n = d->ne[0];
    const int64_t TB = sj->block, nb = (T + TB - 1) / TB;
    const bool has_x = x->mem != NULL;
    const bool in_place = has_x && pe_cpu_same_view(x, d);
    double *ang = (double *)(void *)(scratch + sj->off_ang);
    float *sc = scratch + sj->off_sc;
    float *tin = scratch + sj->off_in, *tout = scratch + sj->off_out;
    float *tabs[2] = {scratch + sj->off_tab[0], scratch + sj->off_tab[1]};
    /* the rows that share one position: all of dim 2 when the positions are broadcast */
    const int64_t rows = G2 == 1 ? d->ne[2] : 1;
    if (begin < end) {
        const int64_t blk = begin % nb, t0 = blk * TB, t1 = t0 + TB < T ? t0 + TB : T;
        sin_tables(sj, t0, 0, t1 - t0, (begin / nb) % G2, begin / (nb * G2), ang, sc, tabs[0]);
    }
    for (int64_t it = begin; it < end; it++) {
        const int64_t blk = it % nb, g2 = (it / nb) % G2, i3 = it / (nb * G2);
        const int64_t t0 = blk * TB, t1 = t0 + TB < T ? t0 + TB : T;
        const float *tabs_now = tabs[(it - begin) & 1];
        float *tabs_next = tabs[(it - begin + 1) & 1];
        const bool next = it + 1 < end;
        const int64_t nblk = (it + 1) % nb, ng2 = ((it + 1) / nb) % G2, ni3 = (it + 1) / (nb * G2);
        const int64_t nt0 = nblk * TB, ntok = (nt0 + TB < T ? nt0 + TB : T) - nt0;
        for (int64_t r = 0; r < rows; r++) {
            const int64_t i2 = G2 == 1 ? r : g2;
            for (int64_t t = t0; t < t1; t++) {
                const float *tab = tabs_now + (t - t0) * n;
                const int64_t di = pe_cpu_at4(d, t, i2, i3);
#ifdef PE_HAVE_F16C
                if (sj->kernel == SIN_K_F32) {
                    float *o = (float *)d->mem + di;
                    sin_row_f32(has_x ? (const float *)x->mem + pe_cpu_at4(x, t, i2, i3) : NULL, o,
                                tab, n, op->x_scale, sj->nt && ((uintptr_t)o & 31u) == 0);
                    continue;
                }
                if (sj->kernel == SIN_K_F16) {
                    uint16_t *o = (uint16_t *)d->mem + di;
                    sin_row_f16(has_x ? (const uint16_t *)x->mem + pe_cpu_at4(x, t, i2, i3)
                                      : NULL,
                                o, tab, n, op->x_scale, sj->nt && ((uintptr_t)o & 31u) == 0);
                    continue;
                }
#endif
                const float *xr =
                    has_x ? pe_cpu_input_row(x, pe_cpu_at4(x, t, i2, i3), n, in_place, tin) : NULL;
                float *out = pe_cpu_output_row(d, di, tout);
                sin_row(xr, out, tab, n, op->x_scale);
                pe_cpu_finish_row(d, di, n, out);
            }
            /* the next row's first x lines requested before the table slice below, so
             * that its reads start while the slice computes (the stream would otherwise
             * begin only at the row's first load) */
            if (has_x && (r + 1 < rows || next)) {
                const int64_t i2n = r + 1 < rows ? (G2 == 1 ? r + 1 : g2) : (G2 == 1 ? 0 : ng2);
                const char *xn =
                    (const char *)x->mem +
                    (size_t)pe_cpu_at4(x, r + 1 < rows ? t0 : nt0, i2n, r + 1 < rows ? i3 : ni3) *
                        posenc_dtype_size(x->dtype);
                const int64_t lines = x->st[0] == 1 && x->st[1] == n ? PE_SIN_PF_LINES : 0;
                for (int64_t o = 0; o < lines * 64; o += 64)
                    __builtin_prefetch(xn + o, 0, 1);
            }
            /* slice r of the next block's tables */
            if (next)
                sin_tables(sj, nt0, ntok * r / rows, ntok * (r + 1) / rows, ng2, ni3, ang, sc,
                           tabs_next);
        }
    }
#ifdef PE_HAVE_F16C
    if (sj->nt)
        pe_cpu_sfence(); /* streaming stores are weakly ordered: drain them before the join */
#endif
}

posenc_status pe_cpu_fast_sinusoidal(struct pe_cpu_fast *f, const struct pe_sinusoidal_op *op)
{
    const struct pe_view *d = &op->dst;
    const double n = (double)d->ne[0] * (double)d->ne[1] * (double)d->ne[2] * (double)d->ne[3];
    const double bytes =
        n * (double)(posenc_dtype_size(d->dtype) +
                     (op->x.mem ? posenc_dtype_size(op->x.dtype) : 0));
    struct sin_job sj;
    memset(&sj, 0, sizeof(sj));
    sj.op = op;
    sj.groups2 = op->pos.st[1] == 0 ? 1 : d->ne[2];
    size_t used = 0;
    /* blocks of tokens whose sin/cos tables fill about 64 KiB (at most 64 tokens) */
    sj.block = 65536 / (8 * (op->half > 0 ? op->half : 1));
    sj.block = sj.block < 1 ? 1 : sj.block > 64 ? 64 : sj.block;
    sj.off_ang = pe_cpu_carve(&used, 2 * (size_t)op->half);
    sj.off_sc = pe_cpu_carve(&used, 2 * (size_t)op->half);
    sj.off_tab[0] = pe_cpu_carve(&used, 2 * (size_t)op->half * (size_t)sj.block);
    sj.off_tab[1] = pe_cpu_carve(&used, 2 * (size_t)op->half * (size_t)sj.block);
    sj.off_in = pe_cpu_carve(&used, (size_t)d->ne[0]);
    sj.off_out = pe_cpu_carve(&used, (size_t)d->ne[0]);
    PE_RETURN_IF_ERROR(pe_cpu_fast_reserve(f, used));
    sj.kernel = SIN_K_GENERIC;
#ifdef PE_HAVE_F16C
    const struct pe_view *x = &op->x;
    /* whole rows in registers: dst with stride 1 and x absent or of dst's dtype with
     * stride 1 (f16 needs F16C, which pe_cpu_have_avx2_f16c implies) */
    if (pe_cpu_have_avx2_f16c && d->st[0] == 1 &&
        (!x->mem || (x->dtype == d->dtype && x->st[0] == 1)))
        sj.kernel = d->dtype == POSENC_DTYPE_F32 ? SIN_K_F32 : SIN_K_F16;
    /* large out-of-place outputs: streaming stores (rows that are not 32-byte aligned fall
     * back to plain stores in sin_run) */
    sj.nt = sj.kernel != SIN_K_GENERIC && pe_cpu_stream_out(x, d);
#endif
    sj.base.fn = sin_run;
    sj.base.op = op;
    sj.base.n_items = (d->ne[1] + sj.block - 1) / sj.block * sj.groups2 * d->ne[3];
    pe_cpu_fast_run(f, &sj.base, bytes);
    return POSENC_OK;
}
