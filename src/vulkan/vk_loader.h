/*
 * vk_loader.h - the Vulkan loader opened at run time instead of linked (issue #18), and
 * the Vulkan function tables every call of src/vulkan goes through. libposenc has no
 * NEEDED entry for libvulkan: it starts on a machine without Vulkan and reports the
 * backend as unavailable there. Written for posenc after the way volk loads Vulkan (no
 * code taken from it).
 *
 * How call sites stay unchanged. Every file of src/vulkan includes this header (through
 * vk_internal.h) instead of <vulkan/vulkan.h>. It includes <vulkan/vulkan.h> with
 * VK_NO_PROTOTYPES (types and PFN_ typedefs only: a call that does not go through a
 * table does not compile) and then #defines the name of every Vulkan 1.0 and 1.1 command
 * to its table entry:
 *
 *   global commands (vkCreateInstance, vkEnumerateInstance*, vkGetInstanceProcAddr):
 *       #define vkCreateInstance (pe_vk_global.vkCreateInstance)
 *     one process-wide table, from the libvulkan posenc opened (pe_vk_load);
 *   instance-level (first argument a VkInstance or VkPhysicalDevice, and
 *   vkGetDeviceProcAddr) and device-level commands (a VkDevice, VkQueue or
 *   VkCommandBuffer):
 *       #define vkCmdDispatch (be->vk.vkCmdDispatch)
 *     the table of the backend `be` (struct pe_vk_backend, vk_internal.h), which every
 *     function of src/vulkan that calls Vulkan has in scope under that name.
 *
 * So `vkCmdDispatch(be->cmd, x, y, z)` compiles to a call through be's own table, and new
 * code calls Vulkan by the usual names and compiles unchanged, as long as a
 * `struct pe_vk_backend *be` is in scope (a helper without one takes it as a parameter).
 * A command outside core 1.0 / 1.1 (an extension) is fetched with
 * be->vk.get_instance_proc_addr / vkGetDeviceProcAddr like before; adding it to a table
 * means an X() entry below plus its #define.
 *
 * Why a table per backend (per context). Instance-level entries come from
 * vkGetInstanceProcAddr(instance), device-level ones from vkGetDeviceProcAddr(device)
 * (the driver's or layer's own functions: no loader trampoline per call). A
 * host-owned context (posenc_context_create_from_host) with
 * posenc_host_device.vk_get_instance_proc_addr set resolves its whole table through the
 * application's function, so posenc calls the loader the application uses (and needs no
 * libvulkan of its own); posenc's own contexts use the libvulkan posenc opened. Both kinds
 * coexist in one process, on any number of devices and instances, each with its table.
 *
 * When. pe_vk_load() opens the loader on the Vulkan backend's first use in the process
 * (posenc_backend_device_count, context creation, AUTO's probe, a host-owned context
 * without vk_get_instance_proc_addr): POSENC_VULKAN_LIBRARY (a path or a name) when set,
 * else libvulkan.so.1, then libvulkan.so (Android's name). Once per process
 * (pthread_once; a failure is kept too), never closed (src/dynload.h). The global table
 * is written only inside that pthread_once; a backend's table only while it is created.
 *
 * Every core command of the tables must resolve (posenc needs Vulkan 1.1); the one that
 * does not is named in a POSENC_ERR_UNAVAILABLE message, so a call through a table never
 * meets a NULL pointer. The exception is vkEnumerateInstanceVersion, absent from a 1.0
 * loader (posenc checks it before creating an instance).
 */
#ifndef POSENC_VK_LOADER_H
#define POSENC_VK_LOADER_H

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "posenc.h"

#include <stddef.h>

/* Global commands: vkGetInstanceProcAddr(NULL, name). */
#define PE_VK_GLOBAL_COMMANDS(X) \
    X(vkCreateInstance) \
    X(vkEnumerateInstanceExtensionProperties) \
    X(vkEnumerateInstanceLayerProperties) \
    X(vkEnumerateInstanceVersion)

/* Instance-level commands of Vulkan 1.0 and 1.1: vkGetInstanceProcAddr(instance, name). */
#define PE_VK_INSTANCE_COMMANDS(X) \
    X(vkDestroyInstance) \
    X(vkEnumeratePhysicalDevices) \
    X(vkGetPhysicalDeviceFeatures) \
    X(vkGetPhysicalDeviceFormatProperties) \
    X(vkGetPhysicalDeviceImageFormatProperties) \
    X(vkGetPhysicalDeviceProperties) \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkGetPhysicalDeviceMemoryProperties) \
    X(vkGetDeviceProcAddr) \
    X(vkCreateDevice) \
    X(vkEnumerateDeviceExtensionProperties) \
    X(vkEnumerateDeviceLayerProperties) \
    X(vkGetPhysicalDeviceSparseImageFormatProperties) \
    X(vkEnumeratePhysicalDeviceGroups) \
    X(vkGetPhysicalDeviceFeatures2) \
    X(vkGetPhysicalDeviceProperties2) \
    X(vkGetPhysicalDeviceFormatProperties2) \
    X(vkGetPhysicalDeviceImageFormatProperties2) \
    X(vkGetPhysicalDeviceQueueFamilyProperties2) \
    X(vkGetPhysicalDeviceMemoryProperties2) \
    X(vkGetPhysicalDeviceSparseImageFormatProperties2) \
    X(vkGetPhysicalDeviceExternalBufferProperties) \
    X(vkGetPhysicalDeviceExternalFenceProperties) \
    X(vkGetPhysicalDeviceExternalSemaphoreProperties)

/* Device-level commands of Vulkan 1.0 and 1.1: vkGetDeviceProcAddr(device, name). */
#define PE_VK_DEVICE_COMMANDS(X) \
    X(vkDestroyDevice) \
    X(vkGetDeviceQueue) \
    X(vkQueueSubmit) \
    X(vkQueueWaitIdle) \
    X(vkDeviceWaitIdle) \
    X(vkAllocateMemory) \
    X(vkFreeMemory) \
    X(vkMapMemory) \
    X(vkUnmapMemory) \
    X(vkFlushMappedMemoryRanges) \
    X(vkInvalidateMappedMemoryRanges) \
    X(vkGetDeviceMemoryCommitment) \
    X(vkBindBufferMemory) \
    X(vkBindImageMemory) \
    X(vkGetBufferMemoryRequirements) \
    X(vkGetImageMemoryRequirements) \
    X(vkGetImageSparseMemoryRequirements) \
    X(vkQueueBindSparse) \
    X(vkCreateFence) \
    X(vkDestroyFence) \
    X(vkResetFences) \
    X(vkGetFenceStatus) \
    X(vkWaitForFences) \
    X(vkCreateSemaphore) \
    X(vkDestroySemaphore) \
    X(vkCreateEvent) \
    X(vkDestroyEvent) \
    X(vkGetEventStatus) \
    X(vkSetEvent) \
    X(vkResetEvent) \
    X(vkCreateQueryPool) \
    X(vkDestroyQueryPool) \
    X(vkGetQueryPoolResults) \
    X(vkCreateBuffer) \
    X(vkDestroyBuffer) \
    X(vkCreateBufferView) \
    X(vkDestroyBufferView) \
    X(vkCreateImage) \
    X(vkDestroyImage) \
    X(vkGetImageSubresourceLayout) \
    X(vkCreateImageView) \
    X(vkDestroyImageView) \
    X(vkCreateShaderModule) \
    X(vkDestroyShaderModule) \
    X(vkCreatePipelineCache) \
    X(vkDestroyPipelineCache) \
    X(vkGetPipelineCacheData) \
    X(vkMergePipelineCaches) \
    X(vkCreateGraphicsPipelines) \
    X(vkCreateComputePipelines) \
    X(vkDestroyPipeline) \
    X(vkCreatePipelineLayout) \
    X(vkDestroyPipelineLayout) \
    X(vkCreateSampler) \
    X(vkDestroySampler) \
    X(vkCreateDescriptorSetLayout) \
    X(vkDestroyDescriptorSetLayout) \
    X(vkCreateDescriptorPool) \
    X(vkDestroyDescriptorPool) \
    X(vkResetDescriptorPool) \
    X(vkAllocateDescriptorSets) \
    X(vkFreeDescriptorSets) \
    X(vkUpdateDescriptorSets) \
    X(vkCreateFramebuffer) \
    X(vkDestroyFramebuffer) \
    X(vkCreateRenderPass) \
    X(vkDestroyRenderPass) \
    X(vkGetRenderAreaGranularity) \
    X(vkCreateCommandPool) \
    X(vkDestroyCommandPool) \
    X(vkResetCommandPool) \
    X(vkAllocateCommandBuffers) \
    X(vkFreeCommandBuffers) \
    X(vkBeginCommandBuffer) \
    X(vkEndCommandBuffer) \
    X(vkResetCommandBuffer) \
    X(vkCmdBindPipeline) \
    X(vkCmdSetViewport) \
    X(vkCmdSetScissor) \
    X(vkCmdSetLineWidth) \
    X(vkCmdSetDepthBias) \
    X(vkCmdSetBlendConstants) \
    X(vkCmdSetDepthBounds) \
    X(vkCmdSetStencilCompareMask) \
    X(vkCmdSetStencilWriteMask) \
    X(vkCmdSetStencilReference) \
    X(vkCmdBindDescriptorSets) \
    X(vkCmdBindIndexBuffer) \
    X(vkCmdBindVertexBuffers) \
    X(vkCmdDraw) \
    X(vkCmdDrawIndexed) \
    X(vkCmdDrawIndirect) \
    X(vkCmdDrawIndexedIndirect) \
    X(vkCmdDispatch) \
    X(vkCmdDispatchIndirect) \
    X(vkCmdCopyBuffer) \
    X(vkCmdCopyImage) \
    X(vkCmdBlitImage) \
    X(vkCmdCopyBufferToImage) \
    X(vkCmdCopyImageToBuffer) \
    X(vkCmdUpdateBuffer) \
    X(vkCmdFillBuffer) \
    X(vkCmdClearColorImage) \
    X(vkCmdClearDepthStencilImage) \
    X(vkCmdClearAttachments) \
    X(vkCmdResolveImage) \
    X(vkCmdSetEvent) \
    X(vkCmdResetEvent) \
    X(vkCmdWaitEvents) \
    X(vkCmdPipelineBarrier) \
    X(vkCmdBeginQuery) \
    X(vkCmdEndQuery) \
    X(vkCmdResetQueryPool) \
    X(vkCmdWriteTimestamp) \
    X(vkCmdCopyQueryPoolResults) \
    X(vkCmdPushConstants) \
    X(vkCmdBeginRenderPass) \
    X(vkCmdNextSubpass) \
    X(vkCmdEndRenderPass) \
    X(vkCmdExecuteCommands) \
    X(vkBindBufferMemory2) \
    X(vkBindImageMemory2) \
    X(vkGetDeviceGroupPeerMemoryFeatures) \
    X(vkCmdSetDeviceMask) \
    X(vkCmdDispatchBase) \
    X(vkGetImageMemoryRequirements2) \
    X(vkGetBufferMemoryRequirements2) \
    X(vkGetImageSparseMemoryRequirements2) \
    X(vkTrimCommandPool) \
    X(vkGetDeviceQueue2) \
    X(vkCreateSamplerYcbcrConversion) \
    X(vkDestroySamplerYcbcrConversion) \
    X(vkCreateDescriptorUpdateTemplate) \
    X(vkDestroyDescriptorUpdateTemplate) \
    X(vkUpdateDescriptorSetWithTemplate) \
    X(vkGetDescriptorSetLayoutSupport)

#define PE_VK_MEMBER(name) PFN_##name name;
struct pe_vk_global_funcs {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr; /* from dlsym */
    PE_VK_GLOBAL_COMMANDS(PE_VK_MEMBER)
};
/* One backend's instance and device tables (struct pe_vk_backend.vk). */
struct pe_vk_funcs {
    /* The vkGetInstanceProcAddr the table came from: posenc's loader's or the
     * application's (for extension commands of this instance). */
    PFN_vkGetInstanceProcAddr get_instance_proc_addr;
    PE_VK_INSTANCE_COMMANDS(PE_VK_MEMBER)
    PE_VK_DEVICE_COMMANDS(PE_VK_MEMBER)
};
#undef PE_VK_MEMBER
extern struct pe_vk_global_funcs pe_vk_global;

#define PE_VK_LIBRARY_ENV "POSENC_VULKAN_LIBRARY"

/*
 * Open the Vulkan loader and fill pe_vk_global, once per process (later calls return the
 * first one's result). Returns POSENC_OK, or POSENC_ERR_UNAVAILABLE with `why` (may be
 * NULL) naming the files tried and POSENC_VULKAN_LIBRARY.
 */
posenc_status pe_vk_load(char *why, size_t why_size);

/* Fill the instance-level entries of *f (and get_instance_proc_addr) through `gipa` for
 * `instance`, the device-level ones with NULL. Returns NULL, or the name of the first
 * command gipa has no function for (the others are filled all the same). */
const char *pe_vk_load_instance(struct pe_vk_funcs *f, PFN_vkGetInstanceProcAddr gipa,
                                VkInstance instance);

/* Fill the device-level entries of *f through f->vkGetDeviceProcAddr for `device`. Returns
 * NULL, or the name of the first one missing (the others are filled all the same). */
const char *pe_vk_load_device(struct pe_vk_funcs *f, VkDevice device);

/* Every command of the tables by its usual name (see above). src/vulkan/vk_loader.c
 * defines PE_VK_LOADER_NO_MACROS to fill the tables by name. */
#ifndef PE_VK_LOADER_NO_MACROS
#define vkGetInstanceProcAddr (pe_vk_global.vkGetInstanceProcAddr)
#define vkCreateInstance (pe_vk_global.vkCreateInstance)
#define vkEnumerateInstanceExtensionProperties (pe_vk_global.vkEnumerateInstanceExtensionProperties)
#define vkEnumerateInstanceLayerProperties (pe_vk_global.vkEnumerateInstanceLayerProperties)
#define vkEnumerateInstanceVersion (pe_vk_global.vkEnumerateInstanceVersion)
#define vkDestroyInstance (be->vk.vkDestroyInstance)
#define vkEnumeratePhysicalDevices (be->vk.vkEnumeratePhysicalDevices)
#define vkGetPhysicalDeviceFeatures (be->vk.vkGetPhysicalDeviceFeatures)
#define vkGetPhysicalDeviceFormatProperties (be->vk.vkGetPhysicalDeviceFormatProperties)
#define vkGetPhysicalDeviceImageFormatProperties (be->vk.vkGetPhysicalDeviceImageFormatProperties)
#define vkGetPhysicalDeviceProperties (be->vk.vkGetPhysicalDeviceProperties)
#define vkGetPhysicalDeviceQueueFamilyProperties (be->vk.vkGetPhysicalDeviceQueueFamilyProperties)
#define vkGetPhysicalDeviceMemoryProperties (be->vk.vkGetPhysicalDeviceMemoryProperties)
#define vkGetDeviceProcAddr (be->vk.vkGetDeviceProcAddr)
#define vkCreateDevice (be->vk.vkCreateDevice)
#define vkEnumerateDeviceExtensionProperties (be->vk.vkEnumerateDeviceExtensionProperties)
#define vkEnumerateDeviceLayerProperties (be->vk.vkEnumerateDeviceLayerProperties)
#define vkGetPhysicalDeviceSparseImageFormatProperties (be->vk.vkGetPhysicalDeviceSparseImageFormatProperties)
#define vkEnumeratePhysicalDeviceGroups (be->vk.vkEnumeratePhysicalDeviceGroups)
#define vkGetPhysicalDeviceFeatures2 (be->vk.vkGetPhysicalDeviceFeatures2)
#define vkGetPhysicalDeviceProperties2 (be->vk.vkGetPhysicalDeviceProperties2)
#define vkGetPhysicalDeviceFormatProperties2 (be->vk.vkGetPhysicalDeviceFormatProperties2)
#define vkGetPhysicalDeviceImageFormatProperties2 (be->vk.vkGetPhysicalDeviceImageFormatProperties2)
#define vkGetPhysicalDeviceQueueFamilyProperties2 (be->vk.vkGetPhysicalDeviceQueueFamilyProperties2)
#define vkGetPhysicalDeviceMemoryProperties2 (be->vk.vkGetPhysicalDeviceMemoryProperties2)
#define vkGetPhysicalDeviceSparseImageFormatProperties2 (be->vk.vkGetPhysicalDeviceSparseImageFormatProperties2)
#define vkGetPhysicalDeviceExternalBufferProperties (be->vk.vkGetPhysicalDeviceExternalBufferProperties)
#define vkGetPhysicalDeviceExternalFenceProperties (be->vk.vkGetPhysicalDeviceExternalFenceProperties)
#define vkGetPhysicalDeviceExternalSemaphoreProperties (be->vk.vkGetPhysicalDeviceExternalSemaphoreProperties)
#define vkDestroyDevice (be->vk.vkDestroyDevice)
#define vkGetDeviceQueue (be->vk.vkGetDeviceQueue)
#define vkQueueSubmit (be->vk.vkQueueSubmit)
#define vkQueueWaitIdle (be->vk.vkQueueWaitIdle)
#define vkDeviceWaitIdle (be->vk.vkDeviceWaitIdle)
#define vkAllocateMemory (be->vk.vkAllocateMemory)
#define vkFreeMemory (be->vk.vkFreeMemory)
#define vkMapMemory (be->vk.vkMapMemory)
#define vkUnmapMemory (be->vk.vkUnmapMemory)
#define vkFlushMappedMemoryRanges (be->vk.vkFlushMappedMemoryRanges)
#define vkInvalidateMappedMemoryRanges (be->vk.vkInvalidateMappedMemoryRanges)
#define vkGetDeviceMemoryCommitment (be->vk.vkGetDeviceMemoryCommitment)
#define vkBindBufferMemory (be->vk.vkBindBufferMemory)
#define vkBindImageMemory (be->vk.vkBindImageMemory)
#define vkGetBufferMemoryRequirements (be->vk.vkGetBufferMemoryRequirements)
#define vkGetImageMemoryRequirements (be->vk.vkGetImageMemoryRequirements)
#define vkGetImageSparseMemoryRequirements (be->vk.vkGetImageSparseMemoryRequirements)
#define vkQueueBindSparse (be->vk.vkQueueBindSparse)
#define vkCreateFence (be->vk.vkCreateFence)
#define vkDestroyFence (be->vk.vkDestroyFence)
#define vkResetFences (be->vk.vkResetFences)
#define vkGetFenceStatus (be->vk.vkGetFenceStatus)
#define vkWaitForFences (be->vk.vkWaitForFences)
#define vkCreateSemaphore (be->vk.vkCreateSemaphore)
#define vkDestroySemaphore (be->vk.vkDestroySemaphore)
#define vkCreateEvent (be->vk.vkCreateEvent)
#define vkDestroyEvent (be->vk.vkDestroyEvent)
#define vkGetEventStatus (be->vk.vkGetEventStatus)
#define vkSetEvent (be->vk.vkSetEvent)
#define vkResetEvent (be->vk.vkResetEvent)
#define vkCreateQueryPool (be->vk.vkCreateQueryPool)
#define vkDestroyQueryPool (be->vk.vkDestroyQueryPool)
#define vkGetQueryPoolResults (be->vk.vkGetQueryPoolResults)
#define vkCreateBuffer (be->vk.vkCreateBuffer)
#define vkDestroyBuffer (be->vk.vkDestroyBuffer)
#define vkCreateBufferView (be->vk.vkCreateBufferView)
#define vkDestroyBufferView (be->vk.vkDestroyBufferView)
#define vkCreateImage (be->vk.vkCreateImage)
#define vkDestroyImage (be->vk.vkDestroyImage)
#define vkGetImageSubresourceLayout (be->vk.vkGetImageSubresourceLayout)
#define vkCreateImageView (be->vk.vkCreateImageView)
#define vkDestroyImageView (be->vk.vkDestroyImageView)
#define vkCreateShaderModule (be->vk.vkCreateShaderModule)
#define vkDestroyShaderModule (be->vk.vkDestroyShaderModule)
#define vkCreatePipelineCache (be->vk.vkCreatePipelineCache)
#define vkDestroyPipelineCache (be->vk.vkDestroyPipelineCache)
#define vkGetPipelineCacheData (be->vk.vkGetPipelineCacheData)
#define vkMergePipelineCaches (be->vk.vkMergePipelineCaches)
#define vkCreateGraphicsPipelines (be->vk.vkCreateGraphicsPipelines)
#define vkCreateComputePipelines (be->vk.vkCreateComputePipelines)
#define vkDestroyPipeline (be->vk.vkDestroyPipeline)
#define vkCreatePipelineLayout (be->vk.vkCreatePipelineLayout)
#define vkDestroyPipelineLayout (be->vk.vkDestroyPipelineLayout)
#define vkCreateSampler (be->vk.vkCreateSampler)
#define vkDestroySampler (be->vk.vkDestroySampler)
#define vkCreateDescriptorSetLayout (be->vk.vkCreateDescriptorSetLayout)
#define vkDestroyDescriptorSetLayout (be->vk.vkDestroyDescriptorSetLayout)
#define vkCreateDescriptorPool (be->vk.vkCreateDescriptorPool)
#define vkDestroyDescriptorPool (be->vk.vkDestroyDescriptorPool)
#define vkResetDescriptorPool (be->vk.vkResetDescriptorPool)
#define vkAllocateDescriptorSets (be->vk.vkAllocateDescriptorSets)
#define vkFreeDescriptorSets (be->vk.vkFreeDescriptorSets)
#define vkUpdateDescriptorSets (be->vk.vkUpdateDescriptorSets)
#define vkCreateFramebuffer (be->vk.vkCreateFramebuffer)
#define vkDestroyFramebuffer (be->vk.vkDestroyFramebuffer)
#define vkCreateRenderPass (be->vk.vkCreateRenderPass)
#define vkDestroyRenderPass (be->vk.vkDestroyRenderPass)
#define vkGetRenderAreaGranularity (be->vk.vkGetRenderAreaGranularity)
#define vkCreateCommandPool (be->vk.vkCreateCommandPool)
#define vkDestroyCommandPool (be->vk.vkDestroyCommandPool)
#define vkResetCommandPool (be->vk.vkResetCommandPool)
#define vkAllocateCommandBuffers (be->vk.vkAllocateCommandBuffers)
#define vkFreeCommandBuffers (be->vk.vkFreeCommandBuffers)
#define vkBeginCommandBuffer (be->vk.vkBeginCommandBuffer)
#define vkEndCommandBuffer (be->vk.vkEndCommandBuffer)
#define vkResetCommandBuffer (be->vk.vkResetCommandBuffer)
#define vkCmdBindPipeline (be->vk.vkCmdBindPipeline)
#define vkCmdSetViewport (be->vk.vkCmdSetViewport)
#define vkCmdSetScissor (be->vk.vkCmdSetScissor)
#define vkCmdSetLineWidth (be->vk.vkCmdSetLineWidth)
#define vkCmdSetDepthBias (be->vk.vkCmdSetDepthBias)
#define vkCmdSetBlendConstants (be->vk.vkCmdSetBlendConstants)
#define vkCmdSetDepthBounds (be->vk.vkCmdSetDepthBounds)
#define vkCmdSetStencilCompareMask (be->vk.vkCmdSetStencilCompareMask)
#define vkCmdSetStencilWriteMask (be->vk.vkCmdSetStencilWriteMask)
#define vkCmdSetStencilReference (be->vk.vkCmdSetStencilReference)
#define vkCmdBindDescriptorSets (be->vk.vkCmdBindDescriptorSets)
#define vkCmdBindIndexBuffer (be->vk.vkCmdBindIndexBuffer)
#define vkCmdBindVertexBuffers (be->vk.vkCmdBindVertexBuffers)
#define vkCmdDraw (be->vk.vkCmdDraw)
#define vkCmdDrawIndexed (be->vk.vkCmdDrawIndexed)
#define vkCmdDrawIndirect (be->vk.vkCmdDrawIndirect)
#define vkCmdDrawIndexedIndirect (be->vk.vkCmdDrawIndexedIndirect)
#define vkCmdDispatch (be->vk.vkCmdDispatch)
#define vkCmdDispatchIndirect (be->vk.vkCmdDispatchIndirect)
#define vkCmdCopyBuffer (be->vk.vkCmdCopyBuffer)
#define vkCmdCopyImage (be->vk.vkCmdCopyImage)
#define vkCmdBlitImage (be->vk.vkCmdBlitImage)
#define vkCmdCopyBufferToImage (be->vk.vkCmdCopyBufferToImage)
#define vkCmdCopyImageToBuffer (be->vk.vkCmdCopyImageToBuffer)
#define vkCmdUpdateBuffer (be->vk.vkCmdUpdateBuffer)
#define vkCmdFillBuffer (be->vk.vkCmdFillBuffer)
#define vkCmdClearColorImage (be->vk.vkCmdClearColorImage)
#define vkCmdClearDepthStencilImage (be->vk.vkCmdClearDepthStencilImage)
#define vkCmdClearAttachments (be->vk.vkCmdClearAttachments)
#define vkCmdResolveImage (be->vk.vkCmdResolveImage)
#define vkCmdSetEvent (be->vk.vkCmdSetEvent)
#define vkCmdResetEvent (be->vk.vkCmdResetEvent)
#define vkCmdWaitEvents (be->vk.vkCmdWaitEvents)
#define vkCmdPipelineBarrier (be->vk.vkCmdPipelineBarrier)
#define vkCmdBeginQuery (be->vk.vkCmdBeginQuery)
#define vkCmdEndQuery (be->vk.vkCmdEndQuery)
#define vkCmdResetQueryPool (be->vk.vkCmdResetQueryPool)
#define vkCmdWriteTimestamp (be->vk.vkCmdWriteTimestamp)
#define vkCmdCopyQueryPoolResults (be->vk.vkCmdCopyQueryPoolResults)
#define vkCmdPushConstants (be->vk.vkCmdPushConstants)
#define vkCmdBeginRenderPass (be->vk.vkCmdBeginRenderPass)
#define vkCmdNextSubpass (be->vk.vkCmdNextSubpass)
#define vkCmdEndRenderPass (be->vk.vkCmdEndRenderPass)
#define vkCmdExecuteCommands (be->vk.vkCmdExecuteCommands)
#define vkBindBufferMemory2 (be->vk.vkBindBufferMemory2)
#define vkBindImageMemory2 (be->vk.vkBindImageMemory2)
#define vkGetDeviceGroupPeerMemoryFeatures (be->vk.vkGetDeviceGroupPeerMemoryFeatures)
#define vkCmdSetDeviceMask (be->vk.vkCmdSetDeviceMask)
#define vkCmdDispatchBase (be->vk.vkCmdDispatchBase)
#define vkGetImageMemoryRequirements2 (be->vk.vkGetImageMemoryRequirements2)
#define vkGetBufferMemoryRequirements2 (be->vk.vkGetBufferMemoryRequirements2)
#define vkGetImageSparseMemoryRequirements2 (be->vk.vkGetImageSparseMemoryRequirements2)
#define vkTrimCommandPool (be->vk.vkTrimCommandPool)
#define vkGetDeviceQueue2 (be->vk.vkGetDeviceQueue2)
#define vkCreateSamplerYcbcrConversion (be->vk.vkCreateSamplerYcbcrConversion)
#define vkDestroySamplerYcbcrConversion (be->vk.vkDestroySamplerYcbcrConversion)
#define vkCreateDescriptorUpdateTemplate (be->vk.vkCreateDescriptorUpdateTemplate)
#define vkDestroyDescriptorUpdateTemplate (be->vk.vkDestroyDescriptorUpdateTemplate)
#define vkUpdateDescriptorSetWithTemplate (be->vk.vkUpdateDescriptorSetWithTemplate)
#define vkGetDescriptorSetLayoutSupport (be->vk.vkGetDescriptorSetLayoutSupport)
#endif /* PE_VK_LOADER_NO_MACROS */

#endif
