"""``--torch-memory posthoc|exact|off``: the option, its alias, and what each mode sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbdtrace.cli import build_parser
from tbdtrace.collector.cupti_backend import CuptiConfig
from tbdtrace.collector.cupti_command import child_env
from tbdtrace.collector.memory.torch_cuda import MODE_ENV, SPOOL_ENV
from tbdtrace.collector.memory.torch_labels import check_mode, labeller


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
def test_child_env_carries_the_mode(tmp_path: Path, mode: str | bool) -> None:
    cfg = CuptiConfig(activities=("kernel",), torch_memory=mode)
    env = child_env(tmp_path, cfg, tmp_path / "steps")
    want = check_mode(mode)
    assert cfg.torch_memory == want
    if want == "off":
        assert SPOOL_ENV not in env and MODE_ENV not in env
    else:
        assert env[SPOOL_ENV] == str(tmp_path) and env[MODE_ENV] == want
