#version 450
// relbias.comp - relative-position bias, posenc_relbias (as cl/bias.cl pe_relbias):
//   rel = (k + k_offset) - (q + q_offset)
//   dst[k, q, h, b] = logits[k, q, h, b] + table[bucket[rel - rel_min], h]  (no logits:
//   the table value)
// with rel - rel_min = k - q + base (base = k_offset - q_offset - rel_min from the host;
// uint arithmetic wraps to the exact index). Flat grid-stride loop over units
// idx = u + n_units*(q + Q*(h + H*b)); a unit is key k = u, or keys 2u, 2u+1 with
// PE_ENC_FLAG_PAIRS (f16 dst, one word store). Logits are read before dst is written (in
// place allowed). Variants DST_F16, X_F16 (logits), TAB_F16. bucket: binding 3, per call.
// Every variant also has a vector path (specialization constant 0, pe_vec_main).
#extension GL_GOOGLE_include_directive : require
#define PE_PUSH_BIAS
#define PE_TAB_BINDING
#include "common.glsl"
#include "encodings_params.glsl"
#include "encodings_io.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ENC_WG

layout(std430, set = 0, binding = 3) readonly buffer Bucket { int bucket[]; };

// PE_RELBIAS_SPEC_* (src/kernel_abi.h): 0 = the general path; else the vector path (4 keys
// a row in the f32 variants, 8 in those with an f16 dst or logits), the logits' presence
// a constant (a pipeline holds only the path it runs).
layout(constant_id = 0) const uint SPEC = 0u;
const bool VEC = (SPEC & PE_RELBIAS_SPEC_VEC) != 0u;
const bool VEC_HAS_X = (SPEC & PE_RELBIAS_SPEC_HAS_X) != 0u;

#if !DST_F16 && !X_F16
// The same bindings as vec4 arrays (the vector path: rows aligned to 4 elements).
layout(std430, set = 0, binding = 0) writeonly buffer DstBuf4 { vec4 dst_v[]; };
layout(std430, set = 0, binding = 1) readonly buffer XBuf4 { vec4 x_v[]; };

// The vector path: a unit is keys 4u .. 4u+3 of PE_RELBIAS_VEC_Q consecutive queries of
// one (head, batch): idx = u + n_units*(qb + ne1*(h + ne2*b)), n_units = K/4, ne1 =
// Q/PE_RELBIAS_VEC_Q. Three divisions per 16 elements and whole vec4 logits and dst
// accesses (as alibi.comp's: CPU implementations such as lavapipe scalarize every buffer
// access per invocation and component); the four bucket indices of a row are consecutive
// (rel - rel_min = k - q + base), one lower for each next query, so the unit's rows need
// 7 table values, not 16, each looked up once. The same values and sum as value() below.
void pe_vec_main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint k = (idx - row * pc.n_units) * 4u;
        uint hb = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint q = (row - hb * pc.ne1) * PE_RELBIAS_VEC_Q;
        uint b = pe_udiv(hb, pc.ne2_magic, (pc.shifts >> 16) & 0xffu);
        uint h = hb - b * pc.ne2;
        uint e = pc.dst_off + k + q * pc.dst_st1 + h * pc.dst_st2 + b * pc.dst_st3;
        uint l = pc.lg_off + k + q * pc.lg_st1 + h * pc.lg_st2 + b * pc.lg_st3;
        // the unit's rows share their bucket indices but one: row r starts at j0 + Q-1-r
        uint j0 = k + uint(pc.base) - q - (PE_RELBIAS_VEC_Q - 1u);
        uint t = pc.tab_off + h * pc.tab_st1;
        float tv[PE_RELBIAS_VEC_Q + 3u];
        for (uint i = 0u; i < PE_RELBIAS_VEC_Q + 3u; i++)
            tv[i] = load_tab(t + uint(bucket[j0 + i]) * pc.tab_st0);
        for (uint r = 0u; r < PE_RELBIAS_VEC_Q; r++, e += pc.dst_st1, l += pc.lg_st1) {
            uint s = PE_RELBIAS_VEC_Q - 1u - r;
            vec4 v = vec4(tv[s], tv[s + 1u], tv[s + 2u], tv[s + 3u]);
            if (VEC_HAS_X)
                v = x_v[l >> 2] + v;
            dst_v[e >> 2] = v;
        }
    }
}
#else
// The vector path of the variants with an f16 dst or logits: keys 8u .. 8u+7 of
// PE_RELBIAS_VEC_Q queries (n_units = K/8), each row's 8 keys one uvec4 of halves (f16
// views, rows on multiples of 8 elements) or two vec4 (f32); the eight bucket indices of
// a row consecutive, as above. The same values and sum as value(), one rounding to f16.
#include "bias_vec8.glsl"

void pe_vec_main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint row = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint k = (idx - row * pc.n_units) * 8u;
        uint hb = pe_udiv(row, pc.ne1_magic, (pc.shifts >> 8) & 0xffu);
        uint q = (row - hb * pc.ne1) * PE_RELBIAS_VEC_Q;
        uint b = pe_udiv(hb, pc.ne2_magic, (pc.shifts >> 16) & 0xffu);
        uint h = hb - b * pc.ne2;
        uint e = pc.dst_off + k + q * pc.dst_st1 + h * pc.dst_st2 + b * pc.dst_st3;
        uint l = pc.lg_off + k + q * pc.lg_st1 + h * pc.lg_st2 + b * pc.lg_st3;
        // as the f32 path: row r's 8 values from j0 + Q-1-r of the unit's Q + 7
        uint j0 = k + uint(pc.base) - q - (PE_RELBIAS_VEC_Q - 1u);
        uint t = pc.tab_off + h * pc.tab_st1;
        float tv[PE_RELBIAS_VEC_Q + 7u];
        for (uint i = 0u; i < PE_RELBIAS_VEC_Q + 7u; i++)
            tv[i] = load_tab(t + uint(bucket[j0 + i]) * pc.tab_st0);
        for (uint r = 0u; r < PE_RELBIAS_VEC_Q; r++, e += pc.dst_st1, l += pc.lg_st1) {
            uint s = PE_RELBIAS_VEC_Q - 1u - r;
            vec4 v0 = vec4(tv[s], tv[s + 1u], tv[s + 2u], tv[s + 3u]);
            vec4 v1 = vec4(tv[s + 4u], tv[s + 5u], tv[s + 6u], tv[s + 7u]);
            if (VEC_HAS_X) {
                vec4 x0, x1;
                pe_ld8_x(l, x0, x1);
                v0 = x0 + v0;
                v1 = x1 + v1;
            }
            pe_st8_dst(e, v0, v1);
        }
    }
}
#endif

float value(uint k, uint q, uint h, uint b)
{
    uint u = uint(bucket[k + uint(pc.base) - q]);
    float v = load_tab(pc.tab_off + u * pc.tab_st0 + h * pc.tab_st1);
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
