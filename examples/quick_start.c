/* One causal attention forward from C, on GPU 0 or, when there is none, the CPU emulator. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "flashjit/flashjit_c.h"

enum { L = 128, H = 4, D = 64 }; /* 128 tokens; 4 query heads share 1 key/value head */

/* A [1, L, heads, D] bf16 tensor in [B, L, H, D] memory; strides count elements. */
static flashjit_tensor view(void* data, int64_t heads) {
  const flashjit_tensor t = {
      data, FLASHJIT_DTYPE_BF16, 4, {1, L, heads, D}, {L * heads * D, heads * D, D, 1}};
  return t;
}

int main(void) {
  static uint16_t x[L * H * D], o_host[L * H * D]; /* bf16 bits */
  for (int i = 0; i < L * H * D; ++i) {
    const float value = (float)(i % 8) / 8 - 0.5f; /* exact in bf16: its top 16 bits */
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    x[i] = (uint16_t)(bits >> 16);
  }
  flashjit_runtime_options options;
  flashjit_runtime_options_init(&options); /* GPU 0, cached tuning */
  flashjit_runtime* rt = NULL;
  flashjit_status s = flashjit_runtime_create(&options, &rt);
  if (s == FLASHJIT_ERROR_NO_DRIVER || s == FLASHJIT_ERROR_NO_DEVICE) {
    printf("no GPU (%s): the CPU emulator\n", flashjit_last_error());
    options.backend = FLASHJIT_BACKEND_EMULATOR;
    s = flashjit_runtime_create(&options, &rt);
  }
  flashjit_attention attn;
  flashjit_attention_init(&attn); /* head_dim 64, scale 1/sqrt(head_dim), ... */
  attn.heads_q = H;
  attn.seqlen_q = attn.seqlen_k = L;
  attn.causal = 1;
  void *q = NULL, *kv = NULL, *o = NULL; /* freed with the runtime */
  if (s == FLASHJIT_OK) s = flashjit_allocate(rt, sizeof x, &q);
  if (s == FLASHJIT_OK) s = flashjit_allocate(rt, sizeof x / H, &kv);
  if (s == FLASHJIT_OK) s = flashjit_allocate(rt, sizeof x, &o);
  if (s == FLASHJIT_OK) s = flashjit_copy_to_device(rt, q, x, sizeof x);
  if (s == FLASHJIT_OK) s = flashjit_copy_to_device(rt, kv, x, sizeof x / H); /* K = V */
  const flashjit_tensor qt = view(q, H), kvt = view(kv, 1), ot = view(o, H);
  /* lse NULL: not kept (a training step keeps it for the backward); stream NULL: the default. */
  if (s == FLASHJIT_OK) s = flashjit_attention_forward(rt, &attn, &qt, &kvt, &kvt, &ot, NULL, NULL);
  if (s == FLASHJIT_OK) s = flashjit_copy_to_host(rt, o_host, o, sizeof o_host);
  if (s != FLASHJIT_OK) {
    fprintf(stderr, "%s: %s\n", flashjit_status_name(s), flashjit_last_error());
    flashjit_runtime_destroy(rt);
    return 1;
  }
  /* Causal: query 0 sees key 0 alone, so each head's output row 0 is V's row 0, exactly. */
  int ok = 1;
  for (int h = 0; h < H; ++h) ok = ok && memcmp(o_host + h * D, x, D * sizeof x[0]) == 0;
  printf("%s\n", ok ? "PASS" : "FAIL");
  flashjit_runtime_destroy(rt);
  return ok ? 0 : 1;
}
