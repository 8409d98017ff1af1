#include "harness.h"
int main(void){ vkf_context *c = harness_context(); harness_close(c); return harness_result("test_errors"); }
