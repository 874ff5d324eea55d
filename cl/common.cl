/*
 * common.cl - shared by every posenc OpenCL program (prepended to each op's source).
 *
 * OpenCL C 1.2, no optional extension required. f16 tensors are stored as IEEE binary16
 * and reached only through vload_half / vstore_half_rte, which OpenCL 1.2 provides
 * without cl_khr_fp16 (a `half *` may be declared, never dereferenced).
 *
 * The host selects the storage type of each tensor with -D options (0 or 1):
 *   DST_F16   destination is f16 (else f32)
 *   HAS_X     an input tensor x is read (fused add)
 *   X_F16     x is f16 (else f32); ignored without HAS_X
 *   POS_I32   positions are int32 (else f32)
 *   TAB_F16   a table tensor (learned rows, relative-bias buckets) is f16 (else f32)
 */

/* Arithmetic is plain f32: no contraction of a*b + c into fma, so every device rounds
 * the same way as the spec's formula (the host reference rounds once in double). */
#pragma OPENCL FP_CONTRACT OFF

#ifndef DST_F16
#define DST_F16 0
#endif
#ifndef HAS_X
#define HAS_X 0
#endif
#ifndef X_F16
#define X_F16 0
#endif
#ifndef POS_I32
#define POS_I32 1
#endif
#ifndef TAB_F16
#define TAB_F16 0
#endif

/* Element types of the kernel arguments, and loads / stores that return / take float.
 * `i` is an element index (long) from the start of the buffer. */
#if DST_F16
#define DST_T half
#define PE_STORE_DST(p, i, v) vstore_half_rte((v), (size_t)(i), (p))
#define PE_LOAD_DST(p, i) vload_half((size_t)(i), (p))
#else
#define DST_T float
#define PE_STORE_DST(p, i, v) ((p)[(i)] = (v))
#define PE_LOAD_DST(p, i) ((p)[(i)])
#endif

#if HAS_X && X_F16
#define X_T half
#define PE_LOAD_X(p, i) vload_half((size_t)(i), (p))
#else
#define X_T float
#define PE_LOAD_X(p, i) ((p)[(i)])
#endif

#if TAB_F16
#define TAB_T half
#define PE_LOAD_TAB(p, i) vload_half((size_t)(i), (p))
#else
#define TAB_T float
#define PE_LOAD_TAB(p, i) ((p)[(i)])
#endif

#if POS_I32
#define POS_T int
#else
#define POS_T float
#endif

/*
 * Angles of the rotary and sinusoidal kernels, accurate without device f64
 * (docs/accuracy-angles.md; the GLSL twin is in shaders/common.glsl).
 *
 * The host splits each frequency w (double) into two f32 words, hi = f32(w) and lo =
 * f32(w - hi) (pe_freq_split). For a position p (exact in f32: any f32, or an integer
 * below 2^24) the angle p*w is the unevaluated sum ph + pl, ph = p*hi and pl = fma(p, lo,
 * fma(p, hi, -ph)): fma gives the product's rounding error exactly, so ph + pl is within
 * ~2^-47 |p w| of p*w. It is reduced by pi/2 with a three-word pi/2 = PE_PIO2_1 (22
 * significant bits) + PE_PIO2_2 + PE_PIO2_3: q = rint(ph * 2/pi), r = ph - q*PE_PIO2_1
 * (exact for |ph| up to ~2^25: the result is a multiple of 2^-21 below 8), minus
 * q*PE_PIO2_2 (one rounding, relative to |r|), plus pl - q*PE_PIO2_3; a second step takes
 * out the quarter turn that q may miss when ph*2/pi rounds (|ph| near 2^24). sin and cos of
 * r (|r| <= pi/4 + 2^-20) are Cephes' sinf / cosf minimax polynomials in f32, and the
 * quadrant (q + q1) mod 4 swaps and negates them. Measured against an f64 evaluation: within
 * 1.7 * 2^-24 up to |p w| = 10^6 and 3.7 * 2^-24 up to 2^24, the same figures as an exact
 * C emulation of these lines. Past that r comes out of range (no phase left in f32): r is
 * replaced by 0 (sin 0, cos 1) so that the values stay in [-1, 1], except that an infinite
 * or NaN angle gives NaN. FP_CONTRACT is off above: only the explicit fma calls fuse.
 */
#define PE_2_OVER_PI 0.636619747f
#define PE_PIO2_1 1.57079601f     /* 0x1.921fb0p+0: 22 significant bits */
#define PE_PIO2_2 3.13916473e-07f
#define PE_PIO2_3 5.39030295e-15f

/* The reduced argument r of p*(hi + lo) and its quadrant n (an integer-valued float, any
 * value mod 4). Scalar and 8-wide versions. */
#define PE_ANGLE_REDUCE_BODY                                                               \
    const TYPE ph = p * hi;                                                                \
    const TYPE pl = fma(p, lo, fma(p, hi, -ph));                                           \
    const TYPE q = rint(ph * PE_2_OVER_PI);                                                \
    TYPE r = fma(-q, (TYPE)PE_PIO2_1, ph);                                                 \
    r = fma(-q, (TYPE)PE_PIO2_2, r);                                                       \
    r = r + fma(-q, (TYPE)PE_PIO2_3, pl);                                                  \
    const TYPE q1 = rint(r * PE_2_OVER_PI);                                                \
    r = fma(-q1, (TYPE)PE_PIO2_1, r);                                                      \
    r = fma(-q1, (TYPE)PE_PIO2_2, r);                                                      \
    *n = (q - 4.0f * floor(q * 0.25f)) + q1;                                               \
    return select(ph - ph, r, CMP(fabs(r) <= 0.8f));

#define TYPE float
#define CMP(c) (int)(c)
static inline float pe_angle_reduce(const float p, const float hi, const float lo, float *n)
{
    PE_ANGLE_REDUCE_BODY
}
#undef TYPE
#undef CMP
#define TYPE float8
#define CMP(c) (c)
static inline float8 pe_angle_reduce8(const float8 p, const float8 hi, const float8 lo,
                                      float8 *n)
{
    PE_ANGLE_REDUCE_BODY
}
#undef TYPE
#undef CMP

/* r - rf with quadrants n - nf (re-rotation: the difference of two reduced angles, |r| <=
 * pi/2 + ...), brought back to |r| <= pi/4. */
static inline float pe_angle_sub(const float r, const float rf, float *n, const float nf)
{
    float d = r - rf;
    const float q = rint(d * PE_2_OVER_PI);
    d = fma(-q, PE_PIO2_1, d);
    d = fma(-q, PE_PIO2_2, d);
    *n = *n - nf + q;
    return d;
}
static inline float8 pe_angle_sub8(const float8 r, const float8 rf, float8 *n, const float8 nf)
{
    float8 d = r - rf;
    const float8 q = rint(d * PE_2_OVER_PI);
    d = fma(-q, (float8)PE_PIO2_1, d);
    d = fma(-q, (float8)PE_PIO2_2, d);
    *n = *n - nf + q;
    return d;
}

/* sin and cos of r + n*pi/2 (|r| <= pi/4 + small): Cephes' sinf / cosf polynomials. */
#define PE_SINCOS_RED_BODY(ITYPE, CONV)                                                    \
    const TYPE z = r * r;                                                                  \
    const TYPE sp = r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f +              \
                                                          z * -1.9515295891e-4f));        \
    const TYPE cp = (1.0f - 0.5f * z) +                                                    \
                    z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f +        \
                                                          z * 2.443315711809948e-5f));    \
    const ITYPE k = CONV(n) & 3;                                                           \
    const ITYPE odd = CMPI((k & 1) != 0);                                                  \
    TYPE s = select(sp, cp, odd), c = select(cp, sp, odd);                                 \
    s = select(s, -s, CMPI((k & 2) != 0));                                                 \
    c = select(c, -c, CMPI(((k + 1) & 2) != 0));                                           \
    *cos_out = c;                                                                          \
    return s;

#define TYPE float
#define CMPI(c) (int)(c)
static inline float pe_sincos_red(const float r, const float n, float *cos_out)
{
    PE_SINCOS_RED_BODY(int, convert_int)
}
#undef TYPE
#undef CMPI
#define TYPE float8
#define CMPI(c) (c)
static inline float8 pe_sincos_red8(const float8 r, const float8 n, float8 *cos_out)
{
    PE_SINCOS_RED_BODY(int8, convert_int8)
}
#undef TYPE
#undef CMPI

/* sin and cos of p*(hi + lo) (returns sin). */
static inline float pe_angle_sincos(const float p, const float hi, const float lo, float *c)
{
    float n;
    const float r = pe_angle_reduce(p, hi, lo, &n);
    return pe_sincos_red(r, n, c);
}
static inline float8 pe_angle_sincos8(const float8 p, const float8 hi, const float8 lo,
                                      float8 *c)
{
    float8 n;
    const float8 r = pe_angle_reduce8(p, hi, lo, &n);
    return pe_sincos_red8(r, n, c);
}

/* Streaming (non-temporal) stores of f32 values as f16 (round to nearest even), for
 * PE_NT_STORE on CPU devices: converted by vstore_half*_rte into a private vector (PoCL
 * keeps it in a register: vcvtps2ph), then stored as raw bits with clang's
 * __builtin_nontemporal_store, so that large f16 outputs skip the read for ownership as
 * f32 ones do. p must be aligned to the vector (16 / 32 bytes). */
#if defined(__clang__)
static inline void pe_nt_store_half8(__global half *p, const float8 v)
{
    ushort8 b;
    vstore_half8_rte(v, 0, (__private half *)&b);
    __builtin_nontemporal_store(b, (__global ushort8 *)p);
}
static inline void pe_nt_store_half16(__global half *p, const float16 v)
{
    ushort16 b;
    vstore_half16_rte(v, 0, (__private half *)&b);
    __builtin_nontemporal_store(b, (__global ushort16 *)p);
}
#endif

/* Layouts of the sinusoidal op; the same values as posenc_sin_layout. */
#define PE_SIN_INTERLEAVED 0
#define PE_SIN_HALF_SPLIT 1
#define PE_SIN_HALF_SPLIT_COS_FIRST 2
