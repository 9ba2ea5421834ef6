"""Slicers: cut a batch into minibatches for the Network's ops and fuse the results back."""

from fe_ray.slicer.slicer import (
    AxisSlicer,
    ChunkSlicer,
    MeanUnslicer,
    Slicer,
    forward_slicers,
    reverse_slicers,
    sanity_assert_slicers,
    split_bounds,
)
from fe_ray.slicer.sliding_slicer import SlidingSlicer

__all__ = ["AxisSlicer", "ChunkSlicer", "MeanUnslicer", "Slicer", "SlidingSlicer", "forward_slicers", "reverse_slicers",
           "sanity_assert_slicers", "split_bounds"]
