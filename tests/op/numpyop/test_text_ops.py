"""Tokenize, WordtoId and PadSequence: FastEstimator's results on small sentences, chained in a Pipeline, and errors."""

from __future__ import annotations

import numpy as np
import pytest

from fe_ray.dataset import NumpyDataset
from fe_ray.op.numpyop.univariate import PadSequence, Tokenize, WordtoId
from fe_ray.pipeline import Pipeline


def test_tokenize_splits_on_whitespace_or_with_a_function() -> None:
    assert Tokenize("x", "x").forward(["The  cat\tsat\n"], {}) == [["The", "cat", "sat"]]
    assert Tokenize("x", "x", to_lower_case=True).forward([b"The CAT"], {}) == [["the", "cat"]]
    by_comma = Tokenize(["a", "b"], ["a", "b"], tokenize_fn=lambda text: text.split(","), to_lower_case=True)
    assert by_comma.forward(["A,b", np.array("C")], {}) == [["a", "b"], ["c"]]
    with pytest.raises(TypeError, match="must hold a string"):
        Tokenize("x", "x").forward([3], {})
    with pytest.raises(TypeError, match="tokenize_fn must be a function"):
        Tokenize("x", "x", tokenize_fn="split")  # type: ignore[arg-type]


def test_word_to_id_with_a_dict_or_a_function() -> None:
    vocab = {"the": 1, "cat": 2, "sat": 3}
    out = WordtoId(vocab, "x", "x").forward([["the", "cat", "sat", "the"]], {})[0]
    np.testing.assert_array_equal(out, [1, 2, 3, 1])
    by_length = WordtoId(lambda tokens: [len(token) for token in tokens], "x", "x")
    np.testing.assert_array_equal(by_length.forward([["a", "bcd"]], {})[0], [1, 3])
    with pytest.raises(ValueError, match="token 'dog' of 'x' has no id in the mapping"):
        WordtoId(vocab, "x", "x").forward([["the", "dog"]], {})
    with pytest.raises(TypeError, match="mapping must be a dict"):
        WordtoId([1, 2], "x", "x")  # type: ignore[arg-type]


def test_pad_sequence_pads_after_or_before_and_cuts() -> None:
    np.testing.assert_array_equal(PadSequence("x", "x", max_len=5).forward([np.array([4, 5])], {})[0],
                                  [4, 5, 0, 0, 0])
    np.testing.assert_array_equal(PadSequence("x", "x", max_len=4, value=-1, append=False).forward([[4, 5]], {})[0],
                                  [-1, -1, 4, 5])
    np.testing.assert_array_equal(PadSequence("x", "x", max_len=2).forward([[1, 2, 3]], {})[0], [1, 2])
    words = PadSequence("x", "x", max_len=3, value="<pad>").forward([["a"]], {})[0]
    assert words.tolist() == ["a", "<pad>", "<pad>"]
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        PadSequence("x", "x", max_len=0)


def test_text_chain_in_a_pipeline() -> None:
    texts = np.array(["the cat sat", "The dog", "a cat sat on the mat"])
    vocab = {"the": 1, "cat": 2, "sat": 3, "dog": 4, "a": 5, "on": 6, "mat": 7}
    pipeline = Pipeline(NumpyDataset({"x": texts}), batch_size=3,
                        ops=[Tokenize("x", "x", to_lower_case=True), WordtoId(vocab, "x", "x"),
                             PadSequence("x", "x", max_len=4)])
    batch = pipeline.get_results()
    np.testing.assert_array_equal(batch["x"], [[1, 2, 3, 0], [1, 4, 0, 0], [5, 2, 3, 6]])
