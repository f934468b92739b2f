"""workloads.pytorch.transformer trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.pytorch.transformer"


def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE,
        tmp_path,
        "--size",
        "tiny",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--device",
        "cpu",
        "--seed",
        "0",
    )
    # tiny batch: 4 sentences
    check_trained(run, "transformer", "pytorch", steps=2, warmup=1, samples=4)


def _transformer_params(d: int, ff: int, vocab: int, layers: int) -> int:
    """Parameter count of the encoder-decoder, written out from the architecture."""
    mha = 4 * d * d + 4 * d  # in-projection (q, k, v) and out-projection, with biases
    ffn = 2 * d * ff + ff + d
    ln = 2 * d
    enc = layers * (mha + ffn + 2 * ln) + ln  # + final encoder norm
    dec = layers * (2 * mha + ffn + 3 * ln) + ln
    return 2 * vocab * d + enc + dec + d * vocab + vocab  # embeddings, stacks, output


def test_paper_size_is_transformer_base() -> None:
    from workloads.pytorch import transformer

    cfg = transformer.CONFIGS["paper"]
    assert (cfg.d_model, cfg.heads, cfg.layers, cfg.ff) == (512, 8, 6, 2048)
    net = transformer.TransformerNMT(cfg)
    assert sum(p.numel() for p in net.parameters()) == _transformer_params(512, 2048, cfg.vocab, 6)
