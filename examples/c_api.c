/* One attention forward through the C API, from C: on the CPU emulator by default, on GPU 0
 * with `c_api_example cuda`. Prints the first values of the output and of its log-sum-exp.
 * The inputs are a fixed pattern, so the same numbers come out on either backend. */
#include <flashjit/flashjit_c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Small, for the emulator's sake: one batch, 2 query heads sharing 1 key/value head. */
enum { kHeadsQ = 2, kHeadsKv = 1, kSeqlen = 64, kHeadDim = 64 };

/* bfloat16 bits of `value`, rounded to nearest even (the inputs are finite). */
static uint16_t bf16_from_float(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static float float_from_bf16(uint16_t bits) {
  const uint32_t wide = (uint32_t)bits << 16;
  float value;
  memcpy(&value, &wide, sizeof value);
  return value;
}

/* A contiguous [1, seqlen, heads, head_dim] descriptor ([B, L, H, D] memory). */
static flashjit_tensor bshd_tensor(void* data, int dtype, int64_t seqlen, int64_t heads) {
  flashjit_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.rank = 4;
  t.shape[0] = 1;
  t.shape[1] = seqlen;
  t.shape[2] = heads;
  t.shape[3] = kHeadDim;
  t.strides[3] = 1;
  t.strides[2] = kHeadDim;
  t.strides[1] = heads * kHeadDim;
  t.strides[0] = seqlen * heads * kHeadDim;
  return t;
}

/* Reports a failed call; returns 1 (the exit code) so callers can `return fail(...)`. */
static int fail(const char* what, flashjit_status status) {
  fprintf(stderr, "%s: %s: %s\n", what, flashjit_status_name(status), flashjit_last_error());
  return 1;
}

/* Copies `count` bf16 values in [-1, 1), a pattern that `seed` shifts, into new runtime
 * memory at *out. */
static flashjit_status upload_pattern(flashjit_runtime* rt, size_t count, size_t seed, void** out) {
  uint16_t* host = malloc(count * sizeof *host);
  flashjit_status status = FLASHJIT_ERROR_INTERNAL;
  if (host == NULL) return status;
  for (size_t i = 0; i < count; ++i) {
    host[i] = bf16_from_float((float)((i * 37 + seed) % 101) / 50.0f - 1.0f);
  }
  status = flashjit_allocate(rt, count * sizeof *host, out);
  if (status == FLASHJIT_OK) status = flashjit_copy_to_device(rt, *out, host, count * sizeof *host);
  free(host);
  return status;
}

int main(int argc, char** argv) {
  flashjit_runtime_options options;
  flashjit_runtime_options_init(&options);
  options.backend =
      argc > 1 && strcmp(argv[1], "cuda") == 0 ? FLASHJIT_BACKEND_CUDA : FLASHJIT_BACKEND_EMULATOR;
  printf("flashjit %s, %s backend\n", flashjit_version(),
         options.backend == FLASHJIT_BACKEND_CUDA ? "cuda" : "emulator");

  flashjit_runtime* rt = NULL;
  flashjit_status status = flashjit_runtime_create(&options, &rt);
  if (status != FLASHJIT_OK) return fail("flashjit_runtime_create", status);

  flashjit_attention attn;
  flashjit_attention_init(&attn);
  attn.heads_q = kHeadsQ;
  attn.heads_kv = kHeadsKv;
  attn.seqlen_q = kSeqlen;
  attn.seqlen_k = kSeqlen;
  attn.head_dim = kHeadDim;
  attn.causal = 1;

  const size_t q_count = (size_t)kSeqlen * kHeadsQ * kHeadDim;
  const size_t kv_count = (size_t)kSeqlen * kHeadsKv * kHeadDim;
  void *q = NULL, *k = NULL, *v = NULL, *o = NULL, *lse = NULL;
  /* Memory from flashjit_allocate is freed with the runtime, so an early exit leaks nothing. */
  status = upload_pattern(rt, q_count, 0, &q);
  if (status == FLASHJIT_OK) status = upload_pattern(rt, kv_count, 11, &k);
  if (status == FLASHJIT_OK) status = upload_pattern(rt, kv_count, 23, &v);
  if (status == FLASHJIT_OK) status = flashjit_allocate(rt, q_count * sizeof(uint16_t), &o);
  if (status == FLASHJIT_OK)
    status = flashjit_allocate(rt, kHeadsQ * kSeqlen * sizeof(float), &lse);
  if (status != FLASHJIT_OK) {
    const int code = fail("upload", status);
    flashjit_runtime_destroy(rt);
    return code;
  }

  const flashjit_tensor q_t = bshd_tensor(q, FLASHJIT_DTYPE_BF16, kSeqlen, kHeadsQ);
  const flashjit_tensor k_t = bshd_tensor(k, FLASHJIT_DTYPE_BF16, kSeqlen, kHeadsKv);
  const flashjit_tensor v_t = bshd_tensor(v, FLASHJIT_DTYPE_BF16, kSeqlen, kHeadsKv);
  const flashjit_tensor o_t = bshd_tensor(o, FLASHJIT_DTYPE_BF16, kSeqlen, kHeadsQ);
  /* lse is fp32 [batch, heads_q, seqlen_q], contiguous. */
  const flashjit_tensor lse_t = {
      lse, FLASHJIT_DTYPE_F32, 3, {1, kHeadsQ, kSeqlen, 0}, {kHeadsQ * kSeqlen, kSeqlen, 1, 0}};

  status = flashjit_attention_forward(rt, &attn, &q_t, &k_t, &v_t, &o_t, &lse_t, NULL);
  if (status == FLASHJIT_OK) status = flashjit_synchronize(rt, NULL);
  printf("forward: %s\n", flashjit_status_name(status));

  uint16_t o_host[8];
  float lse_host[4];
  if (status == FLASHJIT_OK) status = flashjit_copy_to_host(rt, o_host, o, sizeof o_host);
  if (status == FLASHJIT_OK) status = flashjit_copy_to_host(rt, lse_host, lse, sizeof lse_host);
  if (status != FLASHJIT_OK) {
    const int code = fail("flashjit_attention_forward", status);
    flashjit_runtime_destroy(rt);
    return code;
  }
  printf("o[0, 0, 0, 0:8] =");
  for (int i = 0; i < 8; ++i) printf(" %.4f", (double)float_from_bf16(o_host[i]));
  printf("\nlse[0, 0, 0:4] =");
  for (int i = 0; i < 4; ++i) printf(" %.4f", (double)lse_host[i]);
  printf("\n");
  flashjit_runtime_destroy(rt);
  return 0;
}
