"""``unilm_transformer``: one BERT-like stack, one set of weights, three scripts.

Su 2019 ("From Language Models to Seq2Seq: Transformer is like a play, it all
depends on the mask") shows that a single bidirectional Transformer becomes a different
model by the attention mask alone. ``--attention-mask`` chooses the script, an entry of
``masking.ATTENTION_VARIANTS`` (its rule in ``masking.predicates``):

* ``prefix`` (UniLM seq2seq, Su 2019's section "Seq2Seq"): ``<s> source </s> target </s>``
  with segment ids; the source is bidirectional, the target sees the source and its own
  past (``predicates.prefix_lm``). Task ``unilm_seq2seq``.
* ``causal`` (section "Unidirectional Language Model"): everything left to right
  (``predicates.causal``); in ``unilm_seq2seq`` the source becomes unidirectional too (Su
  2019's "naive" left figure), in ``permutation_lm`` it is a plain left-to-right LM.
* ``permutation`` (section "Permutation Language Model"): XLNet's random factorisation
  order, implemented as Su 2019 describes: the tokens are shuffled into the order, keep
  their original position ids and run under the permutation rule of the order they are fed in,
  which is the causal mask (``predicates.permutation``). Task ``permutation_lm``.

Weights: embeddings of tokens, positions (learned, RoBERTa's layout with the ``padding_idx
+ 1`` offset), two segments and the *next* position (see ``UniLMStack.lm_logits``);
``layernorm_embedding``; post-norm layers (``modules.MaskedTransformerLayer``); RoBERTa's
LM head tied to the token embedding. The names follow RoBERTa's ``encoder.sentence_encoder``
/ ``encoder.lm_head`` minus ``sentence_encoder``, so ``--init-from`` a RoBERTa checkpoint is a
renaming (``models/unilm_init.py``).

Every mask the stack runs is derived from the variant's rule joined with the padding rule:
the dense mask of a full pass (``masking.padded_dense_mask``) and the row of one decoding step
against the cache (``masking.step_mask``). The task names its default mask through
``UniLMTask``. With ``--attention-backend flex`` a full pass runs the same joined rule as a
FlexAttention block mask (``modules.flex_attention.padded_block_mask``); the decoding steps stay
dense.

Seq2seq decoding (``fairseq-generate``): the model's encoder runs the bidirectional pass over
``<s> source </s>`` once and keeps every layer's keys/values; the decoder is the same stack
fed one target token per step, attending to those cached source keys/values and to its own
cached past. Where the variant is ``incremental`` (prefix, causal: the source rows never see
the target) this is exactly the full recomputation; called without ``incremental_state`` (or
for a variant that is not incremental) the decoder re-runs the whole sequence (the
bert4keras-style decoder), which the tests and the benchmark compare.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Dict, List, Optional, Tuple, Union

import torch
from fairseq import utils
from fairseq.models import (
    FairseqEncoder,
    FairseqEncoderDecoderModel,
    FairseqIncrementalDecoder,
    register_model,
    register_model_architecture,
)
from fairseq.models.roberta.model import RobertaLMHead
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from torch import Tensor, nn

from fairseq_ext.errors import FairseqExtError, require
from fairseq_ext.masking import ATTENTION_VARIANTS, check_order, padded_dense_mask, predicates, step_mask
from fairseq_ext.models.compat import CheckpointShapeCheckMixin
from fairseq_ext.models.layer_norm_eps import DEFAULT_LAYERNORM_EPS, add_layernorm_eps_arg, set_layernorm_eps
from fairseq_ext.modules import MaskedTransformerLayer
from fairseq_ext.modules.flex_attention import (
    DEFAULT_ATTENTION_BACKEND,
    BlockMask,
    add_attention_backend_arg,
    check_attention_backend,
    padded_block_mask,
)
from fairseq_ext.modules.masked_attention import KeyValue

DEFAULT_ATTENTION_MASK = "prefix"  # under a task that is no UniLMTask: UniLM's own


class UniLMTask(ABC):
    """What ``unilm_transformer`` asks of a task that builds it (``unilm_seq2seq``,
    ``permutation_lm``): the attention mask its data are laid out for, which the model runs
    when ``--attention-mask`` is not given."""

    @abstractmethod
    def default_attention_mask(self) -> str:
        """A key of ``masking.ATTENTION_VARIANTS``."""


def validate_unilm_args(args) -> None:
    """Clear errors for out-of-range model options."""
    require(args.attention_mask in ATTENTION_VARIANTS,
            f"--attention-mask {args.attention_mask!r} is unknown; choose one of {', '.join(ATTENTION_VARIANTS)}")
    check_attention_backend(args.attention_backend)
    for name in ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads"):
        value = getattr(args, name)
        require(value >= 1, f"--{name.replace('_', '-')} must be >= 1, got {value}")
    require(args.encoder_embed_dim % args.encoder_attention_heads == 0,
            f"--encoder-embed-dim {args.encoder_embed_dim} must be divisible by "
            f"--encoder-attention-heads {args.encoder_attention_heads}")
    require(args.max_positions >= 3,
            f"--max-positions must be >= 3 (<s>, one token, </s>), got {args.max_positions}")
    for name in ("dropout", "attention_dropout", "activation_dropout"):
        value = getattr(args, name)
        require(0.0 <= value < 1.0, f"--{name.replace('_', '-')} must be in [0, 1), got {value}")


class UniLMStack(FairseqEncoder):
    """The one stack: every weight of the model lives here.

    As fairseq's encoder it is the bidirectional (or causal) pass over ``<s> source </s>``
    that seq2seq decoding caches; ``seq2seq_logits`` and ``lm_logits`` are the full passes of
    the two tasks.
    """

    def __init__(self, args, dictionary):
        super().__init__(dictionary)
        self.attention_mask = args.attention_mask
        self.variant = ATTENTION_VARIANTS[args.attention_mask]
        self.attention_backend = args.attention_backend
        self.padding_idx = dictionary.pad()
        self.bos, self.eos = dictionary.bos(), dictionary.eos()
        self.num_positions = args.max_positions
        C = args.encoder_embed_dim
        table = args.max_positions + self.padding_idx + 1
        self.embed_tokens = nn.Embedding(len(dictionary), C, self.padding_idx)
        self.embed_positions = nn.Embedding(table, C, self.padding_idx)
        self.embed_segments = nn.Embedding(2, C)
        self.embed_next_positions = nn.Embedding(table, C, self.padding_idx)
        self.layernorm_embedding = nn.LayerNorm(C)
        self.dropout = args.dropout
        self.layers = nn.ModuleList(
            MaskedTransformerLayer(C, args.encoder_ffn_embed_dim, args.encoder_attention_heads,
                                   args.dropout, args.attention_dropout, args.activation_dropout,
                                   args.activation_fn)
            for _ in range(args.encoder_layers)
        )
        self.lm_head = RobertaLMHead(C, len(dictionary), args.activation_fn, weight=self.embed_tokens.weight)
        self.apply(init_bert_params)

    def max_positions(self) -> int:
        return self.num_positions

    # --- the core pass ----------------------------------------------------------------------

    def _position_index(self, positions: Tensor, padding: Tensor) -> Tensor:
        """0-based positions -> rows of the position tables (``padding_idx + 1 + p``)."""
        too_far = (positions >= self.num_positions) & ~padding
        if too_far.any():
            raise FairseqExtError(
                f"a sequence needs position {int(positions[too_far].max())} but the model has "
                f"--max-positions {self.num_positions}; shorten or filter the input, or use a model "
                "with more positions"
            )
        return (positions + self.padding_idx + 1).masked_fill(padding, self.padding_idx)

    def hidden_states(self, tokens: Tensor, positions: Tensor, segments: Tensor,
                      allowed: Union[Tensor, BlockMask], next_positions: Optional[Tensor] = None,
                      past: Optional[List[KeyValue]] = None) -> Tuple[Tensor, List[KeyValue]]:
        """Run the stack.

        Args:
            tokens, positions, segments: ``(B, T)``; positions are 0-based.
            allowed: bool ``(B, T, S)``, True = may attend; ``S`` = cached keys + ``T``; or a
                full pass's ``BlockMask`` (``_full_mask`` with the flex backend).
            next_positions: ``(B, T)`` 0-based position each row must predict (LM only);
                -1 where there is none.
            past: per layer, cached ``(keys, values)``.

        Returns:
            ``(B, T, C)`` final hidden states and per layer the ``(keys, values)`` of all ``S``.
        """
        padding = tokens.eq(self.padding_idx)
        x = self.embed_tokens(tokens) + self.embed_positions(self._position_index(positions, padding))
        x = x + self.embed_segments(segments)
        if next_positions is not None:
            none = padding | next_positions.lt(0)
            x = x + self.embed_next_positions(self._position_index(next_positions.clamp(min=0), none))
        x = nn.functional.dropout(self.layernorm_embedding(x), self.dropout, self.training)
        keys_values = []
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, allowed, past[i] if past is not None else None)
            keys_values.append(kv)
        return x, keys_values

    # --- seq2seq ------------------------------------------------------------------------------

    def with_cls(self, src_tokens: Tensor) -> Tensor:
        """``src </s>`` (fairseq's source) -> ``<s> src </s>``, left-padded, so that every
        row's ``</s>`` (the [SEP] that predicts the first target token) is the last column."""
        pad = self.padding_idx
        if src_tokens[:, -1].eq(pad).any():
            src_tokens = utils.convert_padding_direction(src_tokens, pad, right_to_left=True)
        lengths = src_tokens.ne(pad).sum(1)
        out = torch.cat([src_tokens.new_full((src_tokens.size(0), 1), pad), src_tokens], dim=1)
        return out.scatter(1, (out.size(1) - 1 - lengths).unsqueeze(1), self.bos)

    def attention_rule(self, segments: Tensor) -> predicates.MaskMod:
        """The variant's rule over a sequence with ``segments`` fed in its order (the ranks are
        the positions)."""
        ranks = torch.arange(segments.size(1), device=segments.device).expand_as(segments)
        return self.variant.rule(segments, ranks)

    def _full_mask(self, padding: Tensor, segments: Tensor) -> Union[Tensor, BlockMask]:
        """The mask of a full pass: dense ``(B, T, T)``, or with ``--attention-backend flex``
        the same rule's ``BlockMask``."""
        if self.attention_backend == "flex":
            return padded_block_mask(self.attention_rule(segments), padding)
        return padded_dense_mask(self.attention_rule(segments), padding)

    def seq2seq_logits(self, src_tokens: Tensor, prev_output_tokens: Tensor) -> Tensor:
        """The full pass over ``<s> source </s> target`` under the prefix (or causal) mask.

        Returns the logits of the target tokens only, ``(B, T, V)`` aligned with fairseq's
        ``target`` (``prev_output_tokens`` shifted left): the ``</s>`` that ends the source
        predicts the first target token, target token ``t`` predicts token ``t + 1``.
        """
        src = self.with_cls(src_tokens)
        tgt_in = prev_output_tokens[:, 1:]
        tokens = torch.cat([src, tgt_in], dim=1)
        padding = tokens.eq(self.padding_idx)
        positions = (~padding).long().cumsum(1) - 1
        segments = torch.cat([torch.zeros_like(src), torch.ones_like(tgt_in)], dim=1)
        x, _ = self.hidden_states(tokens, positions, segments, self._full_mask(padding, segments))
        return self.lm_head(x[:, src.size(1) - 1:])

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None, **unused) -> Dict[str, List[Tensor]]:
        """The source pass that incremental decoding caches: per layer the keys/values of
        ``<s> src </s>`` and the final state of its ``</s>``."""
        src = self.with_cls(src_tokens)
        padding = src.eq(self.padding_idx)
        positions = (~padding).long().cumsum(1) - 1
        segments = torch.zeros_like(src)
        x, kvs = self.hidden_states(src, positions, segments, self._full_mask(padding, segments))
        return {
            "src_tokens": [src_tokens],
            "source_padding": [padding],
            "sep_state": [x[:, -1:]],
            "keys": [k for k, _ in kvs],
            "values": [v for _, v in kvs],
        }

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order: Tensor):
        return {name: [t.index_select(0, new_order) for t in tensors] for name, tensors in encoder_out.items()}

    # --- permutation / causal language model --------------------------------------------------

    def lm_logits(self, tokens: Tensor, order: Optional[Tensor] = None) -> Tensor:
        """Language modelling in the factorisation order ``order`` (natural order if None).

        ``tokens`` is ``<s> x_1 .. x_n </s>``, right-padded, and ``order[b]`` a permutation of
        the positions with ``<s>`` (position 0) first and padding last (``masking.random_order``).
        As Su 2019 describes, the input is *shuffled* into the order, each token keeps its
        original position id, and the stack runs under the variant's rule of the shuffled
        sequence, which is fed in its order: the plain causal mask.

        Predicting "the next token" in a shuffled order is ill-posed unless the model knows
        *which position* comes next: two different continuations of the same prefix would
        get the same prediction. XLNet answers with a second, query stream that carries the
        target position but not its content. Here the shuffled input row ``k`` instead adds
        ``embed_next_positions[z_{k+1}]``, the embedding of the position it must predict:
        one pass, one stack, and still no leak, since row ``k`` carries the *position* of
        token ``z_{k+1}`` and only rows after it (in the order) ever see its content. The
        cost is that a row's state mixes its own content with the next query; in natural
        order the extra embedding is just ``position + 1`` and the model is a causal LM.

        Returns ``(B, n + 1, V)`` logits in natural order, aligned with ``tokens[:, 1:]``.
        """
        B, L = tokens.shape
        if order is None:
            order = torch.arange(L, device=tokens.device).expand(B, L)
        else:
            try:
                check_order(order)
            except ValueError as exc:
                raise FairseqExtError(f"factorisation order: {exc}") from None
            require(bool(order[:, 0].eq(0).all()), "a factorisation order must start with position 0 (<s>)")
        inputs, predicted = order[:, :-1], order[:, 1:]
        shuffled = tokens.gather(1, inputs)
        padding = shuffled.eq(self.padding_idx)
        next_positions = predicted.masked_fill(tokens.gather(1, predicted).eq(self.padding_idx), -1)
        segments = torch.zeros_like(shuffled)
        x, _ = self.hidden_states(shuffled, inputs, segments, self._full_mask(padding, segments),
                                  next_positions=next_positions)
        natural = torch.empty_like(x).scatter_(1, (predicted - 1).unsqueeze(-1).expand_as(x), x)
        return self.lm_head(natural)


class UniLMDecoder(FairseqIncrementalDecoder):
    """The same stack seen as fairseq's decoder (it owns no weights)."""

    def __init__(self, dictionary, stack: UniLMStack):
        super().__init__(dictionary)
        object.__setattr__(self, "stack", stack)  # shared, not a second copy of the weights

    def max_positions(self) -> int:
        return self.stack.max_positions()

    def forward(self, prev_output_tokens: Tensor, encoder_out: Optional[Dict[str, List[Tensor]]] = None,
                incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None, **unused):
        if encoder_out is None:
            raise FairseqExtError("unilm_transformer's decoder needs the source (encoder_out)")
        if incremental_state is None or not self.stack.variant.incremental:
            return self.stack.seq2seq_logits(encoder_out["src_tokens"][0], prev_output_tokens), {"attn": None}
        return self._step(prev_output_tokens, encoder_out, incremental_state), {"attn": None}

    def _step(self, prev_output_tokens: Tensor, encoder_out: Dict[str, List[Tensor]],
              incremental_state: Dict[str, Dict[str, Optional[Tensor]]]) -> Tensor:
        """One target token: the newest one attends to the cached source and target past."""
        stack = self.stack
        step = prev_output_tokens.size(1) - 1
        if step == 0:  # the source's </s> predicts the first target token
            if "keys" not in encoder_out:
                raise FairseqExtError("this encoder_out was already used by an incremental decoding run; "
                                      "run the encoder again for a new one")
            # The cache takes the source keys/values over: popping them from encoder_out spares
            # fairseq's per-step reorder_encoder_out from copying them a second time.
            keys, values = encoder_out.pop("keys"), encoder_out.pop("values")
            cache = {"padding": encoder_out["source_padding"][0]}
            for i in range(len(stack.layers)):
                cache[f"k{i}"], cache[f"v{i}"] = keys[i], values[i]
            self.set_incremental_state(incremental_state, "cache", cache)
            return stack.lm_head(encoder_out["sep_state"][0])
        cache = self.get_incremental_state(incremental_state, "cache")
        padding = torch.cat([cache["padding"], cache["padding"].new_zeros(cache["padding"].size(0), 1)], 1)
        source_padding = encoder_out["source_padding"][0]
        n_source = (~source_padding).sum(1, keepdim=True)
        keys = padding.size(1)  # <s> source </s> and the target so far, the newest token last
        segments = (torch.arange(keys, device=padding.device) >= source_padding.size(1)).long().expand_as(padding)
        allowed = step_mask(predicates.and_masks(stack.attention_rule(segments), predicates.padding(padding)),
                            padding.size(0), 1, keys - 1, keys, device=padding.device)[:, 0]
        token = prev_output_tokens[:, -1:]
        past = [(cache[f"k{i}"], cache[f"v{i}"]) for i in range(len(stack.layers))]
        x, kvs = stack.hidden_states(token, n_source - 1 + step, torch.ones_like(token), allowed, past=past)
        cache["padding"] = padding
        for i, (k, v) in enumerate(kvs):
            cache[f"k{i}"], cache[f"v{i}"] = k, v
        self.set_incremental_state(incremental_state, "cache", cache)
        return stack.lm_head(x)

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        cache = self.get_incremental_state(incremental_state, "cache")
        if cache is not None:
            cache = {k: v.index_select(0, new_order) for k, v in cache.items()}
            self.set_incremental_state(incremental_state, "cache", cache)


@register_model("unilm_transformer")
class UniLMTransformerModel(CheckpointShapeCheckMixin, FairseqEncoderDecoderModel):
    """One BERT-like stack used by every ``--attention-mask`` of ``masking.ATTENTION_VARIANTS``."""

    shape_options = (("embed_positions.weight", "--max-positions"), ("embed_next_positions.weight", "--max-positions"))

    @staticmethod
    def add_args(parser):
        parser.add_argument("--attention-mask", choices=list(ATTENTION_VARIANTS),
                            help="; ".join(f"{name}: {v.help}" for name, v in ATTENTION_VARIANTS.items())
                                 + "; default: the task's (prefix for unilm_seq2seq, permutation for "
                                   "permutation_lm)")
        parser.add_argument("--encoder-layers", type=int, metavar="N", help="number of layers")
        parser.add_argument("--encoder-embed-dim", type=int, metavar="N", help="model dimension")
        parser.add_argument("--encoder-ffn-embed-dim", type=int, metavar="N", help="FFN dimension")
        parser.add_argument("--encoder-attention-heads", type=int, metavar="N", help="attention heads")
        parser.add_argument("--max-positions", type=int, metavar="N",
                            help="positions of the whole sequence <s> source </s> target")
        parser.add_argument("--activation-fn", type=str, help="activation of the FFN and LM head")
        parser.add_argument("--dropout", type=float, metavar="D", help="dropout probability")
        parser.add_argument("--attention-dropout", type=float, metavar="D", help="attention dropout")
        parser.add_argument("--activation-dropout", type=float, metavar="D", help="FFN activation dropout")
        add_layernorm_eps_arg(parser)
        add_attention_backend_arg(parser)
        parser.add_argument("--init-from", type=str, metavar="CKPT",
                            help="initialise from a fairseq roberta (or position_masked_roberta) "
                                 "checkpoint trained with the same dictionary")

    @classmethod
    def build_model(cls, args, task):
        unilm_base_architecture(args)
        if args.attention_mask is None:  # the task's own script by default
            args.attention_mask = (task.default_attention_mask() if isinstance(task, UniLMTask)
                                   else DEFAULT_ATTENTION_MASK)
        validate_unilm_args(args)
        stack = UniLMStack(args, task.source_dictionary)
        set_layernorm_eps(stack, args.layernorm_eps)
        return cls(args, stack, UniLMDecoder(task.target_dictionary, stack))

    def __init__(self, args, encoder: UniLMStack, decoder: UniLMDecoder):
        super().__init__(encoder, decoder)
        self.args = args

    @property
    def attention_mask(self) -> str:
        return self.encoder.attention_mask

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None,
                prev_output_tokens: Optional[Tensor] = None, order: Optional[Tensor] = None, **unused):
        """Seq2seq (with ``prev_output_tokens``): target logits of the prefix/causal pass.
        Language model (without): natural-order logits of ``tokens[:, 1:]`` in factorisation
        order ``order``."""
        if prev_output_tokens is None:
            return self.encoder.lm_logits(src_tokens, order), {"attn": None}
        return self.encoder.seq2seq_logits(src_tokens, prev_output_tokens), {"attn": None}

    def max_positions(self):
        return self.encoder.max_positions(), self.encoder.max_positions()

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        key = "encoder.embed_tokens.weight"
        if key in state_dict and state_dict[key].shape != self.encoder.embed_tokens.weight.shape:
            rows, dim = state_dict[key].shape
            raise FairseqExtError(
                f"the checkpoint has {rows} vocabulary rows of dimension {dim}, this model "
                f"{tuple(self.encoder.embed_tokens.weight.shape)}: use the data directory (dictionary) "
                "the model was trained with, and the same --keep-tokens FILE if it was trained with one"
            )
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)


@register_model_architecture("unilm_transformer", "unilm_transformer")
def unilm_base_architecture(args):
    """BERT-base sizes: 12 layers x 768, 12 heads, FFN 3072, 512 positions; the mask defaults
    to the task's (prefix for unilm_seq2seq, permutation for permutation_lm)."""
    args.attention_mask = utils.safe_getattr(args, "attention_mask", None)
    args.encoder_layers = utils.safe_getattr(args, "encoder_layers", 12)
    args.encoder_embed_dim = utils.safe_getattr(args, "encoder_embed_dim", 768)
    args.encoder_ffn_embed_dim = utils.safe_getattr(args, "encoder_ffn_embed_dim", 3072)
    args.encoder_attention_heads = utils.safe_getattr(args, "encoder_attention_heads", 12)
    args.max_positions = utils.safe_getattr(args, "max_positions", 512)
    args.activation_fn = utils.safe_getattr(args, "activation_fn", "gelu")
    args.dropout = utils.safe_getattr(args, "dropout", 0.1)
    args.attention_dropout = utils.safe_getattr(args, "attention_dropout", 0.1)
    args.activation_dropout = utils.safe_getattr(args, "activation_dropout", 0.0)
    args.init_from = utils.safe_getattr(args, "init_from", None)
    args.layernorm_eps = utils.safe_getattr(args, "layernorm_eps", DEFAULT_LAYERNORM_EPS)
    args.attention_backend = utils.safe_getattr(args, "attention_backend", DEFAULT_ATTENTION_BACKEND)


@register_model_architecture("unilm_transformer", "unilm_transformer_base")
def unilm_transformer_base(args):
    """Same as ``unilm_transformer``: BERT-base / RoBERTa-base sizes (UniLM's setting)."""
    unilm_base_architecture(args)


@register_model_architecture("unilm_transformer", "unilm_transformer_tiny")
def unilm_transformer_tiny(args):
    """2 layers x 128, 4 heads, FFN 512, 256 positions: for tests and CPU smoke runs."""
    args.encoder_layers = utils.safe_getattr(args, "encoder_layers", 2)
    args.encoder_embed_dim = utils.safe_getattr(args, "encoder_embed_dim", 128)
    args.encoder_ffn_embed_dim = utils.safe_getattr(args, "encoder_ffn_embed_dim", 512)
    args.encoder_attention_heads = utils.safe_getattr(args, "encoder_attention_heads", 4)
    args.max_positions = utils.safe_getattr(args, "max_positions", 256)
    unilm_base_architecture(args)
