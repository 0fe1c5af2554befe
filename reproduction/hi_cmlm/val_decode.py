"""One decoding of a quickstart-dictionary student on Multi30k val, as the comparisons of the
shipped students decode (``shipped_models.sh``, ``student_layouts``): mask-predict with the given
HI-CMLM strategy (Wang et al. 2021, section 3.2; each checkpoint keeps the fence it was trained
with), 10 passes (``--iter-decode-force-max-iter``), length beam 3, every pass kept, scored with
sacreBLEU against the raw references (``decode`` takes other pass counts and length beams).

    python -m reproduction.hi_cmlm.val_decode --data BIN --checkpoint CKPT --ref VAL_DE --out DIR
        [--strategy fence_replace]

Writes DIR/{generate.txt,generate.log,hyp.txt,bleu.json,seconds}; a decoding newer than its
checkpoint is not redone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from fairseq_ext.masking.hybrid import HYBRID_STRATEGIES
from reproduction.records import ROOT


def decode(
    data: Path,
    checkpoint: Path,
    ref: Path,
    out: Path,
    strategy: str = "fence_replace",
    passes: int = 10,
    length_beam: int = 3,
) -> None:
    if (out / "bleu.json").is_file() and (
        out / "bleu.json"
    ).stat().st_mtime > checkpoint.stat().st_mtime:
        return
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        "fairseq-generate",
        str(data),
        "--user-dir",
        str(ROOT / "fairseq_ext"),
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--path",
        str(checkpoint),
        "--gen-subset",
        "valid",
        "--model-overrides",
        f"{{'hybrid_strategy': '{strategy}'}}",
        "--iter-decode-max-iter",
        str(passes - 1),
        "--iter-decode-with-beam",
        str(length_beam),
        "--iter-decode-force-max-iter",
        "--retain-iter-history",
        "--batch-size",
        "64",
        "--post-process",
        "sentencepiece",
        "--verbose",
    ]  # generate.log keeps the configuration it decoded with
    start = time.time()
    with open(out / "generate.txt", "w") as stdout, open(out / "generate.log", "w") as stderr:
        if subprocess.run(cmd, stdout=stdout, stderr=stderr).returncode != 0:
            sys.exit(f"error: fairseq-generate failed on {checkpoint}; see {out / 'generate.log'}")
    (out / "seconds").write_text(f"{round(time.time() - start)}\n")
    hyps = sorted(
        (
            line.split("\t")
            for line in (out / "generate.txt").read_text(encoding="utf-8").splitlines()
            if line.startswith("D-")
        ),
        key=lambda f: int(f[0][2:]),
    )
    (out / "hyp.txt").write_text("".join(f[2] + "\n" for f in hyps), encoding="utf-8")
    with open(out / "bleu.json", "w") as stdout:
        subprocess.run(
            ["sacrebleu", str(ref), "-i", str(out / "hyp.txt"), "-m", "bleu"],
            stdout=stdout,
            check=True,
        )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m reproduction.hi_cmlm.val_decode",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data", type=Path, required=True, help="binarized Multi30k with the quickstart dictionary"
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--ref", type=Path, required=True, help="the raw German references of val")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--strategy", default="fence_replace", choices=HYBRID_STRATEGIES)
    a = p.parse_args(argv)
    for path in (a.checkpoint, a.ref):
        if not path.is_file():
            p.error(f"{path} does not exist")
    decode(a.data, a.checkpoint, a.ref, a.out, a.strategy)
    print(f"BLEU {json.loads((a.out / 'bleu.json').read_text())['score']}")


if __name__ == "__main__":
    main()
