/*
 * cl_loader.h - the OpenCL ICD loader and CLBlast, opened at run time instead of linked
 * (issue #18): libposenc has no NEEDED entry for libOpenCL or libclblast, so it starts on
 * a machine without them and reports the OpenCL backend as unavailable there.
 *
 * How call sites stay unchanged. The OpenCL code of src/opencl includes this header (via
 * backend_opencl.h) instead of <CL/cl.h>. It includes <CL/cl.h> itself (for the types and
 * the prototypes, which are never called), keeps one process-wide table pe_cl_fn with a
 * pointer for every OpenCL 1.2 API function (PE_CL_COMMANDS, 81 functions: 1.0, 1.1 and
 * 1.2, without the 1.1 functions 1.2 deprecates) and then #defines each function's name
 * to its table entry:
 *
 *     #define clEnqueueNDRangeKernel (pe_cl_fn.clEnqueueNDRangeKernel)
 *
 * so `clEnqueueNDRangeKernel(q, k, ...)` compiles to a call through the table and never
 * references the library's symbol. New code calls OpenCL functions by their usual names
 * and compiles unchanged; a function outside OpenCL 1.2 (an extension, a 2.0 call) must
 * be added to PE_CL_COMMANDS and given its #define below, or fetched with
 * clGetExtensionFunctionAddressForPlatform. One table for the process is enough: the ICD
 * loader dispatches every call through the object's own platform, so the same entry
 * points serve every context, posenc's and the application's (host-owned) alike.
 * CLBlast's C entry points (PE_CLBLAST_COMMANDS) work the same way through pe_clblast_fn.
 *
 * When. pe_cl_load() opens the ICD loader on the OpenCL backend's first use in the process
 * (posenc_backend_device_count, context creation, AUTO's probe): POSENC_OPENCL_LIBRARY (a
 * path or a name) when set, else libOpenCL.so.1, libOpenCL.so, then the Android vendor
 * paths. pe_clblast_load() opens CLBlast on the first attention call that could use it:
 * POSENC_CLBLAST_LIBRARY, else libclblast.so.1, libclblast.so; without it attention uses
 * posenc's own GEMM kernels. Each is tried once per process (pthread_once; the result,
 * failure included, is kept) and never closed (src/dynload.h). The table is written only
 * inside that pthread_once and read after it, so no call races with the writes.
 *
 * Every function of the table must resolve (a library missing one is reported as not
 * loadable, naming it), so a call through the table never meets a NULL pointer.
 */
#ifndef POSENC_CL_LOADER_H
#define POSENC_CL_LOADER_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "posenc.h"
#include "posenc_config.h"

#if POSENC_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#include <stdbool.h>
#include <stddef.h>

/* Every OpenCL 1.2 API function, in <CL/cl.h>'s order. */
#define PE_CL_COMMANDS(X) \
    X(clGetPlatformIDs) \
    X(clGetPlatformInfo) \
    X(clGetDeviceIDs) \
    X(clGetDeviceInfo) \
    X(clCreateSubDevices) \
    X(clRetainDevice) \
    X(clReleaseDevice) \
    X(clCreateContext) \
    X(clCreateContextFromType) \
    X(clRetainContext) \
    X(clReleaseContext) \
    X(clGetContextInfo) \
    X(clRetainCommandQueue) \
    X(clReleaseCommandQueue) \
    X(clGetCommandQueueInfo) \
    X(clCreateBuffer) \
    X(clCreateSubBuffer) \
    X(clCreateImage) \
    X(clRetainMemObject) \
    X(clReleaseMemObject) \
    X(clGetSupportedImageFormats) \
    X(clGetMemObjectInfo) \
    X(clGetImageInfo) \
    X(clSetMemObjectDestructorCallback) \
    X(clRetainSampler) \
    X(clReleaseSampler) \
    X(clGetSamplerInfo) \
    X(clCreateProgramWithSource) \
    X(clCreateProgramWithBinary) \
    X(clCreateProgramWithBuiltInKernels) \
    X(clRetainProgram) \
    X(clReleaseProgram) \
    X(clBuildProgram) \
    X(clCompileProgram) \
    X(clLinkProgram) \
    X(clUnloadPlatformCompiler) \
    X(clGetProgramInfo) \
    X(clGetProgramBuildInfo) \
    X(clCreateKernel) \
    X(clCreateKernelsInProgram) \
    X(clRetainKernel) \
    X(clReleaseKernel) \
    X(clSetKernelArg) \
    X(clGetKernelInfo) \
    X(clGetKernelArgInfo) \
    X(clGetKernelWorkGroupInfo) \
    X(clWaitForEvents) \
    X(clGetEventInfo) \
    X(clCreateUserEvent) \
    X(clRetainEvent) \
    X(clReleaseEvent) \
    X(clSetUserEventStatus) \
    X(clSetEventCallback) \
    X(clGetEventProfilingInfo) \
    X(clFlush) \
    X(clFinish) \
    X(clEnqueueReadBuffer) \
    X(clEnqueueReadBufferRect) \
    X(clEnqueueWriteBuffer) \
    X(clEnqueueWriteBufferRect) \
    X(clEnqueueFillBuffer) \
    X(clEnqueueCopyBuffer) \
    X(clEnqueueCopyBufferRect) \
    X(clEnqueueReadImage) \
    X(clEnqueueWriteImage) \
    X(clEnqueueFillImage) \
    X(clEnqueueCopyImage) \
    X(clEnqueueCopyImageToBuffer) \
    X(clEnqueueCopyBufferToImage) \
    X(clEnqueueMapBuffer) \
    X(clEnqueueMapImage) \
    X(clEnqueueUnmapMemObject) \
    X(clEnqueueMigrateMemObjects) \
    X(clEnqueueNDRangeKernel) \
    X(clEnqueueNativeKernel) \
    X(clEnqueueMarkerWithWaitList) \
    X(clEnqueueBarrierWithWaitList) \
    X(clGetExtensionFunctionAddressForPlatform) \
    X(clCreateCommandQueue) \
    X(clCreateSampler) \
    X(clEnqueueTask)

/* The CLBlast C entry points posenc may call (single-precision GEMMs; see
 * src/opencl/ops_attention.c for why never the half-precision ones). */
#define PE_CLBLAST_COMMANDS(X) \
    X(CLBlastSgemm) \
    X(CLBlastSgemmBatched) \
    X(CLBlastSgemmStridedBatched) \
    X(CLBlastClearCache)

/* The declared prototypes give each pointer its exact type (calling convention and
 * attributes included). */
#define PE_CL_MEMBER(name) __typeof__(&name) name;
struct pe_cl_funcs {
    PE_CL_COMMANDS(PE_CL_MEMBER)
};
extern struct pe_cl_funcs pe_cl_fn;
#if POSENC_HAVE_CLBLAST
struct pe_clblast_funcs {
    PE_CLBLAST_COMMANDS(PE_CL_MEMBER)
};
extern struct pe_clblast_funcs pe_clblast_fn;
#endif
#undef PE_CL_MEMBER

/* The environment variables naming another file for each library (docs/loading.md). */
#define PE_CL_LIBRARY_ENV "POSENC_OPENCL_LIBRARY"
#define PE_CLBLAST_LIBRARY_ENV "POSENC_CLBLAST_LIBRARY"

/*
 * Open the OpenCL ICD loader and fill pe_cl_fn, once per process (later calls return the
 * first one's result). Returns POSENC_OK, or POSENC_ERR_UNAVAILABLE with `why` (may be
 * NULL) naming the files tried and POSENC_OPENCL_LIBRARY.
 */
posenc_status pe_cl_load(char *why, size_t why_size);

/*
 * Open CLBlast and fill pe_clblast_fn, once per process; needs pe_cl_load() to have
 * succeeded. Returns whether it is usable; when not, *why (if not NULL) says what was
 * looked for (a static string). Always false when posenc was built without CLBlast's
 * header.
 */
bool pe_clblast_load(const char **why);

/* The name of every function of the tables, compiled to its table entry (see above).
 * src/opencl/cl_loader.c defines PE_CL_LOADER_NO_MACROS to fill the tables by name. */
#ifndef PE_CL_LOADER_NO_MACROS
#define clGetPlatformIDs (pe_cl_fn.clGetPlatformIDs)
#define clGetPlatformInfo (pe_cl_fn.clGetPlatformInfo)
#define clGetDeviceIDs (pe_cl_fn.clGetDeviceIDs)
#define clGetDeviceInfo (pe_cl_fn.clGetDeviceInfo)
#define clCreateSubDevices (pe_cl_fn.clCreateSubDevices)
#define clRetainDevice (pe_cl_fn.clRetainDevice)
#define clReleaseDevice (pe_cl_fn.clReleaseDevice)
#define clCreateContext (pe_cl_fn.clCreateContext)
#define clCreateContextFromType (pe_cl_fn.clCreateContextFromType)
#define clRetainContext (pe_cl_fn.clRetainContext)
#define clReleaseContext (pe_cl_fn.clReleaseContext)
#define clGetContextInfo (pe_cl_fn.clGetContextInfo)
#define clRetainCommandQueue (pe_cl_fn.clRetainCommandQueue)
#define clReleaseCommandQueue (pe_cl_fn.clReleaseCommandQueue)
#define clGetCommandQueueInfo (pe_cl_fn.clGetCommandQueueInfo)
#define clCreateBuffer (pe_cl_fn.clCreateBuffer)
#define clCreateSubBuffer (pe_cl_fn.clCreateSubBuffer)
#define clCreateImage (pe_cl_fn.clCreateImage)
#define clRetainMemObject (pe_cl_fn.clRetainMemObject)
#define clReleaseMemObject (pe_cl_fn.clReleaseMemObject)
#define clGetSupportedImageFormats (pe_cl_fn.clGetSupportedImageFormats)
#define clGetMemObjectInfo (pe_cl_fn.clGetMemObjectInfo)
#define clGetImageInfo (pe_cl_fn.clGetImageInfo)
#define clSetMemObjectDestructorCallback (pe_cl_fn.clSetMemObjectDestructorCallback)
#define clRetainSampler (pe_cl_fn.clRetainSampler)
#define clReleaseSampler (pe_cl_fn.clReleaseSampler)
#define clGetSamplerInfo (pe_cl_fn.clGetSamplerInfo)
#define clCreateProgramWithSource (pe_cl_fn.clCreateProgramWithSource)
#define clCreateProgramWithBinary (pe_cl_fn.clCreateProgramWithBinary)
#define clCreateProgramWithBuiltInKernels (pe_cl_fn.clCreateProgramWithBuiltInKernels)
#define clRetainProgram (pe_cl_fn.clRetainProgram)
#define clReleaseProgram (pe_cl_fn.clReleaseProgram)
#define clBuildProgram (pe_cl_fn.clBuildProgram)
#define clCompileProgram (pe_cl_fn.clCompileProgram)
#define clLinkProgram (pe_cl_fn.clLinkProgram)
#define clUnloadPlatformCompiler (pe_cl_fn.clUnloadPlatformCompiler)
#define clGetProgramInfo (pe_cl_fn.clGetProgramInfo)
#define clGetProgramBuildInfo (pe_cl_fn.clGetProgramBuildInfo)
#define clCreateKernel (pe_cl_fn.clCreateKernel)
#define clCreateKernelsInProgram (pe_cl_fn.clCreateKernelsInProgram)
#define clRetainKernel (pe_cl_fn.clRetainKernel)
#define clReleaseKernel (pe_cl_fn.clReleaseKernel)
#define clSetKernelArg (pe_cl_fn.clSetKernelArg)
#define clGetKernelInfo (pe_cl_fn.clGetKernelInfo)
#define clGetKernelArgInfo (pe_cl_fn.clGetKernelArgInfo)
#define clGetKernelWorkGroupInfo (pe_cl_fn.clGetKernelWorkGroupInfo)
#define clWaitForEvents (pe_cl_fn.clWaitForEvents)
#define clGetEventInfo (pe_cl_fn.clGetEventInfo)
#define clCreateUserEvent (pe_cl_fn.clCreateUserEvent)
#define clRetainEvent (pe_cl_fn.clRetainEvent)
#define clReleaseEvent (pe_cl_fn.clReleaseEvent)
#define clSetUserEventStatus (pe_cl_fn.clSetUserEventStatus)
#define clSetEventCallback (pe_cl_fn.clSetEventCallback)
#define clGetEventProfilingInfo (pe_cl_fn.clGetEventProfilingInfo)
#define clFlush (pe_cl_fn.clFlush)
#define clFinish (pe_cl_fn.clFinish)
#define clEnqueueReadBuffer (pe_cl_fn.clEnqueueReadBuffer)
#define clEnqueueReadBufferRect (pe_cl_fn.clEnqueueReadBufferRect)
#define clEnqueueWriteBuffer (pe_cl_fn.clEnqueueWriteBuffer)
#define clEnqueueWriteBufferRect (pe_cl_fn.clEnqueueWriteBufferRect)
#define clEnqueueFillBuffer (pe_cl_fn.clEnqueueFillBuffer)
#define clEnqueueCopyBuffer (pe_cl_fn.clEnqueueCopyBuffer)
#define clEnqueueCopyBufferRect (pe_cl_fn.clEnqueueCopyBufferRect)
#define clEnqueueReadImage (pe_cl_fn.clEnqueueReadImage)
#define clEnqueueWriteImage (pe_cl_fn.clEnqueueWriteImage)
#define clEnqueueFillImage (pe_cl_fn.clEnqueueFillImage)
#define clEnqueueCopyImage (pe_cl_fn.clEnqueueCopyImage)
#define clEnqueueCopyImageToBuffer (pe_cl_fn.clEnqueueCopyImageToBuffer)
#define clEnqueueCopyBufferToImage (pe_cl_fn.clEnqueueCopyBufferToImage)
#define clEnqueueMapBuffer (pe_cl_fn.clEnqueueMapBuffer)
#define clEnqueueMapImage (pe_cl_fn.clEnqueueMapImage)
#define clEnqueueUnmapMemObject (pe_cl_fn.clEnqueueUnmapMemObject)
#define clEnqueueMigrateMemObjects (pe_cl_fn.clEnqueueMigrateMemObjects)
#define clEnqueueNDRangeKernel (pe_cl_fn.clEnqueueNDRangeKernel)
#define clEnqueueNativeKernel (pe_cl_fn.clEnqueueNativeKernel)
#define clEnqueueMarkerWithWaitList (pe_cl_fn.clEnqueueMarkerWithWaitList)
#define clEnqueueBarrierWithWaitList (pe_cl_fn.clEnqueueBarrierWithWaitList)
#define clGetExtensionFunctionAddressForPlatform (pe_cl_fn.clGetExtensionFunctionAddressForPlatform)
#define clCreateCommandQueue (pe_cl_fn.clCreateCommandQueue)
#define clCreateSampler (pe_cl_fn.clCreateSampler)
#define clEnqueueTask (pe_cl_fn.clEnqueueTask)
#if POSENC_HAVE_CLBLAST
#define CLBlastSgemm (pe_clblast_fn.CLBlastSgemm)
#define CLBlastSgemmBatched (pe_clblast_fn.CLBlastSgemmBatched)
#define CLBlastSgemmStridedBatched (pe_clblast_fn.CLBlastSgemmStridedBatched)
#define CLBlastClearCache (pe_clblast_fn.CLBlastClearCache)
#endif
#endif /* PE_CL_LOADER_NO_MACROS */

#endif
