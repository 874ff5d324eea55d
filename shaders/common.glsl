// common.glsl - helpers shared by the posenc compute shaders.
//
// Nothing here needs an optional Vulkan feature: f16 tensors are stored in 32-bit words
// (element e is half (e & 1) of word e >> 1) and converted with integer code, and sin/cos
// use our own range reduction and polynomials instead of the driver's sin()/cos(), whose
// accuracy Vulkan only bounds (2^-11 absolute) inside [-pi, pi].

#ifndef PE_COMMON_GLSL
#define PE_COMMON_GLSL

// ---- sin and cos -------------------------------------------------------------------------
//
// a = q*(pi/2) + r with |r| <= ~pi/4, in two steps. Step 1: q0 = round(a * 2/pi) (off by
// up to ~30 for |a| ~ 4e8, as a * 2/pi rounds), r = a - q0*pi/2 with pi/2 split Cody-Waite
// style into PE_PIO2_A (8 significant bits) + PE_PIO2_B (7 bits) + PE_PIO2_C (f32) and
// q0 into qh (a multiple of 2^12, same sign) + ql (|ql| < 2^12): every product with A
// and B is exact for |q0| < 2^28 (|a| < ~4e8) and so is every subtraction (the exact
// partial results fit in 24 bits); only q0*C and the last subtraction round. Step 2
// takes out the few quarter turns step 1 missed: q1 = round(r * 2/pi), r -= q1*pi/2.
// |r| ends within ~1 f32 ulp of a - (q0+q1)*pi/2 plus 0.5 ulp of q0*C (3e-7 at
// |a| = 1.6e7, 1e-5 at 4e8, both far below ulp(a)). Past ~4e8 (ulp(a) >= 32 > 2*pi, no
// phase left in a) r may come out wrong: it is then replaced by 0 so that the results
// stay in [-1, 1]. `precise` (NoContraction) keeps compilers from fusing into fma with a
// different rounding or reassociating, which would cancel the split.
const float PE_2_OVER_PI = 0.636619772367581343f;
const float PE_PIO2_A = 1.5703125f;
const float PE_PIO2_B = 4.84466552734375e-4f;
const float PE_PIO2_C = -6.397578431460715e-07f;

// Minimax polynomials on [-pi/4, pi/4] (the Cephes sinf/cosf coefficients), ~1 ulp.
float pe_sin_poly(float r)
{
    float z = r * r;
    float p = (-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f;
    return p * z * r + r;
}

float pe_cos_poly(float r)
{
    float z = r * r;
    float p = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z
               + 4.166664568298827e-2f) * z * z;
    return (p - 0.5f * z) + 1.0f;
}

// sin(a) and cos(a) of the f32 value a, within ~1e-7 absolute for |a| < ~1e7 on any
// driver (no use of the driver's sin/cos), in [-1, 1] for any finite a. NaN or infinite
// a gives NaN.
void pe_sincos(float a, out float s, out float c)
{
    float q0 = roundEven(a * PE_2_OVER_PI);
    float qh = trunc(q0 * (1.0f / 4096.0f)) * 4096.0f; // exact
    float ql = q0 - qh;                                  // exact
    precise float r = ((((a - qh * PE_PIO2_A) - ql * PE_PIO2_A) - qh * PE_PIO2_B)
                       - ql * PE_PIO2_B) - q0 * PE_PIO2_C;
    float q1 = roundEven(r * PE_2_OVER_PI);              // usually 0
    precise float r1 = ((r - q1 * PE_PIO2_A) - q1 * PE_PIO2_B) - q1 * PE_PIO2_C;
    if (abs(r1) > 0.8f) // only past |a| ~ 4e8; false for NaN, which propagates
        r1 = 0.0f;
    // Quadrant (q0 + q1) mod 4; q0 mod 4 is exact in float for any integral q0.
    int n = (int(q0 - 4.0f * floor(q0 * 0.25f)) + int(q1)) & 3;
    float sr = pe_sin_poly(r1);
    float cr = pe_cos_poly(r1);
    // sin(r + n*pi/2), cos(r + n*pi/2)
    float s0 = (n & 1) != 0 ? cr : sr;
    float c0 = (n & 1) != 0 ? sr : cr;
    s = (n & 2) != 0 ? -s0 : s0;
    c = ((n + 1) & 2) != 0 ? -c0 : c0;
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
