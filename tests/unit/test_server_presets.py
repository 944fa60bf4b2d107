"""The server's preset rule (pure: a calibration report in, preset values out)."""

from __future__ import annotations

from kg_fuse.server.threshold.presets import derive


def report(scores: list[float], noise_median: float = 0.25) -> dict:
    return {"probes": [[f"probe {i}", s, f"concept {i}"] for i, s in enumerate(scores)],
            "gibberish_median": noise_median}


def test_halfway_to_a_typical_relevant_match_and_halfway_to_the_noise() -> None:
    # the figures of the test corpus: default 0.41, probe median 0.7887, noise median 0.253
    presets = derive(0.41, report([0.42, 0.55, 0.7887, 0.8, 0.9], noise_median=0.253))
    assert presets == {"exact": 0.6, "standard": 0.41, "comprehensive": 0.33}


def test_presets_follow_the_default_within_their_bounds() -> None:
    scores = [0.5, 0.55, 0.6, 0.65, 0.7]
    assert derive(0.4, report(scores)) == {"exact": 0.5, "standard": 0.4,
                                           "comprehensive": 0.32}
    assert derive(0.58, report(scores)) == {"exact": 0.63, "standard": 0.58,
                                            "comprehensive": 0.48}
    three = derive(0.3, report(scores, noise_median=0.27))
    assert (three["exact"], three["comprehensive"]) == (0.45, 0.28)
    assert derive(0.97, report(scores))["exact"] == 0.99


def test_without_a_calibration_the_fixed_offsets_apply() -> None:
    assert derive(0.5, None) == {"exact": 0.6, "standard": 0.5, "comprehensive": 0.44}
    assert derive(0.5, {"probes": [["q", 0.0, "c"]]}) == derive(0.5, None)
    assert derive(0.95, None)["exact"] == 1.0
