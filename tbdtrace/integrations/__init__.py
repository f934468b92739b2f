"""Capture windows driven by a trainer: callbacks that mark each training step for
``tbdtrace`` (:mod:`tbdtrace.collector.windows`).

* :class:`tbdtrace.integrations.lightning.TbdtraceCallback`: PyTorch Lightning;
* :class:`tbdtrace.integrations.huggingface.TbdtraceTrainerCallback`: Hugging Face
  ``transformers.Trainer``.

Each either starts its own in-process capture (give ``out_dir`` and ``steps=``,
``schedule=`` or ``on_demand=``) or, in a program run under ``tbdtrace capture --steps``
/``--schedule``/``--on-demand``, marks the steps for that capture's windows. The modules
import their framework; this package does not.
"""
