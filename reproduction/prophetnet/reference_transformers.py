#!/usr/bin/env python
"""An independent reference for table 2: transformers' ``ProphetNetForConditionalGeneration``
trained from scratch on the same Gigaword batches as ``fairseq-train``, with the same
optimiser, schedule, clipping and label smoothing, then decoded with the same beam search.

    python reproduction/prophetnet/reference_transformers.py DATA_BIN --out DIR --ngram 2 --seed 1
    \\
        --updates 1000 --eval-at 250 500 1000 [--model transformers|fairseq_ext] \\
        [--layout corrected|as-released] [--loss transformers|fairseq_ext] [--init
        transformers|fairseq_ext]

What is shared with ``fairseq-train`` (``gigaword.sh``): the task (``translation_prophetnet``),
so the same binarized data, dictionary and batches (``--max-tokens``, shuffled with ``--seed``);
the ``prophetnet_tiny`` sizes; dropout 0.1 (attention and activation too); Adam (betas 0.9,
0.98, eps 1e-8) at ``--lr`` with fairseq's ``inverse_sqrt`` schedule (linear warm-up from 0,
the first update at learning rate 0); gradients of the loss per target token clipped to norm
``--clip-norm``; label smoothing 0.1. What is transformers' own by default: the model's
code, its initialisation, and its loss (``--loss transformers``: the n-gram streams pooled,
``(1 - eps) nll + eps/V smooth``). The switches swap one part for this plugin's, which is how
the bisection of docs/results/prophetnet.md (table 2) was run:

* ``--model fairseq_ext``: this plugin's ``prophetnet`` in the same loop;
* ``--layout as-released``: transformers' predicting-stream relative positions left as
  released (``fairseq_ext.convert.prophetnet_transformers``);
* ``--loss fairseq_ext``: the ``ngram_language_loss`` criterion on transformers' logits;
* ``--init fairseq_ext`` / ``--init transformers``: start from the other implementation's
  initialisation (the weights mapped across);
* ``--batching unsorted``: pairs in a random order instead of fairseq's length buckets, a new
  order each epoch, batches filled greedily;
* ``--batching fairseq-unsorted``: the batches ``fairseq-train --unsorted-batches`` trains on
  (``translation_prophetnet``'s random order under fairseq's batch iterator: batch sizes a
  multiple of 8 pairs, cut once, their order reshuffled each epoch).

At every ``--eval-at`` update the model is copied into a ``prophetnet`` (the forward
functions are equal with the corrected layout, tested) and decoded with fairseq's beam search
(beam 4, lenpen 1.0, no-repeat-ngram 3, max length 40) on the validation pairs; ROUGE-1/2/L
F1, the number of distinct hypotheses and the per-stream validation accuracy (teacher forced)
go to ``DIR/results.json``, which a rerun resumes from (finished points are not redone).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from fairseq import options, tasks, utils
from fairseq.dataclass.configs import GenerationConfig

import fairseq_ext
from fairseq_ext import plugin
from fairseq_ext.analysis.rouge import rouge_f1
from fairseq_ext.convert.prophetnet_transformers import (
    correct_predicting_stream_layout,
    from_transformers_state_dict,
    to_transformers_state_dict,
    transformers_config,
)
from fairseq_ext.criterions.ngram_language_loss import NgramLanguageLoss

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "prophetnet"))
from gigaword_point import hardware, relative  # noqa: E402  (the results-file helpers of examples/prophetnet/gigaword.sh)

POSITIONS = 1024


def fairseq_args(data: str, a) -> argparse.Namespace:
    """The options ``gigaword.sh`` gives ``fairseq-train``, parsed by fairseq itself, with the
    sources padded on the right: transformers' ProphetNet numbers encoder positions from the
    left edge whatever the attention mask says (fairseq's left padding would shift them);
    ``prophetnet`` gives the same result either way."""
    plugin.load()  # fairseq skips --user-dir once fairseq_ext is imported
    argv = [
        data,
        "--user-dir",
        str(Path(fairseq_ext.__file__).parent),
        "--task",
        "translation_prophetnet",
        "-s",
        a.source_lang,
        "-t",
        a.target_lang,
        "--arch",
        a.arch,
        "--ngram",
        str(a.ngram),
        "--criterion",
        "ngram_language_loss",
        "--label-smoothing",
        str(a.label_smoothing),
        "--optimizer",
        "adam",
        "--adam-betas",
        "(0.9,0.98)",
        "--lr",
        str(a.lr),
        "--lr-scheduler",
        "inverse_sqrt",
        "--warmup-updates",
        str(a.warmup),
        "--clip-norm",
        str(a.clip_norm),
        "--dropout",
        "0.1",
        "--attention-dropout",
        "0.1",
        "--max-tokens",
        str(a.max_tokens),
        "--max-source-positions",
        str(POSITIONS + 1),
        "--max-target-positions",
        str(POSITIONS),
        "--seed",
        str(a.seed),
        "--num-workers",
        "0",
    ]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    args.left_pad_source = False
    args.unsorted_batches = a.batching == "fairseq-unsorted"
    return args


class Streams(torch.nn.Module):
    """Presents a transformers ProphetNet as a fairseq model returning every stream's logits,
    for the ``ngram_language_loss`` criterion and for validation accuracy."""

    def __init__(self, hf, pad: int):
        super().__init__()
        self.hf, self.pad = hf, pad

    def forward(self, src_tokens, src_lengths, prev_output_tokens, **unused):
        out = self.hf(
            input_ids=src_tokens,
            attention_mask=src_tokens.ne(self.pad).long(),
            decoder_input_ids=prev_output_tokens,
            decoder_attention_mask=prev_output_tokens.ne(self.pad).long(),
            use_cache=False,
        )
        streams = (
            [out.logits] + [out.logits_ngram[:, k] for k in range(out.logits_ngram.size(1))]
            if out.logits_ngram is not None
            else [out.logits]
        )
        return streams[0], {"stream_logits": streams}


def build(a, args, task):
    """(the module trained, its fairseq-style view, a fresh ``prophetnet`` for decoding)."""
    torch.manual_seed(a.seed)
    ours = task.build_model(args)
    if a.model == "fairseq_ext":
        if a.init == "transformers":
            ours.load_state_dict(
                dict(
                    ours.state_dict(),
                    **from_transformers_state_dict(hf_model(a, args, task).state_dict()),
                )
            )
        return ours, ours, ours
    hf = hf_model(a, args, task)
    if a.init == "fairseq_ext":
        hf.load_state_dict(to_transformers_state_dict(ours.state_dict()), strict=True)
    return hf, Streams(hf, task.target_dictionary.pad()), ours


def hf_model(a, args, task):
    import transformers

    torch.manual_seed(a.seed)
    hf = transformers.ProphetNetForConditionalGeneration(
        transformers_config(args, task.target_dictionary, eps=a.label_smoothing)
    )
    if a.layout == "corrected":
        correct_predicting_stream_layout(hf)
    return hf


def inverse_sqrt(update: int, a) -> float:
    """fairseq's ``inverse_sqrt`` learning rate after ``update`` updates (warm-up from 0)."""
    if update < a.warmup:
        return a.lr * update / a.warmup
    return a.lr * math.sqrt(a.warmup) / math.sqrt(update)


def train_loss(a, module, view, criterion, sample, pad: int):
    """Loss per target token whose gradient is taken."""
    if a.model == "transformers" and a.loss == "transformers":
        net = sample["net_input"]
        labels = sample["target"].masked_fill(sample["target"].eq(pad), -100)
        return module(
            input_ids=net["src_tokens"],
            attention_mask=net["src_tokens"].ne(pad).long(),
            decoder_input_ids=net["prev_output_tokens"],
            decoder_attention_mask=net["prev_output_tokens"].ne(pad).long(),
            labels=labels,
            use_cache=False,
        ).loss
    loss, sample_size, _ = criterion(view, sample)
    return loss / sample_size


@torch.no_grad()
def stream_accuracy(view, task, criterion, args) -> list:
    """Per-stream argmax accuracy (%) on the validation pairs, teacher forced."""
    view.eval()
    correct, count = None, None
    for sample in batches(task, "valid", args, seed=1, shuffle=False):
        _, _, log = criterion(view, sample)
        n = sum(1 for k in log if k.endswith("_count"))
        c = [log[f"s{k}_correct"] for k in range(1, n + 1)]
        t = [log[f"s{k}_count"] for k in range(1, n + 1)]
        correct = c if correct is None else [x + y for x, y in zip(correct, c)]
        count = t if count is None else [x + y for x, y in zip(count, t)]
    return [round(100.0 * c / t, 2) for c, t in zip(correct, count)]


def batches(task, split, args, seed, shuffle, epoch=1, batching="fairseq"):
    """fairseq's batches (pairs of similar length together, the batch order shuffled; with
    ``batching="fairseq-unsorted"`` the task's random order instead of lengths) or, with
    ``batching="unsorted"``, the pairs in a new random order each epoch cut into batches of at
    most ``--max-tokens`` (padded) tokens, as a plain training loop without length bucketing
    makes."""
    if batching == "unsorted":
        dataset = task.dataset(split)
        order = np.random.RandomState(seed + epoch).permutation(len(dataset))
        return (
            dataset.collater([dataset[i] for i in batch])
            for batch in dataset.batch_by_size(order, max_tokens=args.max_tokens)
        )
    itr = task.get_batch_iterator(
        dataset=task.dataset(split),
        max_tokens=args.max_tokens,
        max_positions=(POSITIONS, POSITIONS),
        ignore_invalid_inputs=True,
        required_batch_size_multiple=8,
        seed=seed,
        epoch=epoch,
        disable_iterator_cache=True,
    )
    return itr.next_epoch_itr(shuffle=shuffle)


@torch.no_grad()
def decode(model, task, args) -> list:
    """Hypotheses for the validation pairs, in order (fairseq's beam search)."""
    model.eval()
    gen = task.build_generator(
        [model],
        GenerationConfig(beam=4, lenpen=1.0, no_repeat_ngram_size=3, max_len_a=0, max_len_b=40),
    )
    hyps = {}
    itr = task.get_batch_iterator(
        dataset=task.dataset("valid"),
        max_sentences=64,
        max_positions=(POSITIONS, POSITIONS),
        disable_iterator_cache=True,
    )
    for sample in itr.next_epoch_itr(shuffle=False):
        for i, out in zip(sample["id"].tolist(), task.inference_step(gen, [model], sample)):
            hyps[i] = task.target_dictionary.string(out[0]["tokens"].int(), "sentencepiece")
    return [hyps[i] for i in range(len(hyps))]


def evaluate(a, module, view, ours, task, args, criterion, refs) -> dict:
    if ours is not module:
        ours.load_state_dict(
            dict(ours.state_dict(), **from_transformers_state_dict(module.state_dict()))
        )
    t0 = time.time()
    hyps = decode(ours, task, args)
    rouge = rouge_f1(hyps, refs)
    point = {
        "rouge1_f1": rouge["rouge1"],
        "rouge2_f1": rouge["rouge2"],
        "rougeL_f1": rouge["rougeL"],
        "distinct_hypotheses": len(set(hyps)),
        "sentences": len(hyps),
        "valid_accuracy_per_stream": stream_accuracy(view, task, criterion, args),
        "decode_seconds": round(time.time() - t0, 1),
    }
    module.train()
    return point, hyps


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("data", help="binarized pairs (gigaword.sh's PREP/bin)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument(
        "--refs",
        required=True,
        type=Path,
        help="validation titles, one per line (PREP/raw/valid.title)",
    )
    p.add_argument("-s", "--source-lang", default="article")
    p.add_argument("-t", "--target-lang", default="title")
    p.add_argument("--ngram", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--updates", type=int, default=500)
    p.add_argument(
        "--eval-at",
        type=int,
        nargs="+",
        default=None,
        help="updates to decode at (default: --updates)",
    )
    p.add_argument("--arch", default="prophetnet_tiny")
    p.add_argument("--max-tokens", type=int, default=2048)
    p.add_argument("--lr", type=float, default=7e-4)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--clip-norm", type=float, default=1.0)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--model", choices=("transformers", "fairseq_ext"), default="transformers")
    p.add_argument("--layout", choices=("corrected", "as-released"), default="corrected")
    p.add_argument("--loss", choices=("transformers", "fairseq_ext"), default="transformers")
    p.add_argument(
        "--batching",
        choices=("fairseq", "unsorted", "fairseq-unsorted"),
        default="fairseq",
        help="fairseq's length-bucketed batches (default), a plain loop's unsorted ones, or "
        "fairseq-train --unsorted-batches' (see batches())",
    )
    p.add_argument(
        "--init",
        choices=("transformers", "fairseq_ext"),
        default=None,
        help="initialisation (default: the trained model's own)",
    )
    a = p.parse_args(argv)
    a.init = a.init or a.model
    eval_at = sorted(set(a.eval_at or [a.updates]))
    if a.model == "fairseq_ext" and (a.layout != "corrected" or a.loss != "transformers"):
        p.error(
            "--layout and --loss choose parts of the transformers model; drop them with --model "
            "fairseq_ext"
        )
    if a.model == "fairseq_ext":
        a.loss = "fairseq_ext"
    if not Path(a.data, f"dict.{a.source_lang}.txt").exists() or not a.refs.exists():
        p.error(
            f"{a.data} has no dict.{a.source_lang}.txt or {a.refs} does not exist: prepare the "
            "data with data_prep/gigaword.sh first"
        )
    if eval_at[0] < 1 or eval_at[-1] > a.updates:
        p.error("--eval-at must lie within 1 .. --updates")

    a.out.mkdir(parents=True, exist_ok=True)
    results_path = a.out / "results.json"
    # The points of a run do not depend on how far it goes: --updates may grow across calls.
    settings = {
        k: v
        for k, v in vars(a).items()
        if k not in ("out", "data", "refs", "eval_at", "updates", "source_lang", "target_lang")
    }
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    if results.get("settings") != settings:
        results = {"settings": settings, "points": {}}
        (a.out / "state.pt").unlink(missing_ok=True)
    if all(str(u) in results["points"] for u in eval_at):
        print(f"{results_path}: every point is done")
        return
    train(a, eval_at, results, results_path, argv)


def save_state(
    path: Path, module, opt, update: int, epoch: int, in_epoch: int, losses: list, seconds: float
):
    torch.save(
        {
            "model": module.state_dict(),
            "optimizer": opt.state_dict(),
            "update": update,
            "epoch": epoch,
            "in_epoch": in_epoch,
            "losses": losses[-50:],
            "train_seconds": seconds,
        },
        path,
    )


def train(a, eval_at: list, results: dict, results_path: Path, argv) -> None:
    """Train to the last point, scoring at each; resume from ``state.pt`` (saved at every point:
    model, optimiser, position in the epoch) so that a later call with more updates goes on
    exactly where this one stopped (dropout is seeded per update)."""
    args = fairseq_args(a.data, a)
    task = tasks.setup_task(args)
    for split in ("train", "valid"):
        task.load_dataset(split)
    criterion = NgramLanguageLoss(task, label_smoothing=a.label_smoothing)
    refs = a.refs.read_text().splitlines()
    module, view, ours = build(a, args, task)
    opt = torch.optim.Adam(module.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-8)
    update, epoch, skip, losses, train_seconds = 0, 1, 0, [], 0.0
    state_path = a.out / "state.pt"
    if state_path.exists():
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        update, epoch, skip = state["update"], state["epoch"], state["in_epoch"]
        losses, train_seconds = list(state["losses"]), state["train_seconds"]
        print(f"resumed from {state_path} at update {update}")
    module.train()
    pad = task.target_dictionary.pad()
    t0 = time.time()
    while update < eval_at[-1]:
        for in_epoch, sample in enumerate(
            batches(
                task, "train", args, seed=a.seed, shuffle=True, epoch=epoch, batching=a.batching
            ),
            1,
        ):
            if in_epoch <= skip:
                continue
            for group in opt.param_groups:
                group["lr"] = inverse_sqrt(update, a)
            opt.zero_grad()
            utils.set_torch_seed(
                a.seed + update
            )  # dropout seeded per update, as fairseq's trainer does
            loss = train_loss(a, module, view, criterion, sample, pad)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), a.clip_norm)
            opt.step()
            update += 1
            losses.append(float(loss))
            if update % 50 == 0:
                print(
                    f"update {update} loss {sum(losses[-50:]) / 50:.3f} lr "
                    f"{inverse_sqrt(update, a):.2e}",
                    flush=True,
                )
            if update in eval_at:
                train_seconds += time.time() - t0
                if str(update) not in results["points"]:
                    score(
                        a,
                        update,
                        module,
                        view,
                        ours,
                        task,
                        args,
                        criterion,
                        refs,
                        losses,
                        train_seconds,
                        results,
                        results_path,
                        argv,
                    )
                save_state(
                    a.out / "state.pt", module, opt, update, epoch, in_epoch, losses, train_seconds
                )
                t0 = time.time()
            if update >= eval_at[-1]:
                return
        epoch, skip = epoch + 1, 0


def score(
    a,
    update,
    module,
    view,
    ours,
    task,
    args,
    criterion,
    refs,
    losses,
    train_seconds,
    results,
    results_path,
    argv,
) -> None:
    point, hyps = evaluate(a, module, view, ours, task, args, criterion, refs)
    point["train_loss_last_50"] = round(sum(losses[-50:]) / len(losses[-50:]), 4)
    point["train_seconds_so_far"] = round(train_seconds, 1)
    results["points"][str(update)] = point
    (a.out / f"hyp-{update}.title").write_text("\n".join(hyps) + "\n")
    results["hardware"] = hardware()
    command = relative(
        " ".join(
            ["python", "reproduction/prophetnet/reference_transformers.py"] + (argv or sys.argv[1:])
        )
    )
    results["commands"] = [c for c in results.get("commands", []) if c != command] + [command]
    results["wall_seconds"] = {
        "total": round(
            train_seconds + sum(p["decode_seconds"] for p in results["points"].values()), 1
        )
    }
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"update {update}: ROUGE-1 {point['rouge1_f1']:.2f} distinct "
        f"{point['distinct_hypotheses']} accuracy per stream {point['valid_accuracy_per_stream']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
