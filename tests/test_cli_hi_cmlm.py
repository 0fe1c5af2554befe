"""HI-CMLM through the real fairseq CLIs (subprocesses): preprocess, train, generate with a
length beam, interactive, restore; every sentence is decoded; bad input is refused clearly."""

import sys

import pytest

from tests.conftest import (
    ROOT,
    USER_DIR,
    binarize,
    generate_args,
    read_sample,
    run,
    train_args,
    write_lines,
)


def hypotheses(stdout: str) -> dict[int, str]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("H-"):
            sid, _, text = line[2:].split("\t")
            out[int(sid)] = text
    return out


def test_validation_reports_mask_predict_bleu(tiny_checkpoint):
    log = (tiny_checkpoint.parent / "train.log").read_text()
    valid = [line for line in log.splitlines() if "| valid |" in line]
    assert valid and all("| bleu " in line for line in valid)
    assert "valid on 'valid' subset" in log


def test_generate_length_beam_history_and_analysis(tiny_data, tiny_checkpoint, tmp_path):
    proc = run(
        generate_args(
            tiny_data,
            tiny_checkpoint,
            "--iter-decode-max-iter",
            "3",
            "--iter-decode-with-beam",
            "3",
            "--retain-iter-history",
            "--print-step",
            "--post-process",
            "sentencepiece",
        )
    )
    assert sorted(hypotheses(proc.stdout)) == list(range(21))
    e_lines = [line for line in proc.stdout.splitlines() if line.startswith("E-0_")]
    assert len(e_lines) >= 2 and e_lines[0].split("\t")[1].split()[0] == "<unk>"
    gen = tmp_path / "gen.txt"
    gen.write_text(proc.stdout)
    analysis = run(
        [
            sys.executable,
            "-m",
            "fairseq_ext.analysis",
            "--run",
            f"fence_replace={gen}",
            "--max-iter",
            "4",
            "--out-dir",
            tmp_path / "an",
        ]
    )
    assert "BLEU after each iteration" in analysis.stdout
    for png in ("bleu_per_iteration.png", "bleu_by_length.png", "copy_share_fence_replace.png"):
        assert (tmp_path / "an" / png).stat().st_size > 1000


@pytest.mark.parametrize("n", [1, 9, 17])
def test_generate_prints_exactly_n_hypotheses(spm_model, tiny_data, tiny_checkpoint, tmp_path, n):
    data = binarize(
        spm_model,
        tmp_path,
        {
            "test": (
                read_sample("train", "en")[1000 : 1000 + n],
                read_sample("train", "de")[1000 : 1000 + n],
            )
        },
        srcdict=tiny_data / "dict.en.txt",
    )
    for f in ("dict.en.txt", "dict.de.txt"):
        (data / f).write_text((tiny_data / f).read_text())
    proc = run(
        generate_args(data, tiny_checkpoint, "--iter-decode-max-iter", "2", "--batch-size", "16")
    )
    assert sorted(hypotheses(proc.stdout)) == list(range(n))


def test_stock_translation_lev_drops_sentences_that_we_keep(
    spm_model, tiny_data, tiny_checkpoint, tmp_path
):
    """The upstream bug (fairseq issue 5036) this plugin works around: the same checkpoint
    decoded through stock ``translation_lev`` loses the last, short batch."""
    n = 17
    data = binarize(
        spm_model,
        tmp_path,
        {
            "test": (
                read_sample("train", "en")[2000 : 2000 + n],
                read_sample("train", "de")[2000 : 2000 + n],
            )
        },
        srcdict=tiny_data / "dict.en.txt",
    )
    args = generate_args(data, tiny_checkpoint, "--iter-decode-max-iter", "2", "--batch-size", "16")
    stock = run([a if a != "cmlm_hybrid" else "translation_lev" for a in args])
    ours = run(args)
    assert len(hypotheses(stock.stdout)) == 16
    assert len(hypotheses(ours.stdout)) == n


def test_interactive_and_empty_line(tiny_data, tiny_checkpoint, spm_model):
    base = [
        "fairseq-interactive",
        tiny_data,
        "--user-dir",
        USER_DIR,
        "--task",
        "cmlm_hybrid",
        "-s",
        "en",
        "-t",
        "de",
        "--path",
        tiny_checkpoint,
        "--bpe",
        "sentencepiece",
        "--sentencepiece-model",
        spm_model,
        "--iter-decode-max-iter",
        "2",
        "--iter-decode-with-beam",
        "2",
    ]
    lines = read_sample("test", "en", 3)
    ok = run(base, input="\n".join(lines) + "\n")
    assert len([x for x in ok.stdout.splitlines() if x.startswith("H-")]) == 3
    # an empty line is answered on stderr and skipped; the session goes on with the next line
    gap = run(base, input=lines[0] + "\n\n" + lines[1] + "\n")
    assert "fairseq_ext: input line 2 is empty" in gap.stderr
    assert [x.split("\t")[0] for x in gap.stdout.splitlines() if x.startswith("H-")] == [
        "H-0",
        "H-2",
    ]
    assert "Traceback" not in gap.stderr


def test_restore_file_continues_training(tiny_data, tiny_checkpoint, tmp_path):
    proc = run(
        train_args(tiny_data, tmp_path / "resumed", "--restore-file", tiny_checkpoint, updates=6)
    )
    log = proc.stdout + proc.stderr
    assert "Loaded checkpoint" in log and "@ 4 updates" in log
    assert "num_updates 6" in log


@pytest.mark.parametrize(
    "extra, code, message",
    [
        (["--hybrid-strategy", "half_copied"], 2, "invalid choice: 'half_copied'"),
        (["--copy-temperature", "0"], 1, "fairseq_ext: error: --copy-temperature must be > 0"),
        (["--mask-weight", "1.2"], 1, "fairseq_ext: error: --mask-weight must be in [0, 1]"),
        (
            ["--train-copy-share", "2"],
            1,
            "fairseq_ext: error: --train-copy-share must be in [0, 1]",
        ),
        (["--fence-first", "odd"], 2, "invalid choice: 'odd'"),
        (["--train-decoder-input", "always"], 2, "invalid choice: 'always'"),
        (["--no-such-option"], 2, "unrecognized arguments: --no-such-option"),
    ],
)
def test_bad_options_give_one_clear_error(tiny_data, tmp_path, extra, code, message):
    proc = run(train_args(tiny_data, tmp_path / "ck", *extra), check=False)
    assert proc.returncode == code
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


def test_empty_source_line_is_refused(spm_model, tiny_data, tiny_checkpoint, tmp_path):
    en = read_sample("test", "en", 5)
    de = read_sample("test", "de", 5)
    en[3] = ""
    data = binarize(spm_model, tmp_path, {"test": (en, de)}, srcdict=tiny_data / "dict.en.txt")
    proc = run(generate_args(data, tiny_checkpoint), check=False)
    assert proc.returncode != 0
    assert "fairseq_ext: error: test source line 4 is empty" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_too_long_target_is_refused(spm_model, tiny_data, tiny_checkpoint, tmp_path):
    en = read_sample("test", "en", 3)
    de = read_sample("test", "de", 3)
    de[1] = " ".join(read_sample("train", "de", 60))  # far beyond 255 pieces
    data = binarize(spm_model, tmp_path, {"test": (en, de)}, srcdict=tiny_data / "dict.en.txt")
    proc = run(generate_args(data, tiny_checkpoint), check=False)
    assert proc.returncode != 0
    assert (
        "test target line 2 has" in proc.stderr
        and "more than the 255 a CMLM can predict" in proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_dictionary_mismatch_is_named(tiny_data, tiny_checkpoint, tmp_path):
    write_lines(tmp_path / "t.en", read_sample("train", "en", 300))
    write_lines(tmp_path / "t.de", read_sample("train", "de", 300))
    run(
        [
            sys.executable,
            ROOT / "data_prep" / "spm.py",
            "train",
            "--model",
            tmp_path / "other",
            "--vocab-size",
            "250",
            tmp_path / "t.en",
            tmp_path / "t.de",
        ]
    )
    data = binarize(
        tmp_path / "other.model",
        tmp_path,
        {
            "train": (read_sample("train", "en", 300), read_sample("train", "de", 300)),
            "valid": (read_sample("test", "en", 4), read_sample("test", "de", 4)),
            "test": (read_sample("test", "en", 4), read_sample("test", "de", 4)),
        },
    )
    gen = run(generate_args(data, tiny_checkpoint), check=False)
    assert gen.returncode != 0
    assert "fairseq_ext: error: dictionary mismatch" in gen.stderr and "--srcdict" in gen.stderr
    assert "Traceback" not in gen.stderr
    before = tiny_checkpoint.read_bytes()
    restore = run(
        train_args(data, tmp_path / "ck", "--restore-file", tiny_checkpoint, updates=6), check=False
    )
    assert restore.returncode != 0
    assert "fairseq_ext: error: dictionary mismatch" in restore.stderr
    assert "Traceback" not in restore.stderr
    assert tiny_checkpoint.read_bytes() == before
