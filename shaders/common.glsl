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
// a = q*(pi/2) + r with q = round(a * 2/pi) and |r| <= ~pi/4. pi/2 is split Cody-Waite
// style into PE_PIO2_A (8 significant bits) + PE_PIO2_B (7 bits) + PE_PIO2_C (f32), so
// q*A and q*B are exact for |q| < 2^16 (|a| < ~1e5) and a - q*A, (a - q*A) - q*B are exact
// too (Sterbenz); only q*C and the last subtraction round. The split's residual
// |pi/2 - (A+B+C)| ~ 5e-15 adds < 4e-10 at |q| = 2^16. Past that, q*A rounds by half an
// ulp of a, which is within the caller's f32 angle error anyway.
// `precise` keeps the compiler from fusing into fma with a different rounding or
// reassociating the reduction (that would cancel the split).
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

// sin(a) and cos(a) within a few f32 ulp (absolute ~1.5e-7) on any driver. NaN or
// infinite a gives NaN.
void pe_sincos(float a, out float s, out float c)
{
    float q = roundEven(a * PE_2_OVER_PI);
    precise float r = ((a - q * PE_PIO2_A) - q * PE_PIO2_B) - q * PE_PIO2_C;
    // Quadrant q mod 4, exact in float for any integral q (no int conversion overflow).
    int n = int(q - 4.0f * floor(q * 0.25f)) & 3;
    float sr = pe_sin_poly(r);
    float cr = pe_cos_poly(r);
    // sin(r + n*pi/2), cos(r + n*pi/2)
    float s0 = (n & 1) != 0 ? cr : sr;
    float c0 = (n & 1) != 0 ? sr : cr;
    s = (n & 2) != 0 ? -s0 : s0;
    c = ((n + 1) & 2) != 0 ? -c0 : c0;
}

// ---- f16 storage in 32-bit words ---------------------------------------------------------

// binary16 bits -> f32, exact (subnormals included), by integer code.
float pe_f16_to_f32(uint h)
{
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint m = h & 0x3ffu;
    if (e == 0u) // zero or subnormal: m * 2^-24, a normal f32
        return uintBitsToFloat(floatBitsToUint(float(m) * 5.9604644775390625e-8f) | sign);
    if (e == 31u) // inf / NaN
        return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// f32 -> binary16 bits, round to nearest even, overflow to inf, NaN kept quiet, by
// integer code (packHalf2x16's rounding mode is not specified and differs by driver).
uint pe_f32_to_f16(float f)
{
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    uint h;
    if (x >= 0x47800000u) {           // >= 65536, inf, NaN
        h = x > 0x7f800000u ? (0x7e00u | ((x >> 13) & 0x3ffu)) : 0x7c00u;
    } else if (x >= 0x38800000u) {    // normal f16 range (>= 2^-14)
        // rebias the exponent, add half an ulp minus one plus the lsb (ties to even)
        x += 0xc8000fffu + ((x >> 13) & 1u);
        h = x >> 13;                  // carries into inf at >= 65520
    } else {                          // f16 subnormal or zero
        uint e = x >> 23;             // f32 biased exponent, <= 112
        uint shift = 126u - e;        // value = m * 2^-24 >> shift
        if (shift > 24u) {
            h = 0u;
        } else {
            uint m = (x & 0x7fffffu) | 0x800000u;
            h = m >> shift;
            uint rem = m & ((1u << shift) - 1u);
            uint halfway = 1u << (shift - 1u);
            if (rem > halfway || (rem == halfway && (h & 1u) != 0u))
                h += 1u;
        }
    }
    return h | sign;
}

// Element `hi` (0 = low half) of a word holding two binary16 values.
float pe_load_f16(uint word, uint hi)
{
    return pe_f16_to_f32(hi != 0u ? word >> 16 : word & 0xffffu);
}

#endif
