#version 450
// alibi.comp - ALiBi, posenc_alibi (as cl/bias.cl pe_alibi). With qp = q + q_offset and
// kp = k + k_offset the distance is formed in integers (dist = q - k + base, base =
// q_offset - k_offset; positions <= 2^24, checked by the front end) and converted once:
//   causal and kp > qp:  dst = -inf
//   else                  dst = logits - slope[h] * float(dist)   (symmetric: |dist|;
//                         no logits: -(slope[h] * dist), so -0 at distance 0)
// Grid as relbias.comp (units of one key, or two with PE_ENC_FLAG_PAIRS). Logits are read
// before dst is written (in place allowed). Variants DST_F16, X_F16 (logits).
// slopes: f32 [H], binding 2, per call.
#extension GL_GOOGLE_include_directive : require
#define PE_PUSH_BIAS
#include "common.glsl"
#include "encodings_params.glsl"
#include "encodings_io.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ENC_WG

layout(std430, set = 0, binding = 2) readonly buffer Slopes { float slopes[]; };

// PE_ALIBI_SPEC_* (src/kernel_abi.h): 0 = the general path; else the vector path with the
// op's flags as constants (a pipeline holds only the path it runs): 4 keys per row as a
// vec4 in the f32 variant, 8 keys per row as a uvec4 of halves (or two vec4) in the
// variants with an f16 tensor.
layout(constant_id = 0) const uint SPEC = 0u;
const bool VEC = (SPEC & PE_ALIBI_SPEC_VEC) != 0u;
const bool VEC_HAS_X = (SPEC & PE_ALIBI_SPEC_HAS_X) != 0u;
const bool VEC_CAUSAL = (SPEC & PE_ALIBI_SPEC_CAUSAL) != 0u;
const bool VEC_SYMMETRIC = (SPEC & PE_ALIBI_SPEC_SYMMETRIC) != 0u;

#if !DST_F16 && !X_F16
// The same bindings as vec4 arrays (the vector path: f32, rows aligned to 4 elements).
layout(std430, set = 0, binding = 0) writeonly buffer DstBuf4 { vec4 dst_v[]; };
layout(std430, set = 0, binding = 1) readonly buffer XBuf4 { vec4 x_v[]; };

// The vector path: a unit is keys 4u .. 4u+3 of PE_ALIBI_VEC_Q consecutive queries of one
// (head, batch): idx = u + n_units*(qb + ne1*(h + ne2*b)), n_units = K/4, ne1 = Q/4. One
// slope load per unit and whole vec4 loads and stores: CPU implementations such as
// lavapipe scalarize every buffer access per invocation and component, so the general
// path's three scalar accesses per element (slope, logit, dst) cost 2.5x a copy there.
void pe_vec_main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint k = (idx - row * pc.n_units) * 4u;
        uint hb = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint q = (row - hb * pc.ne1) * PE_ALIBI_VEC_Q;
        uint b = pe_udiv(hb, pc.ne2_magic, (pc.shifts >> 16) & 0xffu);
        uint h = hb - b * pc.ne2;
        float slope = slopes[h];
        uint e = pc.dst_off + k + q * pc.dst_st1 + h * pc.dst_st2 + b * pc.dst_st3;
        uint l = pc.lg_off + k + q * pc.lg_st1 + h * pc.lg_st2 + b * pc.lg_st3;
        ivec4 dist = ivec4(int(q) - int(k) + pc.base) - ivec4(0, 1, 2, 3);
        for (uint r = 0u; r < PE_ALIBI_VEC_Q; r++, e += pc.dst_st1, l += pc.lg_st1, dist += 1) {
            ivec4 dd = VEC_SYMMETRIC ? abs(dist) : dist;
            precise vec4 v = -(slope * vec4(dd));
            if (VEC_HAS_X)
                v = x_v[l >> 2] + v;
            if (VEC_CAUSAL)
                v = mix(v, vec4(uintBitsToFloat(0xff800000u)), lessThan(dist, ivec4(0)));
            dst_v[e >> 2] = v;
        }
    }
}
#else
// The vector path of the variants with an f16 dst or logits: keys 8u .. 8u+7 of
// PE_ALIBI_VEC_Q queries (n_units = K/8), each row's 8 keys one uvec4 of halves (f16,
// rows aligned to 8 elements) or two vec4 (f32); f32 math as above, one rounding to f16.
#include "bias_vec8.glsl"

void pe_vec_main()
{
    const float ninf = uintBitsToFloat(0xff800000u);
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint k = (idx - row * pc.n_units) * 8u;
        uint hb = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint q = (row - hb * pc.ne1) * PE_ALIBI_VEC_Q;
        uint b = pe_udiv(hb, pc.ne2_magic, (pc.shifts >> 16) & 0xffu);
        uint h = hb - b * pc.ne2;
        float slope = slopes[h];
        uint e = pc.dst_off + k + q * pc.dst_st1 + h * pc.dst_st2 + b * pc.dst_st3;
        uint l = pc.lg_off + k + q * pc.lg_st1 + h * pc.lg_st2 + b * pc.lg_st3;
        ivec4 d0 = ivec4(int(q) - int(k) + pc.base) - ivec4(0, 1, 2, 3);
        ivec4 d1 = d0 - 4;
        for (uint r = 0u; r < PE_ALIBI_VEC_Q; r++, e += pc.dst_st1, l += pc.lg_st1, d0 += 1,
                  d1 += 1) {
            ivec4 dd0 = VEC_SYMMETRIC ? abs(d0) : d0;
            ivec4 dd1 = VEC_SYMMETRIC ? abs(d1) : d1;
            precise vec4 v0 = -(slope * vec4(dd0));
            precise vec4 v1 = -(slope * vec4(dd1));
            if (VEC_HAS_X) {
                vec4 x0, x1;
                pe_ld8_x(l, x0, x1);
                v0 = x0 + v0;
                v1 = x1 + v1;
            }
            if (VEC_CAUSAL) {
                v0 = mix(v0, vec4(ninf), lessThan(d0, ivec4(0)));
                v1 = mix(v1, vec4(ninf), lessThan(d1, ivec4(0)));
            }
            pe_st8_dst(e, v0, v1);
        }
    }
}
#endif

float value(uint k, uint q, uint h, uint b)
{
    int dist = int(q) - int(k) + pc.base;
    if ((pc.flags & PE_ENC_FLAG_CAUSAL) != 0u && dist < 0)
        return uintBitsToFloat(0xff800000u); // -inf
    if ((pc.flags & PE_ENC_FLAG_SYMMETRIC) != 0u)
        dist = abs(dist);
    precise float v = -(slopes[h] * float(dist));
    if ((pc.flags & PE_ENC_FLAG_HAS_X) != 0u)
        v = load_x(pc.lg_off + k * pc.lg_st0 + q * pc.lg_st1 + h * pc.lg_st2 + b * pc.lg_st3) + v;
    return v;
}

void main()
{
    if (VEC) {
        pe_vec_main();
        return;
    }
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint np = (pc.flags & PE_ENC_FLAG_PAIRS) != 0u ? 2u : 1u;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint k = (idx - row * pc.n_units) * np;
        uint hb = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint q = row - hb * pc.ne1;
        uint b = pe_udiv(hb, pc.ne2_magic, (pc.shifts >> 16) & 0xffu);
        uint h = hb - b * pc.ne2;
        uint e = pc.dst_off + k * pc.dst_st0 + q * pc.dst_st1 + h * pc.dst_st2 + b * pc.dst_st3;
        float v = value(k, q, h, b);
#if DST_F16
        if (np == 2u) {
            store_dst_pair(e, v, value(k + 1u, q, h, b));
            continue;
        }
#endif
        store_dst(e, v);
    }
}
