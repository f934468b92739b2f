"""Transformer NMT (torch.nn.Transformer), TBD's tensor2tensor ``transformer_base`` workload.

Architecture (t2t's ``transformer_base``): one embedding shared by source, target and the
output softmax (``shared_embedding_and_softmax_weights``), scaled by sqrt(d_model), plus
sinusoidal positions -> nn.Transformer with pre-norm layers (``norm_first``, t2t's
``layer_prepostprocess``: normalize, sublayer, dropout, add; a final layer norm on each
stack), causal target mask, padding masks -> logits against the shared embedding. Loss:
cross-entropy with label smoothing 0.1 (padding ignored). Adam (beta 0.9, 0.98, eps 1e-9)
with the inverse-square-root warm-up schedule of "Attention Is All You Need".

Sizes (workloads/specs.py): tiny = d_model 32, 2 heads, 2+2 layers, ff 64, vocab 32, 4-8
tokens, batch 4; small = d_model 256, 4 heads, 3+3 layers, ff 1024, vocab 8000, 10-30
tokens, batch 32; paper = transformer_base: d_model 512, 8 heads, 6+6 layers, ff 2048,
dropout 0.1, vocab 32768 (WMT En-De 32k subwords), sentences up to 32 tokens, batch 64
(about t2t's 2048 tokens per batch). Data: a reversal task
(:func:`_common.translation_batch`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from workloads import harness, quality, specs
from workloads.pytorch import _common

MODEL = "transformer"


Config = specs.Transformer
CONFIGS = specs.TRANSFORMER.configs
BATCH = specs.TRANSFORMER.batch
LABEL_SMOOTHING = 0.1


def sinusoids(length: int, d_model: int) -> torch.Tensor:
    """Sinusoidal position encodings ``[length, d_model]``."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class TransformerNMT(nn.Module):
    pe: torch.Tensor  # sinusoidal positions, a non-persistent buffer

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.emb = nn.Embedding(cfg.vocab, cfg.d_model, padding_idx=0)
        self.register_buffer("pe", sinusoids(cfg.max_len + 2, cfg.d_model), persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        layer = dict(
            d_model=cfg.d_model,
            nhead=cfg.heads,
            dim_feedforward=cfg.ff,
            dropout=cfg.dropout,
            batch_first=True,
            norm_first=True,
        )
        # the encoder is built here only to turn off nested tensors, which pre-norm layers
        # cannot use (nn.Transformer would warn)
        encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**layer),
            cfg.layers,
            norm=nn.LayerNorm(cfg.d_model),
            enable_nested_tensor=False,
        )
        self.core = nn.Transformer(
            num_encoder_layers=cfg.layers,
            num_decoder_layers=cfg.layers,
            custom_encoder=encoder,
            **layer,
        )
        # t2t's initialisation: N(0, d_model^-0.5), so the sqrt(d_model)-scaled embedding
        # has unit variance, as the positions do (nn.Embedding's N(0, 1) times sqrt(d)
        # drowns them, and the net cannot learn word order)
        nn.init.normal_(self.emb.weight, 0.0, cfg.d_model**-0.5)
        with torch.no_grad():
            self.emb.weight[0].zero_()

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.drop(self.emb(tokens) * self.scale + self.pe[: tokens.shape[1]])

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, T, vocab]`` for the teacher-forced target input."""
        t = tgt_in.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)
        src_pad, tgt_pad = src == 0, tgt_in == 0
        h = self.core(
            self._embed(src),
            self._embed(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )
        return h @ self.emb.weight.T  # the softmax shares the embedding


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, gen = _common.setup(args)
    net = _common.distribute(TransformerNMT(cfg).to(device), device, args)
    opt = torch.optim.Adam(net.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda i: (
            cfg.lr_scale
            * cfg.d_model**-0.5
            * min((i + 1) ** -0.5, (i + 1) * cfg.warmup_steps**-1.5)
        ),
    )
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=LABEL_SMOOTHING)
    data = _common.batches(
        lambda g: _common.translation_batch(
            args.batch_size, cfg.min_len, cfg.max_len, cfg.vocab, g
        ),
        args,
        device,
        gen,
    )
    net.train()

    def step(_: int) -> float:
        src, _len, tgt, _tlen = next(data)
        opt.zero_grad(set_to_none=True)
        logits = net(src, tgt[:, :-1])
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()

    evaluate = _common.translation_eval(
        lambda s, _sl, ys: net(s, ys), net, cfg.min_len, cfg.max_len, cfg.vocab, device, args
    )
    _common.run(
        MODEL, args, device, step, evaluate=evaluate, target=quality.target(MODEL, args.size)
    )


if __name__ == "__main__":
    main()
