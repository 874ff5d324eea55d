#version 450
// fill.comp - posenc_fill: every element of a strided view gets the same bits (converted
// on the host), plus step * i0 for the library's own ramps (4-byte elements only). Variant (glslc -D): FILL_F16 = 1 for f16 (elements in 32-bit words, each
// written by a compare-and-swap loop on its word, since the other half may be another
// element or outside the view), 0 for f32 / i32. Flat grid-stride loop (src/kernel_abi.h).
#extension GL_GOOGLE_include_directive : require

#ifndef FILL_F16
#define FILL_F16 0
#endif

#define PE_FILL_PUSH
#include "rows_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ROWS_WG

layout(std430, set = 0, binding = 0) buffer Dst { uint dst_w[]; };

void main()
{
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.n_total; idx += stride) {
        uint i0 = idx % pc.ne0;
        uint r = idx / pc.ne0;
        uint i1 = r % pc.ne1;
        r /= pc.ne1;
        uint i2 = r % pc.ne2;
        uint i3 = r / pc.ne2;
        uint e = pc.off + i0 * pc.st0 + i1 * pc.st1 + i2 * pc.st2 + i3 * pc.st3;
#if FILL_F16
        // the half by one compare-and-swap of its word (as set_rows.comp: an atomicAnd +
        // atomicOr pair lost updates on lavapipe with windowed bindings there)
        uint sh = (e & 1u) * 16u;
        uint mask = 0xffffu << sh;
        uint h = (pc.bits & 0xffffu) << sh;
        uint old = dst_w[e >> 1];
        for (;;) {
            uint prev = atomicCompSwap(dst_w[e >> 1], old, (old & ~mask) | h);
            if (prev == old)
                break;
            old = prev;
        }
#else
        dst_w[e] = pc.bits + pc.step * i0; // step: 0, or a ramp's (pe_fill_op)
#endif
    }
}
