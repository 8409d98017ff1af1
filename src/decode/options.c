/* Generation options: the defaults of vkf_generate_options and their checks
 * against a model. */
#include "decode/decode.h"

#include <math.h>
#include <string.h>

void vkf_generate_options_init(vkf_generate_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->beams = 1;
    o->length_penalty = 1.0f;
    o->n_best = 1;
    o->temperature = 1.0f;
    o->top_p = 1.0f;
}


vkf_status vkf_decode_check_options(const vkf_arch *a, const vkf_generate_options *o)
{
    if (o->sample) {
        if (!(o->temperature > 0) || !isfinite(o->temperature))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "temperature %g must be a number above 0", (double)o->temperature);
        if (!(o->top_p > 0 && o->top_p <= 1))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "top_p %g is outside (0, 1]", (double)o->top_p);
        if (o->beams != 1)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "sampling takes one beam (beams %u given): beam sampling is not "
                            "implemented", o->beams);
    }
    if (o->beams == 0 || o->beams > VKF_MAX_BEAMS)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "beams %u is outside 1..%u", o->beams, VKF_MAX_BEAMS);
    if (o->n_best == 0 || o->n_best > o->beams)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "n_best %u is outside 1..%u (the number of beams)", o->n_best, o->beams);
    if (o->max_new > a->spec.max_len)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "max_new %u is outside 1..%u (the model's max_len)", o->max_new,
                        a->spec.max_len);
    uint32_t max_new = o->max_new ? o->max_new : a->spec.max_len;
    if (o->min_new > max_new)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "min_new %u is more than max_new %u", o->min_new, max_new);
    if (!isfinite(o->length_penalty))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "length_penalty must be a finite number");
    if ((uint64_t)o->beams * a->spec.tgt_vocab > INT32_MAX)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "beams x tgt_vocab_size must stay below 2^31");
    if (o->forced_bos && (o->forced_bos_id < 0 || (uint32_t)o->forced_bos_id >= a->spec.tgt_vocab ||
                          o->forced_bos_id == a->spec.eos_id))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "forced_bos_id %d is outside the target vocabulary or is eos",
                        o->forced_bos_id);
    return VKF_OK;
}

