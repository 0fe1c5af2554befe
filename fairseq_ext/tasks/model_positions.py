"""The check that every example of a split fits the positions table of the model a one-stack
task built (Su 2019's UniLM and permutation LM share one table for source and target), made
once per dataset when fairseq asks for its batches; the model's size is known only after
``build_model``, so the check cannot run in ``load_dataset``."""
from typing import Optional


class ModelPositionsCheckMixin:
    """Mix into a ``FairseqTask`` before it: ``remember_model_positions(model)`` in
    ``build_model``, and ``check_model_positions(dataset, positions)`` (the task's own rule,
    raising ``FairseqExtError`` at the first example that does not fit) runs once per dataset
    in ``get_batch_iterator``."""

    model_positions: Optional[int] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not callable(getattr(cls, "check_model_positions", None)):
            raise TypeError(f"{cls.__name__} mixes in ModelPositionsCheckMixin but defines no "
                            "check_model_positions(dataset, positions), the task's own rule")

    def remember_model_positions(self, model) -> None:
        self.model_positions = model.encoder.max_positions()

    def get_batch_iterator(self, dataset, *args, **kwargs):
        checked = self.__dict__.setdefault("_positions_checked", set())
        if self.model_positions is not None and id(dataset) not in checked:
            self.check_model_positions(dataset, self.model_positions)
            checked.add(id(dataset))
        return super().get_batch_iterator(dataset, *args, **kwargs)
