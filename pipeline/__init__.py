"""The run pipeline as a library: a run's spec and key (spec.py), its first
steps (prepare.py: prepare, build), the rest on one object (steps.py) and
the whole run (execute.py), a sampled run's regions (sampled.py), and
studies on top:
the study file (study.py), the coordinator (runner.py), its pools
(pools.py), the task a worker runs (worker.py) and the merge of its
database (merge.py); the engine and model benchmark over whole runs
(bench.py); ./run.py --kernel a,b's runs and comparison (compare_kernels.py);
the generated pages of docs/reference/ (reference.py). run.py and a Dask
worker both call into here."""
