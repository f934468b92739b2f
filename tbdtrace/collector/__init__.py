"""Capture: collectors (CUPTI, torch.profiler) and the host sampler."""
