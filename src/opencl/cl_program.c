/*
 * cl_program.c - the OpenCL backend's programs: the kernel sources (embedded, or read
 * from POSENC_CL_KERNEL_DIR), the per-context program cache (pe_cl_get_program, and the
 * program each op variant resolved to last: pe_cl_memo_find / pe_cl_memo_put) and the
 * on-disk program-binary cache that lets a later process skip the compiler.
 */
/* realpath and S_ISVTX (the program-binary cache's trust checks) are XSI */
#if !defined(_WIN32) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700
#endif
#include "backend_opencl.h"
#include "preset.h"
#include "cl_kernels.h"
#include "posenc_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

/* ------------------------------------------------------------------------------------ */
/* Kernel sources and the program cache                                                 */
/* ------------------------------------------------------------------------------------ */

#if !defined(_WIN32)
static int open_regular(const char *path, bool no_links, struct stat *st, const char **why);
#endif

/* Read `name` from `dir` into a malloc'd NUL-terminated string. */
static posenc_status read_source_file(posenc_context *ctx, const char *dir, const char *name,
                                      struct pe_cl_source *out)
{
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return pe_error(ctx, POSENC_ERR_BACKEND, "POSENC_CL_KERNEL_DIR is too long");
#if defined(_WIN32)
    FILE *f = fopen(path, "rb");
    const char *why = NULL;
#else
    /* a FIFO or device there must not block the op: regular files only */
    struct stat st;
    const char *why = NULL;
    const int fd = open_regular(path, false, &st, &why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
#endif
    if (!f)
        return pe_error(ctx, POSENC_ERR_BACKEND, "POSENC_CL_KERNEL_DIR: cannot open %s: %s",
                        path, why ? why : strerror(errno));
    char *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (cap - size < 4096) {
            cap = cap ? cap * 2 : 16384;
            char *grown = realloc(data, cap + 1);
            if (!grown) {
                free(data);
                fclose(f);
                return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory reading %s",
                                path);
            }
            data = grown;
        }
        size_t got = fread(data + size, 1, cap - size, f);
        size += got;
        if (got == 0)
            break;
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(data);
        return pe_error(ctx, POSENC_ERR_BACKEND, "POSENC_CL_KERNEL_DIR: cannot read %s", path);
    }
    data[size] = '\0';
    out->name = name;
    out->data = data;
    out->size = size;
    out->owned = true;
    return POSENC_OK;
}

/* The source of `name` ("common.cl"): embedded, or from POSENC_CL_KERNEL_DIR. Loaded once
 * per context. */
static posenc_status get_source(struct pe_cl_backend *be, const char *name,
                                const struct pe_cl_source **out)
{
    for (int k = 0; k < be->n_sources; k++) {
        if (strcmp(be->sources[k].name, name) == 0) {
            *out = &be->sources[k];
            return POSENC_OK;
        }
    }
    if (be->n_sources >= (int)PE_ARRAY_SIZE(be->sources))
        return pe_error(be->base.ctx, POSENC_ERR_INTERNAL, "opencl: too many kernel sources");
    struct pe_cl_source *src = &be->sources[be->n_sources];
    const char *dir = getenv("POSENC_CL_KERNEL_DIR");
    if (dir && dir[0]) {
        PE_RETURN_IF_ERROR(read_source_file(be->base.ctx, dir, name, src));
        pe_log(be->base.ctx, POSENC_LOG_INFO, "opencl: %s loaded from %s (POSENC_CL_KERNEL_DIR)",
               name, dir);
    } else {
        const struct pe_cl_file *f = pe_cl_find(name);
        if (!f)
            return pe_error(be->base.ctx, POSENC_ERR_INTERNAL,
                            "opencl: kernel source %s is not embedded", name);
        src->name = name;
        src->data = (const char *)f->data;
        src->size = f->size;
        src->owned = false;
    }
    be->n_sources++;
    *out = src;
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* The on-disk program-binary cache                                                     */
/* ------------------------------------------------------------------------------------ */

/*
 * A program built from source is saved (clGetProgramInfo(CL_PROGRAM_BINARIES)) to
 * <dir>/<key>.clbin, and a later process with the same device, driver, source and options
 * loads it with clCreateProgramWithBinary instead of running the compiler. <dir> is
 * $POSENC_CACHE_DIR (empty: no cache), else $XDG_CACHE_HOME/posenc, else ~/.cache/posenc;
 * on PoCL only where POSENC_CACHE_DIR names it (driver_caches_itself).
 *
 * The key is a 128-bit hash (two FNV-1a 64) of the identity: a format tag, the platform's
 * and the device's name, vendor and version strings, the driver version, the build
 * options and a hash of the exact source. The file holds
 *     "PECLBIN2", u32 identity length, the identity, u64 binary size,
 *     u64 hash of (identity, binary), the binary
 * and is used only if every field matches: the binary is bound to the identity it was
 * stored with, so an entry whose binary was built for another source, options or device
 * (another entry's binary under this identity) is ignored, like a corrupt, truncated or
 * foreign file (the program is built from source and the file replaced). Files are
 * written to a temporary name (created 0600, exclusively) and renamed, so a reader never
 * sees half a file.
 *
 * Trust. A loaded binary is native code on some drivers (PoCL), so the cache is trusted
 * only as far as the user's own files, as ssh treats ~/.ssh: the folder (created 0700)
 * is used only when it is a directory owned by the effective user and not writable by
 * group or others, and every folder above it is owned by that user or root and not
 * writable by others unless sticky (/tmp); otherwise the cache is off for the context
 * (one POSENC_LOG_WARN line). An entry is read only when it is a regular file (not a
 * symbolic link, FIFO or device), owned by the user and not group/world-writable; it is
 * opened with O_NONBLOCK, so nothing at an entry's path can make the op wait. Other
 * cache failures are silent (a DEBUG log line): the cache only ever saves time. These
 * files are the only ones the library opens, apart from POSENC_CL_KERNEL_DIR.
 */
#define PE_CL_CACHE_MAGIC "PECLBIN2"
#define PE_CL_CACHE_MAX_BINARY (256u << 20)

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Whether the default cache folder is skipped for be's driver: PoCL keeps a kernel cache
 * of its own ($XDG_CACHE_HOME/pocl/kcache, unless POCL_KERNEL_CACHE=0), and asking it for
 * a program's binary (CL_PROGRAM_BINARIES) makes it compile every kernel of the program
 * for an unknown work-group size, kernels the op never launches included. Measured with
 * both caches empty (tests/test_sinusoidal --backend opencl, PoCL 3.1, 2 cores): 129 s
 * with posenc's cache, 44 s without; warm, 4.0 s against 6.6 s (PoCL then rebuilds from
 * its own cache). A POSENC_CACHE_DIR set to a folder still turns posenc's cache on. */
static bool driver_caches_itself(const struct pe_cl_backend *be)
{
    if (!pe_cl_is_pocl(be))
        return false;
    const char *kc = getenv("POCL_KERNEL_CACHE");
    return !(kc && strcmp(kc, "0") == 0);
}

/* Resolve the cache folder once per backend (be->cache_dir, "" = off). */
void pe_cl_cache_init(struct pe_cl_backend *be)
{
    be->cache_dir[0] = '\0';
#if defined(_WIN32)
    return;
#else
    const char *env = getenv("POSENC_CACHE_DIR");
    int n = -1;
    if (env) {
        if (env[0])
            n = snprintf(be->cache_dir, sizeof(be->cache_dir), "%s", env);
    } else if (driver_caches_itself(be)) {
        pe_log(be->base.ctx, POSENC_LOG_DEBUG,
               "opencl: program-binary cache off: PoCL caches its own builds "
               "(POSENC_CACHE_DIR=dir turns it on)");
        return;
    } else if ((env = getenv("XDG_CACHE_HOME")) != NULL && env[0] == '/') {
        n = snprintf(be->cache_dir, sizeof(be->cache_dir), "%s/posenc", env);
    } else if ((env = getenv("HOME")) != NULL && env[0]) {
        n = snprintf(be->cache_dir, sizeof(be->cache_dir), "%s/.cache/posenc", env);
    }
    if (n < 0 || (size_t)n >= sizeof(be->cache_dir) - 48)
        be->cache_dir[0] = '\0'; /* unset, or too long for <dir>/<key>.clbin */
    pe_log(be->base.ctx, POSENC_LOG_DEBUG, "opencl: program-binary cache %s%s",
           be->cache_dir[0] ? "in " : "off", be->cache_dir);
#endif
}

/* The identity text of a program and the path of its cache file. */
static void cache_identity(const struct pe_cl_backend *be, const struct pe_cl_source *common,
                           const struct pe_cl_source *op, const char *options, char *id,
                           size_t id_size, char *path, size_t path_size)
{
    uint64_t src = fnv1a(0xcbf29ce484222325ull, common->data, common->size);
    src = fnv1a(src, op->name, strlen(op->name) + 1);
    src = fnv1a(src, op->data, op->size);
    snprintf(id, id_size, "posenc-clbin-2|%s|%s|%s|%s|%s|%s|%s|%s|%016llx", be->platform_id,
             be->info.device_name, be->info.vendor, be->info.api_version,
             be->info.driver_version, POSENC_VERSION_STRING, options, op->name,
             (unsigned long long)src);
    const uint64_t k1 = fnv1a(0xcbf29ce484222325ull, id, strlen(id));
    const uint64_t k2 = fnv1a(0x6c62272e07bb0142ull, id, strlen(id));
    snprintf(path, path_size, "%s/%016llx%016llx.clbin", be->cache_dir, (unsigned long long)k1,
             (unsigned long long)k2);
}

#if !defined(_WIN32)
/* mkdir -p for the cache folder (0700 for what it creates). */
static bool make_dirs(const char *dir)
{
    char buf[PE_CL_PATH_MAX];
    if (strlen(dir) >= sizeof(buf))
        return false;
    strcpy(buf, dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    return mkdir(buf, 0700) == 0 || errno == EEXIST;
}
#endif

#if !defined(_WIN32)
/* Open `path` for reading without ever blocking (O_NONBLOCK: a FIFO or device at the path
 * does not wait for a writer) and only if it is a regular file; symbolic links are not
 * followed when `no_links`. Returns the descriptor, or -1 with *why set (NULL: no file). */
static int open_regular(const char *path, bool no_links, struct stat *st, const char **why)
{
    *why = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (no_links ? O_NOFOLLOW : 0));
    if (fd < 0) {
        if (errno != ENOENT)
            *why = errno == ELOOP ? "a symbolic link" : strerror(errno);
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        *why = "not a regular file";
        close(fd);
        return -1;
    }
    return fd;
}

/* The cache entry at `path`, read whole into a malloc'd block when it is a regular file
 * of this user that only this user can write, at most `limit` bytes; else NULL (*why
 * says why, NULL when there is no file). */
static unsigned char *read_cache_file(const char *path, size_t limit, size_t *out_size,
                                      const char **why)
{
    struct stat st;
    int fd = open_regular(path, true, &st, why);
    if (fd < 0)
        return NULL;
    unsigned char *data = NULL;
    if (st.st_uid != geteuid())
        *why = "owned by another user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        *why = "writable by group or others";
    else if (st.st_size <= 0 || (uint64_t)st.st_size > (uint64_t)limit)
        *why = "of an impossible size";
    else if (!(data = malloc((size_t)st.st_size)))
        *why = "out of host memory";
    size_t size = 0;
    while (!*why && size < (size_t)st.st_size) {
        ssize_t got = read(fd, data + size, (size_t)st.st_size - size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            *why = got < 0 ? strerror(errno) : "truncated while read";
        else
            size += (size_t)got;
    }
    close(fd);
    if (*why) {
        free(data);
        return NULL;
    }
    *out_size = size;
    return data;
}

/* Is the cache folder private to this user (see "Trust" above)? Creates it (0700) first
 * with `create`. An untrusted folder is reported once per context at WARN. */
static bool cache_dir_trusted(struct pe_cl_backend *be, bool create)
{
    posenc_context *ctx = be->base.ctx;
    if (create && !make_dirs(be->cache_dir)) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: cannot create the cache folder %s: %s",
               be->cache_dir, strerror(errno));
        return false;
    }
    char real[PATH_MAX];
    if (!realpath(be->cache_dir, real))
        return false; /* not there (yet): nothing to load */
    const uid_t me = geteuid();
    const char *why = NULL;
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
        why = "is not a folder";
    else if (st.st_uid != me)
        why = "is owned by another user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        why = "is writable by group or others";
    /* every folder above: this user's or root's, and not open to others unless sticky */
    for (char *slash = strrchr(real, '/'); !why && slash; slash = strrchr(real, '/')) {
        *slash = '\0';
        const char *up = real[0] ? real : "/";
        if (stat(up, &st) != 0)
            why = "has a folder above it that cannot be examined";
        else if ((st.st_uid != me && st.st_uid != 0) ||
                 ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)))
            why = "is inside a folder that other users can change";
        if (!real[0])
            break;
    }
    if (why && !be->cache_warned) {
        be->cache_warned = true;
        pe_log(ctx, POSENC_LOG_WARN,
               "opencl: program-binary cache %s %s: not used (it must be private to this user, "
               "like ~/.ssh)",
               be->cache_dir, why);
    }
    return why == NULL;
}
#endif

/* A program from the cache file, built (loaded) for the device; NULL when there is none
 * or it does not match. */
static cl_program cache_load(struct pe_cl_backend *be, const char *path, const char *id,
                             const char *options)
{
#if defined(_WIN32)
    (void)be, (void)path, (void)id, (void)options;
    return NULL;
#else
    posenc_context *ctx = be->base.ctx;
    if (!cache_dir_trusted(be, false))
        return NULL;
    size_t size = 0;
    const char *why = NULL;
    unsigned char *data =
        read_cache_file(path, PE_CL_CACHE_MAX_BINARY + PE_CL_ID_MAX + 64, &size, &why);
    if (!data) {
        if (why)
            pe_log(ctx, POSENC_LOG_DEBUG, "opencl: ignoring cache file %s: %s", path, why);
        return NULL;
    }
    const size_t id_len = strlen(id);
    const size_t head = 8 + 4 + id_len + 16;
    uint32_t stored_len = 0;
    uint64_t bin_size = 0, bin_hash = 0;
    if (size < head || memcmp(data, PE_CL_CACHE_MAGIC, 8) != 0) {
        why = "not a posenc cache file";
    } else {
        memcpy(&stored_len, data + 8, 4);
        memcpy(&bin_size, data + 12 + id_len, 8);
        memcpy(&bin_hash, data + 20 + id_len, 8);
        if (stored_len != id_len || memcmp(data + 12, id, id_len) != 0)
            why = "another device, driver, source or options";
        else if (bin_size == 0 || bin_size != size - head)
            why = "truncated";
        else if (fnv1a(fnv1a(0xcbf29ce484222325ull, id, id_len), data + head,
                       (size_t)bin_size) != bin_hash)
            why = "corrupt, or a binary stored for another identity";
    }
    if (why) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: ignoring cache file %s: %s", path, why);
        free(data);
        return NULL;
    }
    const unsigned char *bin = data + head;
    const size_t len = (size_t)bin_size;
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    cl_program prog =
        clCreateProgramWithBinary(be->context, 1, &be->device, &len, &bin, &status, &err);
    free(data);
    if (!prog || err != CL_SUCCESS || status != CL_SUCCESS) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: cache file %s rejected by the driver: %d / %d",
               path, (int)err, (int)status);
        if (prog)
            clReleaseProgram(prog);
        return NULL;
    }
    err = clBuildProgram(prog, 1, &be->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: cache file %s: clBuildProgram failed: %d (%s)",
               path, (int)err, pe_cl_err_name(err));
        clReleaseProgram(prog);
        return NULL;
    }
    return prog;
#endif
}


/* Save a program built from source to its cache file (temporary file + rename). */
static void cache_store(struct pe_cl_backend *be, cl_program prog, const char *path,
                        const char *id)
{
#if defined(_WIN32)
    (void)be, (void)prog, (void)path, (void)id;
#else
    posenc_context *ctx = be->base.ctx;
    cl_uint n_dev = 0;
    size_t bin_size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof(n_dev), &n_dev, NULL) !=
            CL_SUCCESS ||
        n_dev != 1 ||
        clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof(bin_size), &bin_size, NULL) !=
            CL_SUCCESS ||
        bin_size == 0 || bin_size > PE_CL_CACHE_MAX_BINARY)
        return;
    unsigned char *bin = malloc(bin_size);
    if (!bin)
        return;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof(bins), bins, NULL) != CL_SUCCESS) {
        free(bin);
        return;
    }
    if (!cache_dir_trusted(be, true)) {
        free(bin);
        return;
    }
    /* unique per process (pid), context (be) and write (cache_seq) */
    char tmp[PE_CL_PATH_MAX + 160];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%p.%u", path, (long)getpid(), (void *)be,
             be->cache_seq++);
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    bool ok = f != NULL;
    if (ok) {
        const uint32_t id_len = (uint32_t)strlen(id);
        const uint64_t size64 = bin_size;
        const uint64_t hash = fnv1a(fnv1a(0xcbf29ce484222325ull, id, id_len), bin, bin_size);
        ok = fwrite(PE_CL_CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&id_len, 4, 1, f) == 1 &&
             fwrite(id, 1, id_len, f) == id_len && fwrite(&size64, 8, 1, f) == 1 &&
             fwrite(&hash, 8, 1, f) == 1 && fwrite(bin, 1, bin_size, f) == bin_size;
        ok = fclose(f) == 0 && ok;
    }
    if (ok)
        ok = rename(tmp, path) == 0;
    if (!ok) {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: cannot write the cache file %s: %s", path,
               strerror(errno));
        unlink(tmp);
    } else {
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: saved %zu-byte program binary to %s", bin_size,
               path);
    }
    free(bin);
#endif
}

/* The kernel `kernel_name` of common.cl + `file`, built with `defines` (cached). */
/* Test-only (tests/test_faults.c): a smaller program cache than PE_CL_MAX_PROGRAMS, so
 * that a test can fill it (0: the full size). Hidden, in no header. */
int pe_cl_program_cap;

posenc_status pe_cl_get_program(struct pe_cl_backend *be, const char *file,
                                const char *kernel_name, const char *defines,
                                struct pe_cl_program **out)
{
    posenc_context *ctx = be->base.ctx;
    for (int k = 0; k < be->n_programs; k++) {
        struct pe_cl_program *p = &be->programs[k];
        if (strcmp(p->file, file) == 0 && strcmp(p->kernel_name, kernel_name) == 0 &&
            strcmp(p->options, defines) == 0) {
            if (be->pinning)
                p->pin_gen = be->pin_gen;
            *out = p;
            return POSENC_OK;
        }
    }
    if (strlen(defines) >= PE_CL_OPTS_MAX)
        return pe_error(ctx, POSENC_ERR_INTERNAL, "opencl: build options too long");
    if (pe_fault_build())
        return pe_error(ctx, POSENC_ERR_BACKEND, "clBuildProgram(%s, \"%s\") failed "
                        "(injected fault)", file, defines);

    const struct pe_cl_source *common, *op;
    PE_RETURN_IF_ERROR(get_source(be, "common.cl", &common));
    PE_RETURN_IF_ERROR(get_source(be, file, &op));

    char options[PE_CL_OPTS_MAX + 32];
    /* -w: some compilers (PoCL's clang) print warnings straight to the application's
     * stderr, e.g. about the ABI of 512-bit vector types on AVX2 hosts */
    snprintf(options, sizeof(options), "-cl-std=CL1.2 -w %s", defines);
    cl_int err;
    cl_program prog = NULL;
    bool from_binary = false;
    /* Another kernel of the same source and options already built: share its program. */
    for (int k = 0; k < be->n_programs && !prog; k++) {
        struct pe_cl_program *q = &be->programs[k];
        if (strcmp(q->file, file) == 0 && strcmp(q->options, defines) == 0 &&
            clRetainProgram(q->program) == CL_SUCCESS)
            prog = q->program;
    }
    /* The on-disk binary cache: a program built by an earlier process. */
    char cache_path[PE_CL_PATH_MAX + 64] = "";
    char cache_id[PE_CL_ID_MAX] = "";
    if (!prog && be->cache_dir[0]) {
        cache_identity(be, common, op, options, cache_id, sizeof(cache_id), cache_path,
                       sizeof(cache_path));
        prog = cache_load(be, cache_path, cache_id, options);
        from_binary = prog != NULL;
    }
    if (prog) {
        err = CL_SUCCESS;
        goto built;
    }

    const char *strings[2] = {common->data, op->data};
    const size_t lengths[2] = {common->size, op->size};
    prog = clCreateProgramWithSource(be->context, 2, strings, lengths, &err);
    if (!prog || err != CL_SUCCESS)
        return pe_cl_fail(ctx, "clCreateProgramWithSource", err);

    err = clBuildProgram(prog, 1, &be->device, options, NULL, NULL);
    if (err == CL_SUCCESS && cache_path[0])
        cache_store(be, prog, cache_path, cache_id);
    if (err != CL_SUCCESS) {
        char log[PE_CL_BUILD_LOG_SHOWN + 1] = "";
        size_t n = 0;
        if (clGetProgramBuildInfo(prog, be->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) ==
                CL_SUCCESS &&
            n > 0) {
            char *full = malloc(n + 1);
            if (full && clGetProgramBuildInfo(prog, be->device, CL_PROGRAM_BUILD_LOG, n, full,
                                              NULL) == CL_SUCCESS) {
                full[n] = '\0';
                pe_log(ctx, POSENC_LOG_DEBUG, "opencl: build log of %s [%s]:\n%s", file,
                       options, full);
                pe_strlcpy(log, full, sizeof(log));
                for (size_t k = strlen(log); k > 0 && (log[k - 1] == '\n' || log[k - 1] == ' ');)
                    log[--k] = '\0';
            }
            free(full);
        }
        clReleaseProgram(prog);
        return pe_error(ctx, POSENC_ERR_BACKEND, "clBuildProgram(%s, \"%s\") failed: %d (%s): %s",
                        file, options, (int)err, pe_cl_err_name(err), log);
    }
built:;
    cl_kernel kernel = clCreateKernel(prog, kernel_name, &err);
    if (!kernel || err != CL_SUCCESS) {
        clReleaseProgram(prog);
        return pe_cl_fail(ctx, "clCreateKernel", err);
    }
    size_t wg = 0;
    err = clGetKernelWorkGroupInfo(kernel, be->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg,
                                   NULL);
    if (err != CL_SUCCESS) {
        clReleaseKernel(kernel);
        clReleaseProgram(prog);
        return pe_cl_fail(ctx, "clGetKernelWorkGroupInfo", err);
    }
    /* The local memory the kernel declares, against what the device (or its
     * POSENC_DEVICE_PRESET) offers: a kernel that does not fit is refused here, before any
     * launch, instead of failing to enqueue on a smaller device. */
    cl_ulong lm = 0;
    if (clGetKernelWorkGroupInfo(kernel, be->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(lm), &lm,
                                 NULL) == CL_SUCCESS &&
        be->local_mem && lm > be->local_mem) {
        clReleaseKernel(kernel);
        clReleaseProgram(prog);
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "opencl: kernel %s uses %llu bytes of local memory, more than this "
                        "device's CL_DEVICE_LOCAL_MEM_SIZE = %llu%s",
                        kernel_name, (unsigned long long)lm, (unsigned long long)be->local_mem,
                        ctx->preset ? " (lowered by " PE_PRESET_ENV ")" : "");
    }

    /* A full cache (many dtype combinations) recycles its slots in turn: releasing a
     * kernel that is still enqueued is fine, OpenCL keeps it until the command is done. */
    struct pe_cl_program *p;
    const int cap = pe_cl_program_cap > 0 && pe_cl_program_cap < PE_CL_MAX_PROGRAMS
                        ? pe_cl_program_cap
                        : PE_CL_MAX_PROGRAMS;
    if (be->n_programs < cap) {
        p = &be->programs[be->n_programs++];
    } else {
        /* round robin, passing over the programs a pinning call uses (if all are, the
         * next one goes anyway) */
        int k = be->evict_next % cap;
        for (int i = 0; i < cap && be->pinning; i++) {
            const int j = (be->evict_next + i) % cap;
            if (be->programs[j].pin_gen != be->pin_gen) {
                k = j;
                break;
            }
        }
        p = &be->programs[k];
        be->evict_next = (k + 1) % cap;
        pe_log(ctx, POSENC_LOG_DEBUG, "opencl: program cache full, dropping %s:%s [%s]",
               p->file, p->kernel_name, p->options);
        clReleaseKernel(p->kernel);
        clReleaseProgram(p->program);
    }
    p->file = file;
    p->kernel_name = kernel_name;
    pe_strlcpy(p->options, defines, sizeof(p->options));
    p->program = prog;
    p->kernel = kernel;
    p->kernel_wg_size = wg ? wg : 1;
    p->serial = ++be->next_serial;
    p->pin_gen = be->pinning ? be->pin_gen : 0;
    p->n_args_set = 0;
    pe_log(ctx, POSENC_LOG_INFO, "opencl: %s %s:%s [%s]",
           from_binary ? "loaded from the binary cache" : "built", file, kernel_name, options);
    *out = p;
    return POSENC_OK;
}

/* The program remembered for `key` (an op's variant bits, nonzero), or NULL. */
struct pe_cl_program *pe_cl_memo_find(struct pe_cl_backend *be, uint64_t key)
{
    for (size_t k = 0; k < PE_ARRAY_SIZE(be->memo); k++) {
        const struct pe_cl_memo *m = &be->memo[k];
        if (m->key == key)
            return m->p->serial == m->serial ? m->p : NULL;
    }
    return NULL;
}

void pe_cl_memo_put(struct pe_cl_backend *be, uint64_t key, struct pe_cl_program *p)
{
    for (size_t k = 0; k < PE_ARRAY_SIZE(be->memo); k++)
        if (be->memo[k].key == key) {
            be->memo[k].p = p;
            be->memo[k].serial = p->serial;
            return;
        }
    struct pe_cl_memo *m = &be->memo[be->memo_next];
    be->memo_next = (be->memo_next + 1) % (int)PE_ARRAY_SIZE(be->memo);
    m->key = key;
    m->p = p;
    m->serial = p->serial;
}
