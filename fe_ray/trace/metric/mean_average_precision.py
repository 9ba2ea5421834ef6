"""MeanAveragePrecision: COCO-style average precision of an object detector over an epoch."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.trace.metric._epoch_metric import EpochMetric

#: COCO's IoU thresholds 0.50, 0.55, ..., 0.95 (index 0 is AP50, index 5 AP75).
IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
#: COCO's recall points 0.00, 0.01, ..., 1.00 at which interpolated precision is read.
RECALL_POINTS = np.linspace(0.0, 1.0, 101)
#: Detections kept per image and class, highest scores first (COCO's maxDets=100).
MAX_DETECTIONS = 100


class MeanAveragePrecision(EpochMetric):
    """COCO mean average precision of an epoch's detections, logged at its end as ``mAP``, ``AP50`` and ``AP75``.

    The computation is COCO's bounding-box evaluation (pycocotools' ``COCOeval`` with area 'all' and 100 detections,
    which FastEstimator reimplements), here in numpy:

    * Per image and class, detections are taken by decreasing score (at most 100) and each is matched greedily to the
      not yet matched ground-truth box of that class with which its IoU is highest, if that IoU reaches the threshold;
      this is done for each IoU threshold 0.50, 0.55, ..., 0.95.
    * Per class, the detections of all images are ranked by score; precision is made non-increasing in recall and
      read at the recall points 0.00, 0.01, ..., 1.00 (0 beyond the highest recall reached).
    * ``mAP`` is the mean of those precisions over thresholds, recall points and the classes that have ground-truth
      boxes in the epoch; ``AP50`` and ``AP75`` take only the 0.50 or 0.75 threshold. With no ground-truth box at
      all each is -1.

    Boxes are ``[x1, y1, w, h]`` (top-left corner, width, height) in any unit. Ground truth under ``true_key`` is
    ``(batch, num_boxes, 5)``: ``[x1, y1, w, h, label]`` per box, rows of all zeros being padding. Predictions under
    ``pred_key`` are ``(batch, num_detections, 7)``: ``[x1, y1, w, h, label, score, select]``, rows with ``select``
    0 (e.g. dropped by non-maximum suppression) being ignored; a 6-column array without ``select`` keeps every row.
    Labels are class indices ``0 .. num_classes - 1``.

    Differences from FastEstimator: detections on an image without ground-truth boxes count as false positives (as in
    COCO; FastEstimator fails on them), and labels outside ``range(num_classes)`` raise an error instead of being
    silently left out.

    Args:
        num_classes: How many classes there are (labels ``0 .. num_classes - 1``).
        true_key: Key of the ground-truth boxes.
        pred_key: Key of the predicted boxes.
        mode: Mode(s) in which to compute it ('train', 'eval', 'test'; '!mode' excludes one).
        ds_id: Dataset id(s) in which to compute it; None for all, '!id' excludes one.
        output_name: The three keys under which mAP, AP50 and AP75 are logged.
        per_ds: With several datasets in a mode, also log ``<key>|<ds_id>`` per dataset (never when an output name
            contains '|').

    Raises:
        ValueError: If ``num_classes`` is not a positive int or ``output_name`` does not name three keys (when made),
            or at a batch whose arrays have the wrong shape or labels outside ``range(num_classes)``.
    """

    def __init__(self, num_classes: int, true_key: str = "bbox", pred_key: str = "pred",
                 mode: None | str | Iterable[str] = ("eval", "test"), ds_id: None | str | Iterable[str] = None,
                 output_name: tuple[str, str, str] = ("mAP", "AP50", "AP75"), per_ds: bool = True) -> None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 1:
            raise ValueError(f"MeanAveragePrecision num_classes must be a positive int (labels run from 0 to "
                             f"num_classes - 1), got {num_classes!r}.")
        names = [output_name] if isinstance(output_name, str) else list(output_name)
        if len(names) != 3:
            raise ValueError(f"MeanAveragePrecision output_name must name 3 keys (for mAP, AP50 and AP75), got "
                             f"{output_name!r}; e.g. ('mAP', 'AP50', 'AP75').")
        self.num_classes = int(num_classes)
        super().__init__(true_key, pred_key, outputs=names, mode=mode, ds_id=ds_id, per_ds=per_ds)

    def empty(self) -> dict[int, dict[str, Any]]:
        # class -> {"scores": [arrays], "matches": [(thresholds, n) bool arrays], "n_gt": int}; a class appears once
        # one of its boxes (true or predicted) has been seen.
        return {}

    def reduce_batch(self, y_true: Any, y_pred: Any) -> dict[int, tuple[np.ndarray, np.ndarray, int]]:
        truth = np.asarray(to_number(y_true), dtype=np.float64)
        preds = np.asarray(to_number(y_pred), dtype=np.float64)
        if truth.ndim != 3 or truth.shape[-1] != 5:
            raise ValueError(f"MeanAveragePrecision needs ground truth of shape (batch, num_boxes, 5) with rows "
                             f"[x1, y1, w, h, label] under {self.true_key!r}, got shape {list(truth.shape)}.")
        if preds.ndim != 3 or preds.shape[-1] not in (6, 7):
            raise ValueError(f"MeanAveragePrecision needs predictions of shape (batch, num_detections, 7) with rows "
                             f"[x1, y1, w, h, label, score, select] under {self.pred_key!r}, got shape "
                             f"{list(preds.shape)}.")
        if truth.shape[0] != preds.shape[0]:
            raise ValueError(f"MeanAveragePrecision got {truth.shape[0]} images under {self.true_key!r} but "
                             f"{preds.shape[0]} under {self.pred_key!r}; they must describe the same images.")
        part: dict[int, list[Any]] = {}
        for boxes, detections in zip(truth, preds):
            boxes = boxes[np.any(boxes != 0, axis=1)]  # all-zero rows pad images with fewer boxes
            if detections.shape[1] == 7:
                detections = detections[detections[:, 6] > 0]
            self._check_labels(boxes[:, 4], self.true_key)
            self._check_labels(detections[:, 4], self.pred_key)
            for label in np.unique(np.concatenate([boxes[:, 4], detections[:, 4]])).astype(np.int64):
                gt = boxes[boxes[:, 4] == label, :4]
                det = detections[detections[:, 4] == label]
                scores, matches = match_image(det[:, :4], det[:, 5], gt)
                entry = part.setdefault(int(label), [[], [], 0])
                entry[0].append(scores)
                entry[1].append(matches)
                entry[2] += len(gt)
        return {label: (np.concatenate(scores), np.concatenate(matches, axis=1), n_gt)
                for label, (scores, matches, n_gt) in part.items()}

    def add(self, totals: dict[int, dict[str, Any]], part: dict[int, tuple[np.ndarray, np.ndarray, int]]) -> None:
        for label, (scores, matches, n_gt) in part.items():
            entry = totals.setdefault(label, {"scores": [], "matches": [], "n_gt": 0})
            entry["scores"].append(scores)
            entry["matches"].append(matches)
            entry["n_gt"] += n_gt

    def compute(self, totals: dict[int, dict[str, Any]]) -> list[Any]:
        # (thresholds, recall points) precision of each class with ground truth; classes without any are left out.
        curves = [interpolated_precision(np.concatenate(entry["scores"]), np.concatenate(entry["matches"], axis=1),
                                         entry["n_gt"]) for _, entry in sorted(totals.items()) if entry["n_gt"] > 0]
        if not curves:
            return [-1, -1, -1]
        stacked = np.stack(curves)  # (classes, thresholds, recall points)
        return [np.mean(stacked), np.mean(stacked[:, 0]), np.mean(stacked[:, 5])]

    def pack(self, totals: dict[int, dict[str, Any]]) -> dict[str, Any]:
        # Joined copies: a checkpoint must not share arrays with lists that later batches keep growing.
        return {"scores": {label: np.concatenate(entry["scores"]) for label, entry in totals.items()},
                "matches": {label: np.concatenate(entry["matches"], axis=1) for label, entry in totals.items()},
                "n_gt": {label: entry["n_gt"] for label, entry in totals.items()}}

    def unpack(self, state: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
        return {int(label): {"scores": [np.array(state["scores"][label], dtype=np.float64).ravel()],
                             "matches": [np.array(state["matches"][label], dtype=bool).reshape(len(IOU_THRESHOLDS),
                                                                                              -1)],
                             "n_gt": int(state["n_gt"][label])} for label in state["n_gt"]}

    def _check_labels(self, labels: np.ndarray, key: str) -> None:
        bad = labels[(labels < 0) | (labels >= self.num_classes) | (labels != np.round(labels))]
        if bad.size:
            raise ValueError(f"MeanAveragePrecision got box labels {np.unique(bad)[:5].tolist()} under {key!r}, "
                             f"outside 0..{self.num_classes - 1}; set num_classes to the number of classes (one "
                             "more than the largest label).")


def box_iou(boxes_a: np.ndarray, boxes_b: np.ndarray) -> np.ndarray:
    """The ``(len(a), len(b))`` IoU matrix of ``[x1, y1, w, h]`` boxes (0 where a union is empty)."""
    a, b = boxes_a[:, None, :], boxes_b[None, :, :]
    width = np.minimum(a[..., 0] + a[..., 2], b[..., 0] + b[..., 2]) - np.maximum(a[..., 0], b[..., 0])
    height = np.minimum(a[..., 1] + a[..., 3], b[..., 1] + b[..., 3]) - np.maximum(a[..., 1], b[..., 1])
    inter = np.clip(width, 0.0, None) * np.clip(height, 0.0, None)
    union = a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def match_image(det_boxes: np.ndarray, det_scores: np.ndarray, gt_boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Match one image's detections of one class to its ground-truth boxes of that class, as COCO does.

    Returns:
        ``(scores, matches)``: the scores of the (at most :data:`MAX_DETECTIONS`) detections kept, highest first,
        and a ``(len(IOU_THRESHOLDS), len(scores))`` bool array saying which of them matched a box at each threshold.
    """
    order = np.argsort(-det_scores, kind="mergesort")[:MAX_DETECTIONS]
    det_boxes, det_scores = det_boxes[order], det_scores[order]
    matches = np.zeros((len(IOU_THRESHOLDS), len(order)), dtype=bool)
    if not len(order) or not len(gt_boxes):
        return det_scores, matches
    ious = box_iou(det_boxes, gt_boxes)
    for t, threshold in enumerate(IOU_THRESHOLDS):
        taken = np.zeros(len(gt_boxes), dtype=bool)
        for d in range(len(order)):
            candidates = np.where(taken, -np.inf, ious[d])
            best = candidates.max()
            if best >= min(threshold, 1 - 1e-10):
                # COCO scans the boxes keeping the last one at the highest IoU.
                g = len(candidates) - 1 - int(np.argmax(candidates[::-1] == best))
                taken[g] = True
                matches[t, d] = True
    return det_scores, matches


def interpolated_precision(scores: np.ndarray, matches: np.ndarray, n_gt: int) -> np.ndarray:
    """COCO's ``(len(IOU_THRESHOLDS), len(RECALL_POINTS))`` precision of one class over an epoch, from every image's
    kept detection ``scores`` and ``matches`` (in image order) and the number of ground-truth boxes ``n_gt`` > 0."""
    order = np.argsort(-scores, kind="mergesort")
    matches = matches[:, order]
    true_pos = np.cumsum(matches, axis=1, dtype=np.float64)
    false_pos = np.cumsum(~matches, axis=1, dtype=np.float64)
    result = np.zeros((len(IOU_THRESHOLDS), len(RECALL_POINTS)))
    for t in range(len(IOU_THRESHOLDS)):
        recall = true_pos[t] / n_gt
        precision = true_pos[t] / (true_pos[t] + false_pos[t] + np.spacing(1))
        # The precision at a recall is the best precision at that recall or beyond (the curve's upper envelope).
        precision = np.maximum.accumulate(precision[::-1])[::-1]
        at = np.searchsorted(recall, RECALL_POINTS, side="left")
        reached = at < len(recall)
        result[t, reached] = precision[at[reached]]
    return result
