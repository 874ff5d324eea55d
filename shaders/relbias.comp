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
#extension GL_GOOGLE_include_directive : require
#define PE_PUSH_BIAS
#define PE_TAB_BINDING
#include "common.glsl"
#include "encodings_params.glsl"
#include "encodings_io.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ENC_WG

layout(std430, set = 0, binding = 3) readonly buffer Bucket { int bucket[]; };

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
