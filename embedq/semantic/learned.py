"""The learned verifier: a logistic regression over what a (stored, asked) pair's texts say.

The hand rules (guard.py, verify.py) refuse a candidate on the first slot that conflicts;
each rule was written after reading some pairs, and a rule that fits one corpus can miss
or over-refuse on the next. The learned verifier reads the same evidence as features
(`FEATURES`) and weighs it with coefficients fitted on labelled pairs
(`embedq bench threshold --learned --train-learned`, bench/learned.py), leave-one-domain-out:

  score          the cosine of the two texts' unit vectors (the index's score)
  guard          the contrast guard's verdict (one word apart, or the same words reordered)
  number .. disjoint
                 each verifier slot's verdict on its own (`Verifier.slots`), 1 for a conflict
  minimal, frame whether the texts keep one frame (align.minimal) and difflib's word ratio
  substitutions  content-word substitutions of a minimal edit (align.substitutions)
  orphans_*      the share of each side's content words with no counterpart on the other
                 (the same word in any form, or the words embedded alone at a cosine of
                 `min_word_similarity` or more)
  weakest, mean_best
                 each content word's best cosine with the other side's content words (1.0
                 for the same word): the least of them, and their mean
  words_*, length_gap
                 the words on each side (articles dropped), and the share their counts differ

`Learned.probability` standardizes the features with the fitted means and scales and
returns the logistic of the weighted sum; a candidate at or above the cache's threshold is
served when it is at or above `Learned.threshold`, the operating point chosen on the
training domains' out-of-fold probabilities for 0 near-misses served. The fitted values
ship as JSON (embedq/data/learned_verifier.json), read without pickle.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from embedq.errors import InvalidInput
from embedq.semantic.align import MIN_FRAME, lexical, unit
from embedq.semantic.guard import contrasting, stem, words
from embedq.semantic.verify import Verifier

WEIGHTS = Path(__file__).resolve().parents[1] / "data" / "learned_verifier.json"
SLOT_FEATURES = ("number", "negation", "order", "direction", "time", "scope", "tense", "role",
                 "crossed", "content", "disjoint")
FEATURES = ("score", "guard", *SLOT_FEATURES, "minimal", "frame", "substitutions",
            "orphans_asked", "orphans_stored", "weakest", "mean_best", "words_asked",
            "words_stored", "length_gap")
Vector = npt.NDArray[np.float64]


def _best(own: list[str], other: list[str], own_all: list[str], other_all: list[str],
          at: dict[str, npt.NDArray[np.float32]]) -> list[float]:
    """Each word of `own`'s best cosine with `other` (1.0 for the same word in any form)."""
    out = []
    for word in own:
        if lexical(word, own_all, other_all):
            out.append(1.0)
        elif other:
            out.append(max(float(at[word] @ at[o]) for o in other))
        else:
            out.append(0.0)
    return out


def features(asked: str, stored: str, score: float, verifier: Verifier) -> Vector:
    """The pair's features, in `FEATURES` order; the word embeddings through `verifier`'s
    embedder (one call for the pair's content words, from the exact cache once seen)."""
    a, b = words(asked), words(stored)
    slots = verifier.slots(asked, stored)
    ca, cb = verifier.content_words(asked, stored)
    vocabulary = sorted(set(ca) | set(cb))
    at = ({w: unit(v) for w, v in zip(vocabulary, verifier.embed(vocabulary), strict=True)}
          if vocabulary else {})
    best_a, best_b = _best(ca, cb, a, b, at), _best(cb, ca, b, a, at)
    every = best_a + best_b
    floor = verifier.min_word_similarity
    frame = difflib.SequenceMatcher(a=[stem(w) for w in a], b=[stem(w) for w in b],
                                    autojunk=False)
    ops = [op for op in frame.get_opcodes() if op[0] != "equal"]
    values = {
        "score": score,
        "guard": float(contrasting(asked, stored)),
        **{slot: float(slots[slot]) for slot in SLOT_FEATURES},
        "minimal": float(frame.ratio() >= MIN_FRAME),
        "frame": frame.ratio(),
        "substitutions": float(len(ops)),
        "orphans_asked": sum(x < floor for x in best_a) / len(best_a) if best_a else 0.0,
        "orphans_stored": sum(x < floor for x in best_b) / len(best_b) if best_b else 0.0,
        "weakest": min(every) if every else 1.0,
        "mean_best": sum(every) / len(every) if every else 1.0,
        "words_asked": float(len(a)),
        "words_stored": float(len(b)),
        "length_gap": abs(len(a) - len(b)) / max(len(a), len(b), 1),
    }
    return np.array([values[name] for name in FEATURES], dtype=np.float64)


def _sigmoid(z: Vector) -> Vector:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))


@dataclass(frozen=True)
class Learned:
    """Fitted coefficients over standardized `features`, and the operating point."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float  # served at or above this probability
    model: str = ""  # the embedding model the cosine feature came from
    trained_on: str = ""

    def probabilities(self, rows: Vector) -> Vector:
        """The probability that each row (a pair's `features`) is a paraphrase."""
        z = (rows - np.asarray(self.mean)) / np.asarray(self.scale)
        return _sigmoid(z @ np.asarray(self.weights) + self.bias)

    def probability(self, row: Vector) -> float:
        return float(self.probabilities(row[None, :])[0])

    def to_json(self) -> dict[str, Any]:
        return {"features": list(self.features), "mean": list(self.mean),
                "scale": list(self.scale), "weights": list(self.weights), "bias": self.bias,
                "threshold": self.threshold, "model": self.model,
                "trained_on": self.trained_on}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Learned:
        names = tuple(data["features"])
        if names != FEATURES:
            raise InvalidInput(
                f"the learned verifier's weights name the features {list(names)}, this "
                f"code computes {list(FEATURES)}: retrain them with `embedq bench threshold "
                "--learned --train-learned`", "learned_verifier")
        mean, scale, weights = (tuple(float(x) for x in data[k])
                                for k in ("mean", "scale", "weights"))
        if any(len(v) != len(names) for v in (mean, scale, weights)) or not all(
                math.isfinite(x) and x for x in scale) or not all(
                math.isfinite(x) for x in (*mean, *weights)):
            raise InvalidInput("the learned verifier's weights file is damaged: retrain it "
                               "with `embedq bench threshold --learned --train-learned`",
                               "learned_verifier")
        return cls(names, mean, scale, weights, bias=float(data["bias"]),
                   threshold=float(data["threshold"]), model=str(data.get("model", "")),
                   trained_on=str(data.get("trained_on", "")))


def load(path: Path = WEIGHTS) -> Learned:
    """The shipped (or given) weights; JSON only."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read the learned verifier's weights at {path} ({exc}): "
                           "write them with `embedq bench threshold --learned --train-learned`",
                           "learned_verifier") from exc
    return Learned.from_json(data)


def fit(rows: Vector, labels: npt.NDArray[np.bool_], *, l2: float = 1.0,
        iterations: int = 50) -> tuple[Vector, Vector, Vector, float]:
    """(mean, scale, weights, bias) of an L2-regularized logistic regression of `labels`
    (True: paraphrase) on `rows`, standardized; Newton's method, deterministic."""
    mean = rows.mean(axis=0)
    scale = rows.std(axis=0)
    scale[scale == 0] = 1.0
    x = np.hstack([(rows - mean) / scale, np.ones((len(rows), 1))])
    y = labels.astype(np.float64)
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[-1] = 0.0  # the bias is not shrunk
    for _ in range(iterations):
        p = _sigmoid(x @ w)
        gradient = x.T @ (p - y) + penalty * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return mean, scale, w[:-1], float(w[-1])
