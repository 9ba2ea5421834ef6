"""Datasets at FastEstimator's paths (``fe.dataset.CSVDataset`` ...) and small bundled example data
(``fe_ray.dataset.data``)."""

from fe_ray.dataset.batch_dataset import BatchDataset
from fe_ray.dataset.combined_dataset import CombinedDataset
from fe_ray.dataset.csv_dataset import CSVDataset
from fe_ray.dataset.dir_dataset import DirDataset, LabeledDirDataset
from fe_ray.dataset.extend_dataset import ExtendDataset
from fe_ray.dataset.generator_dataset import GeneratorDataset
from fe_ray.dataset.in_memory_dataset import InMemoryDataset
from fe_ray.dataset.interleave_dataset import InterleaveDataset
from fe_ray.dataset.numpy_dataset import NumpyDataset
from fe_ray.dataset.pickle_dataset import PickleDataset
from fe_ray.dataset.siamese_dir_dataset import SiameseDirDataset
from fe_ray.dataset.summary import DatasetSummary, KeySummary
from fe_ray.util.lazy import lazy_attributes

# ``fe.dataset.data.mnist`` as in FastEstimator, without loading the bundled-data loaders with every dataset import.
__getattr__, __dir__ = lazy_attributes(__name__, {"data": "fe_ray.dataset.data"})

__all__ = ["BatchDataset", "CSVDataset", "CombinedDataset", "DatasetSummary", "DirDataset", "ExtendDataset",
           "GeneratorDataset", "InMemoryDataset", "InterleaveDataset", "KeySummary", "LabeledDirDataset",
           "NumpyDataset", "PickleDataset", "SiameseDirDataset"]
