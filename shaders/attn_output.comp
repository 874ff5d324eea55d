#version 450
// attn_output.comp - posenc_attention's output (internal.h, struct pe_attn_output_op):
//   dst[i, h, q, b] = sum_{k < Tk} p[k, q, h, b] * v[i, h / group, k, b]
// as a tiled GEMM per (h, b), the scheme of attn_scores.comp: a workgroup of 64
// invocations computes 64 dims i (x, one per invocation) by 16 queries (y, 16 accumulators
// per invocation), walking the keys in chunks of 16 staged in shared memory (P: 16
// queries x 16 keys, read by all invocations alike; V: 16 keys x 64 dims, each invocation
// copying its own dim to registers). f32 accumulation in order of k (padding adds exact
// zeros).
// An f16 dst whose rows are contiguous, even in length and start on even elements
// (PE_ATTN_FLAG_PAIRS) is written as whole words: the tile goes through shared memory and
// the invocation of each even i stores elements i and i + 1. Otherwise f16 elements are
// written with atomicAnd / atomicOr on their word (the other half may belong to another
// invocation or to data outside dst).
//
// Push (attention_params.glsl, PE_PUSH_ATTN_GEMM): A = p [Tk, Tq, Hq, B] f32 (a_st0..3 for
// k, q, h, b), B = v [Dv, Hk, Tk, B] (i, hk, k, b), C = dst [Dv, Hq, Tq, B] (i, h, q, b);
// n_red = Tk, n_x = Dv, n_y = Tq, n_h = Hq.
// Variants (glslc -D): V_F16, DST_F16. Bindings: 0 p, 1 v, 2 dst.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#ifndef V_F16
#define V_F16 0
#endif
#ifndef DST_F16
#define DST_F16 0
#endif

#define PE_PUSH_ATTN_GEMM
#include "common.glsl"
#include "attention_params.glsl"

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in; // PE_VK_ATTN_TILE_X

layout(std430, set = 0, binding = 0) readonly buffer PBuf { float p_f[]; };
#if V_F16
layout(std430, set = 0, binding = 1) readonly buffer VBuf { uint v_w[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer VBuf { float v_f[]; };
#endif
#if DST_F16
layout(std430, set = 0, binding = 2) buffer DBuf { uint d_w[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer DBuf { float d_f[]; };
#endif

float load_v(uint e)
{
#if V_F16
    return pe_load_f16(v_w[e >> 1], e & 1u);
#else
    return v_f[e];
#endif
}

shared float ta[PE_ATTN_TY][PE_ATTN_R];  // [query][key in chunk]
shared float tb[PE_ATTN_R][PE_ATTN_TX];  // [key in chunk][dim]
#if DST_F16
shared float to[PE_ATTN_TY][PE_ATTN_TX]; // [query][dim]: the tile, for PAIRS
#endif

void main()
{
    const uint lx = gl_LocalInvocationID.x;
    for (uint t = gl_WorkGroupID.x; t < pc.n_tiles; t += gl_NumWorkGroups.x) {
        uint r1 = pe_udiv(t, pc.tx_magic, pc.shifts & 0xffu);
        uint tx = t - r1 * pc.tiles_x;
        uint hb = pe_udiv(r1, pc.ty_magic, (pc.shifts >> 8) & 0xffu);
        uint ty = r1 - hb * pc.tiles_y;
        uint b = pe_udiv(hb, pc.h_magic, (pc.shifts >> 16) & 0xffu);
        uint h = hb - b * pc.n_h;
        uint hk = pe_udiv(h, pc.g_magic, pc.shifts >> 24);
        uint x0 = tx * PE_ATTN_TX, y0 = ty * PE_ATTN_TY;
        uint ny = min(PE_ATTN_TY, pc.n_y - y0); // queries in this tile (uniform)
        uint i = x0 + lx;
        bool i_in = i < pc.n_x;

        float acc[PE_ATTN_TY];
        [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++)
            acc[y] = 0.0f;
        for (uint k0 = 0u; k0 < pc.n_red; k0 += PE_ATTN_R) {
            // P: element e = lx + 64 s of the 16 x 16 tile is (key e % 16, query e / 16);
            // lanes run along the keys (unit stride in the packed probabilities).
            uint rk = lx % PE_ATTN_R, k = k0 + rk;
            [[unroll]] for (uint s = 0u; s < PE_ATTN_TY * PE_ATTN_R / PE_ATTN_TX; s++) {
                uint y = lx / PE_ATTN_R + s * (PE_ATTN_TX / PE_ATTN_R);
                float v = 0.0f;
                if (y < ny && k < pc.n_red)
                    v = p_f[pc.a_off + k * pc.a_st0 + (y0 + y) * pc.a_st1 + h * pc.a_st2 +
                            b * pc.a_st3];
                ta[y][rk] = v;
            }
            // V: row s of the 16 x 64 tile is key k0 + s; lanes run along the dims.
            [[unroll]] for (uint s = 0u; s < PE_ATTN_R; s++) {
                float v = 0.0f;
                if (i_in && k0 + s < pc.n_red)
                    v = load_v(pc.b_off + i * pc.b_st0 + hk * pc.b_st1 + (k0 + s) * pc.b_st2 +
                               b * pc.b_st3);
                tb[s][lx] = v;
            }
            memoryBarrierShared();
            barrier();
            float vv[PE_ATTN_R]; // this invocation's dim, keys k0 ..
            [[unroll]] for (uint r = 0u; r < PE_ATTN_R; r++)
                vv[r] = tb[r][lx];
            [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++) {
                if (y < ny) { // uniform
                    [[unroll]] for (uint r = 0u; r < PE_ATTN_R; r++)
                        acc[y] += ta[y][r] * vv[r];
                }
            }
            memoryBarrierShared();
            barrier(); // the tiles are rewritten by the next chunk
        }
        uint e = pc.c_off + i * pc.c_st0 + h * pc.c_st1 + b * pc.c_st3; // + q * c_st2
#if DST_F16
        if ((pc.flags & PE_ATTN_FLAG_PAIRS) != 0u) { // uniform: a push constant
            [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++)
                to[y][lx] = acc[y];
            memoryBarrierShared();
            barrier();
            // n_x and x0 are even, so i + 1 < n_x whenever i < n_x and i is even
            if (i_in && (lx & 1u) == 0u) {
                [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++) {
                    if (y < ny)
                        d_w[(e + (y0 + y) * pc.c_st2) >> 1] =
                            pe_f32_to_f16(acc[y]) | (pe_f32_to_f16(to[y][lx + 1u]) << 16);
                }
            }
            memoryBarrierShared();
            barrier(); // `to` is rewritten by the next tile
        } else if (i_in) {
            [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++) {
                if (y < ny) {
                    uint ey = e + (y0 + y) * pc.c_st2, sh = (ey & 1u) * 16u;
                    atomicAnd(d_w[ey >> 1], ~(0xffffu << sh));
                    atomicOr(d_w[ey >> 1], pe_f32_to_f16(acc[y]) << sh);
                }
            }
        }
#else
        if (i_in) {
            [[unroll]] for (uint y = 0u; y < PE_ATTN_TY; y++) {
                if (y < ny)
                    d_f[e + (y0 + y) * pc.c_st2] = acc[y];
            }
        }
#endif
    }
}
