/* The model layer's own calls between its files (src/model.c, src/transcribe.c). */
#ifndef VKF_TRANSCRIBE_H
#define VKF_TRANSCRIBE_H

#include "decode/decode.h"
#include "families/family.h"

/* The parts of a model that transcription drives (borrowed). */
void vkf_model_parts(vkf_model *m, vkf_arch **out_arch, vkf_decoder **out_dec, const vkf_family_model **out_fm);

#endif
