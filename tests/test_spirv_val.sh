#!/bin/sh
# spirv-val on SPIR-V that no driver here runs (matmul_coopmat2_wg: NV2 at
# workgroup scope with tensor layouts), for the Vulkan version it targets:
#   test_spirv_val.sh SPIRV_VAL TARGET_ENV FILE.spv...
# SPIRV_VAL is the one that came with coopmat_glslc (tools/fetch_newer.sh
# compiler): Debian 12's predates SPV_NV_cooperative_matrix2.
set -u
val=$1 env=$2
shift 2
status=0
for f in "$@"; do
    if "$val" --target-env "$env" "$f"; then
        echo "valid ($env): $f"
    else
        echo "INVALID ($env): $f"
        status=1
    fi
done
exit $status
