"""FastEstimator 1.7's ``fe.util.ImageDisplay``: one panel, an image with masks, boxes, keypoints and text over it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fe_ray.util.base import to_list
from fe_ray.util.img_data.figure import (
    _BOTTOM,
    _HEATMAP_ALPHA,
    _MASK_ALPHA,
    _TOP,
    BASE_DPI,
    Display,
    _add_legend_entry,
    _axes_at,
    _color,
    _colormap,
    _finish,
    check_matplotlib,
    new_figure,
    set_column_title,
)
from fe_ray.util.img_data.values import (
    _prepare_bboxes,
    _prepare_image,
    _prepare_keypoints,
    _prepare_masks,
    _text,
    _valid_point,
    image_to_rgb,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


class ImageDisplay(Display):
    """One panel: an image with optional masks, bounding boxes, keypoints and text drawn over it.

    See the module docstring for the differences from FastEstimator 1.7 (matplotlib instead of plotly).

    Args:
        image: An (H, W) or (H, W, C) image with 1 or 3 channels; a 3-D torch tensor whose first axis has 1 or 3
            entries and whose last has more than 3 is channel-first. Integer values are pixels; float values in
            [0, 1], [-0.5, 0.5] or [-1, 1] are scaled from that range, others from their minimum to maximum.
        text: Text (a string, or a tensor holding one value) written in the middle of the panel.
        masks: An (H, W) mask or (H, W, N) masks ((N, H, W) for torch, recognised by the image's size), optionally
            with labels: ``(masks, label)`` / ``(masks, [label per mask])``. Binary masks are filled with one colour
            each; continuous ones are drawn as one heat map (their maximum).
        bboxes: Box(es) ``(x0, y0, width, height[, label])`` with (x0, y0) the top left corner: a tensor of shape
            (4,), (5,), (N, 4) or (N, 5), a sequence of such tensors or of such tuples.
        keypoints: (x, y) point(s) from the top left: a tensor of shape (2,) or (N, 2), optionally with labels
            ``(keypoints, [label per point])``. Negative, NaN or None coordinates (not detected) are skipped.
        title: The panel's title.
        mask_threshold: When given, masks become 1 where above it and 0 elsewhere.
        color_map: Matplotlib colour map of grey images, or (grey images, continuous masks).

    Raises:
        ValueError: If an argument has a wrong shape, the masks do not match the image, the labels do not match the
            masks / keypoints, or a colour map is unknown.
        TypeError: If an argument is not an array / tensor (or a box sequence).
        ImportError: If matplotlib is not installed (``pip install matplotlib``).
    """

    def __init__(self, image: Any = None, text: Any = None, masks: Any = None, bboxes: Any = None,
                 keypoints: Any = None, title: str | None = None, mask_threshold: float | None = None,
                 color_map: str | tuple[str, str] = ("gray", "turbo")) -> None:
        check_matplotlib("ImageDisplay")
        maps = to_list(color_map)
        if not 1 <= len(maps) <= 2:
            raise ValueError(f"ImageDisplay color_map must be one colour map name or two (images, masks), got "
                             f"{color_map!r}.")
        for name in maps:
            _colormap(name)
        self.img_color_map, self.mask_color_map = maps[0], maps[-1]
        self.image = None if image is None else _prepare_image(image)
        self.text = None if text is None else _text(text)
        self.masks, self.mask_labels = _prepare_masks(masks, self.image, mask_threshold)
        self.bboxes = _prepare_bboxes(bboxes)
        self.n_bboxes = max((len(box_set) for box_set in self.bboxes), default=0)
        self.keypoints, self.keypoint_labels = _prepare_keypoints(keypoints)
        self.title = title or ""

    def prepare(self, fig: Figure | None = None, axis: tuple[int, int] | None = None,
                col_width: int = 280) -> Figure:
        """Draw the panel into ``fig`` at 1-based (row, column) ``axis`` (default (1, 1)); without ``fig``, into a
        new figure ``col_width`` pixels wide and ``col_width + 100`` high (a square panel, the title above it and
        room for a legend below), titled with ``title``.

        Returns:
            The figure.
        """
        own = fig is None
        if own:
            fig = new_figure(col_width, col_width + _TOP + _BOTTOM, 1, 1)
        ax = _axes_at(fig, axis or (1, 1))
        if own:
            set_column_title(ax, self.title, col_width)
        self._draw(fig, ax, col_width)
        if own:
            _finish(fig)
        return fig

    def _draw(self, fig: Figure, ax: Axes, col_width: int) -> None:
        import matplotlib.patheffects as effects
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch, Rectangle

        outline = [effects.withStroke(linewidth=2, foreground="white")]
        if self.image is not None:
            ax.imshow(image_to_rgb(self.image, self.img_color_map), interpolation="nearest")
        for index, (mask, label) in enumerate(zip(self.masks, self.mask_labels)):
            if mask.max() > 1:
                mask = mask / 255.0
            if len(self.masks) == 1 and np.unique(mask).size > 2:
                overlay = _colormap(self.mask_color_map)(np.clip(mask, 0, 1))
                overlay[..., 3] = _HEATMAP_ALPHA
            else:
                color, first = _color(fig, "mask", label or index, _MASK_ALPHA)
                overlay = np.where((mask != 0)[..., None], np.array(color), 0.0)
                if label and first:
                    _add_legend_entry(fig, label, Patch(color=color[:3], alpha=0.6))
            ax.imshow(overlay, interpolation="nearest")
        for box_set in self.bboxes:
            for index, box in enumerate(box_set):
                x0, y0, width, height = (float(v) for v in box[:4])
                label = str(box[4]) if len(box) > 4 else ""
                color, first = _color(fig, "bbox", label or index)
                if width <= 0 or height <= 0:
                    continue  # empty or invalid box
                ax.add_patch(Rectangle((x0, y0), width, height, fill=False, edgecolor=color, linewidth=2))
                if label:
                    size = max(8, min(14, int(width // len(label)))) * 72 / BASE_DPI
                    ax.text(x0, y0 - 1, label, color=color, fontsize=size, family="monospace", ha="left",
                            va="bottom", path_effects=outline)
                    if first:
                        _add_legend_entry(fig, label, Line2D([], [], color=color, linewidth=2))
        for (x, y), label in zip(self.keypoints, self.keypoint_labels):
            if not _valid_point(x, y):
                continue
            color = (1.0, 0.0, 0.0, 1.0)
            if label:
                color, first = _color(fig, "keypoint", label)
                if first:
                    _add_legend_entry(fig, label, Line2D([], [], color=color, marker="o", linestyle=""))
            ax.scatter([float(x)], [float(y)], s=30, color=color, marker="o")
        if self.image is None and (self.masks or self.bboxes or len(self.keypoints)):
            ax.autoscale_view()
            if not ax.yaxis_inverted():
                ax.invert_yaxis()  # y grows downwards, as in an image
        if self.text:
            size = min(45, col_width // max(len(self.text), 1)) * 72 / BASE_DPI
            ax.text(0.5, 0.5, self.text, transform=ax.transAxes, ha="center", va="center", fontsize=max(size, 4),
                    family="monospace", color="black", path_effects=outline)
