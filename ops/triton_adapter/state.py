"""The package's process-wide state: its locks and its tables of loaded kernels. Kept here, in one
place, so that every module (and any front end built on the package) shares the same ones."""

import threading

lock = threading.Lock()  # guards the tables below; kernel files are imported under it, one at a time
# Interpreted runs and interpreted imports flip process-wide Triton state
# (knobs.runtime.interpret), so they never overlap a compile: all of them hold this lock.
mode_lock = threading.Lock()

kernels = []  # handle -> (path, name, JITFunction)
wrapped = {}  # handle -> the module's object: the kernel under its autotune / heuristics layers
interpreted = {}  # handle -> InterpretedFunction
modules = {}  # (absolute path, interpreted) -> module of an imported kernel file
fingerprints = {}  # absolute path -> fingerprint of the bytes this process executed
source_files = {}  # kernel file -> its sources.source_files result (a file's imports do not depend on the function)
