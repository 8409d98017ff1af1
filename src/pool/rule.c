/* The pool's balanced dispatch rule on plain numbers (pool.h says what it
 * decides): a free slot takes the queue's first batch only where it would end it
 * no later than the other slots, each batch to whichever would end it first,
 * would end the whole queue. pool.c feeds it each slot's measured rate. */
#include "pool/pool.h"

bool vkf_pool_rule_takes(double mine, uint32_t n_others, const double *rates, const double *free_in, uint32_t queued,
                         const uint32_t *counts)
{
    if (mine <= 0 || n_others == 0 || queued == 0) return true;
    double free_at[VKF_POOL_RULE_SLOTS];
    uint32_t n = n_others < VKF_POOL_RULE_SLOTS ? n_others : VKF_POOL_RULE_SLOTS;
    for (uint32_t k = 0; k < n; k++) free_at[k] = free_in[k] > 0 ? free_in[k] : 0;
    double end = 0;
    for (uint32_t i = 0; i < queued; i++) { /* each batch to whichever other slot would end it first */
        uint32_t best = 0;
        double best_end = 0;
        for (uint32_t k = 0; k < n; k++) {
            double e = free_at[k] + (rates[k] > 0 ? rates[k] : mine) * counts[i];
            if (k == 0 || e < best_end) best = k, best_end = e;
        }
        free_at[best] = best_end;
        if (best_end > end) end = best_end;
    }
    return mine * counts[0] <= end;
}
