// Host emulation of the small CUDA subset the generated SpMV kernels use, so CPU-only CI can
// execute every schedule and compare values and owners with the IR simulation.
// Blocks run one after another; the threads of a block run as std::threads when the kernel
// synchronises (shuffles, barriers), else one after another. Force-included by g++ -include.
#pragma once  // (g++ warns about this when precompiling; harmless)
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

// CUDA's math functions the kernels call (teaal_fma): fused, one rounding, as on the GPU
using std::fma;
using std::fmaf;

struct dim3 { unsigned x = 0, y = 0, z = 0; };
// The 16-byte vector types of the kernels' vector loads (TEAAL_DENSE_VECTOR).
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
inline thread_local dim3 threadIdx;
inline dim3 blockIdx;
inline dim3 gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

template <class T> inline T __ldg(const T* p) { return *p; }
// A 16-byte load must be 16-byte aligned on the GPU (else: misaligned address): abort here too.
template <class V> inline V emu_load16(const V* p) {
  if (reinterpret_cast<unsigned long long>(p) % 16) {
    std::fprintf(stderr, "misaligned 16-byte load at %p\n", static_cast<const void*>(p));
    std::abort();
  }
  return *p;
}
inline float4 __ldg(const float4* p) { return emu_load16(p); }
inline double2 __ldg(const double2* p) { return emu_load16(p); }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
// Blocks run one after another, each thread's writes are seen by the next: no fence needed.
inline void __threadfence() {}

inline std::mutex& emu_atomic_mutex() { static std::mutex m; return m; }
template <class T> inline T atomicAdd(T* p, T v) {
  std::lock_guard<std::mutex> lock(emu_atomic_mutex());
  T old = *p;
  *p = old + v;
  return old;
}

// A reusable barrier for `count` threads.
struct EmuBarrier {
  std::mutex m;
  std::condition_variable cv;
  unsigned count, waiting = 0, generation = 0;
  explicit EmuBarrier(unsigned c) : count(c) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    unsigned gen = generation;
    if (++waiting == count) { waiting = 0; ++generation; cv.notify_all(); return; }
    cv.wait(lock, [&] { return gen != generation; });
  }
};

inline std::mutex& emu_registry_mutex() { static std::mutex m; return m; }
// Barriers by (kind, key, count): each is created once and reused by every block.
inline EmuBarrier& emu_barrier(int kind, unsigned long long key, unsigned count) {
  static std::map<std::tuple<int, unsigned long long, unsigned>, EmuBarrier*> barriers;
  std::lock_guard<std::mutex> lock(emu_registry_mutex());
  auto k = std::make_tuple(kind, key, count);
  auto it = barriers.find(k);
  if (it == barriers.end()) it = barriers.emplace(k, new EmuBarrier(count)).first;
  return *it->second;
}

extern unsigned emu_block_threads;
inline void __syncthreads() { emu_barrier(0, 0, emu_block_threads).wait(); }
inline void __barrier_sync_count(unsigned id, unsigned count) { emu_barrier(1, id, count).wait(); }

inline double emu_slots[1024];  // one exchange slot per thread of the block
// A shuffle among the lanes of `mask`: every lane publishes v, then takes lane src's value, or
// keeps its own where src is -1 (a source outside its segment). Aborts on a lane, or a source,
// outside the mask: on the GPU that is undefined.
template <class T> inline T emu_shuffle(unsigned mask, T v, int src) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (!(mask & (1u << lane))) { std::fprintf(stderr, "lane %u not in mask %x\n", lane, mask); std::abort(); }
  EmuBarrier& bar = emu_barrier(2, (unsigned long long)warp << 32 | mask, __builtin_popcount(mask));
  emu_slots[threadIdx.x] = (double)v;
  bar.wait();
  T out = v;
  if (src >= 0) {
    if (!(mask & (1u << src))) { std::fprintf(stderr, "source lane %d not in mask\n", src); std::abort(); }
    out = (T)emu_slots[warp * 32 + src];
  }
  bar.wait();
  return out;
}
// Lane src_lane of this lane's segment of `width` lanes.
template <class T> inline T __shfl_sync(unsigned mask, T v, int src_lane, int width) {
  const unsigned lane = threadIdx.x % 32;
  return emu_shuffle(mask, v, (int)(lane / width * width + (unsigned)src_lane % width));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width) {
  const unsigned lane = threadIdx.x % 32;
  return emu_shuffle(mask, v, (lane % width) + delta < (unsigned)width ? (int)(lane + delta) : -1);
}
