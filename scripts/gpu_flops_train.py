"""A small bf16 training program for scripts/gpu_flops_check.sh: a convolution, an
attention block and linear layers, forward and backward, 6 steps, each in an NVTX range."""

import torch
import torch.nn.functional as F

dev = "cuda"
torch.manual_seed(0)
conv = torch.nn.Conv2d(3, 64, 3, padding=1).to(dev)
qkv = torch.nn.Linear(64, 3 * 64).to(dev)
proj = torch.nn.Linear(64, 64).to(dev)
head = torch.nn.Linear(64, 10).to(dev)
params = [*conv.parameters(), *qkv.parameters(), *proj.parameters(), *head.parameters()]
opt = torch.optim.SGD(params, lr=0.01)
x = torch.randn(32, 3, 32, 32, device=dev)
y = torch.randint(0, 10, (32,), device=dev)
for step in range(6):
    torch.cuda.nvtx.range_push(f"step {step}")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        h = conv(x).flatten(2).transpose(1, 2)  # [32, 1024, 64]
        q, k, v = qkv(h).view(32, 1024, 3, 4, 16).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = proj(a.transpose(1, 2).reshape(32, 1024, 64)).mean(1)
        loss = F.cross_entropy(head(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("loss", float(loss))
