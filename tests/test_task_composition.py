"""Each task of the plugin is ``PluginTask`` (the hooks every task shares, each stated once in
``fairseq_ext/tasks/base.py``), fairseq's task, and what its own file shows: its bases are
``PluginTask`` first, at most one interface of ``fairseq_ext.common.interfaces`` that a model
reads, and one fairseq task; no other mixin, no task restating a shared hook, and no cache keyed
by ``id()`` or kept in the instance's ``__dict__``. The tasks are the ones ``TASK_REGISTRY`` holds
from ``fairseq_ext.*``."""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod

import pytest
from fairseq.tasks import TASK_REGISTRY
from fairseq.tasks.translation import TranslationTask

from fairseq_ext import plugin
from fairseq_ext.common.families import FAMILIES
from fairseq_ext.tasks.base import PluginTask

plugin.load()
PLUGIN_TASKS = {
    name: cls for name, cls in TASK_REGISTRY.items() if cls.__module__.startswith("fairseq_ext.")
}
ID_KEYED = re.compile(r"\bid\(|__dict__")
# what PluginTask's hooks call: a task module that calls one restates a shared hook
SHARED = re.compile(r"\b(with_dictionaries|checked_bpe|complete_batches|amp_train_step)\b")


def composition_faults(cls: type) -> list[str]:
    """What keeps ``cls`` from being a composed task, in words (empty: none)."""
    faults = []
    if len(cls.__bases__) > 3:
        faults.append(f"{len(cls.__bases__)} bases")
    if cls.__bases__[0] is not PluginTask:
        faults.append("PluginTask is not its first base")
    fairseq_bases = [b for b in cls.__bases__ if b.__module__.startswith("fairseq.")]
    if len(fairseq_bases) != 1:
        faults.append(f"{len(fairseq_bases)} fairseq bases")
    for klass in cls.__mro__[1:]:
        if klass.__module__.startswith("fairseq.") or klass in (ABC, object, PluginTask):
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
    restated = sorted(set(SHARED.findall(source)))
    if restated:
        faults.append(f"restates PluginTask's hooks ({', '.join(restated)})")
    return faults


def test_the_registry_holds_every_task_of_the_families():
    assert sorted(PLUGIN_TASKS) == sorted(task for family in FAMILIES for task in family.tasks)


@pytest.mark.parametrize("name", sorted(PLUGIN_TASKS))
def test_a_task_is_plugin_task_and_fairseqs_task_plus_what_its_file_shows(name):
    assert composition_faults(PLUGIN_TASKS[name]) == []


def test_plugin_task_adds_to_fairseqs_hooks_and_keeps_no_state():
    """Each shared hook calls fairseq's own (``super()``), and ``PluginTask`` keeps no state."""
    hooks = {n for n, v in vars(PluginTask).items() if callable(v) or isinstance(v, classmethod)}
    assert hooks == {"add_args", "state_dict", "build_bpe", "get_batch_iterator", "train_step"}
    for name in hooks:
        assert "super()." in inspect.getsource(getattr(PluginTask, name)), name
    assert "__init__" not in vars(PluginTask) and not ID_KEYED.search(inspect.getsource(PluginTask))


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

        def state_dict(self):
            from fairseq_ext.checkpoints.dictionaries import with_dictionaries

            return with_dictionaries(super().state_dict(), self)

    class Deeper(PluginTask, CompleteBatchesMixin, Interface, TranslationTask):
        pass

    faults = composition_faults(Tower)
    assert "PluginTask is not its first base" in faults
    assert any("CompleteBatchesMixin" in f for f in faults)
    assert any("id() or __dict__" in f for f in faults)
    assert any("restates PluginTask's hooks" in f and "with_dictionaries" in f for f in faults)
    assert any(
        "Interface" in f for f in faults
    )  # an interface of this test module, not of fairseq_ext.common.interfaces
    assert "4 bases" in composition_faults(Deeper)


def test_plugin_tasks_step_is_fairseqs_with_current_autocast_unless_the_parent_has_its_own(
    monkeypatch,
):
    """``PluginTask.train_step``: ``amp_train_step`` where the parent's step is
    ``FairseqTask.train_step``, the parent's own step (``translation_lev``'s noise) otherwise."""
    from fairseq.tasks import FairseqTask
    from fairseq.tasks.translation_lev import TranslationLevenshteinTask

    from fairseq_ext.tasks import amp_train_step

    monkeypatch.setattr(amp_train_step, "train_step", lambda *args: ("amp", args))
    monkeypatch.setattr(TranslationLevenshteinTask, "train_step", lambda self, *a: ("lev", a))

    class OnFairseqsStep(PluginTask, FairseqTask):
        pass

    class OnItsParentsStep(PluginTask, TranslationLevenshteinTask):
        pass

    step = ("sample", "model", "criterion", "optimizer", 3, False)
    assert OnFairseqsStep.train_step(object.__new__(OnFairseqsStep), *step) == ("amp", step)
    assert OnItsParentsStep.train_step(object.__new__(OnItsParentsStep), *step) == ("lev", step)
    assert PLUGIN_TASKS["cmlm_hybrid"].__mro__[2] is TranslationLevenshteinTask
