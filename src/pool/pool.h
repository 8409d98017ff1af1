/* The pool layer (src/pool/): one model on several devices (include/vkformer.h,
 * "device pools"). Private to the library and its tests: what tests reach beyond
 * the public API. */
#ifndef VKF_POOL_H
#define VKF_POOL_H

#include "runtime/runtime.h"

/* Tests only: when slot `slot` starts the `batch`-th batch it runs (counted from
 * 1, attempts of returned batches included), the next Vulkan call named `call`
 * on its context returns `result` (vkf_test_inject_fault). At most
 * VKF_POOL_MAX_FAULTS are armed; the environment variable VKFORMER_POOL_FAULT
 * arms them at create ("SLOT:BATCH:CALL:RESULT[,...]", RESULT one of
 * device-lost, out-of-device-memory, out-of-host-memory, unknown), so that the
 * tool and the Python binding can be tested the same way. */
#define VKF_POOL_MAX_FAULTS 8
vkf_status vkf_pool_test_fault(vkf_pool *pool, uint32_t slot, uint32_t batch, const char *call, VkResult result);

#endif
