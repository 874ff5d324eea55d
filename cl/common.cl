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
 * sin and cos of 8 f32 angles for the vector kernels. With PE_FP64 (-D, 1 when the device
 * has cl_khr_fp64) the angle is widened exactly to double, reduced by pi/2 in three parts
 * (fdlibm's pio2_1..3: exact products for |k| < 2^20) and evaluated with Taylor polynomials
 * to r^11 / r^12 (truncation below 1e-11 for |r| <= pi/4), all branch-free, so that CPU
 * implementations vectorise it; the results are the f32 roundings of values within ~1e-11
 * of the exact sin/cos of the f32 angle (better than the 4 ulp the bounds allow). Angles
 * beyond 4e5 (and inf / NaN) use the built-in sincos, as does every device without fp64.
 */
#ifdef PE_FP64 /* defined (0 or 1) for the programs that use it: rope.cl, sinusoidal.cl */
#if PE_FP64 && defined(PE_CPU_ORDER) && PE_CPU_ORDER
/*
 * CPU devices (PoCL): the CPU backend's pe_sincos_block (src/cpu/cpu_fast.c). The angle is
 * reduced by pi/2 in double (pio2_1 + pio2_2: below 1e-15 for |x| <= 4e5), the reduced
 * r (|r| <= pi/4) is rounded to f32, and Cephes' sinf / cosf minimax polynomials run in
 * f32, 8 lanes per AVX2 instruction where the double Taylor polynomials below run 4: within
 * 1.6 * 2^-24 of the exact sin/cos of the f32 angle (measured on the CPU backend against
 * libm over 16 M angles; the bounds of src/check/check.c allow 4 ulp). The sin/cos were
 * 40% of PoCL's f16 sinusoidal kernel time with the double polynomials.
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
static inline float8 pe_sincos8(const float8 xf, float8 *cos_out)
{
    if (any(!(fabs(xf) <= 4.0e5f)))
        return sincos(xf, cos_out);
    const double8 x = convert_double8(xf);
    const double8 k = rint(x * 6.36619772367581382433e-01);
    const float8 r =
        convert_float8((x - k * 1.57079632673412561417e+00) - k * 6.07710050630396597660e-11);
    const float8 z = r * r;
    const float8 sp =
        r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f));
    const float8 cp =
        (1.0f - 0.5f * z) +
        z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f));
    /* quadrant k mod 4: odd swaps sin and cos; sin < 0 in 2, 3; cos < 0 in 1, 2 */
    const int8 q = convert_int8(k);
    const int8 odd = (q & 1) != 0;
    float8 s = select(sp, cp, odd), c = select(cp, sp, odd);
    s = select(s, -s, (q & 2) != 0);
    c = select(c, -c, ((q + 1) & 2) != 0);
    *cos_out = c;
    return s;
}
#elif PE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
static inline float8 pe_sincos8(const float8 xf, float8 *cos_out)
{
    if (any(!(fabs(xf) <= 4.0e5f)))
        return sincos(xf, cos_out);
    const double8 x = convert_double8(xf);
    const double8 k = rint(x * 6.36619772367581382433e-01);
    double8 r = x - k * 1.57079632673412561417e+00;
    r = r - k * 6.07710050630396597660e-11;
    r = r - k * 2.02226624871116645580e-21;
    const double8 r2 = r * r;
    const double8 sp =
        r + r * r2 *
                (-1.0 / 6.0 +
                 r2 * (1.0 / 120.0 +
                       r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0 + r2 * (-1.0 / 39916800.0)))));
    const double8 cp =
        1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 +
                                 r2 * (-1.0 / 720.0 +
                                       r2 * (1.0 / 40320.0 +
                                             r2 * (-1.0 / 3628800.0 + r2 * (1.0 / 479001600.0))))));
    /* quadrant k mod 4: odd swaps sin and cos; sin < 0 in 2, 3; cos < 0 in 1, 2 */
    const long8 q = convert_long8(k);
    const long8 odd = (q & 1) != 0;
    double8 s = select(sp, cp, odd), c = select(cp, sp, odd);
    s = select(s, -s, (q & 2) != 0);
    c = select(c, -c, ((q + 1) & 2) != 0);
    *cos_out = convert_float8(c);
    return convert_float8(s);
}
#else
static inline float8 pe_sincos8(const float8 x, float8 *cos_out)
{
    return sincos(x, cos_out);
}
#endif
#endif

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
