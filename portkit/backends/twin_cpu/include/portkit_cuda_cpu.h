// portkit_cuda_cpu.h: what a CUDA C twin needs to compile and run on a CPU.
//
// The threads of one block run as user-level fibers, one block at a time. A fiber is a
// stack and a saved context: on x86-64 a 20-instruction switch (callee-saved registers,
// MXCSR and the x87 control word), elsewhere ucontext's swapcontext. glibc's swapcontext
// makes a sigprocmask system call on every switch and AddressSanitizer's interceptor of it
// clears the shadow of the whole target stack each time; the plain switch does neither
// (docs/twin-cpu.md has the numbers).
// A fiber runs until it waits: at a barrier (__syncthreads and its forms) or at a warp
// function (__syncwarp, __shfl_*_sync, __ballot_sync, ...). The last thread to arrive
// completes the wait, and the scheduler resumes the waiting threads in thread order
// (or in reverse order: the schedule check). Static __shared__ variables live in the
// ELF section "portkit_shared" (one copy, reused by every block since one block runs at
// a time), dynamic shared memory in one heap buffer per launch; both are filled with
// 0xFF bytes (NaN for half, float and double) before each block, so a read before any
// write shows (0x00 bytes with ZERO_SHARED: the check compares the two). Python drives it through the extern "C" launchers portkit generates
// (portkit/backends/twin_cpu/build.py) and reads errors from a message buffer.
#pragma once

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "portkit_math.h"  // portkit/simt/floatmath: the math the simulator computes too

#if defined(__SANITIZE_ADDRESS__)
#define PORTKIT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PORTKIT_ASAN 1
#endif
#endif

#ifdef PORTKIT_ASAN
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom,
                                               size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                                size_t* size_old);
#endif
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace portkit_cpu {
#if defined(__x86_64__) && !defined(PORTKIT_UCONTEXT)
// portkit_cpu_switch(&from->sp, to->sp): push the callee-saved state, save the stack
// pointer, load the other one, pop its state and return into it.
extern "C" void portkit_cpu_switch(void** save_sp, void* load_sp);
asm(R"(
    .text
    .globl portkit_cpu_switch
    .hidden portkit_cpu_switch
    .type portkit_cpu_switch, @function
portkit_cpu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size portkit_cpu_switch, .-portkit_cpu_switch
)");
struct Context { void* sp; };
inline void context_switch(Context* from, Context* to) { portkit_cpu_switch(&from->sp, to->sp); }
// A stack that `ret`s into `entry` with the alignment of a fresh call.
inline void context_make(Context* c, char* stack, size_t size, void (*entry)()) {
    uint64_t* sp = reinterpret_cast<uint64_t*>(((uintptr_t)(stack + size)) & ~(uintptr_t)15);
    *--sp = 0;                                  // entry never returns
    *--sp = reinterpret_cast<uint64_t>(entry);  // popped by ret: 16-byte aligned slot
    for (int r = 0; r < 6; ++r) *--sp = 0;      // rbp rbx r12 r13 r14 r15
    *--sp = 0x1F80ull | (0x037Full << 32);      // default MXCSR and x87 control word
    c->sp = sp;
}
#else
struct Context { ucontext_t uc; };
inline void context_switch(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }
inline void context_make(Context* c, char* stack, size_t size, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, entry, 0);
}
#endif
}  // namespace portkit_cpu

// ---- keywords ---------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
#define __constant__ static
#define __managed__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __grid_constant__
// Static shared memory: one section, so the runtime can find and poison all of it.
// `extern __shared__` (dynamic) is rewritten by portkit before compiling. GCC ignores the
// section of a static local in a template (it goes to a COMDAT .bss), so portkit also
// appends PORTKIT_SHARED_REGISTER(name) to every declaration (build.py): the first time it
// runs, the variable joins the list of ranges poisoned before each block.
#define __shared__ static __attribute__((section("portkit_shared")))
#define PORTKIT_CAT2(a, b) a##b
#define PORTKIT_CAT(a, b) PORTKIT_CAT2(a, b)
#define PORTKIT_SHARED_REGISTER(name)                                                  \
    [[maybe_unused]] static const bool PORTKIT_CAT(portkit_shared_, __COUNTER__) =      \
        ::portkit_cpu::register_shared(&(name), sizeof(name));
#define __CUDA_ARCH__ 900
#define __CUDACC__ 1
#define PORTKIT_CUDA_CPU 1

// ---- vector and index types --------------------------------------------------------------
struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
#define PORTKIT_VEC(T, N2, N3, N4, A2, A4)                                                 \
    struct alignas(A2) N2 { T x, y; };                                                    \
    struct N3 { T x, y, z; };                                                             \
    struct alignas(A4) N4 { T x, y, z, w; };                                              \
    inline N2 make_##N2(T x, T y) { return N2{x, y}; }                                    \
    inline N3 make_##N3(T x, T y, T z) { return N3{x, y, z}; }                            \
    inline N4 make_##N4(T x, T y, T z, T w) { return N4{x, y, z, w}; }
PORTKIT_VEC(float, float2, float3, float4, 8, 16)
PORTKIT_VEC(double, double2, double3, double4, 16, 32)
PORTKIT_VEC(int, int2, int3, int4, 8, 16)
PORTKIT_VEC(unsigned, uint2, uint3_, uint4, 8, 16)
PORTKIT_VEC(long long, longlong2, longlong3, longlong4, 16, 32)
#undef PORTKIT_VEC
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
inline dim3 make_dim3(unsigned x, unsigned y, unsigned z) { return dim3(x, y, z); }

static constexpr int warpSize = 32;

// ---- the runtime ---------------------------------------------------------------------------
namespace portkit_cpu {

enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE };
enum WarpOp { W_SYNC, W_SHFL, W_UP, W_DOWN, W_XOR, W_BALLOT, W_ANY, W_ALL, W_MATCH_ANY,
              W_MATCH_ALL, W_RED_ADD, W_RED_MIN, W_RED_MAX, W_RED_AND, W_RED_OR, W_RED_XOR };
enum BarrierOp { B_SYNC, B_COUNT, B_AND, B_OR };
// ZERO_SHARED: fill shared memory with 0x00 instead of 0xFF (the uninitialised-value check).
enum Flags { REVERSE = 1, STRICT = 2, ZERO_SHARED = 4 };

struct Fiber {
    Context ctx;
    void* fake_stack;  // AddressSanitizer's bookkeeping of a stack being left
    uint3 index;
    int lane, warp;
    State state;
    const char* file;
    int line;
    int op;            // BarrierOp or WarpOp while waiting
    unsigned mask;     // warp functions
    int arg, width;    // shuffle source/delta/lane mask, segment width
    int size;          // bytes of the exchanged value
    uint64_t value;    // the value a lane brings (predicates too)
    uint64_t result;   // what it leaves with
    char* stack;
};

struct Launch {
    dim3 grid, block;
    void (*thunk)(void**);
    void** args;
    const char* kernel;
    int flags;
    Fiber* fibers;
    int threads, live, at_barrier, warps;
    unsigned* arrived;  // per warp: lanes waiting in a warp function
    unsigned* exited;   // per warp: lanes that returned
    Context scheduler;
    const void* main_bottom;  // the scheduler's stack, as AddressSanitizer reports it
    size_t main_size;
    Fiber* current;
    bool failed;
    char* error;
    size_t error_size;
    size_t stack_size;
    char* stacks;
    void* fake_stack;
    uint64_t float_atomics;
};

inline Launch* g_launch = nullptr;
inline unsigned char* g_dynamic_shared = nullptr;
inline uint64_t g_clock = 0;
// The span of addresses that float atomicAdds touched in the current launch: summing in
// another order rounds differently, so the schedule check does not blame those bytes.
inline uintptr_t g_float_atomic_low = UINTPTR_MAX, g_float_atomic_high = 0;
inline void note_float_atomic(const void* address, size_t size) {
    const uintptr_t a = (uintptr_t)address;
    if (a < g_float_atomic_low) g_float_atomic_low = a;
    if (a + size > g_float_atomic_high) g_float_atomic_high = a + size;
}

}  // namespace portkit_cpu

// The built-in variables: plain globals the scheduler sets before resuming a fiber.
inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

namespace portkit_cpu {

inline unsigned char* dynamic_shared() { return g_dynamic_shared; }

// Static shared variables outside the section (see __shared__): filled like it.
struct SharedRange {
    void* address;
    size_t size;
};
inline SharedRange g_shared_ranges[512];
inline int g_shared_count = 0;
inline int shared_fill() { return g_launch && (g_launch->flags & ZERO_SHARED) ? 0 : 0xFF; }
inline bool register_shared(void* address, size_t size) {
    for (int k = 0; k < g_shared_count; ++k)
        if (g_shared_ranges[k].address == address) return true;
    if (g_shared_count < 512) g_shared_ranges[g_shared_count++] = SharedRange{address, size};
    memset(address, shared_fill(), size);  // first use: before any thread writes it
    return true;
}

// The linker defines these around the "portkit_shared" section; the anchor makes sure the
// section exists (and the symbols with it) when a twin has no static shared memory.
__attribute__((section("portkit_shared"), used)) static char shared_anchor[16];
}  // namespace portkit_cpu
extern "C" char __start_portkit_shared[] __attribute__((visibility("hidden")));
extern "C" char __stop_portkit_shared[] __attribute__((visibility("hidden")));
namespace portkit_cpu {

__attribute__((format(printf, 1, 2))) inline void record_error(const char* format, ...) {
    Launch* L = g_launch;
    if (L->failed) return;
    L->failed = true;
    va_list ap;
    va_start(ap, format);
    vsnprintf(L->error, L->error_size, format, ap);
    va_end(ap);
}

inline void to_scheduler() {
    Launch* L = g_launch;
    Fiber* f = L->current;
#ifdef PORTKIT_ASAN
    __sanitizer_start_switch_fiber(&f->fake_stack, L->main_bottom, L->main_size);
#endif
    context_switch(&f->ctx, &L->scheduler);
#ifdef PORTKIT_ASAN
    __sanitizer_finish_switch_fiber(f->fake_stack, &L->main_bottom, &L->main_size);
#endif
}

// Stops the launch from inside a kernel: the fiber never runs again.
[[noreturn]] inline void fail_here() {
    Launch* L = g_launch;
    L->current->state = DONE;
    to_scheduler();
    __builtin_unreachable();
}

inline const char* where(const char* file) { return file ? file : "?"; }

// ---- barriers ----
inline void release_barrier(Launch* L) {
    int count = 0, all = 1, any = 0;
    const Fiber* first = nullptr;
    for (int t = 0; t < L->threads; ++t) {
        Fiber& f = L->fibers[t];
        if (f.state != AT_BARRIER) continue;
        if (!first) first = &f;
        if ((L->flags & STRICT) && (f.line != first->line || strcmp(f.file, first->file) != 0)) {
            record_error(
                "divergent __syncthreads in %s block (%u,%u,%u): thread (%u,%u,%u) waits at %s:%d, "
                "thread (%u,%u,%u) at %s:%d; every thread of a block must reach the same barrier",
                L->kernel, blockIdx.x, blockIdx.y, blockIdx.z, first->index.x, first->index.y,
                first->index.z, where(first->file), first->line, f.index.x, f.index.y, f.index.z,
                where(f.file), f.line);
            return;
        }
        count += f.value != 0;
        all &= f.value != 0;
        any |= f.value != 0;
    }
    for (int t = 0; t < L->threads; ++t) {
        Fiber& f = L->fibers[t];
        if (f.state != AT_BARRIER) continue;
        f.state = RUNNABLE;
        f.result = f.op == B_COUNT ? count : f.op == B_AND ? all : f.op == B_OR ? any : 0;
    }
    L->at_barrier = 0;
}

inline int barrier(int op, int predicate, const char* file, int line) {
    Launch* L = g_launch;
    Fiber* f = L->current;
    f->state = AT_BARRIER;
    f->op = op;
    f->value = predicate != 0;
    f->file = file;
    f->line = line;
    if (++L->at_barrier == L->live) release_barrier(L);
    to_scheduler();
    return (int)f->result;
}

// ---- warp functions ----
inline void complete_warp(Launch* L, int warp, unsigned mask);

// The lanes of `mask` that a warp function waits for: those that have not returned.
inline unsigned waited_for(Launch* L, int warp, unsigned mask) { return mask & ~L->exited[warp]; }

inline void try_complete(Launch* L, int warp, unsigned mask) {
    unsigned need = waited_for(L, warp, mask);
    if (need && (L->arrived[warp] & need) == need) complete_warp(L, warp, need);
}

inline bool source_lane(const Fiber& f, int& src) {
    const int width = f.width, lane = f.lane;
    const int first = lane & ~(width - 1);  // first lane of this lane's segment
    switch (f.op) {
        case W_SHFL: src = first + (f.arg & (width - 1)); return true;
        case W_UP: src = lane - f.arg; return src >= first;
        case W_DOWN: src = lane + f.arg; return src < first + width;
        case W_XOR: src = lane ^ f.arg; return src < first + width;
        default: return false;
    }
}

inline void complete_warp(Launch* L, int warp, unsigned mask) {
    Fiber* lanes = L->fibers + warp * 32;
    const int base_lane = 0;
    (void)base_lane;
    const Fiber* first = nullptr;
    uint64_t ballot = 0;
    for (int l = 0; l < 32; ++l) {
        if (!(mask >> l & 1)) continue;
        Fiber& f = lanes[l];
        if (!first) first = &f;
        if ((L->flags & STRICT) && (f.op != first->op || f.mask != first->mask)) {
            record_error(
                "warp %d of %s block (%u,%u,%u): lane %d is in a warp function at %s:%d (mask "
                "0x%08x) while lane %d is in a different one at %s:%d (mask 0x%08x); lanes of one "
                "mask must meet at the same warp function with the same mask",
                warp, L->kernel, blockIdx.x, blockIdx.y, blockIdx.z, first->lane,
                where(first->file), first->line, first->mask, f.lane, where(f.file), f.line,
                f.mask);
            return;
        }
        if (f.value) ballot |= 1ull << l;
    }
    for (int l = 0; l < 32; ++l) {
        if (!(mask >> l & 1)) continue;
        Fiber& f = lanes[l];
        int src;
        switch (f.op) {
            case W_SHFL: case W_UP: case W_DOWN: case W_XOR:
                if (!source_lane(f, src)) src = f.lane;  // out of the segment: own value
                // A lane outside the mask has no defined value: poison, so it shows.
                f.result = (src < 32 && (mask >> src & 1)) ? lanes[src].value : ~0ull;
                break;
            case W_BALLOT: f.result = ballot; break;
            case W_ANY: f.result = ballot != 0; break;
            case W_ALL: f.result = ballot == mask; break;
            case W_MATCH_ANY: case W_MATCH_ALL: {
                uint64_t same = 0;
                for (int o = 0; o < 32; ++o)
                    if ((mask >> o & 1) && lanes[o].value == f.value) same |= 1ull << o;
                f.result = f.op == W_MATCH_ANY ? same : (same == mask ? mask : 0);
                break;
            }
            case W_RED_ADD: case W_RED_MIN: case W_RED_MAX: case W_RED_AND: case W_RED_OR:
            case W_RED_XOR: {
                const bool is_signed = f.arg != 0;
                uint64_t acc = f.value;
                for (int o = 0; o < 32; ++o) {
                    if (!(mask >> o & 1) || o == l) continue;
                    const uint64_t v = lanes[o].value;
                    const int32_t sa = (int32_t)acc, sv = (int32_t)v;
                    const uint32_t ua = (uint32_t)acc, uv = (uint32_t)v;
                    switch (f.op) {
                        case W_RED_ADD: acc = (uint32_t)(ua + uv); break;
                        case W_RED_MIN: acc = is_signed ? (uint32_t)std::min(sa, sv) : std::min(ua, uv); break;
                        case W_RED_MAX: acc = is_signed ? (uint32_t)std::max(sa, sv) : std::max(ua, uv); break;
                        case W_RED_AND: acc = ua & uv; break;
                        case W_RED_OR: acc = ua | uv; break;
                        default: acc = ua ^ uv; break;
                    }
                }
                f.result = acc;
                break;
            }
            default: f.result = 0;
        }
        f.state = RUNNABLE;
    }
    L->arrived[warp] &= ~mask;
}

inline uint64_t warp_op(int op, unsigned mask, uint64_t value, int size, int arg, int width,
                        const char* file, int line) {
    Launch* L = g_launch;
    Fiber* f = L->current;
    if (!(mask >> f->lane & 1)) {
        record_error(
            "%s block (%u,%u,%u) thread (%u,%u,%u): lane %d calls a warp function at %s:%d with "
            "mask 0x%08x that does not include itself",
            L->kernel, blockIdx.x, blockIdx.y, blockIdx.z, f->index.x, f->index.y, f->index.z,
            f->lane, where(file), line, mask);
        fail_here();
    }
    if (width < 1 || width > 32 || (width & (width - 1))) {
        record_error("%s: shuffle width %d at %s:%d is not a power of two from 1 to 32",
                     L->kernel, width, where(file), line);
        fail_here();
    }
    f->state = AT_WARP;
    f->op = op;
    f->mask = mask;
    f->value = value;
    f->size = size;
    f->arg = arg;
    f->width = width;
    f->file = file;
    f->line = line;
    L->arrived[f->warp] |= 1u << f->lane;
    try_complete(L, f->warp, mask);
    to_scheduler();
    return f->result;
}

template <typename T>
inline uint64_t bits_of(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles move values of at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}
template <typename T>
inline T from_bits(uint64_t b) {
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}

// ---- the scheduler ----
// A fiber runs its thread of every block of the launch: after the kernel returns it
// waits in to_scheduler, and resuming it starts the same thread of the next block.
[[noreturn]] inline void fiber_main() {
#ifdef PORTKIT_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &g_launch->main_bottom, &g_launch->main_size);
#endif
    for (;;) {
        Launch* L = g_launch;
        L->thunk(L->args);
        Fiber* f = L->current;
        f->state = DONE;
        --L->live;
        L->exited[f->warp] |= 1u << f->lane;
        // A barrier or warp function no longer waits for this thread.
        if (L->live > 0 && L->at_barrier == L->live) release_barrier(L);
        if (L->arrived[f->warp]) {
            Fiber* lanes = L->fibers + f->warp * 32;
            for (int l = 0; l < 32; ++l)
                if (L->arrived[f->warp] >> l & 1) try_complete(L, f->warp, lanes[l].mask);
        }
        to_scheduler();
    }
}

inline void resume(Launch* L, Fiber* f) {
    L->current = f;
    threadIdx = f->index;
#ifdef PORTKIT_ASAN
    __sanitizer_start_switch_fiber(&L->fake_stack, f->stack, L->stack_size);
#endif
    context_switch(&L->scheduler, &f->ctx);
#ifdef PORTKIT_ASAN
    __sanitizer_finish_switch_fiber(L->fake_stack, nullptr, nullptr);
#endif
}

inline void describe_deadlock(Launch* L) {
    for (int t = 0; t < L->threads; ++t) {
        Fiber& f = L->fibers[t];
        if (f.state == AT_WARP) {
            record_error(
                "deadlock in %s block (%u,%u,%u): thread (%u,%u,%u) waits in a warp function at "
                "%s:%d for lanes 0x%08x of warp %d, which never arrive (they wait elsewhere)",
                L->kernel, blockIdx.x, blockIdx.y, blockIdx.z, f.index.x, f.index.y, f.index.z,
                where(f.file), f.line, f.mask & ~L->arrived[f.warp], f.warp);
            return;
        }
    }
    record_error("deadlock in %s block (%u,%u,%u): threads wait and none can go on", L->kernel,
                 blockIdx.x, blockIdx.y, blockIdx.z);
}

inline void run_block(Launch* L, uint3 block) {
    blockIdx = block;
    memset(__start_portkit_shared, shared_fill(), __stop_portkit_shared - __start_portkit_shared);
    for (int k = 0; k < g_shared_count; ++k)
        memset(g_shared_ranges[k].address, shared_fill(), g_shared_ranges[k].size);
    L->live = L->threads;
    L->at_barrier = 0;
    for (int w = 0; w < L->warps; ++w) L->arrived[w] = L->exited[w] = 0;
    for (int t = 0; t < L->threads; ++t) L->fibers[t].state = RUNNABLE;
    const bool reverse = L->flags & REVERSE;
    while (L->live > 0 && !L->failed) {
        bool ran = false;
        for (int i = 0; i < L->threads && !L->failed; ++i) {
            Fiber* f = &L->fibers[reverse ? L->threads - 1 - i : i];
            if (f->state != RUNNABLE) continue;
            resume(L, f);
            ran = true;
        }
        if (!ran && L->live > 0 && !L->failed) describe_deadlock(L);
    }
}

inline void death_report() {
    Launch* L = g_launch;
    if (!L || !L->current) return;
    fprintf(stderr, "portkit-cpu: the error above happened in block (%u,%u,%u), thread (%u,%u,%u)\n",
            blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
}

// Runs the whole grid; returns 0, or 1 with a message in `error`.
inline int launch(void (*thunk)(void**), const char* kernel, void** args, const unsigned* grid,
                  const unsigned* block, size_t shared_bytes, int flags, char* error,
                  size_t error_size) {
    Launch L{};
    L.grid = dim3(grid[0], grid[1], grid[2]);
    L.block = dim3(block[0], block[1], block[2]);
    L.thunk = thunk;
    L.args = args;
    L.kernel = kernel;
    L.flags = flags;
    L.error = error;
    L.error_size = error_size;
    error[0] = 0;
    L.threads = (int)(block[0] * block[1] * block[2]);
    L.warps = (L.threads + 31) / 32;
#ifdef PORTKIT_ASAN
    L.stack_size = 256 * 1024;  // ASan's redzones make frames larger
#else
    L.stack_size = 128 * 1024;
#endif
    // One mapping for every stack; touched pages only are ever backed by memory.
    size_t total = L.stack_size * (size_t)L.threads;
    void* stacks = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stacks == MAP_FAILED) {
        snprintf(error, error_size, "cannot map %zu bytes of fiber stacks", total);
        return 1;
    }
    L.stacks = (char*)stacks;
    L.fibers = new Fiber[L.threads];
    L.arrived = new unsigned[L.warps];
    L.exited = new unsigned[L.warps];
    for (unsigned z = 0, t = 0; z < block[2]; ++z)
        for (unsigned y = 0; y < block[1]; ++y)
            for (unsigned x = 0; x < block[0]; ++x, ++t) {
                Fiber& f = L.fibers[t];
                f.index = uint3{x, y, z};
                f.lane = (int)(t % 32);
                f.warp = (int)(t / 32);
                f.stack = L.stacks + L.stack_size * t;
                f.fake_stack = nullptr;
                context_make(&f.ctx, f.stack, L.stack_size, fiber_main);
            }
    // Dynamic shared memory: an exact heap block, so AddressSanitizer bounds it.
    void* dynamic = nullptr;
    if (posix_memalign(&dynamic, 16, shared_bytes ? shared_bytes : 1) != 0) dynamic = nullptr;
    g_dynamic_shared = (unsigned char*)dynamic;
    Launch* outer = g_launch;
    g_launch = &L;
    g_float_atomic_low = UINTPTR_MAX;
    g_float_atomic_high = 0;
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(death_report);
    blockDim = L.block;
    gridDim = L.grid;
    for (unsigned z = 0; z < grid[2] && !L.failed; ++z)
        for (unsigned y = 0; y < grid[1] && !L.failed; ++y)
            for (unsigned x = 0; x < grid[0] && !L.failed; ++x) {
                if (dynamic) memset(dynamic, (flags & ZERO_SHARED) ? 0 : 0xFF, shared_bytes);
                run_block(&L, uint3{x, y, z});
            }
    L.current = nullptr;
    g_launch = outer;
    free(dynamic);
    g_dynamic_shared = nullptr;
    delete[] L.fibers;
    delete[] L.arrived;
    delete[] L.exited;
    munmap(stacks, total);
    return L.failed ? 1 : 0;
}

// Calls a kernel with its arguments read from `args` (pointers to each value, as
// cuLaunchKernel takes them); the parameter types come from the kernel itself.
template <typename... P, size_t... I>
inline void call_with(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_reference_t<P>*>(args[I])...);
}
template <typename... P>
inline void call(void (*kernel)(P...), void** args) {
    call_with(kernel, args, std::index_sequence_for<P...>{});
}

}  // namespace portkit_cpu

#define PORTKIT_HERE const char* file_ = __builtin_FILE(), int line_ = __builtin_LINE()

// ---- synchronization ---------------------------------------------------------------------
inline void __syncthreads(PORTKIT_HERE) { portkit_cpu::barrier(portkit_cpu::B_SYNC, 1, file_, line_); }
inline int __syncthreads_count(int p, PORTKIT_HERE) { return portkit_cpu::barrier(portkit_cpu::B_COUNT, p, file_, line_); }
inline int __syncthreads_and(int p, PORTKIT_HERE) { return portkit_cpu::barrier(portkit_cpu::B_AND, p, file_, line_); }
inline int __syncthreads_or(int p, PORTKIT_HERE) { return portkit_cpu::barrier(portkit_cpu::B_OR, p, file_, line_); }
inline void __syncwarp(unsigned mask = 0xffffffffu, PORTKIT_HERE) {
    portkit_cpu::warp_op(portkit_cpu::W_SYNC, mask, 0, 0, 0, 32, file_, line_);
}
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
inline void __nanosleep(unsigned) {}
inline long long clock64() { return (long long)++portkit_cpu::g_clock; }
[[noreturn]] inline void __trap_impl(const char* file, int line) {
    portkit_cpu::record_error("__trap() at %s:%d in block (%u,%u,%u) thread (%u,%u,%u)", file, line,
                              blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
    portkit_cpu::fail_here();
}
#define __trap() __trap_impl(__FILE__, __LINE__)
#define __brkpt() __trap()

inline unsigned __activemask() {
    // No partial convergence on a CPU: every lane of the warp that has not returned.
    portkit_cpu::Launch* L = portkit_cpu::g_launch;
    const int warp = L->current->warp;
    const int lanes = std::min(32, L->threads - warp * 32);
    const unsigned all = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
    return all & ~L->exited[warp];
}
inline unsigned __lanemask_lt() { return (1u << (threadIdx.x % 32)) - 1; }

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src, int width = 32, PORTKIT_HERE) {
    return portkit_cpu::from_bits<T>(portkit_cpu::warp_op(portkit_cpu::W_SHFL, mask, portkit_cpu::bits_of(var), sizeof(T), src, width, file_, line_));
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, PORTKIT_HERE) {
    return portkit_cpu::from_bits<T>(portkit_cpu::warp_op(portkit_cpu::W_UP, mask, portkit_cpu::bits_of(var), sizeof(T), (int)delta, width, file_, line_));
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, PORTKIT_HERE) {
    return portkit_cpu::from_bits<T>(portkit_cpu::warp_op(portkit_cpu::W_DOWN, mask, portkit_cpu::bits_of(var), sizeof(T), (int)delta, width, file_, line_));
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32, PORTKIT_HERE) {
    return portkit_cpu::from_bits<T>(portkit_cpu::warp_op(portkit_cpu::W_XOR, mask, portkit_cpu::bits_of(var), sizeof(T), lane_mask, width, file_, line_));
}
inline unsigned __ballot_sync(unsigned mask, int p, PORTKIT_HERE) {
    return (unsigned)portkit_cpu::warp_op(portkit_cpu::W_BALLOT, mask, p != 0, 4, 0, 32, file_, line_);
}
inline int __any_sync(unsigned mask, int p, PORTKIT_HERE) {
    return (int)portkit_cpu::warp_op(portkit_cpu::W_ANY, mask, p != 0, 4, 0, 32, file_, line_);
}
inline int __all_sync(unsigned mask, int p, PORTKIT_HERE) {
    return (int)portkit_cpu::warp_op(portkit_cpu::W_ALL, mask, p != 0, 4, 0, 32, file_, line_);
}
template <typename T>
inline unsigned __match_any_sync(unsigned mask, T v, PORTKIT_HERE) {
    return (unsigned)portkit_cpu::warp_op(portkit_cpu::W_MATCH_ANY, mask, portkit_cpu::bits_of(v), sizeof(T), 0, 32, file_, line_);
}
template <typename T>
inline unsigned __match_all_sync(unsigned mask, T v, int* pred, PORTKIT_HERE) {
    unsigned r = (unsigned)portkit_cpu::warp_op(portkit_cpu::W_MATCH_ALL, mask, portkit_cpu::bits_of(v), sizeof(T), 0, 32, file_, line_);
    *pred = r != 0;
    return r;
}
#define PORTKIT_REDUCE(NAME, OP, T, SIGNED)                                                        \
    inline T NAME(unsigned mask, T v, PORTKIT_HERE) {                                              \
        return (T)(uint32_t)portkit_cpu::warp_op(portkit_cpu::OP, mask, (uint32_t)v, 4, SIGNED, 32, \
                                                 file_, line_);                                    \
    }
PORTKIT_REDUCE(__reduce_add_sync, W_RED_ADD, unsigned, 0)
PORTKIT_REDUCE(__reduce_add_sync, W_RED_ADD, int, 1)
PORTKIT_REDUCE(__reduce_min_sync, W_RED_MIN, unsigned, 0)
PORTKIT_REDUCE(__reduce_min_sync, W_RED_MIN, int, 1)
PORTKIT_REDUCE(__reduce_max_sync, W_RED_MAX, unsigned, 0)
PORTKIT_REDUCE(__reduce_max_sync, W_RED_MAX, int, 1)
PORTKIT_REDUCE(__reduce_and_sync, W_RED_AND, unsigned, 0)
PORTKIT_REDUCE(__reduce_or_sync, W_RED_OR, unsigned, 0)
PORTKIT_REDUCE(__reduce_xor_sync, W_RED_XOR, unsigned, 0)
#undef PORTKIT_REDUCE

#include "portkit_cuda_math.h"
#include "portkit_half.h"

// ---- what NVRTC does not declare is an error here too ---------------------------------
// NVRTC compiles a twin without the C library's headers: INFINITY, M_PI, FLT_MAX,
// uint32_t, std::anything and glibc's host functions are undeclared there. Poisoned here
// so a twin that uses them fails on the CPU as on the GPU (build.py says what to write
// instead). Macros defined above keep working: poison applies to text that follows.
#pragma GCC poison INFINITY NAN HUGE_VAL HUGE_VALF HUGE_VALL MAXFLOAT FP_NAN FP_INFINITE
#pragma GCC poison FP_ZERO FP_SUBNORMAL FP_NORMAL fpclassify M_E M_LOG2E M_LOG10E M_LN2
#pragma GCC poison M_LN10 M_PI M_PI_2 M_PI_4 M_1_PI M_2_PI M_2_SQRTPI M_SQRT2 M_SQRT1_2
#pragma GCC poison FLT_MAX FLT_MIN FLT_EPSILON FLT_TRUE_MIN DBL_MAX DBL_MIN DBL_EPSILON
#pragma GCC poison CHAR_BIT SCHAR_MAX SHRT_MAX INT_MAX INT_MIN UINT_MAX LONG_MAX LONG_MIN
#pragma GCC poison ULONG_MAX LLONG_MAX LLONG_MIN ULLONG_MAX INT8_MAX INT16_MAX INT32_MAX
#pragma GCC poison INT32_MIN INT64_MAX INT64_MIN UINT8_MAX UINT16_MAX UINT32_MAX UINT64_MAX
#pragma GCC poison int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
#pragma GCC poison intptr_t uintptr_t std EXIT_SUCCESS EXIT_FAILURE RAND_MAX
#pragma GCC poison exit abort puts fprintf sprintf snprintf vsnprintf strlen strcmp rand
#pragma GCC poison atoi atof calloc realloc memcmp stderr stdout
