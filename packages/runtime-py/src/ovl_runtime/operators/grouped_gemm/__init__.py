"""The MoE expert GEMM over a static group table (``ag-grouped-gemm``): every rank's ``A`` gathered, each global
m-block multiplied by the expert the manifest's ``reference.groupTable`` names. Manifest references only (no
torch op): ``reference`` (numpy) and ``torch_reference``."""
