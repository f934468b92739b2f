"""``--torch-memory posthoc|exact|off``: the option, its alias, and what each mode sets in
the captured command's environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbdtrace.cli import build_parser
from tbdtrace.collector import strategies
from tbdtrace.collector.child_protocol import BOOTSTRAP_DIR
from tbdtrace.collector.cupti_backend import CuptiConfig
from tbdtrace.collector.memory.torch_cuda import MODE_ENV, SPOOL_ENV
from tbdtrace.collector.memory.torch_labels import check_mode, labeller
from tbdtrace.collector.torch_backend import TorchConfig


@pytest.mark.parametrize(
    ("argv", "mode"),
    [
        ([], "posthoc"),
        (["--torch-memory", "exact"], "exact"),
        (["--torch-memory", "off"], "off"),
        (["--no-torch-memory"], "off"),
    ],
)
def test_capture_option(argv: list[str], mode: str) -> None:
    args = build_parser("capture").parse_args(["capture", "-o", "x", *argv, "--", "true"])
    assert args.torch_memory == mode


def test_capture_option_refuses_other_modes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser("capture").parse_args(["capture", "-o", "x", "--torch-memory", "hooks"])
    assert e.value.code == 2
    assert "invalid choice: 'hooks'" in capsys.readouterr().err


def test_modes() -> None:
    assert [check_mode(m) for m in ("posthoc", "exact", "off", True, False)] == [
        "posthoc",
        "exact",
        "off",
        "posthoc",
        "off",
    ]
    with pytest.raises(ValueError, match="choose one of posthoc, exact, off"):
        check_mode("hooks")
    assert labeller("off") is None
    assert labeller("exact").mode == "exact"  # type: ignore[union-attr]
    assert labeller("posthoc").mode == "posthoc"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["posthoc", "exact", "off", True, False])
def test_command_env_carries_the_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str | bool
) -> None:
    for var in (SPOOL_ENV, MODE_ENV, "PYTHONPATH"):
        monkeypatch.delenv(var, raising=False)
    cfg = CuptiConfig(activities=("kernel",), torch_memory=mode)
    strat = strategies.strategy_for("cupti", cfg, TorchConfig())
    env = strategies.command_env(strat, tmp_path, None)
    want = check_mode(mode)
    assert cfg.torch_memory == want
    if want == "off":
        assert SPOOL_ENV not in env and MODE_ENV not in env and "PYTHONPATH" not in env
    else:
        assert env[SPOOL_ENV] == str(tmp_path) and env[MODE_ENV] == want
        assert env["PYTHONPATH"] == str(BOOTSTRAP_DIR)
