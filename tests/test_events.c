/*
 * test_events.c - posenc_opencl_last_event / posenc_opencl_wait_events (issue #17) on one
 * backend (--backend NAME).
 *
 * OpenCL, the test playing a runtime:
 *  - posenc's own context: an op's event completes under clWaitForEvents and the result is
 *    then right (against the CPU reference); a user event given to wait_events holds the
 *    next op back -- its event is not CL_COMPLETE after 50 ms, it is once the user event
 *    is set, and the result is right; an op that enqueues nothing (an empty tensor) leaves
 *    the last event as it was; before posenc's first command the event is a marker that
 *    completes.
 *  - a host-owned context (the test's cl_context and in-order queue, plus a second queue
 *    of the same cl_context): op A, then wait_events(user event), then op B; waiting for
 *    A's event alone returns while B is held, and A's result read on the second queue
 *    (waiting on A's event) is right -- one op waited for without finishing the queue.
 *    After the user event is set, B's result is right too.
 *  - posenc_buffer_wrap_host on the application's queue (the maps go through it): RoPE on
 *    host memory is right after posenc_context_finish, which also waited for the
 *    application's command behind posenc's.
 *  - bad input: NULL ctx / out, n_events < 0, a NULL list or element, an event of another
 *    cl_context (a second posenc context): INVALID_ARGUMENT naming the argument.
 * CPU and Vulkan: both calls return UNSUPPORTED, *out NULL.
 *
 * Results are RoPE f32 [D=64, H=4, T=16, B=2] with positions < 64 against the CPU
 * reference, within the rounding bound of src/check/check.c.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if TH_HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif

static void expect(posenc_status got, posenc_status want, posenc_context *ctx,
                   const char *needle, const char *what)
{
    const char *msg = ctx ? posenc_context_last_error(ctx) : posenc_last_error();
    if (got != want)
        fail_msg("%s: status %s, want %s (message: %s)", what, posenc_status_string(got),
                 posenc_status_string(want), msg);
    if (needle && !strstr(msg, needle))
        fail_msg("%s: message \"%s\" does not mention \"%s\"", what, msg, needle);
}

static void test_unsupported(void **state)
{
    (void)state;
    void *ev = (void *)(uintptr_t)1;
    expect(posenc_opencl_last_event(th.dut, &ev), POSENC_ERR_UNSUPPORTED, th.dut,
           "events are OpenCL cl_events", "last_event");
    assert_null(ev);
    void *list[1] = {(void *)(uintptr_t)1};
    expect(posenc_opencl_wait_events(th.dut, 1, list), POSENC_ERR_UNSUPPORTED, th.dut,
           "events are OpenCL cl_events", "wait_events");
    expect(posenc_opencl_last_event(NULL, &ev), POSENC_ERR_INVALID_ARGUMENT, NULL,
           "ctx is NULL", "last_event NULL ctx");
    th_check_warnings();
}

#if TH_HAVE_OPENCL
enum { D = 64, H = 4, T = 16, B = 2, N = D * H * T * B };

static float g_x[N], g_ref[N];
static int32_t g_pos[T];
static const struct posenc_rope_params g_rope = {.mode = POSENC_ROPE_NEOX};

#define CL_OK(call) assert_int_equal((call), CL_SUCCESS)

static void make_inputs(void)
{
    static bool done;
    if (done)
        return;
    uint64_t s = 0xe7e7;
    for (int i = 0; i < N; i++)
        g_x[i] = (float)(2.0 * pc_rand_uniform(&s) - 1.0);
    for (int t = 0; t < T; t++)
        g_pos[t] = (int32_t)(pc_rand_u64(&s) % 64);
    posenc_buffer *x = th_upload(th.ref, g_x, sizeof(g_x));
    posenc_buffer *p = th_upload(th.ref, g_pos, sizeof(g_pos));
    posenc_buffer *y = NULL;
    assert_int_equal(posenc_buffer_create(th.ref, sizeof(g_x), &y), POSENC_OK);
    posenc_tensor tx = posenc_tensor_contiguous(x, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor ty = posenc_tensor_contiguous(y, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor tp = posenc_tensor_contiguous(p, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    assert_int_equal(posenc_rope(th.ref, &tx, &tp, &ty, &g_rope), POSENC_OK);
    assert_int_equal(posenc_buffer_read(y, 0, g_ref, sizeof(g_ref)), POSENC_OK);
    posenc_buffer_destroy(&x);
    posenc_buffer_destroy(&p);
    posenc_buffer_destroy(&y);
    done = true;
}

/* Every angle is below 64 rad (positions < 64, frequencies <= 1), |x| <= 1. */
static void compare(const float *got, const char *what)
{
    for (int i = 0; i < N; i++) {
        double b = pc_bound_rope_f32(2.0 * pc_ulp32(64.0), 1.0, 2.0) + pc_ulp32(g_ref[i]);
        if (!(fabs((double)got[i] - g_ref[i]) <= b))
            fail_msg("%s: element %d = %.9g, reference %.9g (bound %.3g)", what, i, got[i],
                     g_ref[i], b);
    }
}

static void rope(posenc_context *ctx, posenc_buffer *x, posenc_buffer *pos, posenc_buffer *y)
{
    posenc_tensor tx = posenc_tensor_contiguous(x, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor ty = posenc_tensor_contiguous(y, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor tp = posenc_tensor_contiguous(pos, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_status st = posenc_rope(ctx, &tx, &tp, &ty, &g_rope);
    if (st != POSENC_OK)
        fail_msg("posenc_rope: %s: %s", posenc_status_string(st), posenc_context_last_error(ctx));
}

static cl_event last_event(posenc_context *ctx)
{
    void *ev = NULL;
    posenc_status st = posenc_opencl_last_event(ctx, &ev);
    if (st != POSENC_OK)
        fail_msg("posenc_opencl_last_event: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
    assert_non_null(ev);
    return (cl_event)ev;
}

static cl_int ev_status(cl_event ev)
{
    cl_int s = 0;
    CL_OK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(s), &s, NULL));
    return s;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const struct posenc_context_params g_params = {
    .backend = POSENC_BACKEND_OPENCL, .flags = POSENC_CONTEXT_DEBUG, .log_fn = th_log,
    .log_level = POSENC_LOG_WARN};

/* posenc's own context (th.dut). */
static void test_owned(void **state)
{
    (void)state;
    make_inputs();
    posenc_context *ctx = th.dut;
    posenc_buffer *x = th_upload(ctx, g_x, sizeof(g_x));
    posenc_buffer *pos = th_upload(ctx, g_pos, sizeof(g_pos));
    posenc_buffer *y1 = NULL, *y2 = NULL;
    assert_int_equal(posenc_buffer_create(ctx, sizeof(g_x), &y1), POSENC_OK);
    assert_int_equal(posenc_buffer_create(ctx, sizeof(g_x), &y2), POSENC_OK);

    /* An op's event completes; then its result is there. */
    rope(ctx, x, pos, y1);
    cl_event e1 = last_event(ctx);
    CL_OK(clWaitForEvents(1, &e1));
    assert_int_equal(ev_status(e1), CL_COMPLETE);
    float *got = th_download(y1);
    compare(got, "after the op's event");
    free(got);

    /* An op that enqueues nothing (an empty tensor) leaves the last event alone. */
    rope(ctx, x, pos, y2);
    cl_event e2 = last_event(ctx);
    assert_ptr_not_equal(e2, e1);
    posenc_tensor ex = posenc_tensor_contiguous(x, 0, POSENC_DTYPE_F32, D, H, 0, B);
    posenc_tensor ey = posenc_tensor_contiguous(y1, 0, POSENC_DTYPE_F32, D, H, 0, B);
    posenc_tensor ep = posenc_tensor_contiguous(pos, 0, POSENC_DTYPE_I32, 0, 1, 1, 1);
    assert_int_equal(posenc_rope(ctx, &ex, &ep, &ey, &g_rope), POSENC_OK);
    cl_event e3 = last_event(ctx);
    assert_ptr_equal(e3, e2);
    CL_OK(clReleaseEvent(e3));
    CL_OK(clWaitForEvents(1, &e2));
    CL_OK(clReleaseEvent(e2));

    /* A user event holds the next op back until it is set. The event's cl_context is
     * posenc's own (the only way to make one for posenc's queue). */
    cl_context cctx = NULL;
    CL_OK(clGetEventInfo(e1, CL_EVENT_CONTEXT, sizeof(cctx), &cctx, NULL));
    cl_int err = CL_SUCCESS;
    cl_event user = clCreateUserEvent(cctx, &err);
    CL_OK(err);
    /* y2 still holds the op above's result: clear it first, by a blocking write before
     * the hold (a blocking call after it would wait for the user event forever) */
    static const float zero[N];
    assert_int_equal(posenc_buffer_write(y2, 0, zero, sizeof(zero)), POSENC_OK);
    assert_int_equal(posenc_opencl_wait_events(ctx, 1, (void *const *)&user), POSENC_OK);
    rope(ctx, x, pos, y2);
    cl_event held = last_event(ctx);
    sleep_ms(50);
    assert_int_not_equal(ev_status(held), CL_COMPLETE);
    assert_int_not_equal(ev_status(held), CL_COMPLETE); /* still, after the flush */
    CL_OK(clSetUserEventStatus(user, CL_COMPLETE));
    CL_OK(clWaitForEvents(1, &held));
    assert_int_equal(ev_status(held), CL_COMPLETE);
    got = th_download(y2);
    compare(got, "after the user event");
    free(got);
    CL_OK(clReleaseEvent(held));
    CL_OK(clReleaseEvent(user));
    CL_OK(clReleaseEvent(e1));

    /* n_events 0 does nothing; the list may then be NULL. */
    assert_int_equal(posenc_opencl_wait_events(ctx, 0, NULL), POSENC_OK);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    posenc_buffer_destroy(&x);
    posenc_buffer_destroy(&pos);
    posenc_buffer_destroy(&y1);
    posenc_buffer_destroy(&y2);
    th_check_warnings();
}

/* Before posenc's first command: a marker, which completes. */
static void test_marker(void **state)
{
    (void)state;
    posenc_context *ctx = NULL;
    char err[256];
    assert_int_equal(posenc_context_create(&g_params, &ctx, err, sizeof(err)), POSENC_OK);
    cl_event e = last_event(ctx);
    CL_OK(clWaitForEvents(1, &e));
    assert_int_equal(ev_status(e), CL_COMPLETE);
    cl_command_type type = 0;
    CL_OK(clGetEventInfo(e, CL_EVENT_COMMAND_TYPE, sizeof(type), &type, NULL));
    assert_int_equal(type, CL_COMMAND_MARKER);
    CL_OK(clReleaseEvent(e));
    posenc_context_destroy(&ctx);
    th_check_warnings();
}

/* The application's context and queues: wait for one op without finishing the queue. */
static void test_host_owned(void **state)
{
    (void)state;
    make_inputs();
    cl_platform_id plats[16];
    cl_uint np = 0;
    cl_device_id dev = NULL;
    CL_OK(clGetPlatformIDs(16, plats, &np));
    for (cl_uint i = 0; i < np && i < 16 && !dev; i++)
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS)
            dev = NULL;
    assert_non_null(dev);
    cl_int err = CL_SUCCESS;
    cl_context cctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CL_OK(err);
    cl_command_queue q = clCreateCommandQueue(cctx, dev, 0, &err);
    CL_OK(err);
    cl_command_queue q2 = clCreateCommandQueue(cctx, dev, 0, &err);
    CL_OK(err);
    struct posenc_host_device host = {.backend = POSENC_BACKEND_OPENCL, .cl_context = cctx,
                                      .cl_queue = q};
    struct posenc_context_params p = g_params;
    p.backend = POSENC_BACKEND_AUTO;
    posenc_context *ctx = NULL;
    char msg[256];
    assert_int_equal(posenc_context_create_from_host(&p, &host, &ctx, msg, sizeof(msg)),
                     POSENC_OK);
    cl_mem m[4];
    const size_t sizes[4] = {sizeof(g_x), sizeof(g_pos), sizeof(g_x), sizeof(g_x)};
    posenc_buffer *b[4];
    for (int i = 0; i < 4; i++) {
        m[i] = clCreateBuffer(cctx, CL_MEM_READ_WRITE, sizes[i], NULL, &err);
        CL_OK(err);
        assert_int_equal(posenc_buffer_wrap_opencl(ctx, m[i], &b[i]), POSENC_OK);
    }
    CL_OK(clEnqueueWriteBuffer(q, m[0], CL_TRUE, 0, sizeof(g_x), g_x, 0, NULL, NULL));
    CL_OK(clEnqueueWriteBuffer(q, m[1], CL_TRUE, 0, sizeof(g_pos), g_pos, 0, NULL, NULL));
    static const float zero[N];
    CL_OK(clEnqueueWriteBuffer(q, m[2], CL_TRUE, 0, sizeof(zero), zero, 0, NULL, NULL));
    CL_OK(clEnqueueWriteBuffer(q, m[3], CL_TRUE, 0, sizeof(zero), zero, 0, NULL, NULL));

    rope(ctx, b[0], b[1], b[2]); /* op A */
    cl_event ea = last_event(ctx);
    cl_event user = clCreateUserEvent(cctx, &err);
    CL_OK(err);
    assert_int_equal(posenc_opencl_wait_events(ctx, 1, (void *const *)&user), POSENC_OK);
    rope(ctx, b[0], b[1], b[3]); /* op B, held back */
    cl_event eb = last_event(ctx);

    /* A alone: its event completes and its result is read on the second queue. */
    CL_OK(clWaitForEvents(1, &ea));
    static float got[N];
    CL_OK(clEnqueueReadBuffer(q2, m[2], CL_TRUE, 0, sizeof(got), got, 1, &ea, NULL));
    compare(got, "op A read on a second queue while op B is held");
    sleep_ms(20);
    assert_int_not_equal(ev_status(eb), CL_COMPLETE);

    CL_OK(clSetUserEventStatus(user, CL_COMPLETE));
    CL_OK(clWaitForEvents(1, &eb));
    CL_OK(clEnqueueReadBuffer(q2, m[3], CL_TRUE, 0, sizeof(got), got, 1, &eb, NULL));
    compare(got, "op B after the user event");

    /* An event of this cl_context made by the application's own command is accepted. */
    cl_event own = NULL;
    CL_OK(clEnqueueMarkerWithWaitList(q2, 0, NULL, &own));
    assert_int_equal(posenc_opencl_wait_events(ctx, 1, (void *const *)&own), POSENC_OK);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    CL_OK(clReleaseEvent(own));
    CL_OK(clReleaseEvent(ea));
    CL_OK(clReleaseEvent(eb));
    CL_OK(clReleaseEvent(user));
    for (int i = 0; i < 4; i++) {
        posenc_buffer_destroy(&b[i]);
        CL_OK(clReleaseMemObject(m[i]));
    }
    posenc_context_destroy(&ctx);
    CL_OK(clReleaseCommandQueue(q2));
    CL_OK(clReleaseCommandQueue(q));
    CL_OK(clReleaseContext(cctx));
    th_check_warnings();
}

/* posenc_buffer_wrap_host on the application's queue: the wrap's map and finish's maps go
 * through that queue, ordered with the application's own commands. */
static void test_host_owned_wrap_host(void **state)
{
    (void)state;
    make_inputs();
    cl_platform_id plats[16];
    cl_uint np = 0;
    cl_device_id dev = NULL;
    CL_OK(clGetPlatformIDs(16, plats, &np));
    for (cl_uint i = 0; i < np && i < 16 && !dev; i++)
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS)
            dev = NULL;
    assert_non_null(dev);
    cl_int err = CL_SUCCESS;
    cl_context cctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CL_OK(err);
    cl_command_queue q = clCreateCommandQueue(cctx, dev, 0, &err);
    CL_OK(err);
    struct posenc_host_device host = {.backend = POSENC_BACKEND_OPENCL, .cl_context = cctx,
                                      .cl_queue = q};
    posenc_context *ctx = NULL;
    char msg[256];
    assert_int_equal(posenc_context_create_from_host(&g_params, &host, &ctx, msg, sizeof(msg)),
                     POSENC_OK);
    size_t align = 0;
    assert_int_equal(posenc_buffer_host_alignment(ctx, &align), POSENC_OK);
    /* x, then pos at 64 KiB, then y at 128 KiB (each a multiple of the alignment) */
    const size_t pos_off = 65536, y_off = 131072, total = 196608;
    assert_true(sizeof(g_x) <= pos_off && align <= pos_off);
    unsigned char *mem = aligned_alloc(4096, total);
    assert_non_null(mem);
    memset(mem, 0, total);
    memcpy(mem, g_x, sizeof(g_x));
    memcpy(mem + pos_off, g_pos, sizeof(g_pos));
    posenc_buffer *b = NULL;
    assert_int_equal(posenc_buffer_wrap_host(ctx, mem, total, &b), POSENC_OK);
    posenc_tensor tx = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor tp = posenc_tensor_contiguous(b, pos_off, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor ty = posenc_tensor_contiguous(b, y_off, POSENC_DTYPE_F32, D, H, T, B);
    assert_int_equal(posenc_rope(ctx, &tx, &tp, &ty, &g_rope), POSENC_OK);
    cl_event mark = NULL; /* the application's own command behind posenc's */
    CL_OK(clEnqueueMarkerWithWaitList(q, 0, NULL, &mark));
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    assert_int_equal(ev_status(mark), CL_COMPLETE); /* finish waited for the whole queue */
    compare((const float *)(const void *)(mem + y_off), "rope on wrapped host memory");
    CL_OK(clReleaseEvent(mark));
    posenc_buffer_destroy(&b);
    posenc_context_destroy(&ctx);
    /* the application's queue still works */
    CL_OK(clEnqueueMarkerWithWaitList(q, 0, NULL, NULL));
    CL_OK(clFinish(q));
    CL_OK(clReleaseCommandQueue(q));
    CL_OK(clReleaseContext(cctx));
    compare((const float *)(const void *)(mem + y_off), "after destroy");
    free(mem);
    th_check_warnings();
}

static void test_bad_input(void **state)
{
    (void)state;
    posenc_context *ctx = th.dut;
    expect(posenc_opencl_last_event(ctx, NULL), POSENC_ERR_INVALID_ARGUMENT, ctx,
           "out_cl_event is NULL", "NULL out");
    void *ev = (void *)(uintptr_t)1;
    expect(posenc_opencl_last_event(NULL, &ev), POSENC_ERR_INVALID_ARGUMENT, NULL,
           "ctx is NULL", "NULL ctx");
    assert_null(ev);
    cl_event mine = last_event(ctx);
    void *list[2] = {mine, NULL};
    expect(posenc_opencl_wait_events(NULL, 1, list), POSENC_ERR_INVALID_ARGUMENT, NULL,
           "ctx is NULL", "wait NULL ctx");
    expect(posenc_opencl_wait_events(ctx, -1, list), POSENC_ERR_INVALID_ARGUMENT, ctx,
           "n_events = -1", "n < 0");
    expect(posenc_opencl_wait_events(ctx, 2, NULL), POSENC_ERR_INVALID_ARGUMENT, ctx,
           "cl_events is NULL with n_events = 2", "NULL list");
    expect(posenc_opencl_wait_events(ctx, 2, list), POSENC_ERR_INVALID_ARGUMENT, ctx,
           "cl_events[1] is NULL", "NULL element");
    /* an event of another cl_context: a second posenc context's */
    posenc_context *other = NULL;
    char err[256];
    assert_int_equal(posenc_context_create(&g_params, &other, err, sizeof(err)), POSENC_OK);
    cl_event foreign = last_event(other);
    list[1] = foreign;
    expect(posenc_opencl_wait_events(ctx, 2, list), POSENC_ERR_INVALID_ARGUMENT, ctx,
           "cl_events[1] = ", "event of another cl_context");
    assert_non_null(strstr(posenc_context_last_error(ctx), "belongs to cl_context"));
    /* the refused list enqueued nothing: the last event is the same */
    cl_event again = last_event(ctx);
    assert_ptr_equal(again, mine);
    CL_OK(clReleaseEvent(again));
    CL_OK(clReleaseEvent(foreign));
    CL_OK(clReleaseEvent(mine));
    posenc_context_destroy(&other);
    /* the context still works */
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    th_check_warnings();
}
#endif

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "events");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest none[] = {cmocka_unit_test(test_unsupported)};
    if (th.kind != POSENC_BACKEND_OPENCL) {
        rc = th_run("events", none, 1);
    } else {
#if TH_HAVE_OPENCL
        const struct CMUnitTest cl[] = {
            cmocka_unit_test(test_owned),
            cmocka_unit_test(test_marker),
            cmocka_unit_test(test_host_owned),
            cmocka_unit_test(test_host_owned_wrap_host),
            cmocka_unit_test(test_bad_input),
        };
        rc = th_run("events", cl, sizeof(cl) / sizeof(cl[0]));
#else
        fprintf(stderr, "events: posenc has OpenCL but this test was built without it\n");
        rc = 1;
#endif
    }
    th_fini();
    return rc;
}
