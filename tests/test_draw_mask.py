"""The mask pictures: what they show is the definition of each mask, the text and PNG
renderings work, bad options get one clear line, and a new script is one registry entry."""

import pytest
import torch

from fairseq_ext.analysis.draw_mask import (
    SCRIPTS,
    MaskPicture,
    Script,
    draw,
    hicmlm_masked_slots,
    main,
    render_png,
    render_text,
)


def test_causal_picture_is_su_2019s_shifted_lower_triangle():
    p = draw("causal", words="a b c d")
    assert p.rows == ["a", "b", "c", "d"] and p.cols == ["<s>", "a", "b", "c", "d"]
    for i in range(4):
        for j in range(5):
            assert bool(p.matrix[i, j]) == (j <= i)  # x_{i+1} sees <s>, x_1 .. x_i


def test_permutation_picture_matches_su_2019s_example():
    """Order <s> -> ying -> jing -> ni -> huan -> bei: "ying can only correlate with <s>",
    "jing only with <s> and ying" (Su 2019's text)."""
    p = draw("permutation")
    words = ["bei", "jing", "huan", "ying", "ni"]
    order = ["ying", "jing", "ni", "huan", "bei"]
    assert p.rows == words
    for i, w in enumerate(words):
        seen = {p.cols[j] for j in range(len(p.cols)) if p.matrix[i, j]}
        assert seen == {"<s>", *order[: order.index(w)]}


def test_permutation_picture_from_a_seed_is_a_permutation():
    p = draw("permutation", seed=3)
    assert sorted(p.matrix[:, 1:].sum(1).tolist()) == [0, 1, 2, 3, 4]


def test_prefix_picture_follows_segments():
    p = draw("prefix", source="a b", target="x y")
    tokens = ["[CLS]", "a", "b", "[SEP]", "x", "y", "[SEP]"]
    seg = [0, 0, 0, 0, 1, 1, 1]
    assert p.rows == tokens
    for i in range(7):
        for j in range(7):
            assert bool(p.matrix[i, j]) == (seg[j] == 0 or (seg[i] == 1 and j <= i))


@pytest.mark.parametrize("t", [0, 3, 9])
def test_hicmlm_picture_follows_mask_predict_and_the_strategies(t):
    L, T = 12, 10
    masked = hicmlm_masked_slots(L, T, t)
    assert int(masked.sum()) == L * (T - t) // T
    p = draw("hicmlm", length=L, iterations=T, iteration=t)
    expected = {"all_mask": "M", "all_copied": "Z", "weighted_sum": "m"}
    chars = [c for _, c, _ in p.legend]
    for row, strategy in zip(p.matrix.tolist(), p.rows):
        assert chars[row[0]] == "w" and chars[row[-1]] == "w"  # <s> and </s> are never masked
        for slot in range(1, L + 1):
            got = chars[row[slot]]
            if not masked[slot - 1]:
                assert got == "w"
            elif strategy == "fence_replace":  # the paper's fence (0, 1, 0, 1, ...) from word y1
                assert got == ("Z" if [0, 1][(slot - 1) % 2] else "M")
            else:
                assert got == expected[strategy]


def test_renderings(tmp_path):
    p = draw("prefix")
    text = render_text(p)
    assert text.splitlines()[0] == p.title
    assert text.count("#") == int(p.matrix.sum()) + text.count("# attends")
    render_png(p, str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_writes_every_picture_and_refuses_bad_orders(tmp_path, capsys):
    main(["--all", str(tmp_path)])
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(f"{n}.png" for n in SCRIPTS)
    with pytest.raises(SystemExit) as exc:
        main(["permutation", "--order", "1,2,2,3,4"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "is not a permutation of the word positions 1..5" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        main(["hicmlm", "--iteration", "10"])
    assert "--iteration must be in 0..9" in capsys.readouterr().err


def test_a_new_script_is_one_registry_entry(monkeypatch, capsys):
    def identity(size: int = 3) -> MaskPicture:
        labels = [str(i) for i in range(size)]
        return MaskPicture(torch.eye(size, dtype=torch.bool), labels, labels, "identity")

    monkeypatch.setitem(
        SCRIPTS,
        "identity",
        Script(identity, "each token sees itself", {"size": "tokens"}),
    )
    main(["identity", "--size", "4"])
    out = capsys.readouterr().out
    assert out.count("#") == 4 + 1  # four cells and the legend


def test_ngram_picture_is_prophetnets_mask():
    from fairseq_ext.analysis.draw_mask import draw
    from fairseq_ext.masking.ngram_stream import ngram_stream_mask

    pic = draw("ngram", length=4, ngram=3)
    assert torch.equal(pic.matrix.bool(), ngram_stream_mask(4, 3))
    assert pic.rows[:2] == ["h_0", "h_1"] and pic.rows[4] == "s1_0" and pic.rows[-1] == "s3_3"
