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
 * Angles of the rotary and sinusoidal kernels, accurate without device f64 and without
 * relying on a fused fma (docs/accuracy-angles.md). shaders/common.glsl has the same
 * operations in the same order, so OpenCL and Vulkan give the same bits (except on devices
 * with fma in hardware, which take the shorter PE_FMA form below).
 *
 * The host gives each frequency w (double, radians per position) in quarter turns, v =
 * w * 2/pi, as two f32 words hi = f32(v) and lo = f32(v - hi) (pe_freq_split): hi + lo is
 * within ~2^-48 of v relative. For a position p (exact in f32: any f32, or an integer
 * below 2^24) the angle in quarter turns p*v is the unevaluated sum xh + e + p*lo, xh =
 * f32(p*hi) and e its rounding error, exact by Dekker's product (p and hi cut into 12-bit
 * halves by masking, so every partial product is exact). The whole quarter turns come out
 * exactly: q = rint(xh), fh = xh - q (exact, |fh| <= 1/2); fl = e + p*lo (|fl| <= ~ulp(xh));
 * a second step q1 = rint(fh + fl) (0 or +-1, near 2^24) keeps |fh + fl| <= 1/2 + tiny.
 * The rest turns into radians with a two-word pi/2: r = fh*PIO2_HI + (fh*PIO2_LO +
 * fl*PIO2_HI), |r| <= pi/4 + 2^-20, whatever p. sin and cos of r are Cephes' sinf / cosf
 * minimax polynomials in f32, and the quadrant (q + q1) mod 4 swaps and negates them.
 * Measured against an f64 evaluation (an exact C emulation of these lines over 4 M angles,
 * integer and f32 positions, and the kernels): within 1.6 * 2^-24 up to |p w| = 1e6 and
 * 2.5 * 2^-24 up to 2^24. Past that the angle has no phase left in f32 (its spacing nears
 * pi): the values stay in [-1, 1] but may differ from the CPU's; an infinite or NaN angle
 * gives NaN. FP_CONTRACT is off above: no operation fuses. 31 operations per angle before
 * the polynomials.
 *
 * PE_FMA (-D, 1 when the device has fma in hardware, CL_FP_FMA): the same steps with
 * OpenCL's fma, which the spec requires to be correctly rounded (a fused multiply-add): e =
 * fma(p, hi, -xh), fl = fma(p, lo, e), r = fma(fh, PIO2_HI, fma(fh, PIO2_LO, fl*PIO2_HI)):
 * 14 operations per angle; within 1.3 * 2^-24 up to 1e6 and 2.4 * 2^-24 up to 2^24 (the
 * same emulation), inside the same contract, though not the same bits as the fma-free form.
 */
#ifndef PE_FMA
#define PE_FMA 0
#endif
#define PE_2_OVER_PI 0.636619747f
#define PE_PIO2_HI 1.57079637f        /* f32(pi/2) */
#define PE_PIO2_LO -4.37113883e-08f   /* f32(pi/2 - PE_PIO2_HI) */
/* pi/2 in three words for pe_angle_sub: A and B with 12 significant bits, so that q*A and
 * q*B are exact for small integers q */
#define PE_PIO2_A 1.5703125f
#define PE_PIO2_B 0.000483751297f
#define PE_PIO2_C 7.54979013e-08f

/* The reduced argument r (radians) of p*(hi + lo) quarter turns and its quadrant n (an
 * integer-valued float, any value mod 4). Scalar and 8-wide versions. */
#if PE_FMA
#define PE_ANGLE_REDUCE_BODY                                                               \
    const TYPE xh = p * hi;                                                                \
    const TYPE fl = fma(p, lo, fma(p, hi, -xh));                                           \
    TYPE q = rint(xh);                                                                     \
    TYPE fh = xh - q;                                                                      \
    const TYPE q1 = rint(fh + fl);                                                         \
    fh = fh - q1;                                                                          \
    q = q + q1;                                                                            \
    *n = q - 4.0f * floor(q * 0.25f);                                                      \
    return fma(fh, (TYPE)PE_PIO2_HI, fma(fh, (TYPE)PE_PIO2_LO, fl * PE_PIO2_HI));
#else
#define PE_ANGLE_REDUCE_BODY                                                               \
    const TYPE xh = p * hi;                                                                \
    const TYPE pa = AS_F(AS_U(p) & 0xfffff000u), pb = p - pa;                             \
    const TYPE ha = AS_F(AS_U(hi) & 0xfffff000u), hb = hi - ha;                           \
    const TYPE e = (((pa * ha - xh) + pa * hb) + pb * ha) + pb * hb;                      \
    const TYPE fl = e + p * lo;                                                            \
    TYPE q = rint(xh);                                                                     \
    TYPE fh = xh - q;                                                                      \
    const TYPE q1 = rint(fh + fl);                                                         \
    fh = fh - q1;                                                                          \
    q = q + q1;                                                                            \
    *n = q - 4.0f * floor(q * 0.25f);                                                      \
    return fh * PE_PIO2_HI + (fh * PE_PIO2_LO + fl * PE_PIO2_HI);
#endif

#define TYPE float
#define AS_F as_float
#define AS_U as_uint
static inline float pe_angle_reduce(const float p, const float hi, const float lo, float *n)
{
    PE_ANGLE_REDUCE_BODY
}
#undef TYPE
#undef AS_F
#undef AS_U
#define TYPE float8
#define AS_F as_float8
#define AS_U as_uint8
static inline float8 pe_angle_reduce8(const float8 p, const float8 hi, const float8 lo,
                                      float8 *n)
{
    PE_ANGLE_REDUCE_BODY
}
#undef TYPE
#undef AS_F
#undef AS_U

/* r - rf with quadrants n - nf (re-rotation: the difference of two reduced angles, |r| <=
 * pi/2 + ...), brought back to |r| <= pi/4 (q is -1, 0 or 1: every product is exact). */
static inline float pe_angle_sub(const float r, const float rf, float *n, const float nf)
{
    const float d = r - rf;
    const float q = rint(d * PE_2_OVER_PI);
    *n = *n - nf + q;
    return ((d - q * PE_PIO2_A) - q * PE_PIO2_B) - q * PE_PIO2_C;
}
static inline float8 pe_angle_sub8(const float8 r, const float8 rf, float8 *n, const float8 nf)
{
    const float8 d = r - rf;
    const float8 q = rint(d * PE_2_OVER_PI);
    *n = *n - nf + q;
    return ((d - q * PE_PIO2_A) - q * PE_PIO2_B) - q * PE_PIO2_C;
}

/* sin and cos of r + n*pi/2 (|r| <= pi/4 + small): Cephes' sinf / cosf polynomials, in
 * the order of shaders/common.glsl's pe_sin_poly / pe_cos_poly. */
#define PE_SINCOS_RED_BODY(ITYPE, CONV)                                                    \
    const TYPE z = r * r;                                                                  \
    const TYPE sp =                                                                        \
        ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;   \
    const TYPE cp = ((((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z +           \
                       4.166664568298827e-2f) * z * z) - 0.5f * z) + 1.0f;                 \
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

/* 8 or 16 floats v to element i of p: PE_STORE8_AS / PE_STORE16_AS(F16, p, i, v) for a
 * destination of halves (F16 1: rounded to nearest even) or floats (0), F16 a literal 0 or
 * 1 (a -D value); PE_STORE8_DST / PE_STORE16_DST to dst (DST_F16). PE_NT_STORE (-D, 1 for
 * large out-of-place outputs on CPU devices): streaming (non-temporal) stores where the
 * compiler has them (clang's __builtin_nontemporal_store; halves through pe_nt_store_half*
 * above), no read for ownership of the destination. The host sets it only where every 8-
 * and 16-wide store is aligned (rows aligned to 16 elements). */
#ifndef PE_NT_STORE
#define PE_NT_STORE 0
#endif
#if PE_NT_STORE && defined(__clang__)
#define PE_STORE8_F0(p, i, v) __builtin_nontemporal_store((v), (__global float8 *)((p) + (i)))
#define PE_STORE16_F0(p, i, v) __builtin_nontemporal_store((v), (__global float16 *)((p) + (i)))
#define PE_STORE8_F1(p, i, v) pe_nt_store_half8((p) + (i), (v))
#define PE_STORE16_F1(p, i, v) pe_nt_store_half16((p) + (i), (v))
#else
#define PE_STORE8_F0(p, i, v) vstore8((v), 0, (p) + (i))
#define PE_STORE16_F0(p, i, v) vstore16((v), 0, (p) + (i))
#define PE_STORE8_F1(p, i, v) vstore_half8_rte((v), 0, (p) + (i))
#define PE_STORE16_F1(p, i, v) vstore_half16_rte((v), 0, (p) + (i))
#endif
#define PE_CAT_(a, b) a##b
#define PE_CAT(a, b) PE_CAT_(a, b)
#define PE_STORE8_AS(F16, p, i, v) PE_CAT(PE_STORE8_F, F16)(p, i, v)
#define PE_STORE16_AS(F16, p, i, v) PE_CAT(PE_STORE16_F, F16)(p, i, v)
#define PE_STORE8_DST(p, i, v) PE_STORE8_AS(DST_F16, p, i, v)
#define PE_STORE16_DST(p, i, v) PE_STORE16_AS(DST_F16, p, i, v)

/* Layouts of the sinusoidal op; the same values as posenc_sin_layout. */
#define PE_SIN_INTERLEAVED 0
#define PE_SIN_HALF_SPLIT 1
#define PE_SIN_HALF_SPLIT_COS_FIRST 2

/* ---- the one-pass attention kernels (cl/flash.cl, cl/flash_cpu.cl): the host passes
 * -DFA_FLAGS to those programs only. Bit i of FA_FLAGS is the host's FA_* bit i
 * (src/opencl/ops_flash.c): the storage types of q, k, v, the mask, the relative-bias
 * table and dst (1: f16), then what the call has. ---- */
#ifdef FA_FLAGS
#define FA_Q_F16 ((FA_FLAGS >> 0) & 1)
#define FA_K_F16 ((FA_FLAGS >> 1) & 1)
#define FA_V_F16 ((FA_FLAGS >> 2) & 1)
#define FA_M_F16 ((FA_FLAGS >> 3) & 1)
#define FA_T_F16 ((FA_FLAGS >> 4) & 1)
#define FA_O_F16 ((FA_FLAGS >> 5) & 1)
#define FA_ALIBI ((FA_FLAGS >> 6) & 1)
#define FA_RELBIAS ((FA_FLAGS >> 7) & 1)
#define FA_MASK ((FA_FLAGS >> 8) & 1)
#define FA_MSLOPE ((FA_FLAGS >> 9) & 1)
#define FA_SOFTCAP ((FA_FLAGS >> 10) & 1)
#define FA_SINKS ((FA_FLAGS >> 11) & 1)
#define FA_SPLIT ((FA_FLAGS >> 12) & 1)

/* a*b + c: fused where the device has fma in hardware (-DFA_FMA=1; one rounding fewer,
 * inside the same bound), else a product and a sum */
#ifndef FA_FMA
#define FA_FMA 0
#endif
#if FA_FMA
#define FA_MAD(a, b, c) fma((a), (b), (c))
#else
#define FA_MAD(a, b, c) ((a) * (b) + (c))
#endif

/* Split-K merges (both files): the sink of head h (-inf without sinks), and
 * M = max(sink, max_c m_c) over a row's nc partials (m first, st floats apart) from pp. */
static inline float fa_sink(__global const float *sinks, const long s_off, const long s_st,
                            const long h)
{
#if FA_SINKS
    return sinks[s_off + h * s_st];
#else
    return -INFINITY;
#endif
}

static inline float fa_merge_max(__global const float *pp, const long nc, const long st,
                                 const float sink)
{
    float M = sink;
    for (long c = 0; c < nc; c++)
        M = fmax(M, pp[c * st]);
    return M;
}

/* element i of p, f16 (f16 = 1) or f32 */
#define FA_LOAD(f16, p, i) ((f16) ? vload_half((size_t)(i), (__global const half *)(p)) \
                                  : ((__global const float *)(p))[(i)])
#define FA_CAT_(a, b) a##b
#define FA_CAT(a, b) FA_CAT_(a, b)

/* RoPE on k inside the pass (pe_attn_fused_op.krot; -DFA_KROT=1 with -DFA_KR_OFF,
 * -DFA_KR_P, -DFA_KR_ADJ): each key's row of the table (f32, D floats, at krot + kr_off +
 * key * kr_st.s2 + b * kr_st.s3) holds mscale cos at the first dim of each pair and
 * mscale sin at its second; pair j < FA_KR_P has dims (a, b) = FA_KR_ADJ ? (FA_KR_OFF + 2j,
 * FA_KR_OFF + 2j + 1) : (FA_KR_OFF + j, FA_KR_OFF + j + FA_KR_P), and
 *     k'_a = k_a c - k_b s,  k'_b = k_a s + k_b c
 * (two products and a sum, each rounded, as the CPU backend's krot_row). The dims outside
 * the window [FA_KR_OFF, FA_KR_OFF + 2 FA_KR_P) are read as stored. */
#ifndef FA_KROT
#define FA_KROT 0
#endif
#if FA_KROT
#define FA_KR_END (FA_KR_OFF + 2 * FA_KR_P)
/* dim i's pair: its first dim, its second, and whether i is the first */
#define FA_KR_A(i) (FA_KR_ADJ ? (i) - (((i) - FA_KR_OFF) & 1) : ((i) < FA_KR_OFF + FA_KR_P ? (i) : (i) - FA_KR_P))
#define FA_KR_B(i) (FA_KR_A(i) + (FA_KR_ADJ ? 1 : FA_KR_P))
/* lane masks of adjacent pairs in an n-wide vector (n = 4, 8, 16): each pair's first lane
 * twice, its second twice, the pair swapped; and the swapped lanes' signs */
#define FA_KR_M4(a, b) (uint4)(a, b, (a) + 2, (b) + 2)
#define FA_KR_M8(a, b) (uint8)(FA_KR_M4(a, b), FA_KR_M4((a) + 4, (b) + 4))
#define FA_KR_M16(a, b) (uint16)(FA_KR_M8(a, b), FA_KR_M8((a) + 8, (b) + 8))
#define FA_KR_SGN4 (float4)(-1.0f, 1.0f, -1.0f, 1.0f)
#define FA_KR_SGN8 (float8)(FA_KR_SGN4, FA_KR_SGN4)
#define FA_KR_SGN16 (float16)(FA_KR_SGN8, FA_KR_SGN8)
#define FA_KR_ODD4 (int4)(0, -1, 0, -1)
#define FA_KR_ODD8 (int8)(FA_KR_ODD4, FA_KR_ODD4)
#define FA_KR_ODD16 (int16)(FA_KR_ODD8, FA_KR_ODD8)
#endif
#endif
