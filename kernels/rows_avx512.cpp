// See kernels/rows_avx512.h.
#include "kernels/rows_avx512.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace mrmf::kernels {

namespace {
bool cpu_has_avx512f() {
#if defined(MRMF_ROWS_AVX512)
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
#else
  return false;
#endif
}
// MRMF_CPU_AVX512: unset, empty or "1" on, "0" off; anything else is
// reported by check_rows_avx512_env() (here: on).
int env_switch() {
  const char* e = std::getenv("MRMF_CPU_AVX512");
  if (!e || !*e || !std::strcmp(e, "1")) return 1;
  return !std::strcmp(e, "0") ? 0 : -1;
}
// A function-local static: read once, on first use, whatever the order in
// which translation units are initialized.
std::atomic<bool>& switch_on() {
  static std::atomic<bool> on{env_switch() != 0};
  return on;
}
}  // namespace

bool rows_avx512() { return cpu_has_avx512f() && switch_on().load(std::memory_order_relaxed); }
void set_rows_avx512(bool on) { switch_on().store(on, std::memory_order_relaxed); }

void check_rows_avx512_env() {
  MRMF_CHECK_KIND(Usage, env_switch() >= 0, "MRMF_CPU_AVX512='", std::getenv("MRMF_CPU_AVX512"),
                  "': expected 0 (the plain loops) or 1 (AVX-512 where the CPU has it, the default)");
}

std::string rows_avx512_description() {
  if (!cpu_has_avx512f()) return "plain loops (this CPU has no AVX-512F)";
  return rows_avx512() ? "AVX-512 (MRMF_CPU_AVX512=0 turns it off)" : "plain loops (AVX-512 off: MRMF_CPU_AVX512=0)";
}

#if defined(MRMF_ROWS_AVX512)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge
// operand, which -Wmaybe-uninitialized then reports at every use (a known
// false positive of the headers, not of this code).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {
template <bool kFirst>
__attribute__((target("avx512f"))) void add_rows(float* acc, const uint16_t* x, int64_t n, const float* table) {
  // Entries 0-31 and 32-63; permutex2var picks from a register pair by the
  // index's low five bits, bit 5 chooses the pair.
  const __m512 t0 = _mm512_loadu_ps(table), t1 = _mm512_loadu_ps(table + 16);
  const __m512 t2 = _mm512_loadu_ps(table + 32), t3 = _mm512_loadu_ps(table + 48);
  const __m512i above63 = _mm512_set1_epi32(~63), bit5 = _mm512_set1_epi32(32);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m512i idx = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k)));
    __m512 v;
    // A branch, not a masked gather of the large lanes: a gather costs about
    // as much with an empty mask (measured: 2.7 against 8.1 G lookups/s on
    // one core), and on counts the branch is nearly always taken.
    if (__builtin_expect(_mm512_test_epi32_mask(idx, above63) == 0, 1)) {
      const __m512 lo = _mm512_permutex2var_ps(t0, idx, t1), hi = _mm512_permutex2var_ps(t2, idx, t3);
      v = _mm512_mask_blend_ps(_mm512_test_epi32_mask(idx, bit5), lo, hi);
    } else {
      v = _mm512_i32gather_ps(idx, table, 4);
    }
    _mm512_storeu_ps(acc + k, kFirst ? v : _mm512_add_ps(_mm512_loadu_ps(acc + k), v));
  }
  for (; k < n; ++k) acc[k] = kFirst ? table[x[k]] : acc[k] + table[x[k]];
}
}  // namespace
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void table_rows_add_avx512(float* acc, const uint16_t* x, int64_t n, const float* table, bool first) {
  if (first)
    add_rows<true>(acc, x, n, table);
  else
    add_rows<false>(acc, x, n, table);
}
#else
void table_rows_add_avx512(float* acc, const uint16_t* x, int64_t n, const float* table, bool first) {
  // Never chosen here (rows_avx512() is false); the plain loop, for safety.
  for (int64_t k = 0; k < n; ++k) acc[k] = first ? table[x[k]] : acc[k] + table[x[k]];
}
#endif

}  // namespace mrmf::kernels
