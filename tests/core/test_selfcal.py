"""Self-calibration: learning what the framing model misses, per model and tool set."""

from __future__ import annotations

import random
import threading

import pytest

from ctxscope.core import fidelity
from ctxscope.core.framing import API_OPENAI_CHAT
from ctxscope.core.learned_correction import (ANY_TOOLS, MODE_AFFINE, MODE_OFFSET, MODE_RATIO, OffsetLearner,
                                              SelfCalibrator, fit)
from ctxscope.telemetry.store import LocalStore
from ctxscope.core.tokens import CharsCounter, counter_for

HIDDEN_PROMPT = 1834  # tokens the provider adds that no request shows

WORDS = ("context window tokens agent tool result summary file read write search the a of to and "
         "profile budget compaction system prompt message assistant user reply").split()


def _session(calls: int, seed: int = 7) -> list[dict]:
    """A growing chat: each call adds a user turn and the previous reply, of varied length."""
    rng = random.Random(seed)
    messages: list[dict] = [{"role": "system", "content": "You are a careful coding agent."}]
    bodies = []
    for _ in range(calls):
        messages.append({"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 400)))})
        bodies.append({"model": "gpt-4o", "messages": list(messages)})
        answer = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 200)))
        messages.append({"role": "assistant", "content": answer})
    return bodies


def test_fifty_calls_with_a_fixed_hidden_prompt_converge_after_five():
    """50 calls, reported = our framed count + a fixed hidden prompt (jitter of a few tokens):
    from the 6th call on, the calibrated figure is within 1% of the reported input."""
    rng = random.Random(3)
    calibrator = SelfCalibrator()
    counter = CharsCounter()
    errors = []
    for index, body in enumerate(_session(50)):
        estimated = fidelity.estimate(body, API_OPENAI_CHAT, counter, "gpt-4o").framed
        reported = estimated + HIDDEN_PROMPT + rng.randint(-3, 3)  # e.g. the date in the hidden prompt
        calibrated = calibrator.corrected("gpt-4o", "-", estimated)  # before the usage arrives
        if index >= 5:
            errors.append(abs(calibrated - reported) / reported)
        calibrator.learn("gpt-4o", "-", estimated, reported)
    assert len(errors) == 45
    assert max(errors) < 0.01
    correction = calibrator.correction("gpt-4o", "-")
    assert correction.mode == MODE_OFFSET and abs(correction.offset - HIDDEN_PROMPT) <= 3


def test_fifty_calls_with_a_proxy_encoding_and_hidden_prompt(tiktoken_ready):
    """50 calls counted with chars/4 while the provider counts o200k tokens plus a hidden prompt:
    from the 6th call on, the calibrated figure is within 1% of the reported input."""
    proxy, exact = CharsCounter(), counter_for("gpt-4o", "tiktoken")
    calibrator = SelfCalibrator()
    errors, raw_errors = [], []
    for index, body in enumerate(_session(50)):
        estimated = fidelity.estimate(body, API_OPENAI_CHAT, proxy, "gpt-4o").framed
        reported = fidelity.estimate(body, API_OPENAI_CHAT, exact, "gpt-4o").framed + HIDDEN_PROMPT
        if index >= 5:
            errors.append(abs(calibrator.corrected("gpt-4o", "-", estimated) - reported) / reported)
            raw_errors.append(abs(estimated - reported) / reported)
        calibrator.learn("gpt-4o", "-", estimated, reported)
    assert max(errors) < 0.01
    assert max(raw_errors) > 0.05  # uncorrected, the proxy is far off: the test can fail


def test_offset_single_pair():
    """One pair: the correction is that pair's residual."""
    c = fit("m", "-", [(1000, 1500)])
    assert (c.mode, c.offset, c.apply(2000)) == (MODE_OFFSET, 500.0, 2500)


def test_ratio_when_residuals_scale_with_size():
    """Residuals proportional to size (a proxy encoding) give a ratio: 1.25 here."""
    c = fit("m", "-", [(400, 500), (800, 1000), (1600, 2000), (3200, 4000)])
    assert c.mode == MODE_RATIO and c.ratio == 1.25 and c.apply(2000) == 2500


def test_affine_when_both():
    """reported = 1.1 x estimate + 300 is learned as a line, exactly."""
    pairs = [(e, round(1.1 * e + 300)) for e in (1000, 2000, 3000, 5000, 8000)]
    c = fit("m", "-", pairs)
    assert c.mode == MODE_AFFINE
    assert c.apply(10000) == 11300


def test_median_ignores_an_odd_call():
    """One call with a server-side loop (+5000) does not move a hidden-prompt offset of 200."""
    pairs = [(1000, 1200), (1100, 1300), (1200, 6400), (1300, 1500), (1400, 1600)]
    c = fit("m", "-", pairs)
    assert c.mode == MODE_OFFSET and c.offset == 200.0


def test_nothing_learned_means_the_estimate():
    """Without pairs the calibrated figure is the raw estimate and no correction is reported."""
    calibrator = SelfCalibrator()
    assert calibrator.corrected("m", "k", 1234) == 1234
    assert calibrator.correction_tokens("m", "k", 1234) is None


def test_per_model_and_pooled_for_a_new_tool_set():
    """Corrections are per model; a new tool set of a known model uses the model's pooled correction."""
    calibrator = SelfCalibrator()
    calibrator.learn("a", "tools1", 1000, 1300)
    calibrator.learn("b", "tools1", 1000, 1050)
    assert calibrator.corrected("a", "tools1", 2000) == 2300
    assert calibrator.corrected("b", "tools1", 2000) == 2050
    assert calibrator.corrected("a", "tools2", 2000) == 2300  # pooled under ANY_TOOLS
    assert calibrator.correction("a", "tools2").tools_key == ANY_TOOLS
    assert calibrator.correction_tokens("a", "tools1", 2000) == 300


def test_ignores_pairs_without_counts():
    """A call without an estimate or without reported usage teaches nothing."""
    calibrator = SelfCalibrator()
    assert calibrator.learn("m", "-", 0, 100) is None
    assert calibrator.learn("m", "-", 100, 0) is None
    assert calibrator.corrections() == []


def test_thread_safe_learning():
    """Eight threads learning and reading at once lose nothing and raise nothing."""
    calibrator = SelfCalibrator(window=1_000)
    failures: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(50):
                calibrator.learn("m", "-", 1000 + i, 1100 + i)
                calibrator.corrected("m", "-", 500)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert calibrator.correction("m", "-").pairs == 8 * 50
    assert calibrator.corrected("m", "-", 500) == 600


def test_persisted_per_model_in_the_local_store(tmp_path):
    """A model's pairs survive a restart through the local store's calibration sidecar."""
    store = LocalStore(tmp_path)
    calibrator = SelfCalibrator()
    for e in (1000, 1500, 2000):
        calibrator.learn("claude-sonnet-4-5", "k", e, e + 480)
    calibrator.learn("gpt-4o", "k", 1000, 1009)
    for model in calibrator.models():
        store.save_calibration(model, calibrator.model_json(model))

    restarted = SelfCalibrator()
    restarted.restore(store.load_calibration("claude-sonnet-4-5"))
    assert restarted.corrected("claude-sonnet-4-5", "k", 3000) == 3480
    assert restarted.correction("gpt-4o", "k") is None  # only the model asked for was loaded
    assert (tmp_path / "calibration").stat().st_mode & 0o777 == 0o700


def test_restore_skips_malformed_entries():
    """A damaged sidecar entry is skipped, the good ones kept."""
    calibrator = SelfCalibrator()
    calibrator.restore({"pairs": [{"model": "m"}, {"model": "m", "tools_key": "k", "pairs": [[10, 20]]}]})
    assert calibrator.corrected("m", "k", 100) == 110


def test_window_must_be_positive():
    """A window below one is a configuration error raised at construction."""
    with pytest.raises(ValueError):
        SelfCalibrator(window=0)


def test_server_tool_sets_are_not_pooled():
    """A tool set with a server tool learns its own hidden part and neither feeds nor borrows the model's pool."""
    calibrator = SelfCalibrator()
    calibrator.learn("m", "s:search", 1000, 5000)  # a web search definition of ~4000 hidden tokens
    assert calibrator.corrected("m", "client-set", 1000) == 1000
    calibrator.learn("m", "client-set", 1000, 1100)
    assert calibrator.corrected("m", "other-client-set", 1000) == 1100
    assert calibrator.corrected("m", "s:other-server-set", 1000) == 1000
    assert calibrator.corrected("m", "s:search", 1000) == 5000


def test_implausible_slopes_fall_back_to_one_parameter():
    """A line steeper than 2 (no tokenizer differs that much) is not learned; offset or ratio is."""
    pairs = [(e, 3 * e - 50) for e in (100, 200, 400, 800, 1600)]  # a line of slope 3 fits exactly
    assert fit("m", "-", pairs).mode == MODE_RATIO
    assert fit("m", "-", [(e, round(1.5 * e) - 50) for e in (100, 200, 400, 800, 1600)]).mode == MODE_AFFINE


def test_offset_learner_median_of_the_window_kept_sorted():
    """The offset mode alone: the latest residual before 3 pairs, then the median of the last `window`."""
    learner = OffsetLearner(window=4)
    # residuals reported - estimate: 50, 60, 30, 100, then 10 pushes the 50 out of the window
    assert learner.learn("m", 100, 150) == (50.0, 1)
    assert learner.learn("m", 100, 160) == (60.0, 2)  # below 3 pairs: the latest
    assert learner.learn("m", 100, 130) == (50.0, 3)  # median of 30, 50, 60
    assert learner.learn("m", 100, 200) == (55.0, 4)  # (50 + 60) / 2
    assert learner.learn("m", 100, 110) == (45.0, 4)  # 10, 30, 60, 100: (30 + 60) / 2
    assert learner.learn("other", 10, 15) == (5.0, 1)  # keys apart
    assert learner.learn("m", 0, 15) is None and learner.learn("m", 10, 0) is None
    assert learner.learn("m", 100, 90) == (20.0, 4)  # -10, 10, 30, 100 (the 60 left): (10 + 30) / 2
