"""EMBEDQ_MODELS and EMBEDQ_MODEL_ALIASES: what an operator writes, what each model is
served with, and how a request's `model` is resolved and routed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from embedq.config import Settings
from embedq.deployment import Deployment
from embedq.encoders.catalog import Catalog
from embedq.errors import ConfigError, UnknownModel
from embedq.fingerprint import fingerprint
from embedq.models import JobStatus
from tests import support

BASE = {"EMBEDQ_ENCODER": "hashing"}


def settings(**env: str) -> Settings:
    return Settings.from_env({**BASE, **{f"EMBEDQ_{k.upper()}": v for k, v in env.items()}})


def test_each_model_has_its_source_revision_tiers_and_queues() -> None:
    s = settings(models="small=mini@r1, large=/models/big@v2:fp32", online_queue="on")
    assert [(e.name, e.source, e.revision, e.tiers) for e in s.served_models()] == [
        ("small", "mini", "r1", None), ("large", "/models/big", "v2", ("fp32",))]
    large = s.for_model("large")
    assert (large.model.model, large.model.model_revision, large.model.tiers) == \
        ("/models/big", "v2", ("fp32",))
    assert (large.queue.online_queue, large.queue.bulk_queue) == ("on.large", "bulk.large")
    assert large.deployment is s and large.for_model("small").queue.online_queue == "on.small"


def test_a_models_file_lists_one_model_a_line(tmp_path: Path) -> None:
    listed = tmp_path / "models.txt"
    listed.write_text("# served models\nsmall=mini@r1\n\nlarge=big@r2  # the slow one\n")
    assert [e.name for e in settings(models=f"@{listed}").served_models()] == ["small", "large"]
    with pytest.raises(ConfigError, match="models file that cannot be read"):
        settings(models=f"@{tmp_path / 'missing.txt'}")


@pytest.mark.parametrize(("models", "message"), [
    ("mini", "is not NAME=SOURCE: write each model as NAME=SOURCE"),
    ("a b=mini", "letters, digits"),
    ("small=mini:int9", "not a list of tiers: write the model's tiers after a colon"),
    ("small=mini@", "empty source or revision"),
    ("small=mini@r1,small=big@r2", "the model name 'small' twice"),
    ("small=mini,other=mini", "same source 'mini' and revision: .* EMBEDQ_MODEL_ALIASES"),
    ("small=mini:int8", "model 'small': EMBEDQ_TIERS with int8 runs on ONNX Runtime"),
    (" , ", "lists no model"),
])
def test_a_wrong_models_list_says_what_to_write(models: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(models=models)


def test_models_exclude_a_single_model_setting() -> None:
    with pytest.raises(ConfigError, match=r"EMBEDQ_MODELS and EMBEDQ_MODEL .* both set"):
        settings(models="small=mini@r1", model="other")


@pytest.mark.parametrize(("aliases", "message"), [
    ("query", "is not ALIAS=MODEL"),
    ("query=medium", "'medium', which is not served: use one of small, large"),
    ("small=large", "a model's own name"),
])
def test_a_wrong_alias_says_what_to_write(aliases: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(models="small=mini@r1,large=big@r2", model_aliases=aliases)


def test_a_request_names_a_model_an_alias_or_a_source() -> None:
    catalog = Catalog(settings(models="small=mini@r1,large=big@r2",
                               model_aliases="query=small,default=large"))
    assert catalog.default.name == "large"
    assert [catalog.resolve(n).name for n in ("small", "query", "big", None)] == \
        ["small", "small", "large", "large"]
    served, tier = catalog.split("query:fp32")
    assert (served.name, tier) == ("small", "fp32")
    with pytest.raises(UnknownModel, match="use one of small, large, default, query"):
        catalog.resolve("medium")
    assert catalog.route("big", "r2") is catalog.models["large"]
    assert catalog.route("big", "r1") is None


def test_switched_aliases_win_over_configured_ones() -> None:
    switched = {"query": "large", "gone": "medium"}
    catalog = Catalog(settings(models="small=mini@r1,large=big@r2",
                               model_aliases="query=small"), switched=lambda: switched)
    assert catalog.resolve("query").name == "large"
    assert "gone" not in catalog.aliases()  # a switch to a model no longer listed


def test_without_models_one_model_on_the_configured_queues() -> None:
    s = settings()
    catalog = Catalog(s)
    [only] = catalog.models.values()
    assert not catalog.several and only.settings is s
    assert (only.name, only.online_queue, only.bulk_queue) == \
        ("all-MiniLM-L6-v2", "online", "bulk")
    with pytest.raises(UnknownModel, match="use 'all-MiniLM-L6-v2'"):
        catalog.resolve("other")


# --- an embedded deployment of two models: one worker per model, jobs name theirs

@pytest.fixture
def two_models(tmp_path: Path) -> Iterator[Deployment]:
    deployment = Deployment.from_settings(settings(
        data_dir=str(tmp_path), encoder="faulty", ledger_path=str(tmp_path / "ledger"),
        models="small=mini@r1,large=big@r2"))
    try:
        yield deployment
    finally:
        deployment.close()


def test_an_embedded_deployment_runs_each_model_on_its_own_worker(
        two_models: Deployment) -> None:
    service = two_models.service
    small = service.embed(["one text"], model="small")
    large = service.embed(["one text"], model="large")
    assert (small.spec.model, small.spec.revision) == ("mini", "r1")
    assert (large.spec.model, large.spec.revision) == ("big", "r2")
    assert [o.source for o in small.outcomes + large.outcomes] == ["computed", "computed"]
    assert service.embed(["one text"], model="large").outcomes[0].source != "computed"
    runtimes = {n: w.runtime for n, w in two_models._workers.items()}
    assert {n: r.encoder.name for n, r in runtimes.items()} == {"small": "mini", "large": "big"}


def test_a_job_runs_on_its_models_worker_and_names_it(two_models: Deployment) -> None:
    jobs = two_models.jobs()
    job_id = jobs.submit([f"job text {i}" for i in range(5)], model="large")
    support.wait_until(lambda: jobs.get(job_id).status in JobStatus.final(), 60, "the job")
    state = jobs.describe(job_id)
    assert (state["status"], state["model"], state["revision"]) == ("succeeded", "large", "r2")
    spec = two_models.service.spec("large")
    assert two_models.durable.get_many([fingerprint(spec, "job text 0")])
