"""tjit's operator kernels: one module (or subpackage) per operator, plain ``@triton.jit`` kernels
that tjit's C++ runtime loads by file path; norm_forward, norm_backward and norm_team, the kernels
the normalisations share; and row_exchange, the exchange of programs that share a row. Modules
import only triton and each other (relative imports). operators.manifest.json lists the
specialisations tjit's kernel bundle holds."""
