"""Gigaword 10k, the model rows of the published low-resource table (docs/results/gigaword-10k.md),
each trained until its validation ROUGE-1 stops improving: one resumable driver for every row.

    python -m reproduction.gigaword_10k.driver --data GIGAWORD --english ENGLISH
        [--rows transformer p1 p2 p1-pt p2-pt unilm-random unilm-minilm] [--seeds 1 2 3]
        [--chunk 500] [--checkpoint-every 100] [--patience 3] [--max-updates 20000] [--lenpens 0.6
        0.8 1.0 1.2 1.5]
        [--beam 4] [--valid-lines 0] [--pretrain-updates 10000] [--lr-grid ROW=LR,LR ...] [--jobs 2]
        [--work work/gigaword_10k]

GIGAWORD: the harvardnlp files ``train10k``, ``valid1k`` and ``test1951`` (``PREFIX.article.txt`` /
``PREFIX.title.txt``). ENGLISH: the folder of the English text the span pre-training reads
(``ENGLISH_SOURCES`` below: WikiText-2, the WMT14 and WMT16 English sides, Multi30k), with the
train10k articles of GIGAWORD added; no valid or test split of Gigaword is ever read for it.

Protocol (every row, every seed):

1. Data, once: ``data_prep/gigaword.sh --local`` (cleaned pairs, sentencepiece 10k, binarized
   train/valid/test) for the transformer and ProphetNet rows; the same cleaned pairs through
   MiniLM's WordPiece (``data_prep/wordpiece.py``, ``UNK`` as ``[UNK]``) and the converted MiniLM
   dictionary for the UniLM rows (as ``reproduction/unilm/pretrained_gigaword.sh``);
   ``--valid-lines N`` keeps the first N pairs of valid1k (default all 1000).
2. Span pre-training (rows ``p1-pt``, ``p2-pt``), once per n (both at once with ``--jobs 2``):
   ``prophetnet_denoising`` with that n on the English corpus, ``--pretrain-updates`` updates,
   resumable (checkpoint every ``--pretrain-chunk``); kept as ``runs/pretrain-pN.json`` with the
   SHA-256 of the checkpoint fine-tuning starts from; run when some run of the row is to be trained
   and has no checkpoint of its own to continue from. A pre-training that replaces a kept one (its
   work folder gone, or more updates asked) moves the earlier record to
   ``runs/superseded/pretraining/``; a fine-tuning run records the SHA-256 of the pre-training it
   started from (``pretraining_sha256``, None for one kept without it), so the page names the runs
   fine-tuned from an earlier pre-training.
3. Fine-tuning in chunks of ``--chunk`` updates (fairseq-train resumed from its
   ``checkpoint_last.pt``, so the schedule and batches are those of one long run, as
   ``--unsorted-batches`` cuts them per epoch; a record's ``batches_per_epoch_from`` is the update
   this rule began at, and the updates before it, or all of a record without it, were trained
   when the batches were cut again at each fairseq-train start; a checkpoint
   every ``--checkpoint-every`` updates, from which a run killed mid-chunk continues); after each
   chunk the checkpoint decodes the validation pairs (beam ``--beam``, length penalty 1.0, no
   repeated trigram, at most 40 tokens) and ROUGE-1 is scored; the best checkpoint so far is
   kept, the others dropped. Training stops when ROUGE-1 has not improved for ``--patience``
   validations (>= 2), or at ``--max-updates`` (then the record says so: not converged).
   ``--lr-grid ROW=LR,LR``: before the row's runs, one probe per learning rate (seed 0, which is
   no evaluation seed; trained until it stops, as above; no test), kept in ``runs/lr-grid/``; the
   best valid ROUGE-1 chooses the rate of the row's runs (default: the recipe's rate).
4. The length penalty is chosen on valid from ``--lenpens`` with the best checkpoint.
5. test1951 is decoded once with that checkpoint and length penalty and scored once.

Each finished run is kept as ``runs/ROW-sSEED.json`` (commands, seed, settings, the curve,
chosen update and length penalty, valid and test ROUGE, per-sentence test ROUGE-1, wall time,
hardware) beside ``runs/ROW-sSEED.test.txt.gz`` (the test hypotheses); both are committed, and
a kept run is not run again (a kept run or a started work folder made with other settings than
asked is refused, every run checked before any starts; a run that early stopping ended is kept
under any cap it did not reach). A run
stopped at the cap keeps its work folder: asked again with a higher ``--max-updates`` and
otherwise the same settings, it trains on from its last checkpoint until early stopping or the
new cap, and steps 4-5 are done again for its new best checkpoint; when its work folder is gone,
it is trained again from update 0 to the new cap, and its record says whether its validations up
to the old cap repeated the kept ones (``repeats_kept_curve``). A run
interrupted mid-way resumes from ``WORK/runs/ROW-sSEED`` (its ``state.json``, the best and last
checkpoints); its wall time counts the killed call's training up to its last checkpoint. Every
run works in its own process with ``--threads`` torch threads (default 1); ``--jobs`` runs side
by side. ``python -m reproduction.gigaword_10k.collect`` merges the kept runs into
``results.json`` and the page.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from data_prep.text import gigaword_style
from fairseq_ext.analysis.rouge import lead, rouge_f1
from reproduction import convergence
from reproduction.convergence import (
    RunClock,
    checkpoint_updates,
    fairseq_generate,
    fairseq_train,
    made_otherwise,
    read_lines,
    refusal,
    rel,
    same_run,
    sha256,
    started_otherwise,
)
from reproduction.gigaword_10k.protocol import CAPPED, EARLY_STOPPED, MODEL_ROWS, ROOT
from reproduction.records import write_json

KEPT = ROOT / "reproduction" / "gigaword_10k" / "runs"
GIGAWORD_FILES = {"train": "train10k", "valid": "valid1k", "test": "test1951"}
# The English text of the span pre-training, relative to --english (data_prep READMEs name the
# originals). Gigaword's train10k articles are added from --data; never a Gigaword valid/test split.
# opennmt_tok/newstest2012.first3000 is left out: it repeats extra_dev_2008_2012/newstest2012.
ENGLISH_SOURCES = [
    "wikitext-2-raw/wiki.valid.raw",
    "wikitext-2-raw/wiki.train.raw",
    "wmt14_en_de/newstest2013.en",
    "wmt14_en_de/extra_dev_2008_2012/news-test2008.en",
    "wmt14_en_de/extra_dev_2008_2012/newstest2009.en",
    "wmt14_en_de/extra_dev_2008_2012/newstest2010.en",
    "wmt14_en_de/extra_dev_2008_2012/newstest2011.en",
    "wmt14_en_de/extra_dev_2008_2012/newstest2012.en",
    "wmt14_en_de/opennmt_tok/train10k.tok.en",
    "wmt16_en_ro/newsdev2016.en",
    "wmt16_en_ro/train10k.europarl.en",
    "multi30k/train.en.gz",
    "multi30k/val.en.gz",
]
ENGLISH_NORMALISATION = (
    "lowercased, digits as '#' (Gigaword's style), Moses escapes undone, WikiText's headings "
    "and blank lines dropped and its @-@ @,@ @.@ joined, lines cut at 100 words, lines under 3 "
    "words dropped; sentencepiece of the Gigaword rows (data_prep/spm.py encode), binarized "
    "with their dictionary"
)

# Every row: its label in the table, its data, its starting point and the recipe of the script
# it comes from (compare_gigaword.sh / examples/prophetnet/gigaword.sh for the sentencepiece rows,
# pretrained_gigaword.sh for the UniLM rows).
ROWS = {
    "transformer": {"model": "transformer", "ngram": None, "pretrain": False},
    "p1": {"model": "prophetnet", "ngram": 1, "pretrain": False},
    "p2": {"model": "prophetnet", "ngram": 2, "pretrain": False},
    "p1-pt": {"model": "prophetnet", "ngram": 1, "pretrain": True},
    "p2-pt": {"model": "prophetnet", "ngram": 2, "pretrain": True},
    "unilm-random": {"model": "unilm", "init": False},
    "unilm-minilm": {"model": "unilm", "init": True},
}
for _key, _label in zip(ROWS, MODEL_ROWS):
    ROWS[_key]["label"] = _label
# sentencepiece rows: prophetnet_tiny (3+3 layers x 256, 4 heads, FFN 1024), the transformer at the
# same sizes
TINY = [
    "--encoder-layers",
    "3",
    "--decoder-layers",
    "3",
    "--encoder-embed-dim",
    "256",
    "--decoder-embed-dim",
    "256",
    "--encoder-ffn-embed-dim",
    "1024",
    "--decoder-ffn-embed-dim",
    "1024",
    "--encoder-attention-heads",
    "4",
    "--decoder-attention-heads",
    "4",
]
RECIPE = {  # optimiser settings per family: those of the scripts named above
    "spm": {"lr": "7e-4", "warmup": 200, "max_tokens": 2048},
    "unilm-random": {"lr": "5e-4", "warmup": 100, "max_tokens": 1024},
    "unilm-minilm": {"lr": "1e-4", "warmup": 100, "max_tokens": 1024},
}
POSITIONS = ["--max-source-positions", "1024", "--max-target-positions", "1024"]


def family(row: str) -> str:
    return row if ROWS[row]["model"] == "unilm" else "spm"


# ---------------------------------------------------------------- the protocol's rules


SCORE = "rouge1"  # the validation score the stop rule reads
best_index = partial(convergence.best_index, key=SCORE)
should_stop = partial(convergence.should_stop, key=SCORE)
next_chunk = partial(convergence.next_chunk, key=SCORE)


def loss_curve(log: str) -> list[dict]:
    """The training loss at each update fairseq's log gives, in update order; an update logged by
    more than one call (one resumed from a checkpoint before it) counts once, as last logged."""
    from reproduction.gpu.training import parse_log

    by_update = {
        int(x["num_updates"]): x["loss"]
        for x in parse_log(log).get("intervals", [])
        if "num_updates" in x and "loss" in x
    }
    return [{"update": update, "loss": loss} for update, loss in sorted(by_update.items())]


def describes(record: dict, checkpoint: Path) -> bool:
    """Whether a kept pre-training record is of ``checkpoint`` (not of an earlier pre-training whose
    folder was lost, with ``checkpoint`` a new one under way): the same SHA-256, or for a record
    kept without one, the same update."""
    if record.get("checkpoint_sha256"):
        return record["checkpoint_sha256"] == sha256(checkpoint)
    return record["updates"] == checkpoint_updates(checkpoint)


def pretraining_started_from(row: str, state: dict) -> dict:
    """A pre-trained row's record field ``pretraining_sha256``: the pre-training its run started
    from."""
    return (
        {"pretraining_sha256": state.get("pretraining_sha256")} if ROWS[row].get("pretrain") else {}
    )


def set_aside_replaced_pretraining(kept: Path, sha: str) -> None:
    """Moves the kept pre-training record ``kept`` to ``superseded/pretraining/`` (named by its
    checkpoint's SHA-256, or ``unhashed``) when a pre-training with checkpoint ``sha`` replaces it:
    the runs fine-tuned from it still name it."""
    if not kept.is_file():
        return
    earlier = json.loads(kept.read_text(encoding="utf-8")).get("checkpoint_sha256")
    if earlier != sha:
        to = (
            kept.parent
            / "superseded"
            / "pretraining"
            / f"{kept.stem}-{(earlier or 'unhashed')[:12]}.json"
        )
        to.parent.mkdir(parents=True, exist_ok=True)
        kept.replace(to)


def repeats_curve(curve: list[dict], kept: list[dict]) -> bool:
    """Whether a run trained again from update 0 repeated each validation of the kept run it
    replaces (update, ROUGE and distinct headlines; not the seconds)."""
    keys = ("update", "rouge1", "rouge2", "rougeL", "distinct")
    return len(curve) >= len(kept) and all(
        {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys} for a, b in zip(curve, kept)
    )


def choose_lenpen(grid: dict) -> str:
    """The length penalty of the best valid ROUGE-1 (ties: the one nearest 1.0, then the
    smaller)."""
    return max(grid, key=lambda lp: (grid[lp]["rouge1"], -abs(float(lp) - 1.0), -float(lp)))


# ---------------------------------------------------------------- helpers


def sentence_rouge1(hyps: list[str], refs: list[str]) -> list[float]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    return [round(100.0 * scorer.score(r, h)["rouge1"].fmeasure, 2) for h, r in zip(hyps, refs)]


# ---------------------------------------------------------------- the driver


class Driver:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.work = a.work.resolve()
        self.kept = a.kept.resolve()
        self.data = self.work / "data"
        self.user_dir = ROOT / "fairseq_ext"
        self.env = dict(
            os.environ,
            PYTHONWARNINGS="ignore",
            OMP_NUM_THREADS=str(a.threads),
            MKL_NUM_THREADS=str(a.threads),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            PYTHONPATH=os.pathsep.join(
                dict.fromkeys([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
            ),
        )

    def settings(self, row: str, lr: str | None = None) -> dict:
        """What a kept run of ``row`` must share with this call to count as the same run."""
        a = self.a
        out = {
            "chunk": a.chunk,
            "patience": a.patience,
            "max_updates": a.max_updates,
            "beam": a.beam,
            "lenpens": [str(x) for x in a.lenpens],
            "valid_lines": a.valid_lines,
            "sizes": a.sizes,
            "max_tokens": a.max_tokens,
            "lr": lr or self.lr_for(row),
        }
        if family(row) == "spm":
            out["vocab"] = a.vocab
        if ROWS[row].get("pretrain"):
            out["pretrain_updates"] = a.pretrain_updates
        return out

    def lr_for(self, row: str) -> str:
        """The row's learning rate: the recipe's, or the one of ``--lr-grid`` whose probe (seed 0,
        no evaluation seed; early stopping on valid, no test) reached the best valid ROUGE-1."""
        grid = self.a.lr_grid.get(row)
        if not grid:
            return RECIPE[family(row)]["lr"]
        best = {}
        for lr in grid:
            probe = self.kept / "lr-grid" / f"{row}-lr{lr}-s0.json"
            if not probe.is_file():
                raise RuntimeError(
                    f"{rel(probe)} is missing: the --lr-grid probes of {row} run first"
                )
            best[lr] = json.loads(probe.read_text(encoding="utf-8"))["valid"]["rouge1"]
        return max(grid, key=lambda lr: (best[lr], -grid.index(lr)))

    def sh(
        self, cmd: list, log: Path, stdin: Path | None = None, stdout: Path | None = None
    ) -> None:
        cmd = [str(c) for c in cmd]
        with open(self.work / "commands.txt", "a", encoding="utf-8") as f:
            f.write(" ".join(cmd) + "\n")
        with open(log, "a", encoding="utf-8") as err:
            fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
            fout = open(stdout, "wb") if stdout else err
            try:
                proc = subprocess.run(
                    cmd, env=self.env, stdin=fin, stdout=fout, stderr=err, cwd=ROOT
                )
            finally:
                if stdin:
                    fin.close()
                if stdout:
                    fout.close()
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd[:4])} ... failed ({proc.returncode}); see {log}\n"
                f"{log.read_text(errors='replace')[-1500:]}"
            )

    # 1. data
    def prepare(self, rows: list[str]) -> None:
        a, d = self.a, self.data
        d.mkdir(parents=True, exist_ok=True)
        made, asked = (
            d / "prepared.json",
            {"data": str(a.data), "valid_lines": a.valid_lines, "vocab": a.vocab},
        )
        if made.is_file() and json.loads(made.read_text(encoding="utf-8")) != asked:
            raise SystemExit(
                f"{d} was prepared with {made.read_text(encoding='utf-8').strip()}, not {asked}: "
                "give another --work folder"
            )
        write_json(made, asked)
        src = d / "source"
        if not (d / "spm" / "bin" / "test.article-title.title.bin").is_file():
            src.mkdir(exist_ok=True)
            for split, prefix in GIGAWORD_FILES.items():
                for side in ("article", "title"):
                    lines = read_lines(a.data / f"{prefix}.{side}.txt")
                    if split == "valid" and a.valid_lines:
                        lines = lines[: a.valid_lines]
                    (src / f"{prefix}.{side}.txt").write_text(
                        "\n".join(lines) + "\n", encoding="utf-8"
                    )
            self.sh(
                [
                    "bash",
                    ROOT / "data_prep" / "gigaword.sh",
                    "--local",
                    src,
                    "--out",
                    d / "spm",
                    "--vocab",
                    a.vocab,
                    "--train",
                    GIGAWORD_FILES["train"],
                    "--valid",
                    GIGAWORD_FILES["valid"],
                    "--test",
                    GIGAWORD_FILES["test"],
                ],
                d / "prep.log",
            )
        lead8 = self.kept / "lead8-test.json"
        if not lead8.is_file():  # lead-8's sentence ROUGE-1 on test: the bar of the paired tests
            articles, titles = (
                read_lines(a.data / f"test1951.{s}.txt") for s in ("article", "title")
            )
            write_json(
                lead8,
                {
                    "row": "lead-8",
                    "test_sentence_rouge1": sentence_rouge1([lead(x, 8) for x in articles], titles),
                },
            )
        if any(ROWS[r].get("pretrain") for r in rows):
            self.prepare_english()
        if any(ROWS[r]["model"] == "unilm" for r in rows):
            self.prepare_wordpiece()

    def prepare_english(self) -> None:
        d, py = self.data, sys.executable
        out = d / "english"
        if (out / "bin" / "train.article-None.article.bin").is_file():
            return
        out.mkdir(parents=True, exist_ok=True)
        sources, lines = [], []
        for name in ENGLISH_SOURCES:
            path = self.a.english / name
            if not path.is_file():
                continue
            got = [x for line in read_lines(path) for x in gigaword_style(line, "wikitext" in name)]
            sources.append({"file": name, "sha256": sha256(path), "lines": len(got)})
            lines += got
        giga = self.a.data / f"{GIGAWORD_FILES['train']}.article.txt"
        got = [
            x
            for line in read_lines(giga)
            for x in gigaword_style(line.replace("<unk>", "UNK"), False)
        ]
        sources.append({"file": f"GIGAWORD/{giga.name}", "sha256": sha256(giga), "lines": len(got)})
        lines += got
        (out / "train.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.sh(
            [py, ROOT / "data_prep" / "spm.py", "encode", "--model", d / "spm" / "spm.model"],
            out / "prep.log",
            stdin=out / "train.txt",
            stdout=out / "train.article",
        )
        self.preprocess(
            [
                "--only-source",
                "--source-lang",
                "article",
                "--trainpref",
                out / "train",
                "--srcdict",
                d / "spm" / "bin" / "dict.article.txt",
                "--destdir",
                out / "bin",
                "--workers",
                "1",
            ]
        )
        write_json(
            out / "corpus.json",
            {
                "sources": sources,
                "lines": len(lines),
                "words": sum(len(x.split()) for x in lines),
                "normalisation": ENGLISH_NORMALISATION,
            },
        )

    def preprocess(self, argv: list) -> None:
        """fairseq-preprocess ARGV in this process (as data_prep/*.sh call it)."""
        from fairseq import options
        from fairseq_cli import preprocess

        with open(self.work / "commands.txt", "a", encoding="utf-8") as f:
            f.write("fairseq-preprocess " + " ".join(map(str, argv)) + "\n")
        preprocess.main(options.get_preprocessing_parser().parse_args([str(x) for x in argv]))

    def prepare_wordpiece(self) -> None:
        from data_prep import wordpiece

        d, py = self.data, sys.executable
        minilm = d / "minilm"
        if not (minilm / "converted" / "model.pt").is_file():
            self.sh(
                [
                    py,
                    "-c",
                    "import all_minilm_l6_v2, sys; all_minilm_l6_v2.extract_model(sys.argv[1])",
                    minilm,
                ],
                d / "prep.log",
            )
            self.sh(
                [
                    py,
                    "-m",
                    "fairseq_ext.convert",
                    "from-transformers",
                    minilm / "all-MiniLM-L6-v2",
                    minilm / "converted",
                ],
                d / "prep.log",
            )
        out = d / "wordpiece"
        if (out / "bin" / "test.article-title.title.bin").is_file():
            return
        (out / "text").mkdir(parents=True, exist_ok=True)
        for split in GIGAWORD_FILES:
            for side in ("article", "title"):
                text = out / "text" / f"{split}.{side}"
                lines = read_lines(d / "spm" / "raw" / f"{split}.{side}")
                text.write_text(
                    "".join(re.sub(r"(?<!\S)UNK(?!\S)", "[UNK]", x) + "\n" for x in lines),
                    encoding="utf-8",
                )
                wordpiece.main(
                    [
                        "encode",
                        "--tokenizer",
                        str(minilm / "all-MiniLM-L6-v2"),
                        "--max-tokens",
                        "200",
                        "--input",
                        str(text),
                        "--output",
                        str(out / f"{split}.{side}"),
                    ]
                )
        self.preprocess(
            [
                "-s",
                "article",
                "-t",
                "title",
                "--srcdict",
                minilm / "converted" / "dict.txt",
                "--joined-dictionary",
                "--trainpref",
                out / "train",
                "--validpref",
                out / "valid",
                "--testpref",
                out / "test",
                "--destdir",
                out / "bin",
                "--workers",
                "1",
            ]
        )

    # commands
    def sizes(self, row: str) -> list[str]:
        if self.a.sizes:
            return self.a.sizes.split()
        if ROWS[row]["model"] == "unilm":
            return (self.data / "minilm" / "converted" / "options.txt").read_text().split()
        return TINY

    def bin(self, row: str) -> Path:
        return self.data / ("wordpiece" if ROWS[row]["model"] == "unilm" else "spm") / "bin"

    def model_args(self, row: str) -> list:
        spec = ROWS[row]
        if spec["model"] == "prophetnet":
            return [
                "--task",
                "translation_prophetnet",
                "-s",
                "article",
                "-t",
                "title",
                "--unsorted-batches",
                "--arch",
                "prophetnet_tiny",
                *self.sizes(row),
                "--ngram",
                spec["ngram"],
                "--criterion",
                "ngram_language_loss",
                "--dropout",
                "0.1",
                "--attention-dropout",
                "0.1",
                *POSITIONS,
            ]
        if spec["model"] == "transformer":
            return [
                "--task",
                "translation_prophetnet",
                "-s",
                "article",
                "-t",
                "title",
                "--unsorted-batches",
                "--arch",
                "transformer",
                *self.sizes(row),
                "--activation-fn",
                "gelu",
                "--encoder-learned-pos",
                "--decoder-learned-pos",
                "--layernorm-embedding",
                "--no-scale-embedding",
                "--share-all-embeddings",
                "--dropout",
                "0.1",
                "--attention-dropout",
                "0.1",
                "--activation-dropout",
                "0.1",
                "--criterion",
                "label_smoothed_cross_entropy",
                "--report-accuracy",
                *POSITIONS,
            ]
        init = (
            ["--init-from", self.data / "minilm" / "converted" / "model.pt"] if spec["init"] else []
        )
        return [
            "--task",
            "unilm_seq2seq",
            "-s",
            "article",
            "-t",
            "title",
            "--unsorted-batches",
            "--arch",
            "unilm_transformer",
            *self.sizes(row),
            "--attention-mask",
            "prefix",
            *init,
            "--criterion",
            "label_smoothed_cross_entropy",
            "--report-accuracy",
        ]

    def optimiser(self, recipe: dict) -> list:
        return [
            "--optimizer",
            "adam",
            "--adam-betas",
            "(0.9,0.98)",
            "--clip-norm",
            "1.0",
            "--lr-scheduler",
            "inverse_sqrt",
            "--lr",
            recipe["lr"],
            "--warmup-updates",
            recipe["warmup"],
            "--max-tokens",
            self.a.max_tokens or recipe["max_tokens"],
        ]

    def train_command(self, row: str, seed: int, save_dir: Path, lr: str) -> list:
        start = []
        if ROWS[row].get("pretrain"):
            start = [
                "--finetune-from-model",
                self.work / f"pretrain-p{ROWS[row]['ngram']}" / "checkpoint_last.pt",
            ]
        return [
            self.bin(row),
            "--user-dir",
            self.user_dir,
            *self.model_args(row),
            "--label-smoothing",
            "0.1",
            *self.optimiser({**RECIPE[family(row)], "lr": lr}),
            *start,
            "--disable-validation",
            "--no-epoch-checkpoints",
            "--save-interval-updates",
            self.a.checkpoint_every,
            "--keep-interval-updates",
            "1",
            "--log-format",
            "simple",
            "--log-interval",
            "50",
            "--seed",
            seed,
            "--num-workers",
            "0",
            "--save-dir",
            save_dir,
        ]

    def generate_command(self, row: str, ckpt: Path, subset: str, lenpen: str) -> list:
        task = (
            ["--task", "unilm_seq2seq"]
            if ROWS[row]["model"] == "unilm"
            else ["--task", "translation_prophetnet", "--post-process", "sentencepiece", *POSITIONS]
        )
        return [
            self.bin(row),
            "--user-dir",
            self.user_dir,
            *task,
            "-s",
            "article",
            "-t",
            "title",
            "--path",
            ckpt,
            "--gen-subset",
            subset,
            "--batch-size",
            "64",
            "--beam",
            self.a.beam,
            "--lenpen",
            lenpen,
            "--no-repeat-ngram-size",
            "3",
            "--max-len-a",
            "0",
            "--max-len-b",
            "40",
            "--num-workers",
            "0",
        ]

    def pretrain_command(self, n: int, save_dir: Path) -> list:
        return [
            self.data / "english" / "bin",
            "--user-dir",
            self.user_dir,
            "--task",
            "prophetnet_denoising",
            "--arch",
            "prophetnet_tiny",
            *self.sizes("p1-pt"),
            "--ngram",
            n,
            "--criterion",
            "ngram_language_loss",
            "--dropout",
            "0.1",
            "--attention-dropout",
            "0.1",
            *POSITIONS,
            *self.optimiser(RECIPE["spm"]),
            "--max-update",
            self.a.pretrain_updates,
            "--save-interval-updates",
            self.a.pretrain_chunk,
            "--disable-validation",
            "--no-epoch-checkpoints",
            "--log-format",
            "simple",
            "--log-interval",
            "50",
            "--seed",
            "1",
            "--num-workers",
            "0",
            "--save-dir",
            save_dir,
        ]

    # workers: one process per run (its own log and torch threads); fairseq runs inside it
    def worker(self, kind: str, name: str, log: Path, lr: str | None = None) -> None:
        if self.a.in_process:  # tests: the run in this process, its output where it goes
            self.run_worker(kind, name, lr)
            return
        spec = self.work / "specs" / f"{name}.json"
        write_json(spec, {"kind": kind, "name": name, "lr": lr, "argv": self.argv})
        log.parent.mkdir(parents=True, exist_ok=True)
        self.sh([sys.executable, "-m", "reproduction.gigaword_10k.driver", "--worker", spec], log)

    def hardware(self) -> str:
        from fairseq_ext.analysis.hardware import cpu_and_cores

        return f"{cpu_and_cores()}, torch threads {self.a.threads}"

    # 2. pre-training
    def pretrain(self, n: int) -> dict:
        kept = self.kept / f"pretrain-p{n}.json"
        save = self.work / f"pretrain-p{n}"
        if kept.is_file() and (save / "checkpoint_last.pt").is_file():
            done = json.loads(kept.read_text(encoding="utf-8"))
            if (
                describes(done, save / "checkpoint_last.pt")
                and done["pretrain_updates"] == self.a.pretrain_updates
                and done["sizes"] == self.a.sizes
            ):
                # else fairseq-train continues from checkpoint_last.pt to the updates asked
                return done
        save.mkdir(parents=True, exist_ok=True)
        state_file = (
            save / "state.json"
        )  # the seconds of earlier calls, as a fine-tuning run keeps them
        state = (
            json.loads(state_file.read_text(encoding="utf-8"))
            if state_file.is_file()
            else {"seconds": 0.0, "sessions": 0}
        )
        clock = RunClock(state_file, save / "checkpoint_last.pt", state, self.hardware())
        clock.save()
        log = save / "worker.log"  # this process's output (Driver.worker)
        with open(self.work / "commands.txt", "a", encoding="utf-8") as f:
            f.write("fairseq-train " + " ".join(map(str, self.pretrain_command(n, save))) + "\n")
        fairseq_train(self.pretrain_command(n, save))
        clock.save()
        curve = loss_curve(log.read_text(errors="replace")) if log.is_file() else []
        corpus = json.loads((self.data / "english" / "corpus.json").read_text(encoding="utf-8"))
        record = {
            "row": f"span pre-training, n = {n}",
            "ngram": n,
            "updates": checkpoint_updates(save / "checkpoint_last.pt"),
            "pretrain_updates": self.a.pretrain_updates,
            "sizes": self.a.sizes,
            "command": "fairseq-train "
            + " ".join(
                rel(c) if isinstance(c, Path) else str(c) for c in self.pretrain_command(n, save)
            ),
            "corpus": corpus,
            "train_loss_curve": curve,
            "seed": 1,
            "wall_seconds": state["seconds"],
            "sessions": state["sessions"],
            "hardware": clock.machines(),
            "checkpoint_sha256": sha256(save / "checkpoint_last.pt"),
        }
        set_aside_replaced_pretraining(kept, record["checkpoint_sha256"])
        write_json(kept, record)
        return record

    # 3.-5. one fine-tuning run
    def finetune(self, row: str, seed: int, probe_lr: str | None = None) -> dict:
        """One run; with ``probe_lr`` a learning-rate probe: trained until it stops, no length
        penalty grid, no test, kept in ``KEPT/lr-grid``."""
        a = self.a
        name = f"{row}-lr{probe_lr}-s{seed}" if probe_lr else f"{row}-s{seed}"
        kept = self.kept / "lr-grid" / f"{name}.json" if probe_lr else self.kept / f"{name}.json"
        w = self.work / "runs" / name
        state_file = w / "state.json"
        asked = self.settings(row, probe_lr)
        if kept.is_file():
            if probe_lr:
                return json.loads(kept.read_text(encoding="utf-8"))
            if not self.extends(name):
                return self.kept_run(name)
        w.mkdir(parents=True, exist_ok=True)
        state = convergence.load_state(state_file, asked, lenpen={})
        if (
            kept.is_file() and not state_file.is_file()
        ):  # an extension whose work folder is gone: from update 0
            done = json.loads(kept.read_text(encoding="utf-8"))
            state["retrained"] = {"cap": done["settings"]["max_updates"], "curve": done["curve"]}
            print(
                f"{name}: its work folder is gone; trained again from update 0 up to the cap of "
                f"{a.max_updates}",
                flush=True,
            )
        if (
            kept.is_file() and state["settings"] != asked
        ):  # the first call of an extension: steps 4-5 are redone
            state.update(
                settings=asked,
                lenpen={},
                extended_from=[*state.get("extended_from", []), state["settings"]["max_updates"]],
            )
        if state["settings"] != asked:
            raise SystemExit(started_otherwise(w, state["settings"], asked))
        save_dir = w / "checkpoints"
        clock = RunClock(state_file, save_dir / "checkpoint_last.pt", state, self.hardware())
        clock.save()
        train = self.train_command(row, seed, save_dir, asked["lr"])
        valid_refs = read_lines(self.data / "spm" / "raw" / "valid.title")
        test_refs = read_lines(self.data / "spm" / "raw" / "test.title")
        best = w / "best.pt"

        def validate(checkpoint: Path) -> dict:
            hyps = self.decode(row, checkpoint, "valid", "1.0", w)
            scores = {k: round(v, 2) for k, v in rouge_f1(hyps, valid_refs).items()}
            return {**scores, "distinct": len(set(hyps))}

        def first_start() -> None:  # fairseq-train starts from the pre-training
            state["pretraining_sha256"] = self.pretraining_sha256(row)

        convergence.train_in_chunks(
            name,
            state,
            clock,
            save_dir,
            best,
            train=lambda target: fairseq_train(train + ["--max-update", target]),
            validate=validate,
            key=SCORE,
            label="ROUGE-1",
            chunk=a.chunk,
            max_updates=a.max_updates,
            patience=a.patience,
            first_start=first_start if ROWS[row].get("pretrain") else None,
        )
        curve = state["curve"]
        chosen = curve[best_index(curve)]
        converged = should_stop(curve, a.patience)
        if (
            converged or probe_lr
        ):  # a run stopped at the cap keeps its checkpoints: a higher cap extends it
            shutil.rmtree(save_dir, ignore_errors=True)
        if probe_lr:
            record = {
                "row": row,
                "seed": seed,
                "lr": probe_lr,
                "settings": asked,
                "curve": curve,
                "stopped": EARLY_STOPPED if converged else CAPPED,
                "chosen_update": chosen["update"],
                "valid": {k: chosen[k] for k in ("rouge1", "rouge2", "rougeL")},
                "command": "fairseq-train "
                + " ".join(rel(c) if isinstance(c, Path) else str(c) for c in train),
                "wall_seconds": clock.seconds(),
                "hardware": clock.machines(),
                "batches_per_epoch_from": state.get("batches_per_epoch_from"),
                **pretraining_started_from(row, state),
            }
            write_json(kept, record)
            shutil.rmtree(w)
            return record
        for lp in (str(x) for x in a.lenpens):
            if lp in state["lenpen"]:
                continue
            if float(lp) == 1.0:
                state["lenpen"][lp] = {k: chosen[k] for k in ("rouge1", "rouge2", "rougeL")}
            else:
                hyps = self.decode(row, best, "valid", lp, w)
                state["lenpen"][lp] = {
                    k: round(v, 2) for k, v in rouge_f1(hyps, valid_refs).items()
                }
            clock.save()
        lenpen = choose_lenpen(state["lenpen"])
        hyps = self.decode(
            row, best, "test", lenpen, w
        )  # the one test decode of this run (of each cap it stopped at)
        clock.save()  # the seconds an extension of this run starts from
        test = {k: round(v, 2) for k, v in rouge_f1(hyps, test_refs).items()}
        hyp_file = self.kept / f"{name}.test.txt.gz"
        hyp_file.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(hyp_file, "wt", encoding="utf-8", compresslevel=9) as f:
            f.write("".join(h + "\n" for h in hyps))

        def show(cmd):
            return " ".join(rel(c) if isinstance(c, Path) else str(c) for c in cmd)

        record = {
            "row": row,
            "label": ROWS[row]["label"],
            "seed": seed,
            "settings": asked,
            "recipe": {**RECIPE[family(row)], "lr": asked["lr"]},
            "commands": {
                "fairseq-train": "fairseq-train " + show(train + ["--max-update", "UPDATES"]),
                "fairseq-generate": "fairseq-generate "
                + show(self.generate_command(row, best, "SUBSET", "LENPEN")),
            },
            "pretraining": f"pretrain-p{ROWS[row]['ngram']}.json"
            if ROWS[row].get("pretrain")
            else None,
            **pretraining_started_from(row, state),
            "valid_set": f"valid1k, first {a.valid_lines} pairs"
            if a.valid_lines
            else "valid1k (1000 pairs)",
            "curve": curve,
            "stopped": EARLY_STOPPED if converged else CAPPED,
            "chosen_update": chosen["update"],
            "lenpen_grid": state["lenpen"],
            "chosen_lenpen": lenpen,
            "valid": state["lenpen"][lenpen],
            "test": test,
            "test_sentences": len(hyps),
            "test_distinct": len(set(hyps)),
            "test_hypotheses": rel(hyp_file),
            "test_sentence_rouge1": sentence_rouge1(
                hyps, read_lines(self.a.data / "test1951.title.txt")
            ),
            "wall_seconds": state["seconds"],
            "sessions": state["sessions"],
            "hardware": clock.machines(),
            "batches_per_epoch_from": state.get("batches_per_epoch_from"),
            **(
                {"extended_from_caps": state["extended_from"]} if state.get("extended_from") else {}
            ),
            **(
                {
                    "retrained_past_cap": state["retrained"]["cap"],
                    "repeats_kept_curve": repeats_curve(curve, state["retrained"]["curve"]),
                }
                if state.get("retrained")
                else {}
            ),
        }
        write_json(kept, record)
        if converged:
            shutil.rmtree(w)
        print(
            f"{name}: stopped ({record['stopped']}) at update {curve[-1]['update']}, best "
            f"{chosen['update']}, lenpen {lenpen}; test ROUGE-1 {test['rouge1']:.2f}",
            flush=True,
        )
        return record

    def pretraining_sha256(self, row: str) -> str | None:
        """The SHA-256 that the kept record of ``row``'s pre-training gives its checkpoint (None for
        a record kept without one)."""
        record = self.kept / f"pretrain-p{ROWS[row]['ngram']}.json"
        return json.loads(record.read_text(encoding="utf-8")).get("checkpoint_sha256")

    def extends(self, name: str) -> bool:
        """Whether this call trains the kept run ``name`` further: it stopped at a lower cap and
        every other setting is the same as asked now. With its work folder it trains on from its
        last checkpoint; without (a machine that did not keep it) it is trained again from update
        0."""
        done = json.loads((self.kept / f"{name}.json").read_text(encoding="utf-8"))
        return convergence.extends(done, self.settings(done["row"]))

    def kept_as_is(self, name: str) -> bool:
        """Whether run ``name`` has a record this call keeps rather than extends."""
        return (self.kept / f"{name}.json").is_file() and not self.extends(name)

    def starts_from_pretraining(self, name: str) -> bool:
        """Whether this call trains run ``name`` of a pre-trained row from its pre-training: it is
        not kept as it is (no record, or one this call extends) and has no checkpoint of its own."""
        row = name.rpartition("-s")[0]
        if not ROWS[row].get("pretrain") or self.kept_as_is(name):
            return False
        return not (self.work / "runs" / name / "checkpoints" / "checkpoint_last.pt").is_file()

    def kept_run(self, name: str) -> dict:
        """A finished run's record; refused when it is not the run asked now (``same_run``)."""
        done = json.loads((self.kept / f"{name}.json").read_text(encoding="utf-8"))
        if not same_run(done, self.settings(done["row"])):
            raise SystemExit(
                made_otherwise(
                    self.kept / f"{name}.json", done["settings"], self.settings(done["row"])
                )
            )
        return done

    def refusal(self, row: str, seed: int) -> str | None:
        """Why the run of ``row`` and ``seed`` cannot be kept or run as asked now (a kept record or
        a started work folder with other settings), or None; every run is checked before any
        starts."""
        name = f"{row}-s{seed}"
        return refusal(
            self.kept / f"{name}.json", self.work / "runs" / name / "state.json", self.settings(row)
        )

    def grid_unasked(self, row: str) -> str | None:
        """Why ``row`` cannot run without ``--lr-grid``: its learning-rate probes are kept, so its
        runs train at the rate they chose, which a call without the option would not ask for; or
        None."""
        probes = list((self.kept / "lr-grid").glob(f"{row}-lr*-s0.json"))
        if row in self.a.lr_grid or not probes:
            return None
        rates = sorted((p.name[len(f"{row}-lr") : -len("-s0.json")] for p in probes), key=float)
        return (
            f"{row}: its learning-rate probes are kept in {rel(self.kept / 'lr-grid')} "
            f"({', '.join(rates)}); its runs train at the rate they chose: add --lr-grid "
            f"{row}={','.join(rates)}"
        )

    def decode(self, row: str, ckpt: Path, subset: str, lenpen: str, w: Path) -> list[str]:
        hyps = fairseq_generate(self.generate_command(row, ckpt, subset, lenpen), w / "generate")
        if (
            ROWS[row]["model"] == "unilm"
        ):  # WordPiece back to words; fairseq's <unk> is the references' UNK
            from data_prep import wordpiece

            pieces, text = w / "generate" / "pieces.txt", w / "generate" / "text.txt"
            pieces.write_text(
                "".join(h.replace("<unk>", "[UNK]") + "\n" for h in hyps), encoding="utf-8"
            )
            wordpiece.main(
                [
                    "decode",
                    "--tokenizer",
                    str(self.data / "minilm" / "all-MiniLM-L6-v2"),
                    "--input",
                    str(pieces),
                    "--output",
                    str(text),
                ]
            )
            hyps = [h.replace("[UNK]", "UNK") for h in read_lines(text)]
        want = len(read_lines(self.data / "spm" / "raw" / f"{subset}.title"))
        if len(hyps) != want:
            raise RuntimeError(f"{len(hyps)} hypotheses for the {want} {subset} pairs")
        return hyps

    def run_worker(self, kind: str, name: str, lr: str | None = None) -> None:
        import torch

        torch.set_num_threads(self.a.threads)
        if kind == "pretrain":
            self.pretrain(int(name[len("pretrain-p") :]))
        else:
            row, _, seed = name.rpartition("-s")
            self.finetune(row.split("-lr")[0], int(seed), lr)

    def run(self) -> None:
        a = self.a
        refused = [why for r in a.rows if (why := self.grid_unasked(r))]
        if (
            refused
        ):  # before any data, pre-training or run: a row of a grid trains at the grid's rate
            raise SystemExit("\n".join(refused))
        self.work.mkdir(parents=True, exist_ok=True)
        self.prepare(a.rows)

        def pretrain(n: int) -> None:
            t0 = time.time()
            self.worker("pretrain", f"pretrain-p{n}", self.work / f"pretrain-p{n}" / "worker.log")
            print(f"pre-training n = {n}: done ({time.time() - t0:.0f} s in this call)", flush=True)

        needed = sorted(
            {
                ROWS[r]["ngram"]
                for r in a.rows
                for s in a.seeds
                if self.starts_from_pretraining(f"{r}-s{s}")
            }
        )
        with ThreadPoolExecutor(
            a.jobs
        ) as pool:  # the pre-trainings side by side, before the runs that start from them
            list(pool.map(pretrain, needed))
        probes = [
            (r, lr)
            for r in a.rows
            for lr in a.lr_grid.get(r, [])
            if not (self.kept / "lr-grid" / f"{r}-lr{lr}-s0.json").is_file()
        ]
        with ThreadPoolExecutor(
            a.jobs
        ) as pool:  # the learning-rate probes before the runs that use their choice
            for job in [
                pool.submit(
                    self.worker,
                    "finetune",
                    f"{r}-lr{lr}-s0",
                    self.work / "runs" / f"{r}-lr{lr}-s0.log",
                    lr,
                )
                for r, lr in probes
            ]:
                job.result()
        for r in a.rows:
            if r in a.lr_grid:
                print(
                    f"{r}: learning rate {self.lr_for(r)} chosen on valid from "
                    f"{', '.join(a.lr_grid[r])}",
                    flush=True,
                )
        todo = [
            f"{r}-s{s}" for s in a.seeds for r in a.rows
        ]  # seed by seed: a partial table has whole seeds
        refused = [why for s in a.seeds for r in a.rows if (why := self.refusal(r, s))]
        if refused:  # before any run starts, not hours later when the pool reaches the refused one
            raise SystemExit("\n".join(refused))

        def one(name):
            if self.kept_as_is(name):
                self.kept_run(name)
                print(f"kept: {name}", flush=True)
                return
            t0 = time.time()
            self.worker("finetune", name, self.work / "runs" / f"{name}.log")
            record = self.kept_run(name)
            print(
                f"{name}: test ROUGE-1 {record['test']['rouge1']:.2f} (update "
                f"{record['chosen_update']}, lenpen {record['chosen_lenpen']}; "
                f"{time.time() - t0:.0f} s in this call)",
                flush=True,
            )

        with ThreadPoolExecutor(a.jobs) as pool:
            for job in [pool.submit(one, name) for name in todo]:
                job.result()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.gigaword_10k.driver",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data", type=Path, help="folder of the harvardnlp files (train10k, valid1k, test1951)"
    )
    p.add_argument(
        "--english",
        type=Path,
        help="folder of the English text of the span pre-training (ENGLISH_SOURCES)",
    )
    p.add_argument(
        "--work", type=Path, default=ROOT / "work" / "gigaword_10k", help="data and unfinished runs"
    )
    p.add_argument("--kept", type=Path, default=KEPT, help="one JSON per finished run (committed)")
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--chunk", type=int, default=500, help="updates between two validations")
    p.add_argument(
        "--patience",
        type=int,
        default=3,
        help="validations without a better ROUGE-1 before stopping (>= 2)",
    )
    p.add_argument(
        "--max-updates",
        type=int,
        default=20000,
        help="a cap; a run stopped by it is marked not converged",
    )
    p.add_argument("--lenpens", nargs="+", type=float, default=[0.6, 0.8, 1.0, 1.2, 1.5])
    p.add_argument("--beam", type=int, default=4)
    p.add_argument(
        "--valid-lines",
        type=int,
        default=0,
        help="validate on the first N pairs of valid1k (0: all)",
    )
    p.add_argument(
        "--vocab",
        type=int,
        default=10000,
        help="sentencepiece vocabulary of the transformer/ProphetNet rows",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=0,
        help="tokens per batch (0: the row's recipe, 2048 or 1024)",
    )
    p.add_argument("--sizes", default="", help="model size options replacing the rows' own (tests)")
    p.add_argument(
        "--pretrain-updates",
        type=int,
        default=10000,
        help="span pre-training updates per n (about 7 passes over the 2.5M tokens of the "
        "English corpus at 2048 tokens a batch)",
    )
    p.add_argument(
        "--pretrain-chunk",
        type=int,
        default=1000,
        help="pre-training checkpoint interval (resumption)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=100,
        help="fine-tuning checkpoint interval within a chunk: a run killed mid-chunk loses at "
        "most this many updates",
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--jobs", type=int, default=1, help="runs side by side")
    p.add_argument(
        "--lr-grid",
        nargs="+",
        default=[],
        metavar="ROW=LR,LR",
        help="learning rates to try for ROW (probes with seed 0, chosen by valid ROUGE-1; "
        "default: the recipe's)",
    )
    p.add_argument(
        "--in-process", action="store_true", help="every run in this process, one at a time (tests)"
    )
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    a = p.parse_args(argv)
    a.lr_grid = lr_grid(p, a.lr_grid)
    if a.worker:
        spec = json.loads(a.worker.read_text(encoding="utf-8"))
        b = p.parse_args(spec["argv"])
        b.lr_grid = lr_grid(p, b.lr_grid)
        d = Driver(b)
        d.argv = spec["argv"]
        d.run_worker(spec["kind"], spec["name"], spec.get("lr"))
        return
    if a.data is None:
        p.error("--data GIGAWORD is required")
    for prefix in GIGAWORD_FILES.values():
        for side in ("article", "title"):
            if not (a.data / f"{prefix}.{side}.txt").is_file():
                p.error(
                    f"{a.data} has no {prefix}.{side}.txt: give the folder of the harvardnlp "
                    "Gigaword files"
                )
    if any(ROWS[r].get("pretrain") for r in a.rows) and (
        a.english is None or not a.english.is_dir()
    ):
        p.error("the pre-trained rows need --english DIR (the folder of ENGLISH_SOURCES)")
    if a.in_process and a.jobs > 1:
        p.error("--in-process runs one run at a time: leave --jobs at 1")
    if (
        a.patience < 2
        or a.chunk < 1
        or a.max_updates < a.chunk
        or min(a.jobs, a.threads, a.checkpoint_every) < 1
    ):
        p.error(
            "--patience must be >= 2, --chunk >= 1, --max-updates >= --chunk, --jobs, --threads "
            "and --checkpoint-every >= 1"
        )
    a.data, a.english = a.data.resolve(), a.english.resolve() if a.english else None
    d = Driver(a)
    d.argv = [*argv_absolute(a)]
    d.run()


def lr_grid(p: argparse.ArgumentParser, items: list[str]) -> dict:
    out = {}
    for item in items:
        row, _, values = item.partition("=")
        if row not in ROWS or not values:
            p.error(f"--lr-grid {item}: write ROW=LR,LR,... with ROW one of {', '.join(ROWS)}")
        out[row] = values.split(",")
    return out


def argv_absolute(a: argparse.Namespace) -> list[str]:
    """This call's options with absolute folders, for the workers."""
    out = [
        "--data",
        str(a.data),
        "--work",
        str(a.work.resolve()),
        "--kept",
        str(a.kept.resolve()),
        "--rows",
        *a.rows,
        "--seeds",
        *map(str, a.seeds),
        "--chunk",
        str(a.chunk),
        "--patience",
        str(a.patience),
        "--max-updates",
        str(a.max_updates),
        "--lenpens",
        *map(str, a.lenpens),
        "--beam",
        str(a.beam),
        "--valid-lines",
        str(a.valid_lines),
        "--vocab",
        str(a.vocab),
        "--max-tokens",
        str(a.max_tokens),
        f"--sizes={a.sizes}",
        "--pretrain-updates",
        str(a.pretrain_updates),
        "--pretrain-chunk",
        str(a.pretrain_chunk),
        "--checkpoint-every",
        str(a.checkpoint_every),
        "--threads",
        str(a.threads),
        "--jobs",
        str(a.jobs),
        *(
            ["--lr-grid", *(f"{r}={','.join(v)}" for r, v in a.lr_grid.items())]
            if a.lr_grid
            else []
        ),
    ]
    if a.english:
        out += ["--english", str(a.english)]
    return out


if __name__ == "__main__":
    main()
