// common.glsl - helpers shared by the posenc compute shaders.
//
// Nothing here needs an optional Vulkan feature: f16 tensors are stored in 32-bit words
// (element e is half (e & 1) of word e >> 1) and converted with integer code, and sin/cos
// use our own range reduction and polynomials instead of the driver's sin()/cos(), whose
// accuracy Vulkan only bounds (2^-11 absolute) inside [-pi, pi].

#ifndef PE_COMMON_GLSL
#define PE_COMMON_GLSL

// ---- angles, sin and cos ----------------------------------------------------------------
//
// The angle pos*w of the rotary and sinusoidal shaders, accurate without shaderFloat64 and
// without relying on a fused fma (SPIR-V leaves fusing to the driver; lavapipe does not
// fuse). The same operations in the same order as cl/common.cl's fma-free form (read the
// full comment there and docs/accuracy-angles.md), so OpenCL without PE_FMA and Vulkan give
// the same bits. In short: the host gives each frequency in quarter turns, v = w * 2/pi,
// as two f32 words hi = f32(v), lo = f32(v - hi); the angle in quarter turns is xh + e +
// p*lo with xh = f32(p*hi) and e its exact rounding error (Dekker's product with 12-bit
// halves cut by masking); the whole quarter turns q = roundEven(xh) come out exactly, and
// the rest (|f| <= 1/2, a second step near 2^24) turns into radians with a two-word pi/2;
// sin and cos of r (|r| <= pi/4 + 2^-20) are Cephes' sinf / cosf minimax polynomials in f32
// (not the driver's sin/cos, which Vulkan bounds only to 2^-11 inside [-pi, pi]). Within
// 1.6 * 2^-24 of an f64 evaluation up to |p w| = 1e6, 2.5 * 2^-24 up to 2^24; past that the
// values stay in [-1, 1]; an infinite or NaN angle gives NaN. `precise` (NoContraction)
// keeps compilers from fusing or reassociating anything, which would cancel the splits.
const float PE_2_OVER_PI = 0.636619747f;
const float PE_PIO2_HI = 1.57079637f;      // f32(pi/2)
const float PE_PIO2_LO = -4.37113883e-08f; // f32(pi/2 - PE_PIO2_HI)
// pi/2 in three words for pe_angle_sub (A and B with 12 significant bits: q*A, q*B exact
// for small integers q)
const float PE_PIO2_A = 1.5703125f;
const float PE_PIO2_B = 0.000483751297f;
const float PE_PIO2_C = 7.54979013e-08f;

// Minimax polynomials on [-pi/4, pi/4] (the Cephes sinf/cosf coefficients), ~1 ulp.
#define PE_SINCOS_POLY(T)                                                                  \
    T pe_sin_poly(T r)                                                                     \
    {                                                                                      \
        precise T z = r * r;                                                               \
        precise T p = (-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f;  \
        precise T v = p * z * r + r;                                                       \
        return v;                                                                          \
    }                                                                                      \
    T pe_cos_poly(T r)                                                                     \
    {                                                                                      \
        precise T z = r * r;                                                               \
        precise T p = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z            \
                       + 4.166664568298827e-2f) * z * z;                                   \
        precise T v = (p - 0.5f * z) + 1.0f;                                               \
        return v;                                                                          \
    }
PE_SINCOS_POLY(float)
PE_SINCOS_POLY(vec4)

// The reduced argument r (radians) of p*(hi + lo) quarter turns and its quadrant n (an
// integer-valued float, taken mod 4 by pe_sincos_red). T is float or vec4, U the matching
// unsigned type.
#define PE_ANGLE_REDUCE(T, U)                                                              \
    T pe_angle_reduce(T p, T hi, T lo, out T n)                                            \
    {                                                                                      \
        precise T xh = p * hi;                                                             \
        T pa = uintBitsToFloat(floatBitsToUint(p) & U(0xfffff000u));                       \
        precise T pb = p - pa;                                                             \
        T ha = uintBitsToFloat(floatBitsToUint(hi) & U(0xfffff000u));                      \
        precise T hb = hi - ha;                                                            \
        precise T e = (((pa * ha - xh) + pa * hb) + pb * ha) + pb * hb;                    \
        precise T fl = e + p * lo;                                                         \
        T q = roundEven(xh);                                                               \
        precise T fh = xh - q;                                                             \
        precise T s = fh + fl;                                                             \
        T q1 = roundEven(s);                                                               \
        fh = fh - q1;                                                                      \
        q = q + q1;                                                                        \
        n = q - 4.0f * floor(q * 0.25f);                                                   \
        precise T r = fh * PE_PIO2_HI + (fh * PE_PIO2_LO + fl * PE_PIO2_HI);               \
        return r;                                                                          \
    }
PE_ANGLE_REDUCE(float, uint)
PE_ANGLE_REDUCE(vec4, uvec4)

// r - rf with quadrants n - nf (re-rotation: the difference of two reduced angles), brought
// back to |r| <= pi/4 (q is -1, 0 or 1: every product is exact).
float pe_angle_sub(float r, float rf, inout float n, float nf)
{
    precise float d = r - rf;
    float q = roundEven(d * PE_2_OVER_PI);
    n = n - nf + q;
    precise float v = ((d - q * PE_PIO2_A) - q * PE_PIO2_B) - q * PE_PIO2_C;
    return v;
}

// sin and cos of r + n*pi/2 (|r| <= pi/4 + small).
void pe_sincos_red(float r, float n, out float s, out float c)
{
    int k = int(n) & 3;
    float sr = pe_sin_poly(r);
    float cr = pe_cos_poly(r);
    float s0 = (k & 1) != 0 ? cr : sr;
    float c0 = (k & 1) != 0 ? sr : cr;
    s = (k & 2) != 0 ? -s0 : s0;
    c = ((k + 1) & 2) != 0 ? -c0 : c0;
}
void pe_sincos_red(vec4 r, vec4 n, out vec4 s, out vec4 c)
{
    ivec4 k = ivec4(n) & 3;
    vec4 sr = pe_sin_poly(r);
    vec4 cr = pe_cos_poly(r);
    bvec4 odd = notEqual(k & 1, ivec4(0));
    vec4 s0 = mix(sr, cr, odd);
    vec4 c0 = mix(cr, sr, odd);
    s = mix(s0, -s0, notEqual(k & 2, ivec4(0)));
    c = mix(c0, -c0, notEqual((k + 1) & 2, ivec4(0)));
}

// sin and cos of p*(hi + lo).
void pe_angle_sincos(float p, float hi, float lo, out float s, out float c)
{
    float n;
    float r = pe_angle_reduce(p, hi, lo, n);
    pe_sincos_red(r, n, s, c);
}
void pe_angle_sincos(vec4 p, vec4 hi, vec4 lo, out vec4 s, out vec4 c)
{
    vec4 n;
    vec4 r = pe_angle_reduce(p, hi, lo, n);
    pe_sincos_red(r, n, s, c);
}

// ---- integer division by a run-time constant ---------------------------------------------

// n / d for any uint n, from magic = floor(2^32 * (2^l - d) / d) + 1 and l = ceil(log2 d)
// computed on the host (pe_vk_magic in src/vulkan/ops_vulkan.c). d = 1 has magic 1, l 0.
// A multiply-high and a few adds instead of a division (slow on GPUs, scalarized on
// CPU implementations).
uint pe_udiv(uint n, uint magic, uint l)
{
    uint hi, lo;
    umulExtended(n, magic, hi, lo);
    uint s1 = min(l, 1u);
    return (hi + ((n - hi) >> s1)) >> (l - s1);
}

// ---- f16 storage in 32-bit words ---------------------------------------------------------

// binary16 bits -> f32, exact (subnormals included), by integer code. No branches: CPU
// implementations (lavapipe) run both sides of a branch, so selects are cheaper there.
float pe_f16_to_f32(uint h)
{
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint m = h & 0x3ffu;
    uint normal = ((e + 112u) << 23) | (m << 13);
    uint special = 0x7f800000u | (m << 13);                      // inf / NaN
    uint sub = floatBitsToUint(float(m) * 5.9604644775390625e-8f); // zero or m * 2^-24
    uint r = e == 0u ? sub : (e == 31u ? special : normal);
    return uintBitsToFloat(r | sign);
}

// f32 -> binary16 bits, round to nearest even, overflow to inf, NaN kept quiet, by
// integer code (packHalf2x16's rounding mode is not specified and differs by driver).
// No branches (see above): all three cases are computed and one is selected.
uint pe_f32_to_f16(float f)
{
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    // >= 65536, inf, NaN
    uint big = x > 0x7f800000u ? (0x7e00u | ((x >> 13) & 0x3ffu)) : 0x7c00u;
    // normal f16 range (>= 2^-14): rebias the exponent, add half an ulp minus one plus
    // the lsb (ties to even); carries into inf at >= 65520
    uint normal = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;
    // f16 subnormal or zero: in 0.5 + |f| the f32 addition itself rounds |f| to a
    // multiple of 2^-24 (nearest even); the sum is never an f32 subnormal
    precise float sf = uintBitsToFloat(x) + 0.5f;
    uint sub = floatBitsToUint(sf) - 0x3f000000u;
    uint h = x >= 0x47800000u ? big : (x >= 0x38800000u ? normal : sub);
    return h | sign;
}

// Element `hi` (0 = low half) of a word holding two binary16 values.
float pe_load_f16(uint word, uint hi)
{
    return pe_f16_to_f32(hi != 0u ? word >> 16 : word & 0xffffu);
}

#endif
