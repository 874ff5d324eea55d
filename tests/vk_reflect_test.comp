#version 450
// A shader for tests/test_vk_reflect.c only (never run): every way a posenc shader may
// size its work-group, shared memory and push constants, so that the SPIR-V reader of
// src/vulkan/vk_limits.c is checked against figures worked out from this source.
//   work-group: x from specialization constant 0 (default 1), y = 2, z = 1
//   shared:     red[N] floats (N = specialization constant 1, default 16) and
//               tile[8][gl_WorkGroupSize.x] vec4s (16 bytes each)
//   push:       uint a at 0, vec4 b at 16 (std430 alignment), uint c at 32: 36 bytes
layout(local_size_x_id = 0, local_size_y = 2, local_size_z = 1) in;
layout(constant_id = 1) const uint N = 16u;
shared float red[N];
shared vec4 tile[8][gl_WorkGroupSize.x];
layout(push_constant, std430) uniform P {
    uint a;
    vec4 b;
    uint c;
} pc;
layout(std430, binding = 0) buffer B {
    float d[];
} buf;
void main()
{
    red[gl_LocalInvocationID.x % N] = pc.b.x;
    barrier();
    tile[gl_LocalInvocationID.y][gl_LocalInvocationID.x] = vec4(red[0]);
    barrier();
    buf.d[gl_GlobalInvocationID.x] = tile[1][0].x + float(pc.c + pc.a);
}
