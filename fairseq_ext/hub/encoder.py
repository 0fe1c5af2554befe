"""Masked-token filling and sentence classification with the position-masked encoder
(Wagner et al. 2020, ``position_masked_roberta``), on fairseq's ``RobertaHubInterface``.

At inference the model is RoBERTa (the position head only acts in pre-training, section
2.1), so fairseq's RoBERTa interface applies as it is: ``encode`` (``<s> pieces </s>``, the
folder's own tokenizer), ``extract_features``, ``predict`` and a one-sentence ``fill_mask``.
This subclass adds batched forms: ``fill_mask`` over a list of sentences (one ``<mask>``
each, the output format of fairseq's) and ``classify`` (the ``sentence_prediction`` head of a
checkpoint fine-tuned with ``examples/position_masking/finetune.sh``, its labels by name). A
batch is right-padded, which RoBERTa's padding mask and padding-aware positions make
equivalent to one sentence at a time (tested against fairseq's own one-sentence methods).
"""
from __future__ import annotations

import torch
from fairseq import utils
from fairseq.data.data_utils import collate_tokens
from fairseq.models.roberta import RobertaHubInterface

from fairseq_ext.errors import require

MASK = "<mask>"


class PositionMaskedHubInterface(RobertaHubInterface):
    """A ``position_masked_roberta`` checkpoint (pre-trained, or fine-tuned to classify)."""

    def _batches(self, tokens: list[torch.Tensor], batch_size: int):
        dictionary = self.task.source_dictionary
        limit = self.model.max_positions()
        for i, t in enumerate(tokens):
            require(len(t) <= limit, f"sentence {i + 1} has {len(t)} tokens with <s> and </s>, more than the model's "
                                     f"{limit} positions; shorten it")
        for start in range(0, len(tokens), batch_size):
            chunk = tokens[start:start + batch_size]
            yield start, chunk, collate_tokens(chunk, pad_idx=dictionary.pad()).to(self.device)

    def _encode_masked(self, sentence: str) -> torch.Tensor:
        """``<s> pieces <mask> pieces </s>`` as fairseq's ``fill_mask`` builds it."""
        require(sentence.count(MASK) == 1, f"fill_mask needs exactly one {MASK} per sentence, e.g. 'He is a "
                                           f"{MASK} guy'; got {sentence!r}")
        spans = [self.bpe.encode(span.rstrip()) if self.bpe is not None else span.strip()
                 for span in sentence.split(MASK)]
        pieces = f" {MASK} ".join(spans).strip()
        return self.task.source_dictionary.encode_line(f"<s> {pieces} </s>", append_eos=False,
                                                       add_if_not_exist=False).long()

    def _filled(self, sentence: str, piece: str, probability: float):
        """fairseq's format: a piece that starts a word (sentencepiece's ``\u2581``, a WordPiece
        without ``##``) takes the space before ``<mask>``, a continuation glues to the word."""
        if self.bpe is None:
            token = " " + piece
        else:
            token = self.bpe.decode(piece)
            if self.bpe.is_beginning_of_word(piece):
                token = " " + token
            elif piece.startswith("##"):
                token = piece[2:]
        target = f" {MASK}" if f" {MASK}" in sentence else MASK
        return sentence.replace(target, token), probability, token

    def fill_mask(self, sentences, topk: int = 5, batch_size: int = 32):
        """For a sentence (``str``) or a list of them, each with one ``<mask>``: the ``topk``
        fillings as ``(filled sentence, probability, token)``, most probable first."""
        if isinstance(sentences, str):
            return self.fill_mask([sentences], topk=topk, batch_size=batch_size)[0]
        dictionary = self.task.source_dictionary
        mask_id = dictionary.index(MASK)
        tokens = [self._encode_masked(s) for s in sentences]
        results = []
        with utils.model_eval(self.model), torch.no_grad():
            for start, chunk, batch in self._batches(tokens, batch_size):
                logits, _ = self.model(batch, features_only=False, return_all_hiddens=False)
                for row, t in enumerate(chunk):
                    position = int((t == mask_id).nonzero()[0])
                    values, index = logits[row, position].float().softmax(dim=-1).topk(topk)
                    sentence = sentences[start + row]
                    results.append([self._filled(sentence, dictionary[i], p)
                                    for i, p in zip(index.tolist(), values.tolist())])
        return results

    def classify(self, sentences, head: str = "sentence_classification_head", return_probs: bool = False,
                 batch_size: int = 32):
        """The label (by name) of a sentence or a list of them; a sentence pair is a tuple.
        With ``return_probs``: ``(label, probabilities over the labels in label order)``."""
        if isinstance(sentences, (str, tuple)):
            return self.classify([sentences], head, return_probs, batch_size)[0]
        require(head in self.model.classification_heads,
                f"the checkpoint has no classification head {head!r} (it has "
                f"{', '.join(self.model.classification_heads) or 'none'}); classify needs a checkpoint fine-tuned "
                "with --task sentence_prediction (examples/position_masking/finetune.sh)")
        labels = self.task.label_dictionary
        tokens = [self.encode(*s) if isinstance(s, tuple) else self.encode(s) for s in sentences]
        results = []
        with utils.model_eval(self.model), torch.no_grad():
            for _, _, batch in self._batches(tokens, batch_size):
                features, _ = self.model(batch, features_only=True, return_all_hiddens=False)
                probs = self.model.classification_heads[head](features).float().softmax(dim=-1)
                for row in probs:
                    label = labels[int(row.argmax()) + labels.nspecial]
                    results.append((label, row.cpu()) if return_probs else label)
        return results
