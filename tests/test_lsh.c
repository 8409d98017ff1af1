/* LSH attention tests: placeholder, being written. */
#include "harness.h"
int main(void) { vkf_context *ctx = harness_context(); harness_close(ctx); return harness_result("lsh"); }
