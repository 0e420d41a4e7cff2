/* bf16-weight linear for x86 CPUs with AVX2 + FMA: y[M,N] = x[M,K] (fp32) . W[N,K]^T (bf16) + b[N].

   Weights are read once from memory as bf16 (half the bytes of fp32), widened to fp32 in an L1 tile of RT
   rows, and multiplied with MT input rows at a time; accumulation is fp32. Each output y[m,n] is the same
   sequence of operations whatever M is and wherever row m falls in a tile (8 lane sums over k in order,
   then one fixed horizontal sum), so a one-row call and a many-row call give bit-identical rows.
   Built and loaded by inference/kernels/native.py. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>

#define RT 4
#ifndef MT
#define MT 3
#endif
static inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehdup_ps(lo);
  __m128 s = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, s);
  s = _mm_add_ss(s, sh);
  return _mm_cvtss_f32(s);
}
static inline __m256 ld_bf16(const uint16_t *p) {
  __m128i h = _mm_loadu_si128((const __m128i *)p);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
void bf16w_linear(const float *x, const uint16_t *w, const float *b, float *y,
                  int64_t M, int64_t N, int64_t K, int nthreads) {
  int64_t tiles = (N + RT - 1) / RT;
  #pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t t = 0; t < tiles; t++) {
    int64_t n0 = t * RT;
    int rows = (int)((N - n0) < RT ? (N - n0) : RT);
    const int64_t KP = (K + 7) & ~(int64_t)7; /* row stride: keeps every 8-float chunk 32-byte aligned */
    float wf[RT][KP] __attribute__((aligned(32)));
    for (int r = 0; r < rows; r++) {
      const uint16_t *wr = w + (n0 + r) * K;
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) _mm256_store_ps(&wf[r][k], ld_bf16(wr + k));
      for (; k < K; k++) { uint32_t u = (uint32_t)wr[k] << 16; memcpy(&wf[r][k], &u, 4); }
    }
    for (int r = rows; r < RT; r++) memset(wf[r], 0, sizeof(float) * K); /* the last tile's unused rows */
    int64_t m = 0;
    for (; m + MT <= M; m += MT) {
      __m256 acc[MT][RT];
      for (int i = 0; i < MT; i++) for (int r = 0; r < RT; r++) acc[i][r] = _mm256_setzero_ps();
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) {
        __m256 xv[MT];
        for (int i = 0; i < MT; i++) xv[i] = _mm256_loadu_ps(x + (m + i) * K + k);
        for (int r = 0; r < RT; r++) {
          __m256 wv = _mm256_load_ps(&wf[r][k]);
          for (int i = 0; i < MT; i++) acc[i][r] = _mm256_fmadd_ps(xv[i], wv, acc[i][r]);
        }
      }
      for (int i = 0; i < MT; i++) {
        const float *xm = x + (m + i) * K;
        for (int r = 0; r < rows; r++) {
          float s = hsum(acc[i][r]);
          for (int64_t kk = k; kk < K; kk++) s += xm[kk] * wf[r][kk];
          y[(m + i) * N + n0 + r] = b ? s + b[n0 + r] : s;
        }
      }
    }
    for (; m < M; m++) {
      const float *xm = x + m * K;
      __m256 acc[RT];
      for (int r = 0; r < RT; r++) acc[r] = _mm256_setzero_ps();
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) {
        __m256 xv = _mm256_loadu_ps(xm + k);
        for (int r = 0; r < RT; r++) acc[r] = _mm256_fmadd_ps(xv, _mm256_load_ps(&wf[r][k]), acc[r]);
      }
      for (int r = 0; r < rows; r++) {
        float s = hsum(acc[r]);
        for (int64_t kk = k; kk < K; kk++) s += xm[kk] * wf[r][kk];
        y[m * N + n0 + r] = b ? s + b[n0 + r] : s;
      }
    }
  }
}
