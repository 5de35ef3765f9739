"""``portkit diff`` without a GPU: the prototype in the simulator against the reference.

Prototypes with planted mistakes show that diff names the first mismatching element,
the block, thread and line that wrote it (recorded by the simulator), and a pattern
that points at the mistake. The GPU half (wrong twins) is tests/check/test_wrong_twins.py.
"""

from __future__ import annotations

import json

import pytest

ONE_CASE = '[portkit.cases.custom("float32-n129", [(129,)])]'
TWO_DTYPES = (
    '[portkit.cases.custom("float32-n129", [(129,)]), '
    'portkit.cases.custom("float64-n129", [(129,)], dtype="float64")]'
)


def planted(sources, name: str, body: str, cases: str = ONE_CASE) -> str:
    return sources.unary_op(name, body, reference="lambda x: x * 2", cases=cases)


def diff_json(cli, root, *args):
    result = cli(root, "diff", *args, "--json", "--sim")
    assert result.exit_code in (0, 1), result.output
    return result, json.loads(result.stdout)


def test_every_32nd_element_is_named_with_its_lane(make_project, sources, cli):
    body = "out[i] = x[i] * 2.0 if i % 32 != 31 else x[i]"
    root = make_project({"diff_lane": (planted(sources, "diff_lane", body), None)})
    result, report = diff_json(cli, root, "diff_lane")
    assert result.exit_code == 1
    (case,) = report["cases"]
    assert case["prototype"] == "sim" and case["other"] == "torch"
    assert "simulator" in report["note"]
    (output,) = case["tensors"]
    assert output["mismatches"] == 4  # 31, 63, 95, 127
    first = output["first"][0]
    assert first["index"] == [31]
    assert first["writer"]["kernel"] == "diff_lane_fwd"
    assert first["writer"]["block"] == [0, 0, 0] and first["writer"]["thread"] == [31, 0, 0]
    assert first["writer"]["file"].endswith("diff_lane.py")
    assert output["first"][1]["writer"]["block"] == [1, 0, 0]
    patterns = " | ".join(output["patterns"])
    assert "every 32th element (flat index % 32 == 31)" in patterns
    assert "lane 31 of a warp" in patterns


def test_only_where_the_input_is_negative(make_project, sources, cli):
    body = "out[i] = x[i] * 2.0 if x[i] >= 0 else x[i]"
    root = make_project({"diff_sign": (planted(sources, "diff_sign", body), None)})
    _, report = diff_json(cli, root, "diff_sign")
    (output,) = report["cases"][0]["tensors"]
    assert output["mismatches"] > 0
    assert any("only where input 0 is small" in p for p in output["patterns"])


def test_lost_tail_and_the_table(make_project, sources, cli):
    body = "out[i] = x[i] * 2.0 if i < n - 3 else 0.0"
    root = make_project({"diff_tail": (planted(sources, "diff_tail", body), None)})
    result = cli(root, "diff", "diff_tail", "--sim")
    assert result.exit_code == 1
    text = result.output
    assert "only the last 3 elements (flat 126..128)" in text
    assert "diff_tail_fwd block (3, 0, 0) thread (30, 0, 0)" in text  # writer of [126]
    assert "1 of 1 cases differ" in text


def test_only_one_dtype_differs(make_project, sources, cli):
    # An error of 1e-6 hides under float32's tolerance, not under float64's.
    proto = planted(sources, "diff_dtype", "out[i] = x[i] * 2.0 + 1e-6", cases=TWO_DTYPES)
    root = make_project({"diff_dtype": (proto, None)})
    _, report = diff_json(cli, root, "diff_dtype")
    differing = {c["dtype"] for c in report["cases"] if c["differs"]}
    assert differing == {"float64"}
    assert report["across_cases"] == ["mismatches only in float64 cases"]


def test_agreement_exits_zero(make_project, sources, cli):
    root = make_project({"diff_ok": (planted(sources, "diff_ok", "out[i] = x[i] * 2.0"), None)})
    result = cli(root, "diff", "diff_ok", "--sim")
    assert result.exit_code == 0, result.output
    assert "all 1 cases agree" in result.output


def test_a_case_diff_draws_its_upstream_gradients_once(make_project, sources, load_op, randn_seeds):
    """Both sides' backward passes seed one draw (a GPU-sized case's costs seconds)."""
    from portkit.diffing.case_diff import diff_case, plan_diff

    py = sources.unary_op(
        "diff_draws", "out[i] = x[i] * 2.0", cases=ONE_CASE, backward="dx[i] = dy[i] * 2.0"
    )
    config, op = load_op(make_project({"diff_draws": (py, None)}), "diff_draws")
    plan = plan_diff(op, config, simulate=True)
    case = op.definition.cases[0]
    randn_seeds.clear()  # the diff's draws only, not loading and planning
    diffed = diff_case(op, case, plan)
    assert not diffed.error and diffed.tensors
    assert randn_seeds.count(case.seed + 10_007) == 1, randn_seeds


def test_a_default_diff_says_which_gpu_sized_cases_it_left_out(make_project, sources, cli):
    """Without a GPU the GPU-sized cases are not diffed unless named: "all 1 cases agree"
    must not read as all of the op's cases."""
    cases = (
        '[portkit.cases.custom("float32-n129", [(129,)]),'
        ' portkit.cases.custom("float32-big", [(1 << 20,)], large=True)]'
    )
    root = make_project(
        {"diff_big": (planted(sources, "diff_big", "out[i] = x[i] * 2.0", cases), None)}
    )
    result = cli(root, "diff", "diff_big", "--sim")
    assert result.exit_code == 0, result.output
    assert "all 1 cases agree" in result.output
    assert "left out 1 GPU-sized case(s) here (float32-big)" in result.output
    _, report = diff_json(cli, root, "diff_big")
    assert "left out 1 GPU-sized case(s) here (float32-big)" in report["note"]
    named = cli(root, "diff", "diff_big", "--sim", "--case", "float32-n129")
    assert "left out" not in named.output


def test_replayed_writers_match_the_recorded_ones(make_project, sources, load_op):
    """The GPU path re-runs single blocks to find writers; here both paths can run, and
    the blocks it re-runs must name the same writers as the full simulation recorded."""
    from portkit.diffing.case_diff import diff_case, plan_diff

    body = "out[i] = x[i] * 2.0 if i % 7 != 3 else x[i]"
    root = make_project({"diff_replay": (planted(sources, "diff_replay", body), None)})
    config, op = load_op(root, "diff_replay")
    plan = plan_diff(op, config, simulate=True)
    case = op.definition.cases[0]
    recorded = diff_case(op, case, plan)
    replayed = diff_case(op, case, plan, replay=True)
    (a,), (b,) = recorded.tensors, replayed.tensors
    assert a.mismatches == b.mismatches > 5
    assert [e.writer for e in a.mapped] == [
        e.writer and type(e.writer)(**{**e.writer.__dict__, "simulated_value": None})
        for e in b.mapped
    ]
    assert 0 < replayed.blocks_simulated <= 5  # 129 elements in 5 blocks of 32
    for e in b.mapped:  # the re-run block computed what the prototype had written
        assert e.writer.simulated_value == pytest.approx(e.prototype)


def test_plot_is_written(make_project, sources, cli, tmp_path):
    body = "out[i] = x[i] * 2.0 if i % 32 != 31 else x[i]"
    root = make_project({"diff_plot": (planted(sources, "diff_plot", body), None)})
    picture = tmp_path / "errors.png"
    result = cli(root, "diff", "diff_plot", "--sim", "--plot", str(picture))
    assert result.exit_code == 1, result.output
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tmp")]


def test_plot_into_a_missing_folder_is_a_user_error(make_project, sources, cli, tmp_path):
    root = make_project({"diff_noplot": (planted(sources, "diff_noplot", "out[i] = x[i]"), None)})
    result = cli(root, "diff", "diff_noplot", "--plot", str(tmp_path / "nope" / "e.png"))
    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert not (tmp_path / "nope").exists()


def test_debug_without_a_difference_is_a_user_error(make_project, sources, cli):
    root = make_project(
        {"diff_nodebug": (planted(sources, "diff_nodebug", "out[i] = x[i] * 2.0"), None)}
    )
    result = cli(root, "diff", "diff_nodebug", "--sim", "--debug")
    assert result.exit_code == 2
    assert "nothing differs" in result.output


def test_unknown_op(make_project, sources, cli):
    root = make_project({"diff_known": (planted(sources, "diff_known", "out[i] = x[i]"), None)})
    result = cli(root, "diff", "nosuch")
    assert result.exit_code == 2 and "unknown op 'nosuch'" in result.output


def test_debug_stops_at_the_writing_thread(make_project, sources, portkit_process):
    body = "out[i] = x[i] * 2.0 if i % 32 != 31 else x[i]"
    root = make_project({"diff_pdb": (planted(sources, "diff_pdb", body), None)})
    proc = portkit_process(root, "diff", "diff_pdb", "--sim", "--debug", input="p i\nc\n")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    banner = "portkit: kernel diff_pdb_fwd, block (0, 0, 0), thread (31, 0, 0)"
    assert banner in out
    after = out[out.index(banner) :]
    assert "output 0[31] differs" in after
    assert "diff_pdb.py" in after and "-> out[i] = x[i] * 2.0 if i % 32 != 31 else x[i]" in after
    assert "(Pdb) np.int64(31)" in after
