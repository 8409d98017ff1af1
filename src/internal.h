/* Everything below the model layer, in one include for the library's tests and
 * tools: the runtime, ops and attention layers' headers, and the few functions of
 * the upper layers that tests call directly. Library sources include the header
 * of their own layer instead. */
#ifndef VKF_INTERNAL_H
#define VKF_INTERNAL_H

#include "runtime/runtime.h"
#include "ops/ops.h"
#include "attention/attention.h"

/* What precision AUTO means on this device (arch): true for F16 weights and
 * activations (GPUs with 16-bit storage), false for the file's weights with F32
 * activations. */
bool vkf_auto_precision_f16(const vkf_device_info *info, bool storage_16bit);

/* ------------------------------------------------------------------ model.c */

/* Everything vkf_model_load checks (container, config, every tensor's name,
 * shape and dtype, float conversion) on a file image in memory, with no device:
 * the fuzzer's entry point. */
vkf_status vkf_model_check_bytes(const void *data, size_t size);


#endif /* VKF_INTERNAL_H */
