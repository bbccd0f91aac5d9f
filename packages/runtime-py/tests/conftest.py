"""The tests run on the CPU only: Triton, where installed, is put in interpreter mode before
anything imports it (the interpreter emulation, ``ovl_runtime.interpret``, needs that)."""

import os

os.environ["TRITON_INTERPRET"] = "1"
