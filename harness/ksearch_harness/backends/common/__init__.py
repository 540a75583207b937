"""What several backends share and none owns: the candidate's sources checked and written to its
build folder, compilers run in child processes (sources.py), and a Python candidate loaded into
the harness's process (pyloader.py). Not a backend: it has no Backend class."""
