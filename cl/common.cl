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

/* Layouts of the sinusoidal op; the same values as posenc_sin_layout. */
#define PE_SIN_INTERLEAVED 0
#define PE_SIN_HALF_SPLIT 1
#define PE_SIN_HALF_SPLIT_COS_FIRST 2
