/* LSH attention (Reformer): placeholder, being written. */
#include "attention_lsh.h"
