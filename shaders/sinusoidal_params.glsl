// sinusoidal_params.glsl - push constants of sinusoidal.comp.
// Mirrors struct pe_vk_sinusoidal_push and PE_SIN_FLAG_* in src/kernel_abi.h, where the
// size (100 bytes) and every offset are checked with _Static_assert, and where the
// fields are explained. Change both together.

#ifndef PE_SINUSOIDAL_PARAMS_GLSL
#define PE_SINUSOIDAL_PARAMS_GLSL

#define PE_SIN_FLAG_LAYOUT_MASK 0x3u
#define PE_SIN_FLAG_HAS_X       0x4u
#define PE_SIN_FLAG_POS_F32     0x8u
#define PE_SIN_FLAG_DST_WORDS   0x10u
#define PE_SIN_FLAG_DST_PAIR2   0x20u

// specialization constant 0 (sinusoidal.comp)
#define PE_SIN_SPEC_VEC          0x1u
#define PE_SIN_SPEC_HAS_X        0x2u
#define PE_SIN_SPEC_POS_SHARED   0x4u
#define PE_SIN_SPEC_LAYOUT_SHIFT 3

#define PE_SIN_INTERLEAVED 0u
#define PE_SIN_HALF_SPLIT 1u
#define PE_SIN_HALF_SPLIT_COS_FIRST 2u

layout(push_constant, std430) uniform PeSinusoidalPush {
    uint dst_off;                               // 0
    uint dst_st0, dst_st1, dst_st2, dst_st3;    // 4
    uint x_off;                                 // 20
    uint x_st0, x_st1, x_st2, x_st3;            // 24
    uint pos_off;                               // 40
    uint pos_st0, pos_st1, pos_st2;             // 44
    uint n_half;                                // 56
    uint n_units;                               // 60
    uint ne1, ne2;                              // 64
    uint units_magic, ne1_magic, ne2_magic;     // 72
    uint shifts;                                // 84
    uint n_total;                               // 88
    uint flags;                                 // 92
    float x_scale;                              // 96
} pc;                                           // 100 bytes

#endif
