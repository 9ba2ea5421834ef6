"""fe.search.visualize: the chart follows the number of varying parameters, the figures hold the search's values,
PNGs are written where FastEstimator would name them, and bad input is rejected by name."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from fe_ray.search import GoldenSection, GridSearch
from fe_ray.search.visualize import (
    plot_cartesian,
    plot_heatmap,
    plot_parallel_coordinates,
    visualize_cartesian,
    visualize_heatmap,
    visualize_parallel_coordinates,
    visualize_search,
)
from fe_ray.search.visualize.vis_util import SearchData, humansorted
from fe_ray.search.visualize.visualize import choose_plot
from fe_ray.summary.summary import ValWithError

# The plots need matplotlib (an optional dependency); fe_ray.search.visualize itself imports it only on use.
pytest.importorskip("matplotlib")


def _golden() -> GoldenSection:
    search = GoldenSection(lambda search_idx, x: {"acc": -(x - 3) ** 2, "loss": (x - 3) ** 2}, x_min=0, x_max=10,
                           max_iter=6, best_mode="max", optimize_field="acc", name="gold")
    search.fit()
    return search


def _grid2(best_mode: str | None = None) -> GridSearch:
    # b's options are given out of numeric order, and their text order ('0.1' < '10' < '1e-05') is wrong too.
    search = GridSearch(lambda search_idx, a, b: {"prod": a * b, "diff": a - b, "sum": a + b},
                        params={"a": [1, 2, 3], "b": [10, 1e-5, 0.1]}, best_mode=best_mode)
    search.fit()
    return search


def _grid3() -> GridSearch:
    search = GridSearch(lambda search_idx, lr, bs, opt: {"score": lr * bs + (opt == "sgd"),
                                                         "tag": "hi" if bs > 1 else "lo"},
                        params={"lr": [1, 2, 3], "bs": [1, 2], "opt": ["sgd", "adam"]}, name="three")
    search.fit()
    return search


def _plot_axes(fig: Any) -> list[Any]:
    """The axes that hold data (not colour bars)."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


# ------------------------------------------------------------------------------------------------ chart choice
def test_the_chart_follows_the_number_of_varying_parameters() -> None:
    assert choose_plot(_golden()) == "cartesian"
    assert choose_plot(_grid2()) == "heatmap"
    assert choose_plot(_grid3()) == "parallel_coordinates"
    # A parameter with a single option does not count: 'b' is constant here, so one varying parameter remains.
    single = GridSearch(lambda search_idx, a, b: a + b, params={"a": [1, 2, 3], "b": [5]})
    single.fit()
    assert choose_plot(single) == "cartesian"
    # Ignoring a parameter takes it out of the count too.
    assert choose_plot(_grid2(), ignore_keys="b") == "cartesian"
    # ...but two evaluations would then share a heatmap cell ('opt' varied), so not a heatmap.
    assert choose_plot(_grid3(), ignore_keys=["opt"]) == "parallel_coordinates"


def test_categorical_values_change_the_chart_as_in_fastestimator() -> None:
    # One string-valued parameter: no line plot of strings, so a parallel coordinate plot.
    one = GridSearch(lambda search_idx, opt: {"acc": len(opt)}, params={"opt": ["sgd", "adam"]})
    one.fit()
    assert choose_plot(one) == "parallel_coordinates"
    # Two parameters, one of them strings: a heatmap with the names along its axis.
    two = GridSearch(lambda search_idx, lr, opt: {"acc": lr * len(opt)}, params={"lr": [1, 2], "opt": ["sgd", "ad"]})
    two.fit()
    assert choose_plot(two) == "heatmap"
    fig = plot_heatmap(two)
    ax = _plot_axes(fig)[0]
    assert [label.get_text() for label in ax.get_yticklabels()] == ["ad", "sgd"]
    assert np.array_equal(ax.images[0].get_array(), [[2, 4], [3, 6]])
    # A string-valued result rules out the heatmap.
    tagged = GridSearch(lambda search_idx, lr, bs: {"score": lr * bs, "tag": "hi" if bs > 1 else "lo"},
                        params={"lr": [1, 2], "bs": [1, 2]})
    tagged.fit()
    assert choose_plot(tagged) == "parallel_coordinates"
    assert choose_plot(tagged, ignore_keys="tag") == "heatmap"


# ------------------------------------------------------------------------------------------------ cartesian
def test_cartesian_draws_each_result_against_the_parameter_in_order() -> None:
    search = _golden()
    fig = plot_cartesian(search)
    axes = _plot_axes(fig)
    assert len(axes) == 2 and len(fig.axes) == 2  # one panel per result, no empty grid cell left behind
    xs = sorted({entry["param"]["x"] for entry in search.get_search_summary()})
    for ax, key in zip(axes, ["acc", "loss"]):
        (line,) = ax.get_lines()
        assert ax.get_ylabel() == key and ax.get_xlabel() == "x" and line.get_label() == key
        assert list(line.get_xdata()) == xs  # joined in order of x, not of evaluation
        sign = -1 if key == "acc" else 1
        assert list(line.get_ydata()) == [sign * (x - 3) ** 2 for x in xs]
    assert fig.get_suptitle() == "gold"


def test_cartesian_ignore_keys_groups_and_ignored_parameters() -> None:
    search = _golden()
    only_acc = plot_cartesian(search, ignore_keys="loss", title="mine")
    assert [ax.get_ylabel() for ax in only_acc.axes] == ["acc"]
    assert only_acc.get_suptitle() == "mine"
    grouped = plot_cartesian(search, groups=[["acc", "loss"]])
    (ax,) = grouped.axes
    assert [line.get_label() for line in ax.get_lines()] == ["acc", "loss"] and ax.get_ylabel() == "acc, loss"
    # Three results, grid ceil(sqrt(3)) = 2 rows x 2 cols with the fourth cell removed.
    three = GridSearch(lambda search_idx, n: {"a": n, "b": 2 * n, "c": 3 * n}, params={"n": [1, 2]})
    three.fit()
    assert len(plot_cartesian(three).axes) == 3
    # An ignored parameter that varied: points that share x, so markers without lines.
    fig = plot_cartesian(_grid2(), ignore_keys="b")
    assert all(line.get_linestyle() == "None" for ax in fig.axes for line in ax.get_lines())
    assert len(fig.axes[0].get_lines()[0].get_xdata()) == 9


# ------------------------------------------------------------------------------------------------ heatmap
def test_heatmap_places_each_result_in_its_cell_ordered_by_value() -> None:
    fig = plot_heatmap(_grid2(best_mode="min"))
    axes = _plot_axes(fig)
    assert [ax.get_title() for ax in axes] == ["diff", "prod", "sum"]
    assert len(fig.axes) == 6  # three heatmaps and their colour bars; the empty fourth cell is removed
    a, b = np.meshgrid([1, 2, 3], [1e-5, 0.1, 10])  # rows: b by value, bottom to top
    for ax, expected in zip(axes, [a - b, a * b, a + b]):
        assert np.allclose(ax.images[0].get_array(), expected)
        assert ax.images[0].origin == "lower"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["1e-05", "0.1", "10"]
        assert ax.images[0].cmap.name == "viridis_r"  # best_mode 'min': the best (smallest) values are yellow
        assert len(ax.texts) == 9  # every cell labelled with its value
    assert fig.get_supxlabel() == "a" and fig.get_supylabel() == "b"
    assert _plot_axes(plot_heatmap(_grid2(best_mode="max")))[0].images[0].cmap.name == "viridis"


def test_heatmap_leaves_unevaluated_cells_blank() -> None:
    search = GridSearch(lambda search_idx, a, b: a + b, params={"a": [1, 2], "b": [1, 2]})
    search.fit()
    state = search.state_dict()
    state["search_summary"] = state["search_summary"][:3]  # as if interrupted before (2, 2)
    search.load_state_dict(state)
    grid = plot_heatmap(search).axes[0].images[0].get_array()
    assert grid[0, 0] == 2 and grid[1, 0] == 3 and grid[0, 1] == 3 and np.ma.is_masked(grid[1, 1])


# ------------------------------------------------------------------------------------------------ parallel coordinates
def test_parallel_coordinates_draw_one_line_per_evaluation_across_all_keys() -> None:
    search = _grid3()
    fig = plot_parallel_coordinates(search)
    (ax,) = _plot_axes(fig)
    assert len(fig.axes) == 2  # the plot and its colour bar
    (lines,) = ax.collections
    segments = lines.get_segments()
    assert len(segments) == 12 and all(len(segment) == 5 for segment in segments)
    texts = {text.get_text() for text in ax.texts}
    assert {"bs", "lr", "opt", "score", "tag", "adam", "sgd", "hi", "lo"} <= texts
    summary = search.get_search_summary()
    # The first evaluation (lr=1, bs=1, opt='sgd'): lr and bs at the bottom of their axes, 'sgd' below 'adam'.
    assert np.allclose(segments[0][:, 0], range(5))
    assert segments[0][0, 1] == 0 and segments[0][1, 1] == 0 and segments[0][2, 1] == 0
    # Coloured by the last numeric result, 'score', whose values the collection carries.
    assert np.allclose(lines.get_array(), [entry["result"]["score"] for entry in summary])
    assert fig.axes[1].get_ylabel() == "score"
    categorical = plot_parallel_coordinates(search, color_by="tag")
    bar = categorical.axes[1]
    assert bar.get_ylabel() == "tag" and {t.get_text() for t in bar.get_yticklabels()} == {"hi", "lo"}


def test_parallel_coordinates_color_by_defaults_to_the_optimize_field() -> None:
    search = GridSearch(lambda search_idx, a, b, c: {"z": a, "y": b + c}, params={"a": [1, 2], "b": [1, 2],
                                                                                   "c": [1, 2]},
                        optimize_field="y", best_mode="min")
    search.fit()
    fig = plot_parallel_coordinates(search)
    assert fig.axes[1].get_ylabel() == "y" and fig.axes[0].collections[0].cmap.name == "viridis_r"
    # The field ignored: the fallback (last numeric result) applies.
    assert plot_parallel_coordinates(search, ignore_keys="y").axes[1].get_ylabel() == "z"


# ------------------------------------------------------------------------------------------------ saving
def test_visualize_search_writes_readable_pngs_named_as_fastestimator(tmp_path: Path) -> None:
    folder = tmp_path / "plots"
    folder.mkdir()
    path = visualize_search(_golden(), save_path=str(folder), verbose=False)
    assert path == str(folder / "figure.png")  # a folder gets FastEstimator's fallback name
    with Image.open(path) as image:
        assert image.format == "PNG"
        width, height = plot_cartesian(_golden()).get_size_inches() * 100
        assert image.size == (round(width), round(height))
    # A path ending in a separator is a folder, created if needed.
    assert visualize_search(_grid2(), save_path=str(tmp_path / "new") + os.sep) == str(tmp_path / "new" /
                                                                                       "figure.png")
    # No extension: '.png' is added (FastEstimator would write '.html'). Parent folders are created.
    assert visualize_search(_grid3(), save_path=str(tmp_path / "a" / "pc")) == str(tmp_path / "a" / "pc.png")
    for name in ("figure.png", "pc.png"):
        found = list(tmp_path.rglob(name))
        assert found and all(Image.open(f).format == "PNG" for f in found)
    # Other formats matplotlib writes follow the extension.
    svg = visualize_heatmap(_grid2(), save_path=str(tmp_path / "h.svg"), verbose=False)
    assert Path(svg).read_text().lstrip().startswith("<?xml")


def test_visualize_functions_report_the_path_and_honour_verbose(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = visualize_cartesian(_golden(), save_path=str(tmp_path / "c.png"))
    assert f"Saving to {path}" in capsys.readouterr().out
    visualize_parallel_coordinates(_grid3(), save_path=str(tmp_path / "p.png"), verbose=False)
    assert "Saving" not in capsys.readouterr().out
    # No save_path and no window (Agg): a temporary PNG whose path is printed and returned.
    temp = visualize_search(_grid3(), title="my search")
    try:
        assert os.path.basename(temp).startswith("my_search_") and temp in capsys.readouterr().out
        assert Image.open(temp).format == "PNG"
    finally:
        os.remove(temp)


def test_a_saved_search_file_can_be_visualized(tmp_path: Path) -> None:
    search = _grid3()
    search.save(str(tmp_path))
    fig = plot_parallel_coordinates(str(tmp_path / "three.json"))
    assert fig.get_suptitle() == "three" and len(fig.axes[0].collections[0].get_segments()) == 12
    assert visualize_search(tmp_path / "three.json", save_path=str(tmp_path / "x.png")) == str(tmp_path / "x.png")


# ------------------------------------------------------------------------------------------------ tabulation
def test_search_data_unwraps_values_and_sorts_names_naturally() -> None:
    assert humansorted(["run10", "Run1", "run2"]) == ["Run1", "run2", "run10"]
    search = GridSearch(lambda search_idx, k: {"v": ValWithError(0, k / 2, 1), "w": [np.float32(k)],
                                               "kind": ["a", "b"]},
                        params={"k": [1, 2]})
    search.fit()
    data = SearchData(search)
    assert data.params == ["k"] and data.results == ["kind", "v", "w"]
    assert data.data["v"] == [0.5, 1.0] and data.data["w"] == [1.0, 2.0]
    assert data.categorical_maps == {"kind": {"['a', 'b']": 0}} and data.to_category("kind", 0) == "['a', 'b']"


# ------------------------------------------------------------------------------------------------ bad input
def test_bad_input_is_rejected_by_name(tmp_path: Path) -> None:
    search = _golden()
    with pytest.raises(TypeError, match="42"):
        visualize_search(42)
    with pytest.raises(ValueError, match="no results to plot"):
        visualize_search(GridSearch(lambda search_idx, a: a, params={"a": [1]}))
    with pytest.raises(ValueError, match="No saved search file"):
        visualize_search(str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="'nope'"):
        visualize_search(search, ignore_keys=["nope"])
    with pytest.raises(TypeError, match="ignore_keys"):
        visualize_search(search, ignore_keys=5)
    with pytest.raises(ValueError, match="leaves no result"):
        visualize_search(search, ignore_keys=["acc", "loss"])
    with pytest.raises(TypeError, match="title"):
        plot_cartesian(search, title=3)
    with pytest.raises(ValueError, match="exactly 2 varying parameters"):
        plot_heatmap(search)
    with pytest.raises(ValueError, match="exactly 1 varying parameter"):
        plot_cartesian(_grid2())
    with pytest.raises(ValueError, match="'f1'"):
        plot_cartesian(search, groups=[["acc", "f1"]])
    with pytest.raises(TypeError, match="groups"):
        plot_cartesian(search, groups="acc")
    with pytest.raises(ValueError, match="'size'"):
        plot_parallel_coordinates(_grid3(), color_by="size")
    with pytest.raises(ValueError, match=r"fig\.txt.*or '\.html'"):
        visualize_search(search, save_path=str(tmp_path / "fig.txt"))
    assert visualize_search(search, save_path=str(tmp_path / "fig.html")) == str(tmp_path / "fig.html")
    assert (tmp_path / "fig.html").read_text().startswith("<!DOCTYPE html>")  # FastEstimator's format, static
    with pytest.raises(TypeError, match="save_path"):
        visualize_search(search, save_path=3)
    with pytest.raises(TypeError, match="colour_by"):
        visualize_search(search, colour_by="acc")


def test_missing_matplotlib_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "matplotlib" else find_spec(name, *args))
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot_cartesian(_golden())
