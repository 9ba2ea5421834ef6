"""RandomGridShuffle: cut an image and its masks into a grid of tiles and swap the tiles randomly (a random op)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fe_ray.op.numpyop.multivariate.multivariate import MultiVariateOp, check_size
from fe_ray.op.numpyop.randomness import get_rng

# One tile move: (row, column) of the output tile's top-left corner, then of the input tile it copies, and its size.
Move = tuple[int, int, int, int, int, int]


class RandomGridShuffle(MultiVariateOp):
    """Cut the image and masks into ``grid = (rows, columns)`` tiles and put the tiles back in a random order.

    The cuts fall at ``int(linspace(0, size, n + 1))``, so tiles differ in size by at most a pixel; only tiles of
    the same size trade places (each group of equal tiles is permuted uniformly, groups in increasing size), as in
    albumentations, which FastEstimator 1.7 wraps. Pixels move exactly, so masks keep their labels and stay aligned.
    Random: the permutations come from the sample's generator (exact across resumes and worker threads, see
    :mod:`fe_ray.op.numpyop.randomness`).

    Args:
        grid: The number of tile rows and columns; each must be a positive int at most half the image's height
            (rows) or width (columns).
        mode, ds_id, image_in, mask_in, masks_in, image_out, mask_out, masks_out: See
            :class:`~fe_ray.op.numpyop.multivariate.multivariate.MultiVariateOp`.

    Raises:
        ValueError: If ``grid`` is not a pair of positive ints, or (when run) has more rows or columns than half the
            image's height or width.
    """

    is_random = True

    def __init__(self, grid: Sequence[int] = (3, 3), mode: None | str | Iterable[str] = None,
                 ds_id: None | str | Iterable[str] = None, image_in: str | None = None, mask_in: str | None = None,
                 masks_in: str | None = None, image_out: str | None = None, mask_out: str | None = None,
                 masks_out: str | None = None) -> None:
        super().__init__(mode=mode, ds_id=ds_id, image_in=image_in, mask_in=mask_in, masks_in=masks_in,
                         image_out=image_out, mask_out=mask_out, masks_out=masks_out)
        if not isinstance(grid, (list, tuple)) or len(grid) != 2:
            raise ValueError(f"RandomGridShuffle grid must be a pair (rows, columns) of positive ints, got {grid!r}.")
        self.grid = (check_size(grid[0], "grid rows", "RandomGridShuffle"),
                     check_size(grid[1], "grid columns", "RandomGridShuffle"))

    def get_params(self, height: int, width: int, state: dict[str, Any]) -> list[Move]:
        rows, cols = self.grid
        if rows > height // 2 or cols > width // 2:
            raise ValueError(f"RandomGridShuffle grid={self.grid} is too fine for a {height}x{width} image: rows "
                             f"must be at most height // 2 = {height // 2} and columns at most width // 2 = "
                             f"{width // 2}. Use a coarser grid.")
        row_cuts = np.linspace(0, height, rows + 1).astype(np.int64)
        col_cuts = np.linspace(0, width, cols + 1).astype(np.int64)
        tiles = [(int(row_cuts[r]), int(col_cuts[c]), int(row_cuts[r + 1] - row_cuts[r]),
                  int(col_cuts[c + 1] - col_cuts[c])) for r in range(rows) for c in range(cols)]
        rng = get_rng(state)
        moves: list[Move] = []
        for size in sorted({tile[2:] for tile in tiles}):
            group = [tile for tile in tiles if tile[2:] == size]
            for target, index in zip(group, rng.permutation(len(group))):
                source = group[int(index)]
                moves.append((target[0], target[1], source[0], source[1], size[0], size[1]))
        return moves

    def apply(self, image: np.ndarray, params: list[Move]) -> np.ndarray:
        out = image.copy()
        for top, left, src_top, src_left, tile_h, tile_w in params:
            out[top:top + tile_h, left:left + tile_w] = image[src_top:src_top + tile_h, src_left:src_left + tile_w]
        return out
