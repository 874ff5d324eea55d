#version 450
// relbias_bwd.comp - posenc_relbias_backward (as cl/bias.cl pe_relbias_bwd): one unit per
// (bucket u, head h), idx = u + n_buckets*h, grid-stride, in a fixed order (deterministic,
// no float atomics):
//   acc = 0 (f32)
//   for i in [seg_start[u], seg_start[u+1])        k = q + delta, delta = rels[i] + rel_delta
//     for b in [0, B)                              (rel_delta = rel_min + q_offset - k_offset)
//       for q ascending with k in [0, K)
//         acc += dlogits[k, q, h, b]
//   dtable[u, h] += acc
// Variants DST_F16 (dtable), X_F16 (dlogits). seg_start, rels: bindings 2, 3, per call.
#extension GL_GOOGLE_include_directive : require
#define PE_PUSH_RELBIAS_BWD
#include "common.glsl"
#include "encodings_params.glsl"
#include "encodings_io.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ENC_WG

layout(std430, set = 0, binding = 2) readonly buffer SegStart { int seg_start[]; };
layout(std430, set = 0, binding = 3) readonly buffer Rels { int rels[]; };

void main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    int K = int(pc.ne0), Q = int(pc.ne1);
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint h = pe_udiv(idx, pc.nb_magic, pc.shifts & 0xffu);
        uint u = idx - h * pc.n_buckets;
        uint hr = pc.dl_off + h * pc.dl_st2;
        uint i_end = uint(seg_start[u + 1u]);
        precise float acc = 0.0f;
        for (uint i = uint(seg_start[u]); i < i_end; i++) {
            int delta = rels[i] + pc.rel_delta;
            int q_lo = max(0, -delta);
            int q_hi = min(Q, K - delta);
            for (uint b = 0u; b < pc.ne3; b++) {
                uint br = hr + b * pc.dl_st3;
                for (int q = q_lo; q < q_hi; q++)
                    acc += load_x(br + uint(q + delta) * pc.dl_st0 + uint(q) * pc.dl_st1);
            }
        }
        uint di = pc.dtab_off + u * pc.dtab_st0 + h * pc.dtab_st1;
        store_dst(di, load_dst(di) + acc);
    }
}
