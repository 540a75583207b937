"""What several backends share and none owns: the candidate's sources checked and written to its
build folder, compilers run in child processes (sources.py), a Python candidate loaded into the
harness's process (pyloader.py: python, triton, mlx's launchers), and the scalar types of the
native calling convention of c and cuda (native.py), and the timing feed of the backends that
draw their inputs on the device, torch_gpu's and mlx's (device_feed.py). Not a backend: it has
no Backend class."""
