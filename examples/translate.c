/* Loads a model file and translates one text with vkformer's public API:
 *   cc translate.c $(pkg-config --cflags --libs vkformer) -o translate
 *   ./translate models/demo.safetensors "three hundred forty two"     -> 342 */
#include <stdio.h>
#include <vkformer.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL TEXT\n", argv[0]);
        return 2;
    }
    vkf_context *ctx = NULL;
    vkf_model *model = NULL;
    vkf_model_config cfg;
    int32_t src[512], out[512];
    uint32_t src_len = 0, out_len = 0;
    const int32_t *ids = src;
    vkf_sequences batch = {1, &ids, &src_len};          /* one source sequence */
    char text[8192];
    vkf_status st = vkf_context_create(NULL, &ctx);    /* the default device */
    if (st == VKF_OK) st = vkf_model_load(ctx, argv[1], &model);
    if (st == VKF_OK) st = vkf_model_get_config(model, &cfg);
    uint32_t max = st == VKF_OK && cfg.max_len < 512 ? cfg.max_len : 512;
    if (st == VKF_OK) st = vkf_model_encode_text(model, argv[2], src, max, &src_len);
    if (st == VKF_OK) st = vkf_model_generate(model, &batch, max, out, &out_len);
    if (st == VKF_OK) st = vkf_model_decode_text(model, out, out_len, text, sizeof text);
    if (st == VKF_OK) printf("%s\n", text);
    else fprintf(stderr, "translate: %s: %s\n", vkf_status_string(st), vkf_last_error());
    vkf_model_destroy(model);
    vkf_context_destroy(ctx);
    return st == VKF_OK ? 0 : 1;
}
