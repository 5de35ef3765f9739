#!/usr/bin/env bash
# The refreshed wrong twins of vector_add, sigmoid and softmax on a GPU: does portkit check
# fail exactly the rows tests/check/test_wrong_twins.py expects (and pass its `passes`),
# do the sanitizers name the marked line, does portkit diff name the element, thread and
# pattern. Each step has its own timeout; the whole script stays under 6 minutes.
#   OUT=/some/folder bash scripts/gpu-16-wrongtwins.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=/tmp/portkit-wrongtwins-cache
plugin=(-p portkit.pytest_plugin)
if python3 -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  plugin=()
fi
OPS="vector_add or sigmoid or softmax"
T=tests/check/test_wrong_twins.py
run() {  # name, timeout, pytest selection...
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 -m pytest "${plugin[@]}" -q -rfEs -p no:cacheprovider -m gpu \
    --junitxml="$OUT/junit-$name.xml" "$@" > "$OUT/$name.txt" 2>&1
  echo $? > "$OUT/$name.rc"
}
# 1. portkit check on every case (the GPU rows of MISTAKES): the slowest step.
run check 200 "$T::test_check_catches_wrong_twin" -k "$OPS"
# 2. compute-sanitizer on the small cases (memcheck, initcheck, racecheck, synccheck).
run sanitize 100 "$T::test_sanitizer_catches_wrong_twin" -k "$OPS"
# 3. portkit diff (element, writer, pattern) and the `i <= n` store past the output.
run diff 50 "$T::test_diff_names_element_thread_and_pattern" "$T::test_bound_off_by_one_writes_past_the_end"
echo "== failures (first lines)"
grep -hE "^(FAILED|ERROR)" "$OUT"/check.txt "$OUT"/sanitize.txt "$OUT"/diff.txt | cut -c1-200 | head -20
echo "== summary"
for name in check sanitize diff; do
  printf '%-9s rc=%s  %s\n' "$name" "$(cat "$OUT/$name.rc")" "$(tail -n 1 "$OUT/$name.txt")"
done | tee "$OUT/summary.txt"
