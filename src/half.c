/* half.c - IEEE binary16 conversions, round to nearest even, exact for every input. */
#include "internal.h"

#include <math.h>
#include <string.h>

/* Round a finite or non-finite double to the nearest binary16 (ties to even). The value
 * is rounded once, directly from double, so f16 outputs of the reference backend carry a
 * single rounding. */
uint16_t pe_f16_from_double(double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0u;
    if (isnan(v))
        return (uint16_t)(sign | 0x7e00u);
    double a = fabs(v);
    if (isinf(a))
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 65520.0) /* rounds to infinity: 65504 + half an ulp (16) */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x1p-14) {
        /* subnormal: units of 2^-24; nearbyint rounds to even in the default mode */
        double q = nearbyint(a * 0x1p24);
        return (uint16_t)(sign | (uint16_t)q); /* q == 1024 becomes the smallest normal */
    }
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    /* a = (1.f) * 2^(e-1); 10 mantissa bits: scale so the integer part has 11 bits */
    double q = nearbyint(m * 2048.0); /* in [1024, 2048] */
    int exp16 = e - 1 + 15;
    if (q >= 2048.0) {
        q = 1024.0;
        exp16++;
    }
    if (exp16 >= 31)
        return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)(exp16 << 10) | ((uint16_t)q & 0x3ffu));
}

double pe_f16_to_double(uint16_t h)
{
    int sign = (h >> 15) & 1;
    int exp = (h >> 10) & 0x1f;
    int man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp((double)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp((double)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

uint16_t posenc_f32_to_f16(float value)
{
    return pe_f16_from_double((double)value); /* float -> double is exact */
}

float posenc_f16_to_f32(uint16_t bits)
{
    return (float)pe_f16_to_double(bits);
}
