/*
 * posenc - the command-line tool: what the library finds, and whether it computes right.
 *
 *   posenc info                      backends, devices, capabilities, what AUTO picks
 *   posenc verify [--backend B] [--op OP] [--filter TEXT] [--quick] [--quiet]
 *                                    every op case on each backend vs the CPU reference
 *   posenc table --kind K ...        an encoding's vectors / matrices as numbers
 *   posenc heatmap --kind K -o F     the same as a PNG heat map       (cmd_heatmap.c)
 *   posenc decay -o F | --csv        RoPE's long-term decay per scaling (cmd_decay.c)
 *   posenc freqs -o F | --csv        RoPE's frequency per pair per scaling (cmd_freqs.c)
 *
 * table, heatmap: cmd_table.c, cmd_heatmap.c, encodings.c; images: plot.c, font.c, png.c.
 */
#include "bench_core.h"
#include "check.h"
#include "posenc.h"
#include "tool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const posenc_backend_kind all_backends[] = {POSENC_BACKEND_CPU, POSENC_BACKEND_OPENCL,
                                                   POSENC_BACKEND_VULKAN};

static const char *device_type_name(posenc_device_type t)
{
    switch (t) {
    case POSENC_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case POSENC_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case POSENC_DEVICE_CPU: return "CPU";
    default: return "other";
    }
}

static int parse_backend(const char *s, posenc_backend_kind *out)
{
    for (int k = 0; k < POSENC_BACKEND_COUNT; k++)
        if (strcmp(s, posenc_backend_name((posenc_backend_kind)k)) == 0) {
            *out = (posenc_backend_kind)k;
            return 1;
        }
    return 0;
}

static const char *known(const char *s)
{
    return s && s[0] ? s : "unknown";
}

static void print_info(const struct posenc_device_info *in)
{
    printf("    device %d: %s\n", (int)in->device_index, known(in->device_name));
    printf("      type            %s\n", device_type_name(in->type));
    printf("      vendor          %s\n", known(in->vendor));
    printf("      api             %s\n", known(in->api_version));
    printf("      driver          %s\n", known(in->driver_version));
    printf("      f16 storage     %s\n", in->f16_native ? "native" : "converted in kernels");
    /* 0 or a value no device has (the CPU backend's "no limit" is near 2^64): not a size */
    if (in->max_buffer_size == 0 || in->max_buffer_size >= ((uint64_t)1 << 56))
        printf("      max buffer      %s\n",
               in->backend == POSENC_BACKEND_CPU ? "none (host memory)" : "unknown");
    else
        printf("      max buffer      %llu MiB\n", (unsigned long long)(in->max_buffer_size >> 20));
    if (in->max_binding_size)
        printf("      max binding     %llu bytes (larger ops are cut into several launches)\n",
               (unsigned long long)in->max_binding_size);
    else
        printf("      max binding     none (a launch addresses whole buffers)\n");
    if (in->max_workgroup_size && in->backend != POSENC_BACKEND_CPU)
        printf("      max work-group  %u\n", in->max_workgroup_size);
    else
        printf("      max work-group  none (no work-groups)\n");
    if (in->compute_units)
        printf("      %s   %u\n", in->backend == POSENC_BACKEND_CPU ? "threads      " : "compute units",
               in->compute_units);
    else
        printf("      compute units   unknown (the driver does not say)\n");
}

static int cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: posenc info\n\nLists every backend and device posenc can use, their "
                   "capabilities,\nwhy a backend is unavailable, and what AUTO selects.\n");
            return 0;
        }
        fprintf(stderr, "posenc info: unknown argument '%s' (try --help)\n", argv[i]);
        return 2;
    }
    printf("posenc %s\n\n", posenc_version());
    for (size_t b = 0; b < sizeof(all_backends) / sizeof(all_backends[0]); b++) {
        posenc_backend_kind kind = all_backends[b];
        int32_t count = 0;
        char why[512];
        posenc_status st = posenc_backend_device_count(kind, &count, why, sizeof(why));
        printf("%s:\n", posenc_backend_name(kind));
        if (st != POSENC_OK) {
            printf("    unavailable: %s\n\n", why);
            continue;
        }
        for (int32_t d = 0; d < count; d++) {
            struct posenc_context_params p = {.backend = kind, .device = d};
            posenc_context *ctx = NULL;
            char err[512];
            st = posenc_context_create(&p, &ctx, err, sizeof(err));
            if (st != POSENC_OK) {
                printf("    device %d: cannot open: %s\n", (int)d, err);
                continue;
            }
            struct posenc_device_info info;
            posenc_context_get_info(ctx, &info);
            print_info(&info);
            posenc_context_destroy(&ctx);
        }
        printf("\n");
    }
    posenc_context *ctx = NULL;
    char err[512];
    struct posenc_context_params p = {.backend = POSENC_BACKEND_AUTO};
    if (posenc_context_create(&p, &ctx, err, sizeof(err)) == POSENC_OK) {
        struct posenc_device_info info;
        posenc_context_get_info(ctx, &info);
        printf("auto selects: %s device %d (%s)%s\n", posenc_backend_name(info.backend),
               (int)info.device_index, info.device_name,
               info.backend == POSENC_BACKEND_CPU
                   ? " - no real GPU found; CPU-emulated devices are used only when asked for"
                   : "");
        posenc_context_destroy(&ctx);
    } else {
        printf("auto: %s\n", err);
    }
    return 0;
}

#define progress_clear tool_progress_clear

/* Counts WARN messages (driver / validation-layer reports) of the context under test. */
static int warn_count;
static void verify_log(posenc_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == POSENC_LOG_WARN) {
        warn_count++;
        progress_clear();
        fprintf(stderr, "  warning: %s\n", msg);
    }
}

/* The worked example of the sinusoidal encoding: d_model = 6, pos = 2, in double. */
static int verify_seed(posenc_context *ctx, double *out_err)
{
    posenc_buffer *b = NULL, *pb = NULL;
    int32_t pos = 2;
    float out[6];
    int ok = posenc_buffer_create(ctx, sizeof(out), &b) == POSENC_OK &&
             posenc_buffer_create(ctx, sizeof(pos), &pb) == POSENC_OK &&
             posenc_buffer_write(pb, 0, &pos, sizeof(pos)) == POSENC_OK;
    if (ok) {
        posenc_tensor dst = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 6, 1, 1, 1);
        posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 1, 1, 1, 1);
        ok = posenc_sinusoidal(ctx, NULL, &pt, &dst, NULL) == POSENC_OK &&
             posenc_buffer_read(b, 0, out, sizeof(out)) == POSENC_OK;
    }
    *out_err = INFINITY;
    if (ok) {
        *out_err = 0.0;
        for (int i = 0; i < 3; i++) {
            double a = 2.0 / pow(10000.0, 2.0 * i / 6.0);
            *out_err = fmax(*out_err, fabs(out[2 * i] - sin(a)));
            *out_err = fmax(*out_err, fabs(out[2 * i + 1] - cos(a)));
        }
    }
    posenc_buffer_destroy(&b);
    posenc_buffer_destroy(&pb);
    /* |angle| <= 2: two ulp of the angle + 4 ulp of sin/cos, see pc_bound_sincos_f32 */
    return ok && *out_err <= pc_bound_sincos_f32(2.0, 0.0);
}

static void op_list(char *buf, size_t n)
{
    buf[0] = '\0';
    for (int o = 0; o < PC_OP_COUNT; o++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", o ? ", " : "",
                 pc_op_name((enum pc_op)o));
}

static int64_t case_elements(const struct pc_case *c)
{
    return c->ne[0] * c->ne[1] * c->ne[2] * c->ne[3];
}

/* --quick: per op, the smallest case of each combination of what changes the code path
 * most (output dtype, fused / in place or not; RoPE call, mode and scaling; attention
 * encoding; copy's source dtype and view). */
static void quick_select(const struct pc_case *cases, size_t n, unsigned char *keep)
{
    for (size_t i = 0; i < n; i++) {
        const struct pc_case *c = &cases[i];
        keep[i] = 0;
        if (c->attn.big)
            continue;
        size_t best = i;
        for (size_t k = 0; k < n; k++) {
            const struct pc_case *d = &cases[k];
            int same = d->op == c->op && d->dtype == c->dtype && d->has_x == c->has_x &&
                       !d->attn.big;
            if (same && c->op == PC_OP_ROPE)
                same = d->rope_call == c->rope_call && d->rope.mode == c->rope.mode &&
                       d->rope.scaling.kind == c->rope.scaling.kind;
            if (same && c->op == PC_OP_ATTENTION)
                same = d->attn.encoding == c->attn.encoding;
            if (same && c->op == PC_OP_COPY)
                same = d->x_dtype == c->x_dtype && d->view == c->view;
            if (same && (case_elements(d) < case_elements(&cases[best]) ||
                         (case_elements(d) == case_elements(&cases[best]) && k < best)))
                best = k;
        }
        keep[i] = best == i;
    }
}

static int cmd_verify(int argc, char **argv)
{
    int only_backend = -1, quiet = 0, quick = 0;
    enum pc_op op = PC_OP_COUNT;
    const char *filter = NULL;
    char ops[256];
    op_list(ops, sizeof(ops));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: posenc verify [--backend cpu|opencl|vulkan] [--op OP] [--filter TEXT] "
                   "[--quick] [--quiet]\n\nRuns every verification case (the same cases as the "
                   "test suites) on each backend\nfound and compares with the CPU reference. "
                   "Prints each case with its max abs\nerror and the bound; exits 1 on any "
                   "failure.\n\n"
                   "  --backend B    only B (default: every backend found)\n"
                   "  --op OP        only the cases of OP: %s\n"
                   "  --filter TEXT  only the cases whose name contains TEXT (an error if none "
                   "does)\n"
                   "  --quick        a representative subset: per op, the smallest case of each\n"
                   "                 dtype / mode / scaling combination (seconds, not "
                   "minutes)\n"
                   "  --quiet        print only failures and the totals, and no progress bar\n"
                   "A progress bar is drawn on stderr when it is a terminal.\n", ops);
            return 0;
        } else if (!strcmp(a, "--backend") || !strcmp(a, "--op") || !strcmp(a, "--filter")) {
            const char *v = tool_value("verify", argc, argv, &i);
            if (!v)
                return 2;
            if (!strcmp(a, "--backend")) {
                posenc_backend_kind k;
                if (!parse_backend(v, &k) || k == POSENC_BACKEND_AUTO) {
                    tool_error("verify", "unknown backend '%s' (cpu, opencl, vulkan)", v);
                    return 2;
                }
                only_backend = (int)k;
            } else if (!strcmp(a, "--op")) {
                int found = 0;
                for (int o = 0; o < PC_OP_COUNT; o++)
                    if (!strcmp(v, pc_op_name((enum pc_op)o))) {
                        op = (enum pc_op)o;
                        found = 1;
                    }
                if (!found) {
                    tool_error("verify", "unknown op '%s' (%s)", v, ops);
                    return 2;
                }
            } else {
                if (!v[0]) {
                    tool_error("verify", "--filter needs a non-empty TEXT");
                    return 2;
                }
                filter = v;
            }
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--quick")) {
            quick = 1;
        } else {
            tool_error("verify", "unknown argument '%s' (try posenc verify --help)", a);
            return 2;
        }
    }
    size_t ncases = 0;
    struct pc_case *cases = pc_cases(op, &ncases);
    unsigned char *keep = cases ? malloc(ncases + 1) : NULL;
    if (!cases || !keep) {
        tool_error("verify", "out of memory listing the cases");
        free(cases);
        return 1;
    }
    if (quick)
        quick_select(cases, ncases, keep);
    else
        memset(keep, 1, ncases);
    static const char seed_name[] = "sinusoidal/worked example d_model=6 pos=2 vs double";
    int run_seed = (op == PC_OP_COUNT || op == PC_OP_SINUSOIDAL) &&
                   (!filter || strstr(seed_name, filter));
    size_t total = 0;
    for (size_t i = 0; i < ncases; i++) {
        if (filter && !strstr(cases[i].name, filter))
            keep[i] = 0;
        total += keep[i];
    }
    if (total == 0 && !run_seed) {
        tool_error("verify", "no case of %s matches --filter '%s' (case names look like "
                             "'%s'; plain posenc verify lists them all)",
                   op != PC_OP_COUNT ? pc_op_name(op) : "any op", filter ? filter : "",
                   ncases ? cases[0].name : "rope/...");
        free(cases);
        free(keep);
        return 2;
    }
    posenc_context *ref = NULL;
    char err[512];
    struct posenc_context_params rp = {.backend = POSENC_BACKEND_CPU,
                                       .flags = POSENC_CONTEXT_CPU_REFERENCE};
    if (posenc_context_create(&rp, &ref, err, sizeof(err)) != POSENC_OK) {
        tool_error("verify", "cannot create the CPU reference: %s", err);
        free(cases);
        free(keep);
        return 1;
    }
    tool_progress_init(quiet);
    int failures = 0, backends_run = 0;
    for (size_t b = 0; b < sizeof(all_backends) / sizeof(all_backends[0]); b++) {
        posenc_backend_kind kind = all_backends[b];
        if (only_backend >= 0 && (int)kind != only_backend)
            continue;
        struct posenc_context_params p = {.backend = kind, .flags = POSENC_CONTEXT_DEBUG,
                                          .log_fn = verify_log, .log_level = POSENC_LOG_WARN};
        posenc_context *dut = NULL;
        posenc_status st = posenc_context_create(&p, &dut, err, sizeof(err));
        if (st != POSENC_OK) {
            printf("== %s: %s: %s\n\n", posenc_backend_name(kind), posenc_status_string(st), err);
            if (only_backend >= 0 || st != POSENC_ERR_UNAVAILABLE)
                failures++;
            continue;
        }
        backends_run++;
        struct posenc_device_info info;
        posenc_context_get_info(dut, &info);
        printf("== %s: %s%s\n", posenc_backend_name(kind), info.device_name,
               quick ? " (--quick: a representative subset)" : "");
        printf("%-100s %10s %10s  %s\n", "case", "max|err|", "bound", "result");
        int pass = 0, fail = 0;
        warn_count = 0;
        if (run_seed) {
            double e;
            int ok = verify_seed(dut, &e);
            if (!quiet || !ok)
                printf("%-100s %10.3g %10.3g  %s\n", seed_name, e, pc_bound_sincos_f32(2.0, 0.0),
                       ok ? "pass" : "FAIL");
            ok ? pass++ : fail++;
        }
        size_t done = 0;
        for (size_t i = 0; i < ncases; i++) {
            if (!keep[i])
                continue;
            tool_progress(posenc_backend_name(kind), (int64_t)done, (int64_t)total,
                          cases[i].name);
            struct pc_result r;
            pc_run_case(ref, dut, &cases[i], &r);
            done++;
            if (!quiet || !r.pass) {
                progress_clear();
                printf("%-100s %10.3g %10.3g  %s%s%s\n", cases[i].name, r.max_err,
                       r.bound_at_max, r.pass ? "pass" : "FAIL", r.pass ? "" : ": ",
                       r.pass ? "" : r.msg);
                fflush(stdout);
            }
            r.pass ? pass++ : fail++;
        }
        progress_clear();
        if (warn_count) {
            printf("%d driver/validation warnings (counted as a failure)\n", warn_count);
            fail++;
        }
        printf("%s: %d passed, %d failed\n\n", posenc_backend_name(kind), pass, fail);
        failures += fail;
        posenc_context_destroy(&dut);
    }
    posenc_context_destroy(&ref);
    free(cases);
    free(keep);
    if (backends_run == 0) {
        tool_error("verify", "no backend could be run");
        return 1;
    }
    printf("verify: %s\n", failures ? "FAILED" : "all cases passed");
    return failures ? 1 : 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: posenc <command> [options]\n\n"
               "commands:\n"
               "  info     backends and devices found, and what AUTO picks\n"
               "  verify   every op case on every backend against the CPU reference\n"
               "  table    an encoding's vectors / matrices as numbers\n"
               "  heatmap  an encoding as a PNG heat map\n"
               "  decay    RoPE's long-term decay for several scalings (PNG or CSV)\n"
               "  freqs    RoPE's frequency per pair for several scalings (PNG or CSV)\n"
               "  bench    GB/s of every op against the backend's copy ceiling (bench/)\n\n"
               "posenc <command> --help for the options of a command.\n");
}

int main(int argc, char **argv)
{
    /* every command: PoCL's workers pinned one to a core unless the user set
     * POCL_AFFINITY (bench/bench_core.h; 1.4-1.9x on PoCL's decode attention, up to 1.2x on its
     * copy, measured on a two-core machine) */
    (void)bench_pocl_affinity();
    if (argc < 2) {
        fprintf(stderr, "posenc: no command given (info, verify, table, heatmap, decay, freqs, "
                        "bench; try posenc --help)\n");
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("posenc %s\n", posenc_version());
        return 0;
    }
    if (!strcmp(argv[1], "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "verify"))
        return cmd_verify(argc - 1, argv + 1);
    if (!strcmp(argv[1], "table"))
        return cmd_table(argc - 1, argv + 1);
    if (!strcmp(argv[1], "heatmap"))
        return cmd_heatmap(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench"))
        return bench_main(argc - 1, argv + 1, "bench");
    if (!strcmp(argv[1], "decay"))
        return cmd_decay(argc - 1, argv + 1);
    if (!strcmp(argv[1], "freqs"))
        return cmd_freqs(argc - 1, argv + 1);
    fprintf(stderr, "posenc: unknown command '%s' (info, verify, table, heatmap, decay, freqs, "
                    "bench; try posenc --help)\n", argv[1]);
    return 2;
}
