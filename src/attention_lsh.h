/* LSH attention (Reformer): placeholder, being written. */
#ifndef VKF_ATTENTION_LSH_H
#define VKF_ATTENTION_LSH_H
#include "internal.h"
#endif
