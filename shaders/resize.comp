#version 450
// resize.comp - resize a learned position grid, posenc_resize_2d (as cl/resize.cl): the
// host computed every tap's index and weight; this only gathers and sums.
//
// Flat grid-stride loop over units idx = u + n_units*j, j a dst row: a unit is channel
// i0 = u, or channels 2u, 2u+1 with PE_ENC_FLAG_PAIRS (f16 dst, one word store). With
// cls, row j = 0 is copied from src row 0. Every other row is grid cell (r, c),
// j = cls + r*dst_w + c:
//   acc = 0; for a < 4 (outer), b < 4 (inner):
//       acc += (wy[4r+a] * wx[4c+b]) * src[i0, cls + iy[4r+a]*src_w + ix[4c+b]]
// in f32, in that fixed order (unused taps have weight 0 and a valid index).
// Variants DST_F16, X_F16 (src). Taps: bindings 2-5, uploaded per call.
#extension GL_GOOGLE_include_directive : require
#define PE_PUSH_RESIZE
#include "common.glsl"
#include "encodings_params.glsl"
#include "encodings_io.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ENC_WG

layout(std430, set = 0, binding = 2) readonly buffer Wx { float wx[]; };
layout(std430, set = 0, binding = 3) readonly buffer Wy { float wy[]; };
layout(std430, set = 0, binding = 4) readonly buffer Ix { int ix[]; };
layout(std430, set = 0, binding = 5) readonly buffer Iy { int iy[]; };

float value(uint i0, uint j)
{
    uint sr = pc.src_off + i0 * pc.src_st0;
    if (j < pc.cls)
        return load_x(sr);
    uint g = j - pc.cls;
    uint r = pe_udiv(g, pc.dst_w_magic, (pc.shifts >> 8) & 0xffu);
    uint c = g - r * pc.dst_w;
    precise float acc = 0.0f;
    for (uint a = 0u; a < 4u; a++) {
        precise float w_a = wy[4u * r + a];
        uint src_row = pc.cls + uint(iy[4u * r + a]) * pc.src_w;
        for (uint b = 0u; b < 4u; b++) {
            precise float w = w_a * wx[4u * c + b];
            acc += w * load_x(sr + (src_row + uint(ix[4u * c + b])) * pc.src_st1);
        }
    }
    return acc;
}

void main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint np = (pc.flags & PE_ENC_FLAG_PAIRS) != 0u ? 2u : 1u;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint j = pe_udiv(idx, pc.units_magic, pc.shifts & 0xffu);
        uint i0 = (idx - j * pc.n_units) * np;
        uint e = pc.dst_off + i0 * pc.dst_st0 + j * pc.dst_st1;
        float v = value(i0, j);
#if DST_F16
        if (np == 2u) {
            store_dst_pair(e, v, value(i0 + 1u, j));
            continue;
        }
#endif
        store_dst(e, v);
    }
}
