"""Vectors that are not vectors (Inf, the wrong width) are never stored: the text's caller
gets InvalidVector (HTTP 422: the text or the model, not the infrastructure), and the
texts that shared its batch still get theirs."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from embedq.api.errors import ERROR_TABLE
from embedq.errors import InvalidVector
from embedq.fingerprint import fingerprint
from embedq.models import Embedding
from embedq.service import EmbeddingService
from tests.conftest import Cluster

pytestmark = pytest.mark.integration


def never_stored(service: EmbeddingService, text: str) -> None:
    fp = fingerprint(service.spec(), text)
    with service.db.session() as s:
        assert s.scalar(select(func.count()).where(Embedding.fingerprint == fp)) == 0
    assert service.hot.vectors([fp]) == [None]


@pytest.mark.parametrize(("marker", "says"), [
    ("[[inf]]", "NaN or Inf"),
    ("[[wrongdim]]", "shape (383,)"),
])
def test_a_bad_vector_fails_its_text_alone_and_is_never_stored(
    cluster: Cluster, salt: str, marker: str, says: str
) -> None:
    service = cluster.service()
    texts = [f"{salt} fine {i}" for i in range(8)]
    texts.insert(3, f"{salt} broken {marker}")
    result = service.embed(texts)
    errors = [o.error for o in result.outcomes]
    assert isinstance(errors[3], InvalidVector), errors[3]
    assert says in str(errors[3])
    assert all(e is None for i, e in enumerate(errors) if i != 3), errors
    assert all(o.vector is not None and o.vector.shape == (384,)
               for i, o in enumerate(result.outcomes) if i != 3)
    never_stored(service, texts[3])


def test_an_invalid_vector_is_a_422() -> None:
    status = next(kind.status for cls, kind in ERROR_TABLE if issubclass(InvalidVector, cls))
    assert status == 422
