"""CSVDataset: FastEstimator's per-column typing (pandas rules), options, errors, Pipeline use and resume."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest

import fe_ray as fe
from fe_ray.dataset import CSVDataset
from fe_ray.pipeline import Pipeline
from tests.dataset.resume_helpers import batches, interrupted_run


def _write(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_rows_become_typed_dicts(tmp_path: Path) -> None:
    path = _write(tmp_path, "id,score,name,flag,mixed\n1,0.5,cat,True,3\n2,1e2,dog,false,x\n-3,-inf,\"a,b\",TRUE,4\n")
    ds = fe.dataset.CSVDataset(str(path))
    assert len(ds) == 3
    assert ds[0] == {"id": 1, "score": 0.5, "name": "cat", "flag": True, "mixed": "3"}
    assert ds[2] == {"id": -3, "score": -math.inf, "name": "a,b", "flag": True, "mixed": "4"}
    assert [type(ds[1][key]) for key in ("id", "score", "name", "flag", "mixed")] == [int, float, str, bool, str]
    assert ds["id"] == [1, 2, -3]  # a key gives the whole column, as FastEstimator's in-memory datasets
    assert ds.parent_path == str(tmp_path)
    assert ds.keys() == ["id", "score", "name", "flag", "mixed"]


def test_missing_values_are_nan_and_turn_ints_into_floats(tmp_path: Path) -> None:
    path = _write(tmp_path, "a,b,c,d\n1,x,,True\n,NA,,\n3,y,,False\n")
    ds = CSVDataset(path)
    assert ds[0]["a"] == 1.0 and isinstance(ds[0]["a"], float) and math.isnan(ds[1]["a"])
    assert ds[0]["b"] == "x" and math.isnan(ds[1]["b"])  # text column keeps NaN for the gap
    assert all(math.isnan(value) for value in ds["c"])  # an all-missing column is float NaN
    assert ds[0]["d"] is True and math.isnan(ds[1]["d"]) and ds[2]["d"] is False


def test_header_names_are_mangled_like_pandas_and_short_rows_padded(tmp_path: Path) -> None:
    path = _write(tmp_path, "a,a,,b\n1,2,3,4\n5,6\n\n")
    ds = CSVDataset(path)
    assert ds.keys() == ["a", "a.1", "Unnamed 2", "b"]  # FastEstimator strips ':' (and '|', ';') from names
    assert len(ds) == 2  # the blank line is skipped
    assert ds[1]["a.1"] == 6 and math.isnan(ds[1]["b"]) and ds[0]["b"] == 4.0


def test_delimiter_options_and_compression(tmp_path: Path) -> None:
    semicolon = _write(tmp_path, "x;y\n1;2\n", "semi.csv")
    assert CSVDataset(semicolon, delimiter=";")[0] == {"x": 1, "y": 2}
    assert CSVDataset(semicolon, sep=";")[0] == {"x": 1, "y": 2}
    packed = tmp_path / "data.csv.gz"
    with gzip.open(packed, "wt") as handle:
        handle.write("\ufeffx\ty\tz\n1\t-\t7\n2\tq\t8\n3\tr\t9\n")
    ds = CSVDataset(packed, delimiter="\t", usecols=["z", "x"], nrows=2, na_values=["-"], dtype={"z": float})
    assert ds.keys() == ["x", "z"]  # file order, as pandas keeps it; the BOM is dropped
    assert ds[0] == {"x": 1, "z": 7.0} and isinstance(ds[1]["z"], float) and len(ds) == 2
    assert CSVDataset(packed, delimiter="\t", dtype=str)[0]["x"] == "1"
    kept = CSVDataset(_write(tmp_path, "v\nNA\n", "na.csv"), keep_default_na=False)
    assert kept[0]["v"] == "NA"


def test_split_keeps_order_and_moves_rows(tmp_path: Path) -> None:
    path = _write(tmp_path, "i\n" + "".join(f"{i}\n" for i in range(10)))
    ds = CSVDataset(path)
    part = ds.split(0.3, seed=1)
    assert isinstance(part, CSVDataset) and len(part) == 3 and len(ds) == 7
    assert sorted(part["i"] + ds["i"]) == list(range(10))
    assert ds["i"] == sorted(ds["i"])
    assert part.parent_path == ds.parent_path
    again = CSVDataset(path).split(0.3, seed=1)
    assert again["i"] == part["i"]
    chosen = CSVDataset(path).split([9, 0])
    assert chosen["i"] == [9, 0]


ROWS = "id,mode,type,score,my col,a|b\n1,train,0,0.5,a,1\n2,eval,1,,b,2\n3,train,2,1.5,c,3\n4,test,,2.0,d,4\n"


def _ids(ds: CSVDataset) -> list[int]:
    return [ds[i]["id"] for i in range(len(ds))]


def test_fill_na(tmp_path: Path) -> None:
    path = _write(tmp_path, ROWS + "5,,3,1.0,e,5\n")
    default = CSVDataset(path)
    assert math.isnan(default[1]["score"]) and math.isnan(default[3]["type"]) and math.isnan(default[4]["mode"])
    nones = CSVDataset(path, fill_na=None)
    assert (nones[1]["score"], nones[3]["type"], nones[4]["mode"]) == (None, None, None)
    assert nones[0]["type"] == 0.0 and isinstance(nones[0]["type"], float)  # the int column with gaps stays float
    zeros = CSVDataset(path, fill_na=0)
    assert (zeros[1]["score"], zeros[3]["type"]) == (0.0, 0.0) and isinstance(zeros[3]["type"], float)
    assert zeros[4]["mode"] == 0 and type(zeros[4]["mode"]) is int  # a text column takes the value as given
    text = CSVDataset(path, ",", None, "?")
    assert (text[1]["score"], text[4]["mode"], text[0]["score"]) == ("?", "?", 0.5)  # FastEstimator's order


def test_include_if_dict(tmp_path: Path) -> None:
    path = _write(tmp_path, ROWS)
    assert _ids(CSVDataset(path, include_if={"mode": "train"})) == [1, 3]
    assert _ids(CSVDataset(path, include_if={"mode": ["train", "test"], "type": (0, 2)})) == [1, 3]
    assert _ids(CSVDataset(path, include_if={"type": [1, None]})) == [2, 4]  # None matches the missing type
    assert _ids(CSVDataset(path, include_if={"type": None}, fill_na=None)) == [4]
    assert _ids(CSVDataset(path, include_if={"type": 5})) == []
    kept = CSVDataset(path, include_if={"mode": "eval"})
    assert len(kept) == 1 and kept[0]["id"] == 2  # renumbered from 0
    with pytest.raises(ValueError, match=r"include_if names column 'kind'.*columns are \['id'"):
        CSVDataset(path, include_if={"kind": 1})


def test_include_if_query(tmp_path: Path) -> None:
    path = _write(tmp_path, ROWS)
    assert _ids(CSVDataset(path, include_if="type >= 1")) == [2, 3]  # the missing type compares False
    # '&' and '|' bind as pandas' and/or do, not as Python's bitwise operators.
    assert _ids(CSVDataset(path, include_if="type >= 1 & mode == 'train' | id == 4")) == [3, 4]
    assert _ids(CSVDataset(path, include_if="mode in ['eval', 'test'] and not score > 1")) == [2]
    assert _ids(CSVDataset(path, include_if="mode == ['eval', 'test']")) == [2, 4]  # a list: membership
    assert _ids(CSVDataset(path, include_if="mode != ['eval', 'test']")) == [1, 3]
    assert _ids(CSVDataset(path, include_if="`my col` == 'c' or `a|b` * 2 == 8")) == [3, 4]
    assert _ids(CSVDataset(path, include_if="0 < score <= 1.5 and ~(id == 3)")) == [1]
    assert _ids(CSVDataset(path, include_if="score != 0.5")) == [2, 3, 4]  # a missing value differs from all
    assert CSVDataset(path, include_if="id == 4").keys() == ["id", "mode", "type", "score", "my col", "ab"]
    for query, match in (("kind > 1", "names 'kind', which is not a column"), ("id >", "does not parse"),
                         ("mode.str.len() > 3", "does not support"), ("id == @limit", "uses '@'"),
                         ("abs(id) > 1", "uses Call"), ("mode in 'train'", "'in' needs a list")):
        with pytest.raises(ValueError, match=match):
            CSVDataset(path, include_if=query)
    with pytest.raises(ValueError, match="failed on row"):
        CSVDataset(path, include_if="mode > 1")


def test_include_if_function_and_bad_types(tmp_path: Path) -> None:
    path = _write(tmp_path, ROWS)
    assert _ids(CSVDataset(path, include_if=lambda mode: mode in ["eval", "test"])) == [2, 4]
    assert _ids(CSVDataset(path, include_if=lambda id, score: id > 1 and score > 1)) == [3, 4]
    with pytest.raises(ValueError, match=r"asks for \['kind'\]"):
        CSVDataset(path, include_if=lambda kind: True)
    with pytest.raises(ValueError, match="include_if must be None, a dict"):
        CSVDataset(path, include_if=3)  # type: ignore[arg-type]
    # fill_na applies before the filter, as in FastEstimator.
    assert _ids(CSVDataset(path, include_if="type == -1", fill_na=-1)) == [4]


@pytest.mark.parametrize("text, kwargs, error, match", [
    ("", {}, ValueError, "is empty; it needs a header row"),
    ("a,b\n1,2,3\n", {}, ValueError, r"line 2: 3 fields but the header has 2; check the delimiter"),
    ("a;b\n1;2\n", {}, ValueError, r"looks split by ';' rather than ','; pass delimiter=';'"),
    ("a,b\n1,2\n", {"delimiter": ",,"}, ValueError, r"delimiter must be one character .* got ',,'"),
    ("a,b\n1,2\n", {"delimiter": 1}, TypeError, "delimiter must be a one-character string, got int"),
    ("a,b\n1,2\n", {"index_col": 0}, TypeError, r"does not support the pandas option\(s\) \['index_col'\]"),
    ("a,b\n1,2\n", {"usecols": ["c"]}, ValueError, r"usecols names 'c'.*columns are \['a', 'b'\]"),
    ("a,b\n1,x\n", {"dtype": {"b": int}}, ValueError, r"column 'b' value 'x' is not a int"),
    ("a\n\n1\n,\n", {}, ValueError, "2 fields but the header has 1"),
])
def test_user_errors_name_value_and_fix(tmp_path: Path, text: str, kwargs: dict, error: type[Exception],
                                        match: str) -> None:
    with pytest.raises(error, match=match):
        CSVDataset(_write(tmp_path, text), **kwargs)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.csv' does not exist"):
        CSVDataset(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="is a folder"):
        CSVDataset(tmp_path)


def test_pipeline_batches_and_state(tmp_path: Path) -> None:
    path = _write(tmp_path, "x,y,name\n" + "".join(f"{i * 0.5},{i % 3},n{i}\n" for i in range(7)))
    pipeline = Pipeline(eval_data=CSVDataset(path), batch_size=3)
    batch = pipeline.get_results("eval")
    assert isinstance(batch, dict)
    np.testing.assert_array_equal(batch["x"], [0.0, 0.5, 1.0])
    assert batch["x"].dtype == np.float64 and batch["y"].dtype == np.int64
    assert batch["name"].tolist() == ["n0", "n1", "n2"]
    with pipeline("eval", 1) as loader:
        assert [b["y"].tolist() for b in loader] == [[0, 1, 2], [0, 1, 2], [0]]
    assert CSVDataset(path).state_dict() == {}
    with pytest.raises(ValueError, match="no state"):
        CSVDataset(path).load_state_dict({"x": 1})


def test_mid_epoch_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    path = _write(tmp_path, "x,y\n" + "".join(f"{i},{i * i}\n" for i in range(11)))

    def make() -> Pipeline:
        return Pipeline(CSVDataset(path), batch_size=4, shuffle_seed=5)

    expected = batches(make(), range(1, 4))
    assert interrupted_run(make, 3, stop_epoch=2, taken=2) == expected
    assert expected[0] != batches(Pipeline(CSVDataset(path), batch_size=4, shuffle_seed=6), range(1, 2))[0]


def test_numpy_dtypes_give_python_values(tmp_path: Path) -> None:
    path = _write(tmp_path, "a,b\n0.1,2\n")
    ds = CSVDataset(path, dtype={"a": np.float32, "b": np.float64})
    assert ds[0] == {"a": float(np.float32(0.1)), "b": 2.0} and ds[0]["a"] != 0.1
    assert type(ds[0]["a"]) is float and type(ds[0]["b"]) is float
    with pytest.raises(TypeError, match="dtype for column 'a' must be one of"):
        CSVDataset(path, dtype={"a": list})
    with pytest.raises(ValueError, match="nrows must be >= 0, got -1"):
        CSVDataset(path, nrows=-1)


def test_numbers_are_read_as_pandas_reads_them(tmp_path: Path) -> None:
    """Values checked against pandas 2.3's read_csv (FastEstimator's reader): its decimal converter keeps 17 digits
    (a leading zero counts) and scales them once, and integers that fit neither int64 nor uint64 stay text."""
    def column(*values: str, **kwargs: object) -> list[object]:
        path = _write(tmp_path, "a,b\n" + "".join(f"{value},1\n" for value in values))
        return [sample["a"] for sample in CSVDataset(path, **kwargs).data.values()]

    assert column("0.30000000000000004", "3.14159265358979323846", "123456789.123456789") == \
        [0.3, 3.1415926535897927, 123456789.12345678]
    assert column("12345678901234567890e-10", "1e-400", "-0.0", "+Inf", "INFINITY") == \
        [1234567890.1234567, 0.0, -0.0, math.inf, math.inf]
    assert math.copysign(1.0, column("-0.0", "1.5")[0]) == -1.0
    assert column("0.000000000000000000012", "1") == [1.2e-20, 1.0]  # pandas: 0.0 (all digits dropped)
    assert column("1e400", "1") == ["1e400", "1"] and column(" inf", "1") == [" inf", "1"]  # not floats to pandas
    with_gap = column("5349979066121302517", "")  # an int column with a gap: ints, then made floats
    assert with_gap[0] == 5.349979066121302e+18 and math.isnan(with_gap[1])
    assert column("18446744073709551615", "1") == [18446744073709551615, 1]  # uint64
    assert column("99999999999999999999", "1") == ["99999999999999999999", "1"]  # beyond uint64: text
    assert column("1.5", "99999999999999999999") == [1.5, 1.0000000000000002e+20]  # a float came first
    assert column("18446744073709551615", "-1") == ["18446744073709551615", "-1"]
    assert column("-9223372036854775809", "1.5") == [-9.223372036854778e+18, 1.5]
    assert column("0.1000000000000000055511151231257827", dtype={"a": "float32"}) == [0.10000000149011612]
    assert column("3.14159265358979323846", dtype={"a": float}) == [3.1415926535897927]
    with pytest.raises(ValueError, match="value '1e400' is not a float"):
        column("1e400", dtype={"a": float})
