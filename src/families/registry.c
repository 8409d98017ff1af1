/* The registry: every family vkformer reads, and the probe that picks one for a
 * path (a file is vkformer's own format; a folder is picked by its
 * config.json's model_type). A new family is one line in `families` below. */
#include "families/family.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const vkf_family *const families[] = {
    NULL, /* vkformer's own file, vkf_family_vkformer(): filled in below */
    &vkf_family_marian,
    &vkf_family_m2m100,                 /* M2M-100 and NLLB-200 */
    &vkf_family_mbart,                  /* mBART-50 and mBART */
    &vkf_family_whisper,                /* Whisper (audio in) */
    &vkf_family_bart,                   /* BART */
    &vkf_family_t5,                     /* T5, Flan-T5, mT5 and LongT5 */
};

const vkf_family *vkf_family_vkformer(void);

vkf_status vkf_family_find(const char *path, const vkf_family **out_family, vkf_probe *out_probe, char **out_model_type)
{
    *out_family = NULL, *out_model_type = NULL;
    struct stat sb;
    vkf_probe p = {.path = path};
    p.is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (p.is_dir) {
        json_t *cfg = NULL;
        VKF_TRY(vkf_hf_read_json(path, "config.json", false, &cfg));
        json_t *type = json_object_get(cfg, "model_type");
        if (!type) {
            json_decref(cfg);
            return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: key \"model_type\" is missing");
        }
        if (!json_is_string(type)) {
            json_decref(cfg);
            return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: \"model_type\" must be a string");
        }
        *out_model_type = strdup(json_string_value(type));
        json_decref(cfg);
        if (!*out_model_type) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        p.model_type = *out_model_type;
    }
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        const vkf_family *f = families[i] ? families[i] : vkf_family_vkformer();
        if (f->probe(&p)) {
            *out_family = f, *out_probe = p;
            return VKF_OK;
        }
    }
    char names[256] = "";
    for (size_t i = 1; i < sizeof families / sizeof families[0]; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i > 1 ? ", " : "", families[i]->name);
    }
    char q[VKF_QUOTE_SIZE];
    vkf_status st = vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: model_type %s is not supported (vkformer reads "
                             "%s folders)", vkf_quote(q, sizeof q, p.model_type, (size_t)-1), names);
    free(*out_model_type);
    *out_model_type = NULL;
    return st;
}
