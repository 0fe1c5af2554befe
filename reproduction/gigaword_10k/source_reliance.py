"""Does a span pre-trained ProphetNet read its encoder? A diagnostic of the pre-trained rows of
docs/results/gigaword-10k.md.

    python -m reproduction.gigaword_10k.source_reliance [--work work/gigaword_10k] [--batches 20]
        [--output reproduction/gigaword_10k/runs/source-reliance.json]

For each span pre-training the driver kept (``WORK/pretrain-pN/checkpoint_last.pt``, and under
``by_update`` each of its interval checkpoints ``checkpoint_E_U.pt``: when it learns to read its
source, or stops), the loss of
the next-token stream (bits a target token, teacher forced, no label smoothing, dropout off) on
the first ``--batches`` batches of its own denoising task (``prophetnet_denoising``, the driver's
seed and batch size, so lines it was trained on): once with each line's own masked source, and
once with the source of the next line of the batch (the batch's sources rolled by one). MASS-style
span prediction (Song et al. 2019, section 2) is meant to make the decoder read the encoder for
the masked span; a decoder that learnt to predict the span from its own inputs alone (the token
before each position and its place in the line) scores alike on both. Qi et al. (2020, section 1)
motivate future n-gram prediction by the opposite risk: a next-token decoder that leans on local
correlations instead of the source.

Beside it, whether the encoder tells lines apart at all: the share of the variance of its output
states (real positions of each line's own source) that lies between lines, each line's mean state
against the batch's (0: every line gets the same states on average; 1: every state of a line is
its line's mean), pooled over the batches; and both measures for a random initialisation of the
pre-training's configuration (``task.build_model`` under its seed), the level training starts
near.

Each entry names the SHA-256 of the ``checkpoint_last.pt`` it measured, which the page compares
with the pre-training record's; a call adds its pre-trainings to those ``--output`` holds, so one
measured before its folder was lost stays.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

from reproduction.gigaword_10k.driver import rel, sha256
from reproduction.gigaword_10k.protocol import ROOT

OUTPUT = ROOT / "reproduction" / "gigaword_10k" / "runs" / "source-reliance.json"


def stream1_nats(model, sample: dict, roll: bool) -> tuple[float, int]:
    """Summed next-token-stream loss (nats) and target tokens of one batch; with ``roll`` each line
    is given the source of the next line of the batch."""
    import torch
    import torch.nn.functional as F

    net_input = dict(sample["net_input"])
    if roll:
        net_input["src_tokens"] = torch.roll(net_input["src_tokens"], 1, dims=0)
        net_input["src_lengths"] = torch.roll(net_input["src_lengths"], 1, dims=0)
    logits = model(**net_input)[1]["stream_logits"][0]
    target = sample["target"]
    pad = model.decoder.dictionary.pad()
    loss = F.cross_entropy(
        logits.float().reshape(-1, logits.size(-1)),
        target.reshape(-1),
        ignore_index=pad,
        reduction="sum",
    )
    return float(loss), int(target.ne(pad).sum())


def line_variance(states, padding) -> tuple[float, float]:
    """Between-line and total sums of squares of encoder states (``T x B x C``) over the positions
    ``padding`` (``B x T``) does not mark: the total about the batch's mean state, the between-line
    part about it of each line's mean state, counted once per position of the line."""
    real = (~padding).T.unsqueeze(-1).to(states.dtype)  # T x B x 1
    counts = real.sum(0)  # B x 1
    grand = (states * real).sum((0, 1)) / counts.sum()
    line_means = (states * real).sum(0) / counts  # B x C
    total = (((states - grand) ** 2) * real).sum()
    between = (((line_means - grand) ** 2) * counts).sum()
    return float(between), float(total)


class Probe:
    """The first ``batches`` batches of a pre-training's own denoising task (seed 1), loaded once,
    on which each of its checkpoints is scored."""

    def __init__(self, checkpoint: Path, data: Path, batches: int, max_tokens: int):
        from fairseq import checkpoint_utils, tasks

        from fairseq_ext import plugin

        plugin.load()
        self.data = data
        state = checkpoint_utils.load_checkpoint_to_cpu(
            str(checkpoint), arg_overrides={"data": str(data)}
        )
        self.update = state["optimizer_history"][-1]["num_updates"]
        self.cfg = state["cfg"]
        self.task = tasks.setup_task(
            self.cfg.task
        )  # the task of the checkpoint's config; no model is built
        self.task.load_dataset("train")
        iterator = self.task.get_batch_iterator(
            self.task.dataset("train"),
            max_tokens=max_tokens,
            seed=1,
            epoch=1,
            max_positions=self.task.max_positions(),
        ).next_epoch_itr(shuffle=True)
        self.samples = [sample for _, sample in zip(range(batches), iterator)]

    def score(self, checkpoint: Path) -> dict:
        """Both measures for the weights of ``checkpoint``."""
        from fairseq import checkpoint_utils

        (model,), _ = checkpoint_utils.load_model_ensemble(
            [str(checkpoint)], arg_overrides={"data": str(self.data)}, task=self.task
        )
        return {"checkpoint": rel(checkpoint), **self.measures(model)}

    def score_at_init(self) -> dict:
        """Both measures for a model of the probed checkpoint's configuration at random
        initialisation, seeded as its training was (``common.seed``)."""
        import torch

        torch.manual_seed(self.cfg.common.seed)
        return {
            "seed": self.cfg.common.seed,
            **self.measures(self.task.build_model(self.cfg.model)),
        }

    def measures(self, model) -> dict:
        """Bits a target token with each line's own source and with the next line's, and the
        between-line share of the encoder's variance, on the probe's batches (dropout off)."""
        import torch

        model.eval()
        sums = {"own": 0.0, "rolled": 0.0, "between": 0.0, "total": 0.0}
        tokens = lines = 0
        # the encoder's output of the own-source forward, kept by a hook rather than run again
        encoded = []
        with torch.no_grad():
            for sample in self.samples:
                hook = model.encoder.register_forward_hook(
                    lambda module, args, out: encoded.append(out)
                )
                loss, n = stream1_nats(model, sample, roll=False)
                hook.remove()
                sums["own"] += loss
                sums["rolled"] += stream1_nats(model, sample, roll=True)[0]
                (own_states,) = encoded
                encoded.clear()
                between, total = line_variance(
                    own_states["encoder_out"][0], own_states["encoder_padding_mask"][0]
                )
                sums["between"] += between
                sums["total"] += total
                tokens += n
                lines += sample["nsentences"]
        own, rolled = (sums[k] / tokens / math.log(2) for k in ("own", "rolled"))
        return {
            "lines": lines,
            "target_tokens": tokens,
            "bits_own_source": round(own, 3),
            "bits_rolled_source": round(rolled, 3),
            "bits_the_source_saves": round(rolled - own, 3),
            "encoder_between_line_share": round(sums["between"] / sums["total"], 4),
        }


def measure(folder: Path, data: Path, batches: int, max_tokens: int) -> dict:
    """A pre-training's ``checkpoint_last.pt``, each interval checkpoint (``by_update``) and its
    random initialisation (``at_init``); the last interval checkpoint holds the same weights as
    ``checkpoint_last.pt`` when it is of the same update, and is then scored once."""
    last = folder / "checkpoint_last.pt"
    probe = Probe(last, data, batches, max_tokens)
    by_update = [
        {"update": update, **probe.score(path)} for update, path in interval_checkpoints(folder)
    ]
    if by_update and by_update[-1]["update"] == probe.update:
        final = {**by_update[-1], "checkpoint": rel(last)}
        del final["update"]
    else:
        final = probe.score(last)
    return {
        **final,
        "by_update": by_update,
        "at_init": probe.score_at_init(),
        "checkpoint_sha256": sha256(last),
    }


def interval_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """fairseq's ``checkpoint_EPOCH_UPDATE.pt`` files of a folder, by update."""
    found = []
    for path in folder.glob("checkpoint_*_*.pt"):
        match = re.fullmatch(r"checkpoint_(\d+)_(\d+)\.pt", path.name)
        if match:
            found.append((int(match.group(2)), path))
    return sorted(found)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.gigaword_10k.source_reliance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--work", type=Path, default=ROOT / "work" / "gigaword_10k", help="the driver's work folder"
    )
    p.add_argument("--batches", type=int, default=20, help="denoising batches per checkpoint")
    p.add_argument(
        "--max-tokens", type=int, default=2048, help="tokens per batch (the pre-training's)"
    )
    p.add_argument("--output", type=Path, default=OUTPUT)
    a = p.parse_args(argv)
    if a.batches < 1 or a.max_tokens < 1:
        p.error("--batches and --max-tokens must be >= 1")
    checkpoints = sorted(a.work.glob("pretrain-p*/checkpoint_last.pt"))
    if not (a.work / "data" / "english" / "bin").is_dir():
        p.error(
            f"{a.work} has no data/english/bin (the pre-training corpus the driver binarizes): "
            "give the driver's --work"
        )
    if not checkpoints:
        p.error(
            f"{a.work} holds no pretrain-pN/checkpoint_last.pt: run the driver's span "
            "pre-training first (python -m reproduction.gigaword_10k.driver --rows p1-pt p2-pt "
            "...)"
        )
    earlier = json.loads(a.output.read_text(encoding="utf-8")) if a.output.is_file() else None
    command = (
        f"python -m reproduction.gigaword_10k.source_reliance --batches {a.batches} --max-tokens "
        f"{a.max_tokens}"
    )
    if earlier and earlier["command"] != command:
        p.error(
            f"{rel(a.output)} was measured by `{earlier['command']}`; measure with the same "
            "options or give another --output"
        )
    import torch

    from fairseq_ext.analysis.hardware import cpu_and_cores

    torch.set_num_threads(1)
    t0 = time.time()
    corpus = a.work / "data" / "english" / "bin"
    results = {
        ckpt.parent.name: measure(ckpt.parent, corpus, a.batches, a.max_tokens)
        for ckpt in checkpoints
    }
    machines = [
        *(earlier["hardware"].split(" then ") if earlier else []),
        f"{cpu_and_cores()}, torch threads 1",
    ]
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(
        json.dumps(
            {
                "command": command,
                "checkpoints": {**(earlier["checkpoints"] if earlier else {}), **results},
                "wall_seconds": round(
                    time.time() - t0 + (earlier["wall_seconds"] if earlier else 0), 1
                ),
                "calls": (earlier.get("calls", 1) if earlier else 0) + 1,
                "hardware": " then ".join(dict.fromkeys(machines)),
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    for name, r in results.items():
        print(
            f"{name}: {r['bits_own_source']:.3f} bits a token with its own source, "
            f"{r['bits_rolled_source']:.3f} with another line's "
            f"({r['bits_the_source_saves']:+.3f}); the encoder's between-line share "
            f"{r['encoder_between_line_share']:.3f} "
            f"({r['at_init']['encoder_between_line_share']:.3f} at init)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
