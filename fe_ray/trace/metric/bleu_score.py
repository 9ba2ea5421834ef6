"""BleuScore: corpus BLEU (Papineni et al., ACL 2002) of an epoch's predicted token sequences."""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from fe_ray.backend import to_number
from fe_ray.trace.metric._epoch_metric import EpochMetric
from fe_ray.trace.trace import Data

#: The ``k`` of Chen and Cherry's smoothing 4 (nltk's SmoothingFunction default).
SMOOTHING_K = 5.0


class BleuScore(EpochMetric):
    """Corpus BLEU of an epoch's predicted sequences against one reference each, logged at its end.

    The value is what FastEstimator computes with nltk (``corpus_bleu`` with uniform weights over the 1- to
    ``n_gram``-grams and ``SmoothingFunction().method4``), reimplemented here:

    * Per sentence and order n, each predicted n-gram counts as correct at most as often as it occurs in the
      reference; the epoch sums the correct counts and the predicted n-gram counts (at least 1 per sentence).
    * An order with no correct n-gram gets, when the predictions hold more than one token in all, the smoothed
      precision ``ln(L) / (2^i * 5) / total_n`` (Chen and Cherry's method 4, ``L`` the predicted tokens of the
      epoch, ``i`` counting such orders from 1).
    * BLEU is the brevity penalty (``exp(1 - R / L)`` when ``L`` is below the reference length ``R``, else 1) times
      the geometric mean of the positive precisions; 0 without a single correct token. It is rounded to 5 decimals.

    Sequences are ``(batch, length)`` token ids, 0 being padding (every 0 is dropped, as in FastEstimator), or
    ``(batch, length, vocabulary)`` scores / one-hot rows (argmax over the last axis). Each batch also writes the
    sentences' own BLEU scores (same rules, per sentence) for per-instance loggers.

    Differences from FastEstimator: the trace reads ``true_key`` and ``pred_key`` (FastEstimator's reads the fixed
    keys 'target_real' and 'pred'); tokens compare as integers (FastEstimator compares their text, so 3 and 3.0
    differ).

    Args:
        true_key: Key of the reference sequences.
        pred_key: Key of the predicted sequences.
        mode: Mode(s) in which to compute it ('train', 'eval', 'test'; '!mode' excludes one).
        ds_id: Dataset id(s) in which to compute it; None for all, '!id' excludes one.
        output_name: Key under which the score is logged.
        n_gram: The highest n-gram order (4 gives BLEU-4, 2 BLEU-2).
        per_ds: With several datasets in a mode, also log ``<output_name>|<ds_id>`` per dataset (never when
            ``output_name`` contains '|').

    Raises:
        ValueError: If ``n_gram`` is not a positive int (when made), or at a batch whose sequences are not token ids
            or whose numbers of sentences differ.
    """

    def __init__(self, true_key: str, pred_key: str, mode: None | str | Iterable[str] = ("eval", "test"),
                 ds_id: None | str | Iterable[str] = None, output_name: str = "bleu_score", n_gram: int = 4,
                 per_ds: bool = True) -> None:
        if isinstance(n_gram, bool) or not isinstance(n_gram, numbers.Integral) or n_gram < 1:
            raise ValueError(f"BleuScore n_gram must be a positive int (4 for BLEU-4), got {n_gram!r}.")
        self.n_gram = int(n_gram)
        super().__init__(true_key, pred_key, outputs=output_name, mode=mode, ds_id=ds_id, per_ds=per_ds)

    def empty(self) -> dict[str, Any]:
        # correct / total: per n-gram order (index n - 1); lengths: predicted and reference tokens.
        return {"correct": np.zeros(self.n_gram, np.int64), "total": np.zeros(self.n_gram, np.int64),
                "hyp_len": 0, "ref_len": 0}

    def reduce_batch(self, y_true: Any, y_pred: Any) -> list[dict[str, Any]]:
        references = self._tokens(y_true, self.true_key)
        hypotheses = self._tokens(y_pred, self.pred_key)
        if len(references) != len(hypotheses):
            raise ValueError(f"BleuScore got {len(references)} references ({self.true_key!r}) but "
                             f"{len(hypotheses)} predictions ({self.pred_key!r}); they must describe the same "
                             "sentences.")
        return [sentence_counts(ref, hyp, self.n_gram) for ref, hyp in zip(references, hypotheses)]

    def add(self, totals: dict[str, Any], part: list[dict[str, Any]]) -> None:
        for counts in part:
            totals["correct"] += counts["correct"]
            totals["total"] += counts["total"]
            totals["hyp_len"] += counts["hyp_len"]
            totals["ref_len"] += counts["ref_len"]

    def has_data(self, totals: dict[str, Any]) -> bool:
        return bool(totals["total"][0])  # every sentence adds at least 1 to each order's total

    def compute(self, totals: dict[str, Any]) -> list[Any]:
        return [round(bleu_from_counts(totals), 5)]

    def on_batch_end(self, data: Data) -> None:
        part, suffix = self.ingest(data)
        data.write_per_instance_log(f"{self.outputs[0]}{suffix}", np.array([bleu_from_counts(c) for c in part]))

    def pack(self, totals: dict[str, Any]) -> dict[str, Any]:
        return {"correct": totals["correct"].copy(), "total": totals["total"].copy(),
                "hyp_len": int(totals["hyp_len"]), "ref_len": int(totals["ref_len"])}

    def unpack(self, state: Mapping[str, Any]) -> dict[str, Any]:
        correct = np.array(state["correct"], dtype=np.int64).ravel()
        if correct.size != self.n_gram:
            raise ValueError(f"BleuScore with n_gram={self.n_gram} was given a checkpoint of n_gram={correct.size}; "
                             "the checkpoint belongs to a different configuration.")
        return {"correct": correct, "total": np.array(state["total"], dtype=np.int64).ravel(),
                "hyp_len": int(state["hyp_len"]), "ref_len": int(state["ref_len"])}

    def _tokens(self, value: Any, key: str) -> list[np.ndarray]:
        """A batch's sequences as lists of int token ids, padding (0) dropped."""
        array = np.asarray(to_number(value))
        if array.ndim > 2 and array.shape[-1] > 1:
            array = np.argmax(array, axis=-1)
        if array.ndim == 3 and array.shape[-1] == 1:
            array = array[..., 0]
        if array.ndim != 2:
            raise ValueError(f"BleuScore needs (batch, length) token ids or (batch, length, vocabulary) scores under "
                             f"{key!r}, got shape {list(array.shape)}.")
        if array.dtype.kind == "f" and not np.array_equal(array, np.round(array)):
            raise ValueError(f"BleuScore needs whole-number token ids under {key!r}, got values such as "
                             f"{array[array != np.round(array)][:3].tolist()}.")
        array = array.astype(np.int64)
        return [row[row != 0] for row in array]


def _ngrams(tokens: Sequence[int], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def sentence_counts(reference: np.ndarray, hypothesis: np.ndarray, n_gram: int) -> dict[str, Any]:
    """One sentence's BLEU statistics: per order n = 1 .. ``n_gram`` the clipped matches (``correct``) and the
    predicted n-grams (``total``, at least 1, as nltk counts), and both lengths."""
    ref, hyp = reference.tolist(), hypothesis.tolist()
    correct, total = np.zeros(n_gram, np.int64), np.zeros(n_gram, np.int64)
    for n in range(1, n_gram + 1):
        predicted, available = _ngrams(hyp, n), _ngrams(ref, n)
        correct[n - 1] = sum(min(count, available[gram]) for gram, count in predicted.items())
        total[n - 1] = max(1, sum(predicted.values()))
    return {"correct": correct, "total": total, "hyp_len": len(hyp), "ref_len": len(ref)}


def bleu_from_counts(counts: Mapping[str, Any]) -> float:
    """BLEU from summed :func:`sentence_counts` (uniform weights, smoothing method 4, corpus brevity penalty)."""
    correct, total = np.asarray(counts["correct"]), np.asarray(counts["total"])
    hyp_len, ref_len = int(counts["hyp_len"]), int(counts["ref_len"])
    if correct[0] == 0:
        return 0.0
    penalty = 1.0 if hyp_len > ref_len else math.exp(1.0 - ref_len / hyp_len)
    precisions, smoothed = [], 1
    for right, seen in zip(correct.tolist(), total.tolist()):
        if right == 0 and hyp_len > 1:
            # Method 4 gives shorter outputs proportionally smaller counts for an order they never get right.
            precisions.append(math.log(hyp_len) / (2 ** smoothed * SMOOTHING_K) / seen)
            smoothed += 1
        else:
            precisions.append(right / seen)
    weight = 1.0 / len(precisions)
    return penalty * math.exp(math.fsum(weight * math.log(p) for p in precisions if p > 0))
