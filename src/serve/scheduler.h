/* The serving layer (src/serve/): above the model, below the server's HTTP
 * front end (tools/cli/serve*.c). scheduler.c implements include/vkformer.h's
 * vkf_scheduler_* on the decode layer's generation plans: see its notes. */
#ifndef VKF_SERVE_SCHEDULER_H
#define VKF_SERVE_SCHEDULER_H

#include "decode/decode.h"
#include "model.h"

#endif
