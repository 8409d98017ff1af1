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

/* The balanced dispatch rule on plain numbers, for tests: a slot that runs a
 * source in `mine` seconds considers the first of `queued` batches (counts[i]
 * sources each); the n_others other active slots run a source in rates[k]
 * seconds (0: unknown, taken as `mine`) and are free in free_in[k] seconds. True:
 * it would end that batch no later than the others would end the whole queue,
 * and takes it. An unknown own rate (0), no other slot or an empty queue: true. */
bool vkf_pool_rule_takes(double mine, uint32_t n_others, const double *rates, const double *free_in, uint32_t queued,
                         const uint32_t *counts);
/* Other slots the rule weighs (past this many, the rest are left out, which only
 * makes a slot take work sooner). */
#define VKF_POOL_RULE_SLOTS 64

#endif
