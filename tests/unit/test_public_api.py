"""The public API, pinned: `from embedq import *` gives exactly these names."""

from __future__ import annotations

import embedq

PUBLIC = ["Client", "EmbedqError", "EncodeSpec", "Settings", "__version__", "fingerprint"]


def test_public_api_is_pinned() -> None:
    assert sorted(embedq.__all__) == sorted(PUBLIC)


def test_every_public_name_resolves() -> None:
    for name in embedq.__all__:
        assert getattr(embedq, name) is not None, name
    assert isinstance(embedq.__version__, str) and embedq.__version__.count(".") == 2
