/* The model layer's own calls between its files: what src/model.c (the public
 * model object) lends to src/transcribe.c, which drives a loaded Whisper model. */
#ifndef VKF_MODEL_H
#define VKF_MODEL_H

#include "decode/decode.h"
#include "families/family.h"

/* The parts of a model that transcription drives (borrowed). */
void vkf_model_parts(vkf_model *m, vkf_arch **out_arch, vkf_decoder **out_dec, const vkf_family_model **out_fm);

#endif
