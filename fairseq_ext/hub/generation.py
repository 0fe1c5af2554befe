"""Text in, text out for the plugin's sequence-to-sequence families, on fairseq's
``GeneratorHubInterface`` (``fairseq.hub_utils``).

The interface tokenizes with the folder's own tokenizer (``cfg.bpe``), binarizes with the
task's dictionary, cuts batches with the task's own ``get_batch_iterator`` (``max_tokens`` /
``batch_size`` of the checkpoint's configuration, or of ``from_pretrained``'s overrides), asks
the task for its generator with the given options, and decodes the best hypothesis of every
sentence, in input order; fairseq's ``generate`` (token ids in, hypotheses out) stays as it is.
So a call decodes exactly as ``fairseq-generate`` / ``fairseq-interactive`` with the same
options (tested in tests/test_hub.py).

* ``HICMLMHubInterface.translate``: mask-predict (Ghazvininejad et al. 2019) with the HI-CMLM
  decoder input (Wang et al. 2021, section 3.2): ``passes`` decoder passes (fairseq's
  ``--iter-decode-max-iter passes - 1``), ``length_beam`` length candidates
  (``--iter-decode-with-beam``), ``force_passes`` (``--iter-decode-force-max-iter``), and the
  ``strategy`` that fills the masked slots (``--model-overrides "{'hybrid_strategy': ...}"``).
* ``Seq2SeqHubInterface.summarize`` (ProphetNet, Qi et al. 2020; UniLM, Su 2019): beam search
  with fairseq's options by name (``beam``, ``lenpen``, ``max_len_b``, ``min_len``,
  ``no_repeat_ngram_size``, ...).
"""
from __future__ import annotations

from contextlib import contextmanager

from fairseq.hub_utils import GeneratorHubInterface

from fairseq_ext.errors import require
from fairseq_ext.masking import HYBRID_STRATEGIES


class HICMLMHubInterface(GeneratorHubInterface):
    """A ``cmlm_hybrid`` checkpoint (``hi_cmlm_transformer``)."""

    def translate(self, sentences, passes: int | None = None, length_beam: int | None = None,
                  strategy: str | None = None, force_passes: bool | None = None, verbose: bool = False,
                  **options):
        """Translate a sentence (``str``) or a list of them. Unset arguments keep
        ``fairseq-generate``'s defaults (those saved in the checkpoint's configuration or given
        to ``from_pretrained``); ``options`` are further generation options by fairseq name."""
        if passes is not None:
            require(isinstance(passes, int) and passes >= 1,
                    f"passes must be an integer >= 1 (decoder passes of mask-predict), got {passes!r}")
            options["iter_decode_max_iter"] = passes - 1
        if length_beam is not None:
            options["iter_decode_with_beam"] = length_beam
        if force_passes is not None:
            options["iter_decode_force_max_iter"] = bool(force_passes)
        with self.hybrid_strategy(strategy):
            return self.sample(sentences, beam=self.cfg.generation.beam, verbose=verbose, **options)

    @contextmanager
    def hybrid_strategy(self, strategy: str | None):
        """Within the block the decoders fill masked slots by ``strategy`` (None: as saved)."""
        if strategy is None:
            yield
            return
        require(strategy in HYBRID_STRATEGIES,
                f"strategy {strategy!r} is unknown; choose one of {', '.join(HYBRID_STRATEGIES)}")
        decoders = [model.decoder for model in self.models]
        saved = [decoder.hybrid_strategy for decoder in decoders]
        for decoder in decoders:
            decoder.hybrid_strategy = strategy
        try:
            yield
        finally:
            for decoder, value in zip(decoders, saved):
                decoder.hybrid_strategy = value


class Seq2SeqHubInterface(GeneratorHubInterface):
    """A ``translation_prophetnet`` (``prophetnet``) or ``unilm_seq2seq``
    (``unilm_transformer``) checkpoint."""

    def summarize(self, sentences, beam: int | None = None, verbose: bool = False, **options):
        """The best beam-search output for a source (``str``) or a list of them. ``beam``
        defaults to ``fairseq-generate``'s (the checkpoint's configuration, or
        ``from_pretrained``'s overrides); ``options`` are generation options by fairseq name."""
        return self.sample(sentences, beam=self.cfg.generation.beam if beam is None else beam, verbose=verbose,
                           **options)
