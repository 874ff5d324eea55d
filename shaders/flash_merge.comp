#version 450
// flash_merge.comp - the second dispatch of split-K attention (flash_attn.comp with
// FA_PARTIAL): for each row (query, head) and each chunk of 8 dims of dst, combine the NS
// partials (m_s, l_s, acc_s) the key splits wrote, with the sink when there is one:
//   M = max(max_s m_s, sink),  w_s = exp(m_s - M)  (0 for m_s = -inf)
//   L = sum_s w_s l_s + exp(sink - M),  dst = sum_s w_s acc_s / L
// M = -inf (every key masked, no finite sink): dst = 0. f32, in order of s.
// An invocation = (row, chunk): row = f + NF * (hk + Hk * b), f = g + group * q.
// Bindings: 0 dst, 5 sinks, 6 the parameter table, 7 the partials.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "common.glsl"
#include "flash_params.glsl"

layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer OF { float o_f[]; };
layout(std430, set = 0, binding = 0) buffer OW { uint o_w[]; };
layout(std430, set = 0, binding = 7) readonly buffer PF { float p_f[]; };
layout(std430, set = 0, binding = 7) readonly buffer PF4 { vec4 p_f4[]; };

const uint DVC = DVP / 8u;

void st_o(uint e, float x)
{
    if ((FLAGS & FA_O16) != 0u) {
        uint sh = (e & 1u) * 16u;
        atomicAnd(o_w[e >> 1], ~(0xffffu << sh));
        atomicOr(o_w[e >> 1], pe_f32_to_f16(x) << sh);
    } else {
        o_f[e] = x;
    }
}

void main()
{
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    const uint NS = pu(P_NS), NROWS = pu(P_NROWS), NF = pu(P_NF), Hk = pu(P_HK);
    const uint group = pu(P_GROUP);
    const uint n = NROWS * DVC;
    for (uint it = gl_GlobalInvocationID.x; it < n; it += gl_NumWorkGroups.x * WG) {
        const uint row = it / DVC, c = it - row * DVC;
        const uint hkb = row / NF, f = row - hkb * NF;
        const uint b = hkb / Hk, hk = hkb - b * Hk;
        const uint qq = f / group, h = hk * group + (f - qq * group);
        float M = NEG_INF;
        for (uint s = 0u; s < NS; s++)
            M = max(M, p_f[(s * NROWS + row) * PREC]);
        float sk = NEG_INF;
        if ((FLAGS & FA_SINKS) != 0u) {
            sk = sink_f[pu(P_S) + h * pu(P_S + 1u)];
            M = max(M, sk);
        }
        float inv = 0.0f;
        vec4 a0 = vec4(0.0f), a1 = vec4(0.0f);
        if (M != NEG_INF) {
            float L = 0.0f;
            for (uint s = 0u; s < NS; s++) {
                uint rec = (s * NROWS + row) * PREC;
                float ms = p_f[rec];
                float w = ms == NEG_INF ? 0.0f : exp(ms - M);
                L += w * p_f[rec + 1u];
                a0 += w * p_f4[(rec >> 2) + 1u + 2u * c];
                a1 += w * p_f4[(rec >> 2) + 2u + 2u * c];
            }
            if ((FLAGS & FA_SINKS) != 0u)
                L += exp(sk - M);
            inv = L == 0.0f ? 0.0f : 1.0f / L;
        }
        a0 *= inv;
        a1 *= inv;
        const uint ob = pu(P_O) + h * pu(P_O + 2u) + qq * pu(P_O + 3u) + b * pu(P_O + 4u);
        const uint o_st0 = pu(P_O + 1u);
        float x[8] = float[8](a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w);
        if ((FLAGS & FA_PAIRS) != 0u) {
            [[unroll]] for (uint i = 0u; i < 8u; i += 2u) {
                uint d = 8u * c + i;
                if (d < DV)
                    o_w[(ob + d) >> 1] = pe_f32_to_f16(x[i]) | (pe_f32_to_f16(x[i + 1u]) << 16);
            }
        } else {
            [[unroll]] for (uint i = 0u; i < 8u; i++) {
                uint d = 8u * c + i;
                if (d < DV)
                    st_o(ob + d * o_st0, x[i]);
            }
        }
    }
}
