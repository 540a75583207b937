"""Backend triton builds and loads as backend python does (python/build.py): the sources are
written and syntax-checked, the module is run at the first load. Triton's own compilation happens
inside the candidate's first call, not here."""
