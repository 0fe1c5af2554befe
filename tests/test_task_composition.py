"""Each task of the plugin is fairseq's base task plus explicit helper calls, not a tower of
mixins: at most two bases (fairseq's task, and at most one interface of
``fairseq_ext.common.interfaces`` that a model reads), every behaviour it adds written in its own
class, and no cache keyed by ``id()`` or kept in the instance's ``__dict__`` behind the
reader's back. The tasks are the ones ``TASK_REGISTRY`` holds from ``fairseq_ext.*``."""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod

import pytest
from fairseq.tasks import TASK_REGISTRY
from fairseq.tasks.translation import TranslationTask

from fairseq_ext import plugin
from fairseq_ext.common.families import FAMILIES

plugin.load()
PLUGIN_TASKS = {
    name: cls for name, cls in TASK_REGISTRY.items() if cls.__module__.startswith("fairseq_ext.")
}
ID_KEYED = re.compile(r"\bid\(|__dict__")


def composition_faults(cls: type) -> list[str]:
    """What keeps ``cls`` from being a composed task, in words (empty: none)."""
    faults = []
    if len(cls.__bases__) > 2:
        faults.append(f"{len(cls.__bases__)} bases")
    fairseq_bases = [b for b in cls.__bases__ if b.__module__.startswith("fairseq.")]
    if len(fairseq_bases) != 1:
        faults.append(f"{len(fairseq_bases)} fairseq bases")
    for klass in cls.__mro__[1:]:
        if klass.__module__.startswith("fairseq.") or klass in (ABC, object):
            continue
        if not klass.__module__.startswith("fairseq_ext.common.interfaces"):
            faults.append(f"behaviour inherited from {klass.__module__}.{klass.__name__}")
            continue
        concrete = [
            name
            for name, value in vars(klass).items()
            if callable(value)
            and not name.startswith("__")
            and not getattr(value, "__isabstractmethod__", False)
        ]
        if concrete:
            faults.append(f"{klass.__name__} implements {', '.join(concrete)}")
    source = inspect.getsource(inspect.getmodule(cls))
    if ID_KEYED.search(source):
        faults.append(f"{inspect.getmodule(cls).__name__} keys or keeps state by id() or __dict__")
    return faults


def test_the_registry_holds_every_task_of_the_families():
    assert sorted(PLUGIN_TASKS) == sorted(task for family in FAMILIES for task in family.tasks)


@pytest.mark.parametrize("name", sorted(PLUGIN_TASKS))
def test_a_task_is_fairseqs_task_plus_what_its_file_shows(name):
    cls = PLUGIN_TASKS[name]
    assert len(cls.__bases__) <= 2
    assert composition_faults(cls) == []


def test_the_check_finds_a_tower_of_mixins():
    """A task of the old shape (mixins that add hooks and cache per dataset id) is refused."""

    class CompleteBatchesMixin:
        def get_batch_iterator(self, dataset, **options):
            seen = self.__dict__.setdefault("_seen", set())
            seen.add(id(dataset))
            return super().get_batch_iterator(dataset, **options)

    class Interface(ABC):
        @abstractmethod
        def rule(self) -> str:
            """What a model asks."""

    class Tower(CompleteBatchesMixin, Interface, TranslationTask):
        def rule(self) -> str:
            return "prefix"

    faults = composition_faults(Tower)
    assert "3 bases" in faults
    assert any("CompleteBatchesMixin" in f for f in faults)
    assert any("id() or __dict__" in f for f in faults)
    assert any(
        "Interface" in f for f in faults
    )  # an interface of this test module, not of fairseq_ext.common.interfaces
