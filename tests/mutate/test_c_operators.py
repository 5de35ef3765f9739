"""The twin's mutation operators, each on a small snippet of C CUDA."""

from __future__ import annotations

import pytest

from portkit.mutate.c_operators import scan, twin_mutants
from portkit.mutate.model import KINDS

KERNEL = """\
#define THREADS 256
// a comment with i < n and __syncthreads(); is never mutated
template <typename T>
__global__ void k(const T* x, T* out, int* hist, long long n) {
    __shared__ T part[THREADS];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    const long long packs = n / 4;
    for (long long p = i; p < packs; p += 4) acc += (float)x[p];
    for (long long c = packs * 4 + i; c < n; c += 256) acc += (float)x[c];
    part[threadIdx.x] = (T)acc;
    __syncthreads();
    if (i >= n) return;
    if (i < n) {
        out[i] = part[threadIdx.x];
        atomicAdd(&hist[i], 1);
    }
    T v = __shfl_down_sync(0xffffffffu, x[i], 16);
}
"""


def mutants(kind: str):
    return twin_mutants(KERNEL, "cuda_src/k.cu", {kind})


def lines(kind: str) -> list[tuple[int, str]]:
    return [(m.line, m.source.splitlines()[m.line - 1].strip()) for m in mutants(kind)]


def test_barrier_is_dropped_and_comments_are_left_alone():
    (m,) = mutants("barrier")
    assert m.line == 12 and m.side == "twin" and m.kind == "barrier"
    assert "__syncthreads();" not in m.source.splitlines()[11]
    assert m.source.splitlines()[1] == KERNEL.splitlines()[1]  # the comment, unchanged


def test_bound_makes_each_less_than_a_less_or_equal():
    found = lines("bound")
    assert (9, "for (long long p = i; p <= packs; p += 4) acc += (float)x[p];") in found
    assert (14, "if (i <= n) {") in found
    # `template <typename T>`, `<<` and casts are not comparisons
    assert all("template" not in text for _, text in found)
    assert len(found) == 3
    described = {m.description for m in mutants("bound")}
    assert described == {"`p < packs` made `<=`", "`c < n` made `<=`", "`i < n` made `<=`"}


def test_index_shifts_a_plain_subscript_but_not_a_declaration():
    found = lines("index")
    assert (15, "out[i + 1] = part[threadIdx.x];") in found
    assert (9, "for (long long p = i; p < packs; p += 4) acc += (float)x[p + 1];") in found
    assert not any(line == 5 for line, _ in found)  # __shared__ T part[THREADS]


def test_int32_declares_a_wide_local_int():
    found = lines("int32")
    assert (8, "const int packs = n / 4;") in found
    assert (6, "int i = (long long)blockIdx.x * blockDim.x + threadIdx.x;") in found
    assert [line for line, _ in found] == [6, 8, 9, 10]  # locals and loop variables
    assert all("(long long)" in text for line, text in found if line == 6)  # casts stay


def test_atomic_becomes_a_plain_update():
    (m,) = mutants("atomic")
    assert m.source.splitlines()[15].strip() == "(hist[i] += 1);"


def test_accumulator_in_a_templated_kernel_is_declared_T():
    (m,) = mutants("accum")
    assert m.line == 7 and m.source.splitlines()[6].strip() == "T acc = 0.0f;"


def test_accumulator_outside_a_template_is_not_mutated():
    plain = "__global__ void k(float* out) {\n    float acc = 0.0f;\n    out[0] = acc;\n}\n"
    assert twin_mutants(plain, "k.cu", {"accum"}) == []


def test_tail_loop_is_dropped_but_the_main_loop_is_not():
    (m,) = mutants("tail")
    assert m.line == 10 and m.source.splitlines()[9].strip().startswith("if (false) for (")


def test_shuffle_direction_and_offset():
    found = [text for _, text in lines("shuffle")]
    assert "T v = __shfl_up_sync(0xffffffffu, x[i], 16);" in found
    assert "T v = __shfl_down_sync(0xffffffffu, x[i], (16) / 2);" in found


def test_guards_become_always_or_never_taken():
    found = lines("guard")
    assert (14, "if (true) {") in found
    assert (13, "if (false) return;") in found


def test_every_kind_has_an_operator_and_all_kinds_by_default():
    every = twin_mutants(KERNEL, "k.cu")
    assert {m.kind for m in every} == set(KINDS)
    assert all(m.source != KERNEL for m in every)


@pytest.mark.parametrize(
    "text", ['const char* s = "a < b";\n', "x = 1; /* i < n */\n"], ids=["string", "block"]
)
def test_strings_and_block_comments_are_blanked(text):
    line, _ = scan(text)  # the line and the empty one after its newline
    assert "<" not in line.code and len(line.code) == len(text.rstrip("\n"))
