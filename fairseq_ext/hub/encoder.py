"""Masked-token filling and sentence classification with the position-masked encoder (Wagner et
al. 2020, section 2.1: RoBERTa at inference), batched, on fairseq's ``RobertaHubInterface``."""

from __future__ import annotations

import torch
from fairseq.data.data_utils import collate_tokens
from fairseq.models.roberta import RobertaHubInterface

from fairseq_ext.common.errors import require
from fairseq_ext.hub.inputs import encoded, positive_int, refuse_unknown, require_bool

MASK = "<mask>"
CALL_ARGUMENTS = ("batch_size", "allow_empty", "too_long")


class PositionMaskedHubInterface(RobertaHubInterface):
    """A ``position_masked_roberta`` checkpoint (pre-trained, or fine-tuned to classify)."""

    def _encoded(self, method, sentences, encode, gives, allow_empty, too_long, pairs=False):
        """``inputs.encoded`` within the model's positions, for a model in evaluation mode (not
        switched: threads share it)."""
        require(
            not self.model.training,
            f"{method}: the model is in training mode (dropout on), as .train() left it; call "
            ".eval() first (a call that switched the mode would switch it for every thread "
            "sharing the model)",
        )
        limit, why = self.model.max_positions(), "its positions, with <s> and </s>"
        unk = self.task.source_dictionary.unk()
        return encoded(
            method, sentences, encode, limit, why, unk, allow_empty, too_long, gives, pairs
        )

    def _batches(self, tokens: dict, batch_size: int):
        """``(input indices, tokens, padded tokens on the device)`` of each batch."""
        rows = list(tokens)
        for start in range(0, len(rows), batch_size):
            chunk = [tokens[i] for i in rows[start : start + batch_size]]
            padded = collate_tokens(chunk, self.task.source_dictionary.pad())
            yield rows[start : start + batch_size], chunk, padded.to(self.device)

    def _encode_masked(self, sentence: str, index: int) -> torch.Tensor:
        """``<s> pieces <mask> pieces </s>`` as fairseq's ``fill_mask`` builds it."""
        require(
            sentence.count(MASK) == 1,
            f"fill_mask: sentences[{index}] has {sentence.count(MASK)} {MASK}, it "
            f"needs exactly one, e.g. 'He is a {MASK} guy'; got {sentence!r:.80}",
        )
        spans = [
            self.bpe.encode(span.rstrip()) if self.bpe is not None else span.strip()
            for span in sentence.split(MASK)
        ]
        pieces = f" {MASK} ".join(spans).strip()
        return self.task.source_dictionary.encode_line(
            f"<s> {pieces} </s>", append_eos=False, add_if_not_exist=False
        ).long()

    def _filled(self, sentence: str, piece: str, probability: float):
        """fairseq's format: a word-initial piece takes the space before ``<mask>``."""
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

    def fill_mask(
        self,
        sentences,
        topk: int = 5,
        batch_size: int = 32,
        allow_empty: bool = True,
        too_long: str = "skip",
        **options,
    ):
        """The ``topk`` fillings ``(filled sentence, probability, token)`` of each sentence's one
        ``<mask>``, most probable first."""
        refuse_unknown("fill_mask", options, ("topk", *CALL_ARGUMENTS))
        dictionary = self.task.source_dictionary
        topk = positive_int("fill_mask", "topk", topk)
        batch_size = positive_int("fill_mask", "batch_size", batch_size)
        require(
            topk <= len(dictionary),
            f"fill_mask: topk {topk} is more than the {len(dictionary)} words the model "
            "knows; give a smaller topk",
        )
        batch, single, empty, tokens = self._encoded(
            "fill_mask", sentences, self._encode_masked, "[]", allow_empty, too_long
        )
        mask_id = dictionary.index(MASK)
        for i, t in tokens.items():
            require(
                bool((t == mask_id).any()),
                f"fill_mask: the {MASK} of sentences[{i}] lies beyond the model's "
                f"{self.model.max_positions()} positions; shorten the text before it",
            )
        results = [[] if i in empty else None for i in range(len(batch))]  # None: skipped
        with torch.no_grad():
            for rows, chunk, padded in self._batches(tokens, batch_size):
                logits, _ = self.model(padded, features_only=False, return_all_hiddens=False)
                for row, (i, t) in enumerate(zip(rows, chunk)):
                    position = int((t == mask_id).nonzero()[0])
                    values, index = logits[row, position].float().softmax(dim=-1).topk(topk)
                    results[i] = [
                        self._filled(batch[i], dictionary[w], p)
                        for w, p in zip(index.tolist(), values.tolist())
                    ]
        return results[0] if single else results

    def classify(
        self,
        sentences,
        head: str = "sentence_classification_head",
        return_probs: bool = False,
        batch_size: int = 32,
        allow_empty: bool = True,
        too_long: str = "skip",
        **options,
    ):
        """The label of each sentence (a pair is a tuple); with ``return_probs``, also the
        probabilities in label order."""
        refuse_unknown("classify", options, ("head", "return_probs", *CALL_ARGUMENTS))
        batch_size = positive_int("classify", "batch_size", batch_size)
        require_bool("classify", "return_probs", return_probs)
        require(
            isinstance(head, str) and head in self.model.classification_heads,
            f"the checkpoint has no classification head {head!r} (it has "
            f"{', '.join(self.model.classification_heads) or 'none'}); classify needs a "
            "checkpoint fine-tuned with --task sentence_prediction "
            "(examples/position_masking/finetune.sh)",
        )
        batch, single, _, tokens = self._encoded(
            "classify",
            sentences,
            lambda s, _: self.encode(*s) if isinstance(s, tuple) else self.encode(s),
            "None",
            allow_empty,
            too_long,
            pairs=True,
        )
        labels = self.task.label_dictionary
        results = [None] * len(batch)
        with torch.no_grad():
            for rows, _, padded in self._batches(tokens, batch_size):
                features, _ = self.model(padded, features_only=True, return_all_hiddens=False)
                probs = self.model.classification_heads[head](features).float().softmax(dim=-1)
                for i, row in zip(rows, probs):
                    label = labels[int(row.argmax()) + labels.nspecial]
                    results[i] = (label, row.cpu()) if return_probs else label
        return results[0] if single else results
