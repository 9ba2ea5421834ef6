"""``fe.util``: FastEstimator 1.7's public utility names, checked against FastEstimator's documented examples and
hand-computed values, plus the internal helpers fe_ray's own modules import from ``fe_ray.util``."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.util import devices

ROOT = Path(__file__).resolve().parents[1]

FE17_NAMES = [
    "FEID", "Data", "DefaultKeyDict", "Flag", "LogSplicer", "NonContext", "Suppressor", "Timer", "check_ds_id",
    "check_io_names", "cpu_count", "detach_tensors", "draw", "filter_nones", "get_batch_size", "get_device",
    "get_num_devices", "get_num_gpus", "get_shape", "get_type", "in_notebook", "is_number", "list_files",
    "move_tensors_to_device", "pad_batch", "pad_data", "param_to_range", "parse_modes", "parse_string_to_python",
    "prettify_metric_name", "strip_prefix", "strip_suffix", "to_list", "to_number", "to_set",
]
INTERNAL_NAMES = ["MODES", "NonContext", "accepts_positional", "check_count", "check_ds_id", "check_epoch",
                  "check_mode", "filter_nones", "get_batch_size", "lower_priority", "map_nested", "parse_ds_ids",
                  "parse_modes", "to_list", "to_set"]


def _run(code: str, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                         timeout=180, env=full_env)
    assert out.returncode == 0, out.stderr
    return out.stdout


# ------------------------------------------------------------------------------------------------ the namespace
def test_every_fe17_name_is_an_attribute_of_fe_util_in_a_fresh_interpreter() -> None:
    out = _run(f"""
        import sys
        import fe_ray as fe
        names = {FE17_NAMES!r}
        missing = [name for name in names if not hasattr(fe.util, name)]
        print(missing, sorted(set(names) - set(fe.util.__all__)))
        print('torch' in sys.modules, 'tensorflow' in sys.modules)
    """)
    assert out.split("\n")[:2] == ["[] []", "False False"]


def test_existing_internal_imports_still_resolve_to_the_base_module() -> None:
    import fe_ray.util as util
    from fe_ray.util import base

    for name in INTERNAL_NAMES:
        assert getattr(util, name) is getattr(base, name)
    assert fe.util is util
    from fe_ray.trace.trace import Data
    assert fe.util.Data is Data
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fe.util.nope  # noqa: B018


# ------------------------------------------------------------------------------------------- containers / checks
def test_to_list_and_to_set_follow_fastestimator_examples() -> None:
    assert fe.util.to_list(None) == [] and fe.util.to_list([None]) == [None] and fe.util.to_list(7) == [7]
    assert fe.util.to_list((7, 8)) == [7, 8] and fe.util.to_list({7}) == [7]
    assert fe.util.to_list({"a": 7}) == [{"a": 7}]
    assert fe.util.to_set(None) == set() and fe.util.to_set([None]) == {None} and fe.util.to_set(7) == {7}
    assert fe.util.to_set([7, 8]) == {7, 8} and fe.util.to_set((7,)) == {7}
    assert fe.util.to_set({"a": 1, "b": 2}.keys()) == {"a", "b"}


def test_fastestimator_helpers_filter_nones_ifelse_and_argument_names(tmp_path: Path) -> None:
    """FastEstimator's fe.util semantics: filter_nones drops a dict's None values and a collection's falsy entries
    (keeping a tuple or set a tuple or set), IfElse, FE's argument names, nested io names, a corrupt .gz file."""
    import gzip

    assert fe.util.filter_nones([1, None, 0, None, "a", ""]) == [1, "a"]
    assert fe.util.filter_nones({"a": 1, "b": None, "c": 0}) == {"a": 1, "c": 0}
    assert fe.util.filter_nones((1, None, 0)) == (1,) and fe.util.filter_nones({None, 2}) == {2}
    assert fe.util.drop_nones([1, None, 0]) == [1, 0]  # fe_ray's own lists keep 0
    assert fe.util.IfElse(True, "y", "n") == "y" and fe.util.IfElse(False, "y") is None
    assert fe.util.get_batch_size(data={"x": np.zeros((3, 2))}) == 3
    assert fe.util.check_ds_id(ds_ids={"a", "b"}) == {"a", "b"}
    assert fe.util.check_io_names(["a", ["b", "c"]]) == ["a", ["b", "c"]]
    with pytest.raises(ValueError, match="forbidden"):
        fe.util.check_io_names(["a", ["b:c"]])
    data = fe.util.Data(batch_data={"a": 1})
    assert data["a"] == 1
    corrupt = tmp_path / "bad.gz"
    packed = bytearray(gzip.compress(bytes(range(256)) * 64))
    packed[20] ^= 0xFF  # a flipped byte in the deflate stream: zlib.error when read
    corrupt.write_bytes(bytes(packed))
    assert fe.util.is_valid_file(str(corrupt)) is False


def test_suppressor_hides_output_on_stop_iteration_and_log_splicer_getvalue(capfd: pytest.CaptureFixture[str],
                                                                             tmp_path: Path) -> None:
    import io

    with pytest.raises(StopIteration):
        with fe.util.Suppressor(show_if_exception=True):
            print("hidden-msg", flush=True)
            raise StopIteration
    assert "hidden-msg" not in capfd.readouterr().out  # the end of an iteration is no error to show it for
    saved, sys.stdout = sys.stdout, io.StringIO()
    try:
        with fe.util.LogSplicer(tmp_path / "log.txt") as splicer:
            print("hello")
            value = splicer.getvalue()
    finally:
        sys.stdout = saved
    assert value == "hello\n" and (tmp_path / "log.txt").read_text() == "hello\n"


def test_param_to_range() -> None:
    assert fe.util.param_to_range(7) == (-7, 7)
    assert fe.util.param_to_range(-3.2) == (-3.2, 3.2)
    assert fe.util.param_to_range([7, 8]) == (7, 8)
    assert fe.util.param_to_range((3.1, 4.3)) == (3.1, 4.3)
    with pytest.raises(TypeError, match="'7'"):
        fe.util.param_to_range("7")
    with pytest.raises(ValueError, match="exactly two"):
        fe.util.param_to_range((1, 2, 3))


def test_parse_modes() -> None:
    assert fe.util.parse_modes({"train"}) == {"train"}
    assert fe.util.parse_modes({"!train"}) == {"eval", "test", "infer"}
    assert fe.util.parse_modes({"train", "eval"}) == {"train", "eval"}
    assert fe.util.parse_modes({"!train", "!infer"}) == {"eval", "test"}
    with pytest.raises(ValueError, match="Cannot mix"):
        fe.util.parse_modes({"!train", "eval"})
    with pytest.raises(ValueError, match="'training'"):
        fe.util.parse_modes({"training"})


def test_check_ds_id_for_a_running_id_and_for_filter_sets() -> None:
    assert fe.util.check_ds_id("") == "" and fe.util.check_ds_id("ds1") == "ds1"
    assert fe.util.check_ds_id({"ds1"}) == {"ds1"}
    assert fe.util.check_ds_id({"!ds1", "!ds2"}) == {"!ds1", "!ds2"}
    assert fe.util.check_ds_id(["ds1", "ds2"]) == {"ds1", "ds2"}
    with pytest.raises(ValueError, match="Cannot mix"):
        fe.util.check_ds_id({"!ds1", "ds2"})
    for bad in ("a|b", "a:b", "a;b", ""):
        with pytest.raises(ValueError, match="Invalid ds_id"):
            fe.util.check_ds_id({bad})
    with pytest.raises(TypeError, match="str"):
        fe.util.check_ds_id({3})
    with pytest.raises(TypeError, match="str"):
        fe.util.check_ds_id(3)


def test_check_io_names() -> None:
    names = ["x", "y_pred", "acc|ds1"]
    assert fe.util.check_io_names(names) is names
    for bad, match in (("a:b", "forbidden"), ("a;b", "forbidden"), ("", "empty"), ("a|b|c", "more than one")):
        with pytest.raises(ValueError, match=match):
            fe.util.check_io_names(["x", bad])
    with pytest.raises(TypeError, match="str"):
        fe.util.check_io_names([None])


def test_get_batch_size() -> None:
    assert fe.util.get_batch_size({"x": np.ones((4, 3)), "y": np.ones(4), "z": 7, "s": np.float32(1)}) == 4
    with pytest.raises(ValueError, match="Ragged"):
        fe.util.get_batch_size({"x": np.ones((4, 3)), "y": np.ones(5)})


# ----------------------------------------------------------------------------------------------------- strings
def test_string_helpers() -> None:
    assert fe.util.prettify_metric_name("myUgly_loss") == "My Ugly Loss"
    assert fe.util.prettify_metric_name("val_ROC") == "Val Roc"
    assert fe.util.prettify_metric_name("aBcD__e") == "A Bc D E"
    with pytest.raises(TypeError, match="str"):
        fe.util.prettify_metric_name(3)
    assert fe.util.strip_suffix("astring.json", ".json") == "astring"
    assert fe.util.strip_suffix("astring.json", ".yson") == "astring.json"
    assert fe.util.strip_suffix(None, ".json") is None and fe.util.strip_suffix("a", None) == "a"
    assert fe.util.strip_prefix("astring.json", "ast") == "ring.json"
    assert fe.util.strip_prefix("astring.json", "asa") == "astring.json"
    assert fe.util.is_number("13.7") and fe.util.is_number("-1e-3") and fe.util.is_number(7)
    assert not fe.util.is_number("ae13.7") and not fe.util.is_number(None) and not fe.util.is_number("")


def test_parse_string_to_python() -> None:
    parse = fe.util.parse_string_to_python
    assert parse("5") == 5 and parse("[5, 4, 0.3]") == [5, 4, 0.3] and parse("{'a':5, 'b':7}") == {"a": 5, "b": 7}
    assert parse('{"a": true, "b": null}') == {"a": True, "b": None}
    assert parse("adam") == "adam" and parse("/tmp/x.csv") == "/tmp/x.csv"
    assert parse("") == "" and parse(None) == ""


# -------------------------------------------------------------------------------------------------- structures
def test_default_key_dict() -> None:
    d = fe.util.DefaultKeyDict(default=lambda x: x + x, a=4, b=6)
    assert d["a"] == 4 and d["c"] == "cc" and dict(d) == {"a": 4, "b": 6, "c": "cc"}
    with pytest.raises(TypeError, match="callable"):
        fe.util.DefaultKeyDict(default=5)


def test_feid_compares_as_its_int_and_prints_through_the_table() -> None:
    ids = [fe.util.FEID(3), fe.util.FEID(1)]
    assert ids[0] == 3 and ids[0] == fe.util.FEID(3) and ids[0] != 4 and {ids[0]: "x"}[3] == "x"
    assert sorted(ids) == [1, 3] and ids[1] < 2
    try:
        fe.util.FEID.set_translation_dict({3: "@model"})
        assert str(ids[0]) == "@model" and repr(ids) == "[@model, 1]"
    finally:
        fe.util.FEID.set_translation_dict({})
    assert str(ids[0]) == "3"
    with pytest.raises(TypeError, match="int"):
        fe.util.FEID("3")


def test_flag_and_noncontext() -> None:
    flag = fe.util.Flag()
    assert not flag
    flag.set_true()
    assert flag
    flag.set_false()
    assert not flag
    a = 5
    with fe.util.NonContext():
        a += 37
    assert a == 42


# ----------------------------------------------------------------------------------------------- types / shapes
def test_get_type() -> None:
    assert fe.util.get_type(np.ones((10, 10), dtype="int32")) == "int32"
    assert fe.util.get_type([np.ones((10, 10)) for _ in range(4)]) == "List[float64]"
    assert fe.util.get_type(27) == "int" and fe.util.get_type({"a": 1, "b": 2}) == "dict"
    assert fe.util.get_type([1, "a"]) == "List[int]" and fe.util.get_type([[[1]]]) == "List[List[List[int]]]"
    assert fe.util.get_type([]) == "list"
    assert fe.util.get_type(collections.OrderedDict()) == "collections.OrderedDict"


def test_get_type_and_get_shape_of_framework_tensors() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    assert fe.util.get_type(torch.ones((10, 10)).type(torch.float)) == "torch.float32"
    assert fe.util.get_type(tf.ones((10, 10), dtype="float16")) == "<dtype: 'float16'>"
    assert fe.util.get_shape(torch.ones((2, 3))) == [2, 3]
    assert fe.util.get_shape(tf.ones((4, 1))) == [4, 1]
    assert fe.util.get_shape([torch.ones((2, 3)), torch.ones((2, 5))]) == [None, 2, None]


def test_get_shape_follows_fastestimator_examples() -> None:
    assert fe.util.get_shape(np.ones((12, 22, 11))) == [12, 22, 11]
    assert fe.util.get_shape([np.ones((12, 22, 11)), np.ones((18, 5))]) == [None]
    assert fe.util.get_shape([np.ones((12, 22, 11)), np.ones((18, 5, 4))]) == [None, None, None, None]
    assert fe.util.get_shape([np.ones((12, 22, 11)), np.ones((12, 22, 4))]) == [None, 12, 22, None]
    assert fe.util.get_shape({"a": np.ones((12, 22, 11))}) == [] and fe.util.get_shape(5) == []
    assert fe.util.get_shape([]) == [None]


def test_pad_data() -> None:
    out = fe.util.pad_data(np.ones((1, 2)), target_shape=(3, 3), pad_value=-2)
    np.testing.assert_array_equal(out, [[1, 1, -2], [-2, -2, -2], [-2, -2, -2]])
    with pytest.raises(ValueError, match=r"\[1, 2\] to \[3, 3, 3\]"):
        fe.util.pad_data(np.ones((1, 2)), target_shape=(3, 3, 3), pad_value=-2)
    with pytest.raises(ValueError, match="at least"):
        fe.util.pad_data(np.ones((1, 2)), target_shape=(4, 1), pad_value=-2)


def test_pad_batch_pads_in_place_to_the_largest_shape() -> None:
    batch = [{"x": np.ones((2, 2)), "y": 8}, {"x": np.ones((3, 1)), "y": 4}]
    assert fe.util.pad_batch(batch, pad_value=0) is None
    np.testing.assert_array_equal(batch[0]["x"], [[1, 1], [1, 1], [0, 0]])
    np.testing.assert_array_equal(batch[1]["x"], [[1, 0], [1, 0], [1, 0]])
    assert batch[0]["y"] == 8 and batch[1]["y"] == 4
    with pytest.raises(ValueError, match="different keys"):
        fe.util.pad_batch([{"x": np.ones(2)}, {"y": np.ones(2)}], 0)
    with pytest.raises(ValueError, match="different ranks"):
        fe.util.pad_batch([{"x": np.ones(2)}, {"x": np.ones((2, 2))}], 0)


# ------------------------------------------------------------------------------------------------------ tensors
def test_to_number_returns_numpy_for_every_kind_of_value() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    five = fe.util.to_number(5)
    assert isinstance(five, np.ndarray) and five.shape == () and five == 5
    source = np.array([1, 2, 3])
    copied = fe.util.to_number(source)
    assert copied is not source and copied.tolist() == [1, 2, 3]
    weight = torch.tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(fe.util.to_number(weight * 3), [3.0, 6.0])
    np.testing.assert_array_equal(fe.util.to_number(tf.constant([1, 2, 3])), [1, 2, 3])
    text = fe.util.to_number("abc")  # FastEstimator's np.array(data) for strings too
    assert isinstance(text, np.ndarray) and text.item() == "abc"


def test_detach_and_move_tensors_inside_nested_containers() -> None:
    torch = pytest.importorskip("torch")
    pair = collections.namedtuple("pair", "a b")
    grad = torch.ones(2, requires_grad=True) * 2
    data = {"a": [grad, 5], "b": (grad, "s"), "c": pair(grad, None), "d": {3}}
    detached = fe.util.detach_tensors(data)
    assert not detached["a"][0].requires_grad and not detached["b"][0].requires_grad
    assert isinstance(detached["c"], pair) and not detached["c"].a.requires_grad
    assert detached["a"][1] == 5 and detached["b"][1] == "s" and detached["d"] == {3} and grad.requires_grad
    # The meta device needs no hardware, yet is a real move: the result has no data on the CPU any more.
    moved = fe.util.move_tensors_to_device({"x": [torch.ones(3)], "y": 1.5}, "meta")
    assert moved["x"][0].device.type == "meta" and moved["y"] == 1.5
    assert fe.util.get_device() == torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


# ------------------------------------------------------------------------------------------------------ devices
FAKE_SMI = """#!/bin/sh
echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa1111-0000)"
echo "  MIG 1g.10gb     Device  0: (UUID: MIG-bbbb2222)"
echo "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-cccc3333-0000)"
"""


def test_count_visible_follows_cuda_visible_devices_rules() -> None:
    gpus = [(0, "A", "GPU-aaaa1111"), (1, "B", "GPU-cccc3333"), (2, "C", "GPU-dddd4444")]
    count = devices._count_visible
    assert count(gpus, "0,1,2") == 3 and count(gpus, "2") == 1 and count(gpus, "") == 0
    assert count(gpus, "-1") == 0 and count(gpus, "0,-1,2") == 1  # CUDA stops at the first invalid entry
    assert count(gpus, "0,0") == 1 and count(gpus, "1,7") == 1
    assert count(gpus, "GPU-cccc,0") == 2 and count(gpus, "GPU-ffff") == 0


def test_gpu_counts_come_from_nvidia_smi_without_importing_a_framework(tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    code = """
        import sys
        import fe_ray as fe
        print(fe.util.get_num_gpus(), fe.util.get_num_devices(), fe.util.get_gpu_info())
        print('torch' in sys.modules, 'tensorflow' in sys.modules)
    """
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    all_visible = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                         timeout=180, env={**all_visible, **env})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["2 2 ['0: NVIDIA H100 80GB HBM3', '1: NVIDIA H100 80GB HBM3']", "False False"]
    # The GPUs CUDA_VISIBLE_DEVICES hides are not counted (torch.cuda.device_count()'s rule, FastEstimator's count);
    # get_gpu_info still lists the machine's GPUs.
    hidden = _run(code, env={**env, "CUDA_VISIBLE_DEVICES": "1"})
    assert hidden.splitlines()[0].startswith("1 1 ['0: ")
    for none in ("", "-1"):
        none_visible = _run(code, env={**env, "CUDA_VISIBLE_DEVICES": none})
        assert none_visible.splitlines()[0].startswith("0 1 ")  # no GPU still counts one device, as FastEstimator


def test_get_num_devices_is_torchs_count_once_torch_is_loaded() -> None:
    torch = pytest.importorskip("torch")
    assert fe.util.get_num_devices() == max(torch.cuda.device_count(), 1)
    assert fe.util.get_num_gpus() == torch.cuda.device_count()


def test_cpu_count_caps_and_applies_the_limit_to_frameworks_imported_later() -> None:
    out = _run("""
        import os
        import fe_ray as fe
        cores = len(os.sched_getaffinity(0))
        print(fe.util.cpu_count() == cores, fe.util.cpu_count(limit=10_000) == cores)
        os.environ.pop("FE_NUM_THREADS_", None)
        import numpy as np
        print(fe.util.cpu_count(limit=np.int64(1)), os.environ["FE_NUM_THREADS_"])  # a numpy int as FE takes it
        print(*(os.environ[name] for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTEROP_THREADS",
                                              "TF_NUM_INTRAOP_THREADS")))  # for processes started later
        import torch
        print(torch.get_num_threads(), fe.util.cpu_count())
        try:
            fe.util.cpu_count(limit=2)
        except ValueError as err:
            print("ValueError", "already applied" in str(err))
    """, env={"FE_NUM_THREADS": "", "FE_NUM_THREADS_": ""})
    assert out.splitlines() == ["True True", "1 1", "1 1 1 1", "1 1", "ValueError True"]


def test_cpu_count_reads_fe_num_threads_and_rejects_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FE_NUM_THREADS_", raising=False)
    monkeypatch.setenv("FE_NUM_THREADS", "four")
    with pytest.raises(ValueError, match="FE_NUM_THREADS must be an integer"):
        fe.util.cpu_count()
    monkeypatch.delenv("FE_NUM_THREADS")
    with pytest.raises(TypeError, match="limit"):
        fe.util.cpu_count(limit=1.5)
    with pytest.raises(ValueError, match="at least 1"):
        fe.util.cpu_count(limit=-2)
    assert "FE_NUM_THREADS_" not in os.environ


# -------------------------------------------------------------------------------------------------- environment
def test_suppressor_silences_python_and_native_output(capfd: pytest.CaptureFixture[str]) -> None:
    print("before", flush=True)
    with fe.util.Suppressor():
        print("py-out")
        print("py-err", file=sys.stderr)
        os.write(1, b"c-out\n")
        os.write(2, b"c-err\n")
    print("after", flush=True)
    with fe.util.Suppressor(allow_pyprint=True):
        print("kept")
        os.write(1, b"dropped\n")
    captured = capfd.readouterr()
    assert captured.out == "before\nafter\nkept\n" and captured.err == ""


def test_suppressor_shows_the_output_only_if_the_block_raises(capfd: pytest.CaptureFixture[str]) -> None:
    with fe.util.Suppressor(show_if_exception=True):
        print("quiet")
    with pytest.raises(RuntimeError, match="boom"), fe.util.Suppressor(show_if_exception=True):
        print("context")
        os.write(2, b"native\n")
        raise RuntimeError("boom")
    assert capfd.readouterr().out == "context\nnative\n"


def test_log_splicer_tees_stdout_into_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.txt"
    log.write_text("old\n")
    with fe.util.LogSplicer(str(log)):
        print("hello")
    print("outside")
    assert log.read_text() == "old\nhello\n" and capsys.readouterr().out == "hello\noutside\n"


def test_timer_as_context_and_decorator(capsys: pytest.CaptureFixture[str]) -> None:
    with fe.util.Timer() as timer:
        time.sleep(0.02)
    assert 0.02 <= timer.interval < 5

    @fe.util.Timer("T2")
    def func() -> int:
        return 3

    assert func() == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Task took {timer.interval} seconds" and lines[1].startswith("T2 took ")
    fe.util.draw()
    assert "FastEstimator" in capsys.readouterr().out


def test_in_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert fe.util.in_notebook() is False
    shell = type("ZMQInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert fe.util.in_notebook() is True
    terminal = type("TerminalInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: terminal))
    assert fe.util.in_notebook() is False


def test_list_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("a.png", "b.txt", ".hidden.png", "sub/c.png"):
        (tmp_path / name).write_text("x")
    root = str(tmp_path)
    assert sorted(fe.util.list_files(root)) == sorted(os.path.join(root, n) for n in ("a.png", "b.txt", "sub/c.png"))
    assert sorted(fe.util.list_files(root, ".png")) == [os.path.join(root, "a.png"), os.path.join(root, "sub/c.png")]
    assert fe.util.list_files(root, ".png", recursive_search=False) == [os.path.join(root, "a.png")]
    with pytest.raises(FileNotFoundError):
        fe.util.list_files(tmp_path / "missing")
    with pytest.raises(ValueError, match="is a file"):
        fe.util.list_files(tmp_path / "a.png")
