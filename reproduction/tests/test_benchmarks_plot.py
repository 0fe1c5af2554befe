"""benchmarks/plot.py: the speed figure picks exactly the ratios (goal >= / <= X, or a ratio
name), not absolute rates or memory, and draws them."""

from reproduction.benchmarks.plot import plot_ratios, ratio_metrics

RESULTS = {
    "cpu": {
        "hardware": "test CPU, 2 threads",
        "benchmarks": {
            "posmask": {
                "metrics": {
                    "posmask_train_tokens_per_s_ratio": 0.97,
                    "posmask_train_tokens_per_s": 16000.0,
                    "train_peak_rss_mb_roberta": 560.0,
                },
                "goals": {"posmask_train_tokens_per_s_ratio": ">= 0.95"},
            },
            "prophetnet": {
                "metrics": {
                    "prophetnet_train_step_ratio": 1.5,
                    "prophetnet_vs_hf_train_speedup": 1.1,
                    "seconds_per_update": 0.7,
                },
                "goals": {
                    "prophetnet_train_step_ratio": "<= 2.0 (3 streams)",
                    "prophetnet_vs_hf_train_speedup": ">= 1.5",
                },
            },
        },
    },
    "gpu": {
        "hardware": "test GPU",
        "benchmarks": {
            "unilm": {
                "metrics": {"unilm_keep_tokens_train_speedup": 1.2},
                "goals": {"unilm_keep_tokens_train_speedup": "report"},
            }
        },
    },
}


def test_ratio_metrics_keeps_ratios_and_their_goals_only():
    rows = ratio_metrics(RESULTS)
    assert [(kind, metric, goal) for kind, _, metric, _, goal in rows] == [
        ("cpu", "posmask_train_tokens_per_s_ratio", ">= 0.95"),
        ("cpu", "prophetnet_train_step_ratio", "<= 2.0 (3 streams)"),
        ("cpu", "prophetnet_vs_hf_train_speedup", ">= 1.5"),
        ("gpu", "unilm_keep_tokens_train_speedup", None),  # "report" is no goal to draw
    ]
    assert (
        ratio_metrics(
            {"cpu": {"hardware": "x", "benchmarks": {"m": {"metrics": {"tokens_per_s": 1.0}}}}}
        )
        == []
    )


def test_plot_ratios_draws_a_figure(tmp_path):
    assert plot_ratios(RESULTS, tmp_path / "speed.png")
    assert (tmp_path / "speed.png").stat().st_size > 5000
    assert not plot_ratios({}, tmp_path / "none.png") and not (tmp_path / "none.png").exists()
