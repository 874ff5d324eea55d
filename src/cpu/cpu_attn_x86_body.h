/*
 * cpu_attn_x86_body.h - the loops of cpu_attn_x86.c for one vector width, included once per
 * instruction set (AVX2: 8 lanes; AVX-512: 16) after these are defined:
 *   SFX(name)   the function's name for this width (name_avx2, name_avx512)
 *   PE_IN       the target attribute, always_inline, static inline; PE_FN the target
 *   PV, VW      the vector type and its lanes
 *   V_ZERO() V_SET1(x) V_LOAD(p) V_STORE(p, v) V_MUL V_ADD V_SUB V_MAX
 *   V_FMA_BC(p, b, c)  *p b + c, the float at p in every lane (AVX-512: read by the FMA
 *               itself, {1to16})
 *   V_FMA(a, b, c) V_FNMA(a, b, c) (c - a b) V_HMAX(a) (the lanes' max, a float)
 *   V_LDROW(row, i, f16)  VW elements of a K / V row from element i (f16 converted, or f32)
 *   V_HSUM4(a, b, c, d)   the four vectors' lane sums as an __m128; V_HSUM1(a) one float
 *   V_FLOOR(a)  V_POW2I(n) (2^n for whole n, as floats)  V_MUL_IF_GT(x, lo, a, b) (a b where
 *               x > lo, else 0)
 *   V_FMADDSUB(a, b, c) (a b - c in even lanes, a b + c in odd)  V_DUPEVEN(a) V_DUPODD(a)
 *               (lanes 2p and 2p + 1 both a[2p], or both a[2p + 1])  V_SWAP2(a) (lanes 2p and
 *               2p + 1 exchanged)
 *   V_SUMS4X4(a, N, x, xs)  optional: scores4n's N x 4 lane sums a[n][u] stored at x[u xs + n]
 *               (without it, V_HSUM4 per key and scalar stores)
 * and KROW(k, kb, j); with VW 16 also tree_step and tree_max (cpu_attn_x86.c) and
 *   VI, VI_SET1(x) VI_SUB(a, b) VI_ABS(a) VI_TO_PS(a) VI_LANES() (0, 1, ... 15)  16 int32s.
 * Not a header of its own: no include guard, nothing declared outside.
 */

/* VW elements of key row `row` from element i; with rot (RoPE inside the pass), rotated
 * with the key's table row t: k'_a = k_a c - k_b s (one product, then a fused multiply-
 * subtract), k'_b = k_a s + k_b c (a product, a fused multiply-add); adjacent pairs in one
 * vector: the pair swapped in the register, c and s duplicated over it, fmaddsub. rot NULL
 * (a constant in the plain loops) folds away. */
PE_IN PV SFX(ldk)(const void *row, int64_t i, const int f16, const float *t,
                  const struct pe_attn_x86_rot *rot)
{
    if (!rot || i < rot->lo || i >= rot->lo + 2 * rot->P)
        return V_LDROW(row, i, f16);
    if (rot->adjacent) {
        const PV v = V_LDROW(row, i, f16), tv = V_LOAD(t + i);
        return V_FMADDSUB(v, V_DUPEVEN(tv), V_MUL(V_SWAP2(v), V_DUPODD(tv)));
    }
    if (i < rot->lo + rot->P) /* a pair's first dims: partners P on */
        return V_FNMA(V_LDROW(row, i + rot->P, f16), V_LOAD(t + i + rot->P),
                      V_MUL(V_LDROW(row, i, f16), V_LOAD(t + i)));
    return V_FMA(V_LDROW(row, i - rot->P, f16), V_LOAD(t + i),
                 V_MUL(V_LDROW(row, i, f16), V_LOAD(t + i - rot->P)));
}

/* Key j's table row (rot NULL: none). */
#define TROW(rot, j) ((rot) ? (rot)->tab + (j) * (rot)->ts : (const float *)0)

/* Four rows of q against N (1-3) keys from key j: 4 N accumulators, each q load serving N
 * keys and each k load (converted once) four rows; with N = 3, 12 chains of FMAs in flight
 * (the latency of an FMA times the two FMA ports needs 8). */
PE_IN void SFX(scores4n)(const float *restrict q, int64_t D, const void *k, int64_t kb,
                            int64_t j, float *restrict x, int64_t xs, const int N, const int f16,
                            struct pe_attn_x86_pf_stream *pf, const struct pe_attn_x86_rot *rot)
{
    PV a[4][4];
    for (int n = 0; n < N; n++)
        for (int u = 0; u < 4; u++)
            a[n][u] = V_ZERO();
    for (int64_t i = 0; i < D; i += VW) {
        PV kk[4];
        if (rot && !rot->adjacent && i >= rot->lo && i < rot->lo + 2 * rot->P) {
            /* NeoX-style pairs: both halves of the pair from one load of each (the second
             * half's step is then skipped) */
            if (i >= rot->lo + rot->P)
                continue;
            const int64_t P = rot->P;
            PV kh[4];
            for (int n = 0; n < N; n++) {
                const void *row = KROW(k, kb, j + n);
                const float *t = TROW(rot, j + n);
                const PV ka = V_LDROW(row, i, f16), kb2 = V_LDROW(row, i + P, f16);
                const PV c = V_LOAD(t + i), sn = V_LOAD(t + i + P);
                kk[n] = V_FNMA(kb2, sn, V_MUL(ka, c));
                kh[n] = V_FMA(ka, sn, V_MUL(kb2, c));
            }
            for (int u = 0; u < 4; u++) {
                const PV qa = V_LOAD(q + u * D + i), qb = V_LOAD(q + u * D + i + P);
                for (int n = 0; n < N; n++)
                    a[n][u] = V_FMA(qb, kh[n], V_FMA(qa, kk[n], a[n][u]));
            }
            pf_step(pf);
            pf_step(pf);
            pf_step(pf);
            pf_step(pf);
            continue;
        }
        for (int n = 0; n < N; n++)
            kk[n] = SFX(ldk)(KROW(k, kb, j + n), i, f16, TROW(rot, j + n), rot);
        for (int u = 0; u < 4; u++) {
            const PV qu = V_LOAD(q + u * D + i);
            for (int n = 0; n < N; n++)
                a[n][u] = V_FMA(qu, kk[n], a[n][u]);
        }
        /* four lines every other step (and at the last): at d 64 with 16 lanes (the
         * fewest steps, 64 in a 64-key tile) that is a head's share of K, 128 lines;
         * pf_rest after the loop takes what a shorter tile leaves */
        if ((i & VW) || i + VW >= D)
            pf_round(pf);
    }
#ifdef V_SUMS4X4
    V_SUMS4X4(a, N, x + j, xs);
#else
    for (int n = 0; n < N; n++) {
        float s[4];
        _mm_storeu_ps(s, V_HSUM4(a[n][0], a[n][1], a[n][2], a[n][3]));
        for (int u = 0; u < 4; u++)
            x[u * xs + j + n] = s[u];
    }
#endif
}

#if VW == 16
/* scores4n's plain case (no rotation) for the tile's whole groups of four keys, software-
 * pipelined: the next group's first vector of each K row is loaded and converted before
 * this group's lane sums, so that those loads overlap the sums instead of waiting for
 * them (the same operations in the same order, one load earlier). One thread, a 64-key
 * tile of 4 rows in L1/L2, the loops as in the library against this order, in one
 * process: d 64 1307 against 1445 cycles, d 128 2278 against 2434 (2026-12-04, Zen 4).
 * Returns the keys done (a multiple of 4). */
PE_IN int64_t SFX(scores4p)(const float *restrict q, int64_t D, const void *k, int64_t kb,
                               int64_t kt, float *restrict x, int64_t xs, const int f16,
                               struct pe_attn_x86_pf_stream *pf)
{
    if (kt < 4)
        return 0;
    PV kn[4];
    for (int n = 0; n < 4; n++)
        kn[n] = V_LDROW(KROW(k, kb, n), 0, f16);
    int64_t j = 0;
    for (; j + 4 <= kt; j += 4) {
        PV a[4][4];
        for (int u = 0; u < 4; u++) {
            const PV qu = V_LOAD(q + u * D);
            for (int n = 0; n < 4; n++)
                a[n][u] = V_FMA(qu, kn[n], V_ZERO());
        }
        if (D == VW)
            pf_round(pf);
        for (int64_t i = VW; i < D; i += VW) {
            PV kk[4];
            for (int n = 0; n < 4; n++)
                kk[n] = V_LDROW(KROW(k, kb, j + n), i, f16);
            for (int u = 0; u < 4; u++) {
                const PV qu = V_LOAD(q + u * D + i);
                for (int n = 0; n < 4; n++)
                    a[n][u] = V_FMA(qu, kk[n], a[n][u]);
            }
            if ((i & VW) || i + VW >= D) /* as scores4n */
                pf_round(pf);
        }
        if (j + 8 <= kt)
            for (int n = 0; n < 4; n++)
                kn[n] = V_LDROW(KROW(k, kb, j + 4 + n), 0, f16);
        V_SUMS4X4(a, 4, x + j, xs);
    }
    return j;
}
#endif

/* pf: the next tile's K lines, a few at each step of the inner loops. */
PE_IN void SFX(scores4)(const float *restrict q, int64_t D, const void *k, int64_t kb,
                           int64_t kt, float *restrict x, int64_t xs, const int f16,
                           const struct pe_attn_x86_pf_stream *pf, const struct pe_attn_x86_rot *rot)
{
    struct pe_attn_x86_pf_stream s = pf_local(pf); /* in registers, not aliased by x */
    int64_t j = 0;
#if VW == 16 /* 32 registers: 4 keys (16 chains, 4 k rows and a q vector live) */
    if (!rot)
        j = SFX(scores4p)(q, D, k, kb, kt, x, xs, f16, &s);
    for (; j + 4 <= kt; j += 4)
        SFX(scores4n)(q, D, k, kb, j, x, xs, 4, f16, &s, rot);
    if (kt - j == 3)
        SFX(scores4n)(q, D, k, kb, j, x, xs, 3, f16, &s, rot);
#else
    for (; j + 3 <= kt; j += 3)
        SFX(scores4n)(q, D, k, kb, j, x, xs, 3, f16, &s, rot);
#endif
    if (kt - j == 2)
        SFX(scores4n)(q, D, k, kb, j, x, xs, 2, f16, &s, rot);
    else if (kt - j == 1)
        SFX(scores4n)(q, D, k, kb, j, x, xs, 1, f16, &s, rot);
    pf_rest(&s);
}

/* One row: four keys at a time, one accumulator each. */
PE_IN void SFX(scores1)(const float *restrict q, int64_t D, const void *k, int64_t kb,
                           int64_t kt, float *restrict x, const int f16,
                           const struct pe_attn_x86_pf_stream *pf, const struct pe_attn_x86_rot *rot)
{
    struct pe_attn_x86_pf_stream s = pf_local(pf);
    int64_t j = 0;
    for (; j + 4 <= kt; j += 4) {
        pf_step(&s);
        pf_step(&s);
        pf_step(&s);
        pf_step(&s);
        PV a0 = V_ZERO(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < D; i += VW) {
            const PV qi = V_LOAD(q + i);
            a0 = V_FMA(qi, SFX(ldk)(KROW(k, kb, j), i, f16, TROW(rot, j), rot), a0);
            a1 = V_FMA(qi, SFX(ldk)(KROW(k, kb, j + 1), i, f16, TROW(rot, j + 1), rot), a1);
            a2 = V_FMA(qi, SFX(ldk)(KROW(k, kb, j + 2), i, f16, TROW(rot, j + 2), rot), a2);
            a3 = V_FMA(qi, SFX(ldk)(KROW(k, kb, j + 3), i, f16, TROW(rot, j + 3), rot), a3);
        }
        _mm_storeu_ps(x + j, V_HSUM4(a0, a1, a2, a3));
    }
    for (; j < kt; j++) {
        PV a = V_ZERO();
        for (int64_t i = 0; i < D; i += VW)
            a = V_FMA(V_LOAD(q + i), SFX(ldk)(KROW(k, kb, j), i, f16, TROW(rot, j), rot), a);
        x[j] = V_HSUM1(a);
    }
    pf_rest(&s);
}

/* The prefetches go with the first group of rows. */
PE_IN void SFX(scores_rows)(const float *restrict qs, int64_t nr, int64_t D, const void *k,
                               int64_t kb, int64_t kt, float *restrict x, int64_t xs,
                               const int f16, const struct pe_attn_x86_pf_stream *pf,
                               const struct pe_attn_x86_rot *rot)
{
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4, pf = NULL)
        SFX(scores4)(qs + r * D, D, k, kb, kt, x + r * xs, xs, f16, pf, rot);
    for (; r < nr; r++, pf = NULL)
        SFX(scores1)(qs + r * D, D, k, kb, kt, x + r * xs, f16, pf, rot);
}

/* scores_rows with D 64 or 128 and rows of 64 scores (cpu_attn.c's tiles) as constants:
 * the loops over D unrolled and the q / x rows at constant offsets, which frees registers
 * (with D a variable GCC held loop values in vector registers and spilled three of the
 * four converted K vectors of each step to the stack). One process, two builds, back to
 * back calls (K and V in the L3), 32|8 heads, f16 K/V, medians of 1000-2000 (2026-12-05,
 * Zen 4): AVX-512 ALiBi d 64 228 against 252 us, d 128 388 against 461; RoPE in the pass
 * d 64 312 against 325, d 128 558-578 against 611-637; AVX2 d 64 315 against 317, d 128
 * 536 against 545. The same for the weighted sum over V (Dv) or the softmax step (64
 * keys) changed nothing (229 against 229 us, 220 against 220). */
PE_IN void SFX(scores_body)(const float *restrict qs, int64_t nr, int64_t D, const void *k,
                               int64_t kb, int64_t kt, float *restrict x, int64_t xs,
                               const int f16, const struct pe_attn_x86_pf_stream *pf,
                               const struct pe_attn_x86_rot *rot)
{
    /* RoPE over the whole row (n_offs 0, n_dims D), the common case: the window and the
     * pairing as constants too, so each key vector's rotation is straight-line code */
    if (rot && rot->lo == 0 && 2 * rot->P == D && xs == 64 && (D == 64 || D == 128)) {
        const struct pe_attn_x86_rot c0 = {rot->tab, rot->ts, 0, D / 2, 0};
        const struct pe_attn_x86_rot c1 = {rot->tab, rot->ts, 0, D / 2, 1};
        if (D == 64 && rot->adjacent)
            SFX(scores_rows)(qs, nr, 64, k, kb, kt, x, 64, f16, pf, &c1);
        else if (D == 64)
            SFX(scores_rows)(qs, nr, 64, k, kb, kt, x, 64, f16, pf, &c0);
        else if (rot->adjacent)
            SFX(scores_rows)(qs, nr, 128, k, kb, kt, x, 64, f16, pf, &c1);
        else
            SFX(scores_rows)(qs, nr, 128, k, kb, kt, x, 64, f16, pf, &c0);
    } else if (D == 64 && xs == 64)
        SFX(scores_rows)(qs, nr, 64, k, kb, kt, x, 64, f16, pf, rot);
    else if (D == 128 && xs == 64)
        SFX(scores_rows)(qs, nr, 128, k, kb, kt, x, 64, f16, pf, rot);
    else
        SFX(scores_rows)(qs, nr, D, k, kb, kt, x, xs, f16, pf, rot);
}

PE_FN static void SFX(scores_f16)(const float *restrict qs, int64_t nr, int64_t D, const void *k,
                              int64_t kb, int64_t kt, float *restrict x, int64_t xs,
                              const struct pe_attn_x86_pf_stream *pf)
{
    SFX(scores_body)(qs, nr, D, k, kb, kt, x, xs, 1, pf, NULL);
}

PE_FN static void SFX(scores_f32)(const float *restrict qs, int64_t nr, int64_t D, const void *k,
                              int64_t kb, int64_t kt, float *restrict x, int64_t xs,
                              const struct pe_attn_x86_pf_stream *pf)
{
    SFX(scores_body)(qs, nr, D, k, kb, kt, x, xs, 0, pf, NULL);
}

PE_FN static void SFX(scores_f16_rot)(const float *restrict qs, int64_t nr, int64_t D,
                                      const void *k, int64_t kb, int64_t kt, float *restrict x,
                                      int64_t xs, const struct pe_attn_x86_pf_stream *pf,
                                      const struct pe_attn_x86_rot *rot)
{
    SFX(scores_body)(qs, nr, D, k, kb, kt, x, xs, 1, pf, rot);
}

PE_FN static void SFX(scores_f32_rot)(const float *restrict qs, int64_t nr, int64_t D,
                                      const void *k, int64_t kb, int64_t kt, float *restrict x,
                                      int64_t xs, const struct pe_attn_x86_pf_stream *pf,
                                      const struct pe_attn_x86_rot *rot)
{
    SFX(scores_body)(qs, nr, D, k, kb, kt, x, xs, 0, pf, rot);
}

/* G (1-4) rows' acc over columns [i, i + VW W) (W = 1 or 2 vectors a row): scaled by alpha,
 * then the tile's keys in order, each V load (converted once) serving the G rows. */
PE_IN void SFX(accum_block)(const float *const *xr, float *const *ar, const float *alpha,
                               int64_t kt, const void *v, int64_t vb, int64_t i, const int G,
                               const int W, const int f16, struct pe_attn_x86_pf_stream *pf)
{
    PV a[4][2];
    for (int u = 0; u < G; u++)
        for (int w = 0; w < W; w++)
            a[u][w] = V_MUL(V_LOAD(ar[u] + i + VW * w), V_SET1(alpha[u]));
    for (int64_t j = 0; j < kt; j++) {
        PV vv[2];
        for (int w = 0; w < W; w++)
            vv[w] = V_LDROW(KROW(v, vb, j), i + VW * w, f16);
        for (int u = 0; u < G; u++)
            for (int w = 0; w < W; w++)
                a[u][w] = V_FMA_BC(xr[u] + j, vv[w], a[u][w]);
        pf_step(pf);
    }
    for (int u = 0; u < G; u++)
        for (int w = 0; w < W; w++)
            V_STORE(ar[u] + i + VW * w, a[u][w]);
}

/* Four rows, 2 vectors of columns from i: 8 accumulators written out (GCC keeps them in
 * registers; the array form of accum_block spilled the converted V rows in this case, the
 * hot one of GQA decode). */
PE_IN void SFX(accum4x2)(const float *const *xr, float *const *ar, const float *al,
                             int64_t kt, const void *v, int64_t vb, int64_t i, const int f16,
                             struct pe_attn_x86_pf_stream *pf)
{
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
    PV a00 = V_MUL(V_LOAD(ar[0] + i), V_SET1(al[0]));
    PV a01 = V_MUL(V_LOAD(ar[0] + i + VW), V_SET1(al[0]));
    PV a10 = V_MUL(V_LOAD(ar[1] + i), V_SET1(al[1]));
    PV a11 = V_MUL(V_LOAD(ar[1] + i + VW), V_SET1(al[1]));
    PV a20 = V_MUL(V_LOAD(ar[2] + i), V_SET1(al[2]));
    PV a21 = V_MUL(V_LOAD(ar[2] + i + VW), V_SET1(al[2]));
    PV a30 = V_MUL(V_LOAD(ar[3] + i), V_SET1(al[3]));
    PV a31 = V_MUL(V_LOAD(ar[3] + i + VW), V_SET1(al[3]));
    const char *vp = v;
    for (int64_t j = 0; j < kt; j++, vp += vb) {
        const PV v0 = V_LDROW(vp, i, f16), v1 = V_LDROW(vp, i + VW, f16);
        a00 = V_FMA_BC(x0 + j, v0, a00);
        a01 = V_FMA_BC(x0 + j, v1, a01);
        a10 = V_FMA_BC(x1 + j, v0, a10);
        a11 = V_FMA_BC(x1 + j, v1, a11);
        a20 = V_FMA_BC(x2 + j, v0, a20);
        a21 = V_FMA_BC(x2 + j, v1, a21);
        a30 = V_FMA_BC(x3 + j, v0, a30);
        a31 = V_FMA_BC(x3 + j, v1, a31);
        if ((j & 3) == 3) /* a line a key */
            pf_round(pf);
    }
    V_STORE(ar[0] + i, a00);
    V_STORE(ar[0] + i + VW, a01);
    V_STORE(ar[1] + i, a10);
    V_STORE(ar[1] + i + VW, a11);
    V_STORE(ar[2] + i, a20);
    V_STORE(ar[2] + i + VW, a21);
    V_STORE(ar[3] + i, a30);
    V_STORE(ar[3] + i + VW, a31);
}

/* One row (MHA decode: a K/V head's only row), 4 vectors of columns from i: four accumulators for
 * even keys and four for odd ones (8 chains in flight), added at the end. */
PE_IN void SFX(accum1x4)(const float *x0, float *a, float al, int64_t kt, const void *v,
                             int64_t vb, int64_t i, const int f16,
                             struct pe_attn_x86_pf_stream *pf)
{
    const PV s = V_SET1(al), z = V_ZERO();
    PV e0 = V_MUL(V_LOAD(a + i), s);
    PV e1 = V_MUL(V_LOAD(a + i + VW), s);
    PV e2 = V_MUL(V_LOAD(a + i + 2 * VW), s);
    PV e3 = V_MUL(V_LOAD(a + i + 3 * VW), s);
    PV o0 = z, o1 = z, o2 = z, o3 = z;
    const char *vp = v;
    int64_t j = 0;
    for (; j + 2 <= kt; j += 2, vp += 2 * vb) {
        const float *p = x0 + j, *q = x0 + j + 1;
        e0 = V_FMA_BC(p, V_LDROW(vp, i, f16), e0);
        e1 = V_FMA_BC(p, V_LDROW(vp, i + VW, f16), e1);
        e2 = V_FMA_BC(p, V_LDROW(vp, i + 2 * VW, f16), e2);
        e3 = V_FMA_BC(p, V_LDROW(vp, i + 3 * VW, f16), e3);
        o0 = V_FMA_BC(q, V_LDROW(vp + vb, i, f16), o0);
        o1 = V_FMA_BC(q, V_LDROW(vp + vb, i + VW, f16), o1);
        o2 = V_FMA_BC(q, V_LDROW(vp + vb, i + 2 * VW, f16), o2);
        o3 = V_FMA_BC(q, V_LDROW(vp + vb, i + 3 * VW, f16), o3);
        pf_step(pf);
        pf_step(pf);
    }
    if (j < kt) {
        const float *p = x0 + j;
        e0 = V_FMA_BC(p, V_LDROW(vp, i, f16), e0);
        e1 = V_FMA_BC(p, V_LDROW(vp, i + VW, f16), e1);
        e2 = V_FMA_BC(p, V_LDROW(vp, i + 2 * VW, f16), e2);
        e3 = V_FMA_BC(p, V_LDROW(vp, i + 3 * VW, f16), e3);
    }
    V_STORE(a + i, V_ADD(e0, o0));
    V_STORE(a + i + VW, V_ADD(e1, o1));
    V_STORE(a + i + 2 * VW, V_ADD(e2, o2));
    V_STORE(a + i + 3 * VW, V_ADD(e3, o3));
}

PE_IN void SFX(accum_rows)(const float *x, int64_t xs, const int64_t *rows,
                              const float *alpha, int64_t kt, const void *v, int64_t vb,
                              float *acc, int64_t Dv, const int G, const int f16,
                              const struct pe_attn_x86_pf_stream *pf)
{
    const float *xr[4];
    float *ar[4], al[4];
    for (int u = 0; u < G; u++) {
        xr[u] = x + rows[u] * xs;
        ar[u] = acc + rows[u] * Dv;
        al[u] = alpha[rows[u]];
    }
    /* pf: the next tile's V lines, a few at each key of each block of columns */
    struct pe_attn_x86_pf_stream s = pf_local(pf);
    int64_t i = 0;
    if (G == 4)
        for (; i + 2 * VW <= Dv; i += 2 * VW)
            SFX(accum4x2)(xr, ar, al, kt, v, vb, i, f16, &s);
    if (G == 1)
        for (; i + 4 * VW <= Dv; i += 4 * VW)
            SFX(accum1x4)(xr[0], ar[0], al[0], kt, v, vb, i, f16, &s);
    for (; i + 2 * VW <= Dv; i += 2 * VW)
        SFX(accum_block)(xr, ar, al, kt, v, vb, i, G, 2, f16, &s);
    if (i < Dv)
        SFX(accum_block)(xr, ar, al, kt, v, vb, i, G, 1, f16, &s);
    pf_rest(&s);
}

PE_IN void SFX(accum_body)(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                              const float *alpha, int64_t kt, const void *v, int64_t vb,
                              float *acc, int64_t Dv, const int f16,
                              const struct pe_attn_x86_pf_stream *pf)
{
    int64_t r = 0; /* the prefetches go with the first group of rows */
    for (; r + 4 <= n_rows; r += 4, pf = NULL)
        SFX(accum_rows)(x, xs, rows + r, alpha, kt, v, vb, acc, Dv, 4, f16, pf);
    switch (n_rows - r) {
    case 3:
        SFX(accum_rows)(x, xs, rows + r, alpha, kt, v, vb, acc, Dv, 3, f16, pf);
        break;
    case 2:
        SFX(accum_rows)(x, xs, rows + r, alpha, kt, v, vb, acc, Dv, 2, f16, pf);
        break;
    case 1:
        SFX(accum_rows)(x, xs, rows + r, alpha, kt, v, vb, acc, Dv, 1, f16, pf);
        break;
    default:
        break;
    }
}

PE_FN static void SFX(accum_f16)(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                             const float *alpha, int64_t kt, const void *v, int64_t vb,
                             float *acc, int64_t Dv, const struct pe_attn_x86_pf_stream *pf)
{
    SFX(accum_body)(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv, 1, pf);
}

PE_FN static void SFX(accum_f32)(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                             const float *alpha, int64_t kt, const void *v, int64_t vb,
                             float *acc, int64_t Dv, const struct pe_attn_x86_pf_stream *pf)
{
    SFX(accum_body)(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv, 0, pf);
}


/* exp(x) for x <= 0 (or -inf): pe_cpu_exp_f32 (cpu_fast.h) with fused multiply-adds
 * (within the same 2e-7 relative; 0 below -87.3). */
PE_IN PV SFX(vexp)(PV x)
{
    const PV lo = V_SET1(-87.33654f);
    const PV xc = V_MAX(x, lo);
    const PV n = V_FLOOR(V_FMA(xc, V_SET1(1.44269504088896341f), V_SET1(0.5f)));
    PV r = V_FNMA(n, V_SET1(0.693359375f), xc);
    r = V_FMA(n, V_SET1(2.12194440e-4f), r);
    PV p = V_SET1(1.9875691500e-4f);
    p = V_FMA(p, r, V_SET1(1.3981999507e-3f));
    p = V_FMA(p, r, V_SET1(8.3334519073e-3f));
    p = V_FMA(p, r, V_SET1(4.1665795894e-2f));
    p = V_FMA(p, r, V_SET1(1.6666665459e-1f));
    p = V_FMA(p, r, V_SET1(5.0000001201e-1f));
    p = V_ADD(V_FMA(p, V_MUL(r, r), r), V_SET1(1.0f));
    return V_MUL_IF_GT(x, lo, p, V_POW2I(n));
}

/* The online-softmax step of one row over a tile (cpu_attn.c's row_softmax): x (kt logits)
 * becomes the p_j, m and l are updated; returns alpha, or -1 when every key so far is
 * masked (x untouched). The keys past the last whole vector take the scalar exp. */
PE_IN float SFX(softmax)(float *x, int64_t kt, float *m, float *l)
{
    const int64_t kv = kt - kt % VW;
    PV mx = V_SET1(-INFINITY);
    for (int64_t j = 0; j < kv; j += VW)
        mx = V_MAX(mx, V_LOAD(x + j));
    float mt = V_HMAX(mx);
    for (int64_t j = kv; j < kt; j++)
        mt = x[j] > mt ? x[j] : mt;
    mt = *m > mt ? *m : mt;
    if (mt == -INFINITY)
        return -1.0f; /* every key so far masked */
    const float alpha = *m == -INFINITY ? 0.0f : pe_cpu_exp_f32(*m - mt);
    const PV mn = V_SET1(mt);
    PV s = V_ZERO();
    for (int64_t j = 0; j < kv; j += VW) {
        const PV p = SFX(vexp)(V_SUB(V_LOAD(x + j), mn));
        V_STORE(x + j, p);
        s = V_ADD(s, p);
    }
    float sum = V_HSUM1(s);
    for (int64_t j = kv; j < kt; j++) {
        x[j] = pe_cpu_exp_f32(x[j] - mt);
        sum += x[j];
    }
    *l = *l * alpha + sum;
    *m = mt;
    return alpha;
}

#if VW == 16
/* Four rows of a tile (kt a multiple of 16) in one set of vectors, as SFX(softmax) row by row
 * but: each row's max over 16 lanes, then the four rows' maxima folded together by one tree
 * of maxima (row u's in 128-bit lane u); the four alphas by one vexp (instead of four scalar
 * exps); each row's sum of the p_j in 16 lanes (j mod 16), the four folded by one tree of
 * sums: per row ((s_e + s_e+8) + (s_e+4 + s_e+12)) for e < 4, then (e + e^2), then
 * (e + e^1). ALiBi's bias (slope, d0: four rows' worth, or slope NULL) is added in the pass
 * that takes the max. Rows r0 + u with a key seen so far go to live. */
PE_IN int64_t SFX(softmax4)(float *x, int64_t xs, int64_t kt, float *m, float *l, float *alpha,
                            int64_t r0, int64_t *live, const float *slope, const int32_t *d0,
                            const int sym)
{
    const __m512i i8 = _mm512_set_epi32(23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8);
    const __m512i i4 = _mm512_set_epi32(27, 26, 25, 24, 15, 14, 13, 12, 19, 18, 17, 16, 7, 6, 5, 4);
    PV mx[4];
    for (int u = 0; u < 4; u++) {
        float *xu = x + u * xs;
        PV mu = V_SET1(-INFINITY);
        if (slope) {
            const PV sl = V_SET1(slope[u]);
            VI d = VI_SUB(VI_SET1(d0[u]), VI_LANES());
            for (int64_t j = 0; j < kt; j += VW, d = VI_SUB(d, VI_SET1(VW))) {
                const PV v = V_SUB(V_LOAD(xu + j), V_MUL(sl, VI_TO_PS(sym ? VI_ABS(d) : d)));
                V_STORE(xu + j, v);
                mu = V_MAX(mu, v);
            }
        } else {
            for (int64_t j = 0; j < kt; j += VW)
                mu = V_MAX(mu, V_LOAD(xu + j));
        }
        mx[u] = mu;
    }
    __m512 t = tree_max(tree_max(mx[0], mx[2], 0xFF00, i8), tree_max(mx[1], mx[3], 0xFF00, i8),
                        0xF0F0, i4);
    t = _mm512_max_ps(t, _mm512_permute_ps(t, 0x4E));
    t = _mm512_max_ps(t, _mm512_permute_ps(t, 0xB1)); /* row u's tile max in lanes 4u..4u+3 */
    const __m512i rep = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512 mo = _mm512_permutexvar_ps(rep, _mm512_castps128_ps512(_mm_loadu_ps(m)));
    const __m512 mn = _mm512_max_ps(mo, t);
    float mt[16], av[16], sm[16];
    _mm512_storeu_ps(mt, mn);
    _mm512_storeu_ps(av, SFX(vexp)(_mm512_sub_ps(mo, mn)));
    PV sum[4];
    for (int u = 0; u < 4; u++) {
        sum[u] = V_ZERO();
        if (mt[4 * u] == -INFINITY)
            continue; /* every key so far masked: x stays */
        float *xu = x + u * xs;
        const PV mu = V_SET1(mt[4 * u]);
        for (int64_t j = 0; j < kt; j += VW) {
            const PV p = SFX(vexp)(V_SUB(V_LOAD(xu + j), mu));
            V_STORE(xu + j, p);
            sum[u] = V_ADD(sum[u], p);
        }
    }
    __m512 st = tree_step(tree_step(sum[0], sum[2], 0xFF00, i8),
                          tree_step(sum[1], sum[3], 0xFF00, i8), 0xF0F0, i4);
    st = _mm512_add_ps(st, _mm512_permute_ps(st, 0x4E));
    st = _mm512_add_ps(st, _mm512_permute_ps(st, 0xB1));
    _mm512_storeu_ps(sm, st);
    int64_t n = 0;
    for (int u = 0; u < 4; u++) {
        if (mt[4 * u] == -INFINITY) {
            alpha[u] = -1.0f;
            continue;
        }
        const float a = m[u] == -INFINITY ? 0.0f : av[4 * u];
        alpha[u] = a;
        l[u] = l[u] * a + sm[4 * u];
        m[u] = mt[4 * u];
        live[n++] = r0 + u;
    }
    return n;
}
#endif

/* The rows r < nr in one function, so that one row's chain of max, exp and sum overlaps the
 * next row's: alpha[r], and the rows with a key seen so far (alpha >= 0) listed in live (in
 * order). ab: ALiBi's bias of the rows taken four at a time (pe_attn_x86_rows4), or NULL. */
PE_FN static int64_t SFX(softmax_rows)(float *x, int64_t xs, int64_t nr, int64_t kt, float *m,
                                       float *l, float *alpha, int64_t *live,
                                       const struct pe_attn_x86_alibi *ab)
{
    int64_t n = 0, r = 0;
#if VW == 16
    if (kt % VW == 0)
        for (; r + 4 <= nr; r += 4)
            n += SFX(softmax4)(x + r * xs, xs, kt, m + r, l + r, alpha + r, r, live + n,
                               ab ? ab->slope + r : NULL, ab ? ab->d0 + r : NULL,
                               ab ? ab->symmetric : 0);
#else
    (void)ab; /* no rows four at a time: pe_attn_x86_rows4 gave 0 */
#endif
    for (; r < nr; r++) {
        const float a = SFX(softmax)(x + r * xs, kt, m + r, l + r);
        alpha[r] = a;
        if (a >= 0.0f)
            live[n++] = r;
    }
    return n;
}
