// rows_params.glsl - push constants of fill.comp and set_rows.comp. Mirrors struct
// pe_vk_fill_push / pe_vk_set_rows_push in src/kernel_abi.h (sizes checked there with
// _Static_assert: 44 and 92 bytes). Change both together.
// Define PE_FILL_PUSH or PE_SET_ROWS_PUSH before including: a shader has one block.

#ifndef PE_ROWS_PARAMS_GLSL
#define PE_ROWS_PARAMS_GLSL

#ifdef PE_FILL_PUSH
layout(push_constant, std430) uniform PeFillPush {
    uint off, st0, st1, st2, st3;    // 0
    uint ne0, ne1, ne2, n_total;     // 20
    uint bits, step;                 // 36
} pc;                                // 44 bytes
#endif

#ifdef PE_SET_ROWS_PUSH
layout(push_constant, std430) uniform PeSetRowsPush {
    uint src_off, src_st0, src_st1, src_st2, src_st3;    // 0
    uint dst_off, dst_st0, dst_st1, dst_st2, dst_st3;    // 20
    uint rows_off, rows_st0, rows_st1, rows_st2;         // 40 (32-bit words)
    uint ne0, ne1, ne2, n_total;                         // 56
    uint e2, e3, base2, base3;                           // 72
    uint n_rows;                                         // 88
} pc;                                                    // 92 bytes
#endif

#endif
